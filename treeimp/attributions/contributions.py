"""Per-row contributions (local explanations): TreeSHAP and Saabas, in-bag and out of bag.

The engine of ``treeimp.contributions(model, X)`` and ``Explainer.contributions(X)``
(which parse the model and read X): every row's path-dependent TreeSHAP values (Lundberg
et al. 2020; what shap's TreeExplainer with ``feature_perturbation="tree_path_dependent"``,
XGBoost's ``pred_contribs`` and LightGBM's ``pred_contrib`` compute) or Saabas
contributions, from the numba kernels of ``treeimp/kernels/treeshap.py``; rows are
processed in chunks and no (rows x trees) array is built.

Out of bag (``oob=True``, bagged scikit-learn forests, X the training rows): a tree's
contributions to a row it was grown on carry the in-bag bias (noise and high-cardinality
features look important); each row's phi^oob is the mean over the trees for which it is
out of bag, phi^in the mean over the others (Loecher 2023, "Debiasing SHAP scores in
random forests").

Groups of columns (``groups=``): a group's contribution is the sum of its members', or
with ``group_shapley`` the group is one player of the game whose players are the groups,
and the kernels credit every split to its column's group (``grouped_inputs``).
"""

from __future__ import annotations

import dataclasses
import html

import numba
import numpy as np
import pandas as pd

from ..backends.threads import run_tasks, task_ranges, thread_count
from ..inputs.rows import CHUNK_ROWS
from ..inputs.threads import numba_threads
from ..kernels.linear_leaves import linear_leaf_shap, prunable_splits
from ..kernels.treeshap import (
    ROWS_PER_TASK,
    contributions_chunk,
    expected_values,
    oob_contributions_chunk,
    path_features,
    saabas_chunk,
    summed_cover,
)
from ..model.ensemble import FOREST
from ..model.kernel_inputs import ShapTables
from ..model.offsets import check_base_margin
from ..model.routing import routing_flags
from ..results import interaction_plot as iplot
from ..results.html import MAX_ROWS, frame_table
from ..results.pair_importance import binned_partner, strongest_partner

METHODS = ("shap", "saabas")
ROUTED_CHUNK_VALUES = 1 << 23  # router numbers of one chunk (64 MB of float64)


def shap_cover(ens):
    """The node cover TreeSHAP weighs paths by: the parser's ``cover`` where it stored
    one (LightGBM: row counts, as its pred_contrib), else the training weight (scikit-learn:
    weighted_n_node_samples; XGBoost: hessian sums; HistGradientBoosting: counts); at
    internal nodes the sum of the children's (``summed_cover``)."""

    leaf_cover = np.where(np.isnan(ens.cover), ens.weight, ens.cover)
    return summed_cover(ens.tree_offsets, ens.postorder, ens.left, ens.right,
                        np.ascontiguousarray(leaf_cover, dtype=np.float64))


def shap_players(ens):
    """How the library's own TreeSHAP credits every split: (per node the player, int64:
    a column, or ``n_features + g`` for the g-th group; the groups, tuples of columns
    among which a group's value is shared equally). The model's features and no groups,
    unless the ensemble's leaf router says otherwise (``LeafRouter.shap_feature``:
    CatBoost's statistics of combinations of categorical features)."""
    router = ens.leaf_router
    if router is None or router.shap_feature is None:
        return np.ascontiguousarray(ens.feature, dtype=np.int64), ()
    F = ens.n_features
    groups = tuple(tuple(int(j) for j in g) for g in router.shap_groups)
    if any(not g or min(g) < 0 or max(g) >= F for g in groups):
        raise ValueError(f"leaf router SHAP groups {groups[:5]} must be non-empty tuples of "
                         f"columns in 0..{F - 1}")
    players = np.ascontiguousarray(router.shap_feature, dtype=np.int64)
    inner = players[ens.left >= 0]
    if inner.size and (inner.min() < 0 or inner.max() >= F + len(groups)):
        raise ValueError(f"leaf router SHAP features must be in 0..{F + len(groups) - 1}, "
                         f"got {inner.min()}..{inner.max()}")
    return players, groups


def split_routed(ens, method):
    """The ensemble whose routing the contribution kernels walk: ``ens``, or, for a model
    routed by the library's leaf indices, the same trees routed by the row's own outcome
    of every split (``LeafRouter.split_router``), since TreeSHAP reads the outcomes at
    the nodes off the row's path too (Saabas walks only the path)."""
    router = ens.leaf_router
    if router is None:
        return ens
    if router.split_router is not None:
        return dataclasses.replace(ens, leaf_router=router.split_router)
    if method == "saabas":
        return ens
    raise ValueError(
        f"TreeSHAP needs every split's outcome for a row, also off its path, but this "
        f"{ens.model_name} model tells only the row's leaf (CatBoost's non-symmetric "
        "trees with target-statistic splits); Saabas contributions walk only the row's "
        "path: contributions(method='saabas'), or the measure 'saabas_oob'")


def kernel_inputs(ens, method, players=None):
    """The contribution kernels' :class:`~treeimp.model.kernel_inputs.ShapTables`: TreeSHAP
    reads the leaves, the covers, the quadrature tables and per tree the most distinct
    players on a path (which sets its quadrature size),
    Saabas the node values of the normal form (internal nodes the weight-mean of their
    children, as mdi_oob reads them). ``players``: ``shap_players(ens)`` to credit
    splits as the library's own TreeSHAP does (the kernels' output then has a column per
    player); None: to the model's features."""

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    max_depth = int(ens.routing.depth.max())
    gl_nodes, gl_weights = quadrature_tables(max_depth)
    if players is None or not players[1]:
        feature = np.ascontiguousarray(ens.feature, dtype=np.int64)
        per_path = ens.path_features
    else:
        feature = players[0]
        per_path = path_features(ens.tree_offsets, ens.left, ens.right, feature,
                                 ens.n_features + len(players[1]))
    return ShapTables(method == "shap", max_depth, gl_nodes, gl_weights, shap_cover(ens),
                      np.ascontiguousarray(ens.value, dtype=np.float64), per_path, feature)


def check_group_shapley(group_shapley, groups, method="shap"):
    """Refuse ``group_shapley`` that is not a bool, given without ``groups``, or with
    Saabas contributions (which credit every split to its feature, so that a group's
    Saabas contribution is the sum of its members': ``groups=`` alone)."""
    if not isinstance(group_shapley, (bool, np.bool_)):
        raise TypeError(f"group_shapley must be True or False, got {group_shapley!r}")
    if not group_shapley:
        return False
    if groups is None:
        raise ValueError("group_shapley=True makes every group of columns one player; "
                         "give the groups: groups={name: columns} or groups='input'")
    if method != "shap":
        raise ValueError(
            f"group_shapley=True is for method='shap' (the Shapley values of the game whose "
            f"players are the groups), got method={method!r}: Saabas contributions add up "
            "per split, so a group's Saabas contribution is the sum of its members' "
            "(groups= without group_shapley)")
    return True


def grouped_inputs(cm, grp):
    """The TreeSHAP tables of ``cm`` (a :class:`ContributionModel`) with every split
    credited to the group of its column (``grp``: ``resolve_groups``, which covers every
    column once): the kernels then compute the Shapley values of the game whose players
    are the groups, with one output column per group. The path-dependent value function
    multiplies, per player, the factors of all its splits on a path (the kernel merges a
    player's repeated splits), so this is exact; the quadrature size is set by the most
    distinct groups on a path. A split the library's own TreeSHAP credits to a
    combination of columns (CatBoost) is credited to their group, and refused when the
    combination spans groups (its split depends on columns of several players)."""
    ens = cm.ens
    F = ens.n_features
    of = np.full(F + len(cm.groups), -1, np.int64)
    for g, cols in enumerate(grp.members):
        of[cols] = g
    if (of[:F] < 0).any():
        raise ValueError(f"feature groups cover {int((of[:F] >= 0).sum())} of {F} columns")
    for c, cols in enumerate(cm.groups):
        owners = sorted({int(of[j]) for j in cols})
        if len(owners) > 1:
            raise ValueError(
                f"this {ens.model_name} model splits on a combination of the columns "
                f"{list(cols)}, which lie in the groups {[grp.names[g] for g in owners]}; "
                "such a split depends on several players, so group_shapley=True needs each "
                "combination's columns in one group")
        of[F + c] = owners[0]
    inputs = cm.inputs
    internal = ens.left >= 0
    feature = np.where(internal, of[np.where(internal, inputs.feature, 0)], 0)
    feature = np.ascontiguousarray(feature, dtype=np.int64)
    per_path = path_features(ens.tree_offsets, ens.left, ens.right, feature,
                             len(grp.members))
    return inputs._replace(feature=feature, path_features=per_path)


def expected_tree_values(ens, method):
    """(n_trees, value_dim): each tree's base value, the cover-weighted mean of its leaves
    (TreeSHAP) or its root value (Saabas)."""
    roots = ens.tree_offsets[:-1]
    if method == "saabas":
        return np.asarray(ens.value, dtype=np.float64)[roots]

    node = expected_values(ens.tree_offsets, ens.postorder, ens.left, ens.right,
                           shap_cover(ens), np.ascontiguousarray(ens.value, np.float64))
    return node[roots]


def _base_per_output(ens, per_tree, scale):
    """base_score + sum over trees of scale x per-tree base, per output."""
    base = np.array(ens.base_score, dtype=np.float64)
    for t in range(ens.n_trees):
        c = int(ens.tree_output[t])
        base[c:c + per_tree.shape[1]] += scale[t] * per_tree[t]
    return base


class ContributionModel:
    """What the contribution kernels read of a parsed model for one method, built once
    (the :class:`~treeimp.Explainer` keeps one per method).

    Attributes
    ----------
    ens : TreeEnsemble
        The ensemble the kernels walk (``split_routed``); rows are read against it.
    method : "shap" or "saabas"
    inputs : ShapTables
        The kernels' tables (``kernel_inputs``).
    groups : tuple of tuples
        The groups of features among which the library's own TreeSHAP shares a split's
        credit (``shap_players``; empty for most models).
    per_tree : ndarray (n_trees, value_dim)
        Every tree's base value (``expected_tree_values``).
    """

    def __init__(self, ens, method):
        if method == "saabas":
            ens.refuse_linear_leaves("Saabas contributions")
        players = shap_players(ens)
        if method in METHODS:
            ens = split_routed(ens, method)
        self.inputs = kernel_inputs(ens, method, players)  # an unknown method is refused here
        self.ens = ens
        self.method = method
        self.groups = players[1]
        self.per_tree = expected_tree_values(ens, method)


def in_sample(cm, rows, data, y, names, grp, *, n_jobs=None, base_margin=None,
              group_shapley=False):
    """:class:`Contributions` of the rows (a ``RowSource`` read against ``cm.ens``) to
    every tree: phi and the base values, each row's starting at its ``base_margin``
    when given. ``data``: the X kept with the result; ``names``: its feature names;
    ``grp``: feature groups (``resolve_groups``) or None, whose members' values are
    summed, or with ``group_shapley`` which are the players (``grouped_inputs``)."""
    ens = cm.ens
    n = rows.n_rows
    if group_shapley:
        ens.refuse_linear_leaves("group_shapley=True")
        values = _in_sample(ens, rows, grouped_inputs(cm, grp), n_jobs,
                            n_players=len(grp.members))
        grp, names, data = None, list(grp.names), None
    else:
        values = _in_sample(ens, rows, cm.inputs, n_jobs, cm.groups)
        if ens.linear_leaves is not None:
            _add_linear_shap(ens, rows, values, n_jobs)
    base = np.broadcast_to(_base_per_output(ens, cm.per_tree, ens.tree_scale),
                           (n, ens.n_outputs)).copy()
    offset = check_base_margin(base_margin, n, ens)
    if offset is not None:  # each row starts at its own margin instead of the base
        base += ens.start_margin(offset) - ens.base_score
    values, names, data = _grouped(grp, values, names, data)
    return Contributions(values, base, names, data, method=cm.method, y=y,
                         output_names=_output_names(ens))


def _add_linear_shap(ens, rows, values, n_jobs):
    """Add to ``values`` (n_rows, n_features, n_outputs), the TreeSHAP values of the
    trees with their leaves at the constant fallbacks, the Shapley values of the linear
    leaf models' gains (``kernels/linear_leaves.linear_leaf_shap``, docs/methods.md):
    together the exact path-dependent Shapley values of the linear trees."""
    lin = ens.linear_leaves
    trees = np.flatnonzero(np.add.reduceat(lin.count, ens.tree_offsets[:-1]) > 0)
    parent = np.full(ens.n_nodes, -1, np.int64)
    inner = np.flatnonzero(ens.left >= 0)
    parent[ens.left[inner]] = inner
    parent[ens.right[inner]] = inner
    prunable = prunable_splits(ens.left, parent, ens.feature, lin.offset, lin.count,
                               lin.feature)
    cover = shap_cover(ens)
    scale = np.ascontiguousarray(ens.tree_scale, dtype=np.float64)
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks():
            strict, _ = routing_flags(ens, chunk)
            linear_leaf_shap(chunk, values[start:start + chunk.shape[0]], trees.astype(np.int64),
                             ens.tree_offsets, ens.tree_output, scale, parent, prunable,
                             cover, ens.value, ens.routing, strict, lin.offset, lin.count,
                             lin.const, lin.feature, lin.coef)


def check_out_of_bag(ens, n_rows, base_margin):
    """Refuse out-of-bag contributions of a model without out-of-bag rows, or with
    per-row offsets (forests take none)."""
    if base_margin is not None:
        check_base_margin(base_margin, n_rows, ens)  # forests take no offset: a clear error
    if ens.kind != FOREST:
        raise ValueError("oob=True is for bagged forests; boosting models have no "
                         "out-of-bag rows: pass held-out rows instead (oob=False)")


def out_of_bag(cm, rows, bits, data, y, names, grp, *, n_jobs=None, group_shapley=False):
    """Out-of-bag :class:`Contributions` of the forest's training rows (in training
    order, checked by the caller): phi^oob over the trees for which a row is out of bag,
    phi^in over the others. ``bits``: the packed in-bag rows, one row per tree
    (``parsers.inbag_bits``); the other arguments as in :func:`in_sample`."""
    ens = cm.ens
    n = rows.n_rows
    K, F = ens.n_outputs, ens.n_features
    inputs = cm.inputs
    if group_shapley:
        inputs, F = grouped_inputs(cm, grp), len(grp.members)
        grp, names, data = None, list(grp.names), None
    phi_oob = np.zeros((n, F, K))
    phi_in = np.zeros((n, F, K))
    n_oob = np.zeros(n, np.int64)

    with numba_threads(n_jobs):
        for start, chunk in rows.chunks():
            stop = start + chunk.shape[0]
            strict, round32 = routing_flags(ens, chunk)
            oob_contributions_chunk(chunk, start, bits, phi_oob[start:stop],
                                    phi_in[start:stop], n_oob[start:stop], inputs,
                                    ens.tree_offsets, ens.tree_output, ens.routing, strict,
                                    round32,
                                    rows_per_task(chunk.shape[0], numba.get_num_threads()))
    # per-row base values: mean of the out-of-bag (in-bag) trees' expected values
    base_oob, base_in = _oob_bases(ens, bits, n, cm.per_tree)
    n_in = ens.n_trees - n_oob
    with np.errstate(invalid="ignore", divide="ignore"):
        phi_oob /= np.where(n_oob > 0, n_oob, np.nan)[:, None, None]
        phi_in /= np.where(n_in > 0, n_in, np.nan)[:, None, None]
    phi_in, _, _ = _grouped(grp, phi_in, names, data)
    phi_oob, names, data = _grouped(grp, phi_oob, names, data)
    return Contributions(phi_oob, base_oob, names, data, method=cm.method, y=y,
                         output_names=_output_names(ens), values_in=phi_in,
                         base_values_in=base_in, n_oob_trees=n_oob)


def _grouped(grp, values, names, X):
    """(values, names, data) with each feature group's members summed ((n, F, K) ->
    (n, G, K)); unchanged without groups."""
    if grp is None:
        return values, names, X
    return np.einsum("nfk,fg->ngk", values, grp.matrix), list(grp.names), None


def _in_sample(ens, rows, inputs, n_jobs, groups=(), n_players=None):
    """(n_rows, n_features, n_outputs) contributions; the kernels credit one column per
    player (``shap_players``), and each group's column is then shared equally among its
    features. ``n_players``: the kernels' columns when ``inputs`` credit other players
    (``grouped_inputs``), returned as they are."""

    F = ens.n_features
    P = F + len(groups) if n_players is None else n_players
    out = np.zeros((rows.n_rows, P, ens.n_outputs))
    scale = np.ascontiguousarray(ens.tree_scale, dtype=np.float64)
    # routed models: a chunk holds the router's numbers, one column per routing column
    chunk_rows = (CHUNK_ROWS if ens.leaf_router is None
                  else max(1, min(CHUNK_ROWS, ROUTED_CHUNK_VALUES // ens.leaf_router.n_columns)))
    # one kernel per method: a TreeSHAP call compiles no Saabas code and the other way
    kernel = contributions_chunk if inputs.use_shap else saabas_chunk
    with numba_threads(n_jobs):
        threads = thread_count()
        for start, chunk in rows.chunks(chunk_rows):
            strict, round32 = routing_flags(ens, chunk)
            _chunk_tasks(kernel, chunk, out[start:start + chunk.shape[0]], inputs, ens, scale,
                         strict, round32, threads)
    for g, cols in enumerate(groups):
        out[:, list(cols)] += out[:, F + g, None] / len(cols)
    return out[:, :F].copy() if groups else out


def _chunk_tasks(kernel, X, out, inputs, ens, scale, strict, round32, threads):
    """Run ``kernel`` (``contributions_chunk`` or ``saabas_chunk``) on the rows of X in
    tasks of ``rows_per_task`` rows, ranges of tasks in ``threads`` Python threads (a
    task writes only its own rows of ``out``)."""
    per_task = rows_per_task(X.shape[0], threads)
    ranges = task_ranges(-(-X.shape[0] // per_task), threads)
    # TreeSHAP of trees without categorical or zero-as-missing nodes: None, the kernel
    # compiled without the routing of those
    plain = (() if kernel is saabas_chunk
             else (None if ens.routing.plain.all() else True,))

    def tasks(i):
        kernel(X, out, inputs, ens.tree_offsets, ens.tree_output, scale, ens.routing, strict,
               round32, per_task, ranges[i], ranges[i + 1], *plain)

    run_tasks(tasks, len(ranges) - 1, threads)


def _oob_bases(ens, bits, n, per_tree):
    """(base of the out-of-bag trees, base of the in-bag trees) per row, (n, n_outputs):
    base_score + the mean of those trees' expected values; NaN for rows without such
    trees. Accumulated tree by tree from the bit rows (no (rows x trees) array)."""
    K = ens.n_outputs
    sums = {False: np.zeros((n, K)), True: np.zeros((n, K))}
    counts = np.zeros(n)
    for t in range(ens.n_trees):
        inbag = np.unpackbits(bits[t], bitorder="little", count=n).astype(bool)
        c = int(ens.tree_output[t])
        vd = per_tree.shape[1]
        sums[True][inbag, c:c + vd] += per_tree[t]
        sums[False][~inbag, c:c + vd] += per_tree[t]
        counts += ~inbag
    out = []
    for inbag, cnt in ((False, counts), (True, ens.n_trees - counts)):
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(ens.base_score + sums[inbag] / np.where(cnt > 0, cnt, np.nan)[:, None])
    return out[0], out[1]


def _output_names(ens):
    if ens.n_outputs == 1:
        return None
    if ens.classes is not None and len(ens.classes) == ens.n_outputs:
        return [str(c) for c in ens.classes]
    return [f"output {k}" for k in range(ens.n_outputs)]


def _squeeze(a):
    """Drop the outputs axis of a single-output array."""
    return a[..., 0] if a is not None and a.shape[-1] == 1 else a


class Contributions:
    """Per-row feature contributions, as returned by :func:`treeimp.contributions`.

    Attributes
    ----------
    values : ndarray (n_rows, n_features[, n_outputs])
        phi: in-sample contributions, or with ``oob=True`` phi^oob (out-of-bag trees).
    base_values : ndarray (n_rows[, n_outputs])
        ``base_values + values.sum(axis=1)`` is the raw prediction (out of bag: the row's
        out-of-bag prediction).
    feature_names : list of str
    data : the X that was explained
    values_in, base_values_in : phi^in and its base values (``oob=True`` only, else None)
    n_oob_trees : ndarray (n_rows,) trees for which each row is out of bag (``oob=True``)
    betas : ndarray (n_features[, n_outputs]) the shrinkage slopes (results of
        :meth:`shrunk` only, else None)
    """

    def __init__(self, values, base_values, feature_names, data, *, method="shap", y=None,
                 output_names=None, values_in=None, base_values_in=None, n_oob_trees=None,
                 betas=None):
        self.values = _squeeze(values)
        self.base_values = _squeeze(base_values)
        self.values_in = _squeeze(values_in)
        self.base_values_in = _squeeze(base_values_in)
        self.feature_names = list(feature_names)
        self.data = data
        self.method = method
        self.y = y
        self.output_names = output_names
        self.n_oob_trees = n_oob_trees
        self.betas = betas

    @property
    def oob(self) -> bool:
        return self.values_in is not None

    def __repr__(self) -> str:
        kind = "out-of-bag " if self.oob else ""
        return (f"Contributions({kind}{self.method}, {self.values.shape[0]} rows, "
                f"{len(self.feature_names)} features"
                + (f", {len(self.output_names)} outputs" if self.output_names else "") + ")")

    def _repr_html_(self) -> str:
        """The notebook display: the summary line and the mean |contribution| of each
        feature (out of bag also the in-bag one), largest first."""
        imp = self.importance()
        cols = {"mean |phi|": imp} if imp.ndim == 1 else {
            f"mean |phi| {o}": imp[o] for o in imp.columns}
        if self.oob:
            inb = self.importance("in")
            cols.update({"mean |phi in-bag|": inb} if inb.ndim == 1 else {
                f"mean |phi in-bag| {o}": inb[o] for o in inb.columns})
        frame = pd.DataFrame(cols)
        frame = frame.loc[frame.iloc[:, 0].sort_values(ascending=False, kind="stable").index]
        return ("<div class='treeimp'><p><b>" + html.escape(repr(self)) + "</b></p>"
                + frame_table(frame, max_rows=MAX_ROWS) + "</div>")

    def _frame(self, a):
        if a.ndim == 1:
            return pd.Series(a, index=pd.Index(self.feature_names, name="feature"))
        return pd.DataFrame(a, index=pd.Index(self.feature_names, name="feature"),
                            columns=pd.Index(self.output_names, name="output"))

    def importance(self, which="values"):
        """Mean |phi| per feature over the rows (rows without values, e.g. rows that are
        in-bag for every tree, are skipped): a Series, or a DataFrame with one column per
        output. ``which``: "values" (phi, or phi^oob out of bag) or "in" (phi^in)."""
        if which not in ("values", "in"):
            raise ValueError(f"which must be 'values' or 'in', got {which!r}")
        a = self.values if which == "values" else self.values_in
        if a is None:
            raise ValueError("which='in' needs out-of-bag contributions (oob=True)")
        return self._frame(np.nanmean(np.abs(a), axis=0))

    def shrunk(self):
        """Loecher's shrunk SHAP (forests, out of bag): per feature (and output) the
        least-squares slope THROUGH THE ORIGIN (no intercept) of phi^oob on phi^in across
        rows, beta_k = sum_i phi^oob_ik phi^in_ik / sum_i (phi^in_ik)^2, and the local
        explanations beta_k phi^in_ik. Loecher's R code fits without an intercept (a Python
        port fits one); this follows the R code. Rows missing either value are skipped;
        beta is 0 for a feature whose phi^in is 0 on every row.

        Returns a Contributions whose ``values`` are beta_k phi^in_ik, ``base_values``
        phi^in's base values (the shrunk values do not add up to a prediction) and
        ``betas`` the slopes; its ``importance()`` is mean_i |beta_k phi^in_ik|.
        """
        if not self.oob:
            raise ValueError("shrunk() needs out-of-bag contributions: "
                             "contributions(forest, X_train, oob=True)")
        ok = ~(np.isnan(self.values) | np.isnan(self.values_in))
        p_oob = np.where(ok, self.values, 0.0)
        p_in = np.where(ok, self.values_in, 0.0)
        num = np.sum(p_oob * p_in, axis=0)
        den = np.sum(p_in * p_in, axis=0)
        betas = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        values = np.where(np.isnan(self.values_in), np.nan, betas[None] * self.values_in)
        out = Contributions(values, self.base_values_in, self.feature_names, self.data,
                            method=f"shrunk {self.method}", y=self.y,
                            output_names=self.output_names, betas=betas)
        return out

    def to_shap(self):
        """A ``shap.Explanation`` of ``values`` (needs shap installed), so that shap's
        beeswarm, waterfall and bar plots work."""
        return shap_explanation(self)

    def plot(self, features=None, *, output=0, top=20):
        """treeimp's figure of out-of-bag contributions (needs matplotlib): left, mean
        |phi^in| against mean |phi^oob| per feature (the ``top`` features by mean
        |phi^in|; noise features sit high in-bag and near 0 out of bag); right, Loecher's
        scatter of phi^in against phi^oob over rows for ``features`` (names or indices,
        default the two with the largest mean |phi^in|), with the line y = x.
        ``output``: which output of a model with several. Returns the figure."""
        if not self.oob:
            raise ValueError("plot() compares in-bag and out-of-bag contributions: "
                             "contributions(forest, X_train, oob=True)")
        import matplotlib.pyplot as plt

        p_in, p_oob = self.values_in, self.values
        if p_in.ndim == 3:
            if not 0 <= output < p_in.shape[2]:
                raise ValueError(f"output={output} but there are {p_in.shape[2]} outputs")
            p_in, p_oob = p_in[:, :, output], p_oob[:, :, output]
        m_in = np.nanmean(np.abs(p_in), axis=0)
        m_oob = np.nanmean(np.abs(p_oob), axis=0)
        order = np.argsort(-m_in, kind="stable")
        if features is None:
            chosen = list(order[:2])
        else:
            many = isinstance(features, (list, tuple, np.ndarray, pd.Index))
            chosen = [self._feature_index(f) for f in (features if many else [features])]
        fig, axes = plt.subplots(1, 1 + len(chosen), figsize=(4.2 * (1 + len(chosen)), 4))
        axes = np.atleast_1d(axes)
        shown = order[:top][::-1]
        pos = np.arange(len(shown))
        axes[0].barh(pos + 0.2, m_in[shown], height=0.4, label="mean |phi in-bag|")
        axes[0].barh(pos - 0.2, m_oob[shown], height=0.4, label="mean |phi out-of-bag|")
        axes[0].set_yticks(pos, [self.feature_names[j] for j in shown])
        axes[0].legend(loc="lower right", fontsize="small")
        axes[0].set_title(f"{self.method}: in-bag vs out-of-bag")
        for ax, j in zip(axes[1:], chosen):
            ax.scatter(p_in[:, j], p_oob[:, j], s=6, alpha=0.5)
            lo = np.nanmin([np.nanmin(p_in[:, j]), np.nanmin(p_oob[:, j])])
            hi = np.nanmax([np.nanmax(p_in[:, j]), np.nanmax(p_oob[:, j])])
            ax.plot([lo, hi], [lo, hi], color="grey", lw=1)
            ax.axhline(0, color="grey", lw=0.5)
            ax.set_xlabel("phi in-bag")
            ax.set_ylabel("phi out-of-bag")
            ax.set_title(self.feature_names[j])
        fig.tight_layout()
        return fig

    def dependence(self, feature, *, color="auto", interactions=None, output=0,
                   which="values", ax=None):
        """A dependence plot (needs matplotlib; shap's ``dependence_plot`` /
        ``shap.plots.scatter``): x the feature's values (``data``; a categorical column by
        its categories), y its contribution, the points coloured by the values of the
        feature it interacts with most.

        Parameters
        ----------
        feature : str or int
            Name or position.
        color : "auto", str, int or None, default "auto"
            The colouring feature. "auto" with ``interactions``: the feature k != j with
            the largest mean |phi_jk| over the rows of ``interactions`` (exact; they may
            be computed on a subsample of the rows, e.g. ``treeimp.interactions(model,
            X[:500])``, since only the choice of k is read from them). "auto" without:
            an approximation from these contributions alone (as shap's
            ``approximate_interactions``, not its code): rows sorted by the feature's
            values are cut into bins of 50 consecutive rows (a tenth of the rows when
            fewer), and k is the feature whose values, by a straight line within each
            bin, explain the largest share of the contribution's spread within bins.
            None: no colour.
        interactions : Interactions, optional
            Of the same model and features (see ``color``).
        output : int or str, default 0
            Which output of a model with several.
        which : {"values", "in"}, default "values"
            phi (out of bag: phi^oob) or phi^in; also the values read of
            ``interactions``.
        ax : matplotlib Axes, optional

        Returns
        -------
        matplotlib.figure.Figure
        """
        if which not in ("values", "in"):
            raise ValueError(f"which must be 'values' or 'in', got {which!r}")
        a = self.values if which == "values" else self.values_in
        if a is None:
            raise ValueError("which='in' needs out-of-bag contributions (oob=True)")
        names = self.feature_names
        j = iplot.feature_index(feature, names)
        y = iplot.select_output(a, 1, output, self.output_names)[:, j]
        n = y.shape[0]
        if interactions is not None:
            if list(getattr(interactions, "feature_names", [])) != names:
                raise ValueError("interactions must be of the same features as these "
                                 f"contributions {names[:10]}, got "
                                 f"{list(getattr(interactions, 'feature_names', []))[:10]}")
            phi = interactions.values if which == "values" else interactions.values_in
            if phi is None:
                raise ValueError("which='in' needs out-of-bag interactions (oob=True)")
            phi = iplot.select_output(phi, 2, output, interactions.output_names)

        def auto():
            if interactions is not None:
                return strongest_partner(phi, j)
            others = [k for k in range(len(names)) if k != j]
            if not others:
                return None
            cols = np.column_stack([iplot.feature_column(self.data, k, n)[0]
                                    for k in others])
            best = binned_partner(y, iplot.feature_column(self.data, j, n)[0], cols)
            return None if best is None else others[best]

        c = iplot.color_index(color, names, auto)
        x = iplot.feature_column(self.data, j, n)
        cv = None if c is None else iplot.feature_column(self.data, c, n)
        title = names[j] if c is None else f"{names[j]}, coloured by {names[c]}"
        if isinstance(color, str) and color == "auto" and c is not None:
            title += (" (its largest mean |interaction|)" if interactions is not None
                      else " (approximate strongest interaction)")
        return iplot.dependence(x, y, cv, xlabel=names[j],
                                ylabel=f"{self.method} contribution of {names[j]}",
                                clabel=None if c is None else names[c], ax=ax, title=title)

    def _feature_index(self, f):
        if isinstance(f, (int, np.integer)):
            if not 0 <= f < len(self.feature_names):
                raise ValueError(f"feature index {f} is out of range for "
                                 f"{len(self.feature_names)} features")
            return int(f)
        if str(f) not in self.feature_names:
            raise ValueError(f"unknown feature {f!r}; features are {self.feature_names[:10]}")
        return self.feature_names.index(str(f))


def shap_explanation(res):
    """A ``shap.Explanation`` of a :class:`Contributions` or ``Interactions`` ``res``: its
    values, base values, data (as a numpy array), feature and output names."""
    try:
        import shap
    except ImportError:
        raise ImportError("to_shap() needs the shap package: pip install shap") from None
    data = res.data
    if hasattr(data, "to_numpy"):
        data = data.to_numpy()
    return shap.Explanation(values=res.values, base_values=res.base_values,
                            data=None if data is None else np.asarray(data),
                            feature_names=res.feature_names, output_names=res.output_names)


def rows_per_task(n_rows, n_threads):
    """ROWS_PER_TASK (kernels/treeshap.py), or fewer when there are too few rows to give
    every thread two tasks (a few rows of a deep forest would otherwise run on one
    thread), rounded up to a multiple of 8: a task's rows are the kernel's vector
    width."""
    share = -(-n_rows // (2 * n_threads))
    return int(max(1, min(ROWS_PER_TASK, -(-share // 8) * 8)))


def quadrature_tables(max_depth):
    """Gauss-Legendre nodes and weights on [0, 1]: row M holds the M-point rule (exact
    for polynomials of degree <= 2M - 1), for M = 1 .. max_depth // 2 + 1."""
    m_max = max_depth // 2 + 1
    nodes = np.zeros((m_max + 1, m_max))
    weights = np.zeros((m_max + 1, m_max))
    for m in range(1, m_max + 1):
        x, w = np.polynomial.legendre.leggauss(m)
        nodes[m, :m] = 0.5 * (x + 1.0)
        weights[m, :m] = 0.5 * w
    return nodes, weights
