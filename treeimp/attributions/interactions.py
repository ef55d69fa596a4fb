"""Per-row SHAP interaction values of a tree ensemble (Lundberg et al. 2020, eq. 3).

The interaction of players i != j is phi_ij = (phi_i in the game with j always present
- phi_i in the game with j always absent) / 2, the definition of shap's
``shap_interaction_values`` and XGBoost's ``pred_interactions``; the main effect phi_ii
is phi_i minus the row's other entries, so every row of the matrix sums to the
contributions. The kernel (``kernels/treeshap.interactions_chunk``) walks each tree
once per batch of rows with the TreeSHAP kernel in its pair mode (``tree_shap_batch``:
a leaf's interaction is the Beta integral of its path product without the two players'
factors, counted at the deeper of their two edges). Models
whose library credits a split to a group of features (CatBoost's combinations of
categorical features) are refused: CatBoost's own interaction values for them match no
sharing rule that was checked. With ``group_shapley`` the players are groups of columns
(``contributions.grouped_inputs``), and a combination inside one group is part of its
player.
"""

import numba
import numpy as np

from ..inputs.rows import CHUNK_ROWS
from ..inputs.threads import numba_threads
from ..kernels.treeshap import interactions_chunk
from ..model.offsets import check_base_margin
from ..model.routing import routing_flags
from .contributions import (
    ROUTED_CHUNK_VALUES,
    _base_per_output,
    _oob_bases,
    _output_names,
    _squeeze,
    grouped_inputs,
    rows_per_task,
)

# a chunk's interaction array holds rows x players^2 x outputs numbers: at most this many
CHUNK_VALUES = 1 << 24


class Interactions:
    """Per-row SHAP interaction values, as returned by :func:`treeimp.interactions`.

    Attributes
    ----------
    values : ndarray (n_rows, n_features, n_features[, n_outputs])
        phi_ij: symmetric in i and j, main effects on the diagonal (with ``groups``:
        groups in place of features, a pair of groups the sum of its members' pairs,
        a group's diagonal its members' main effects and pairs among them; with
        ``group_shapley``, the interaction values of the game of the groups); each row's
        ``values[r].sum(axis=1)`` is its contributions (:func:`treeimp.contributions`),
        and ``base_values + values.sum(axis=(1, 2))`` its raw prediction. With
        ``oob=True`` the mean over the trees for which the row is out of bag.
    base_values : ndarray (n_rows[, n_outputs])
    feature_names : list of str
    data : the X that was explained
    values_in, base_values_in : the same over the trees each row is in-bag for
        (``oob=True`` only, else None)
    n_oob_trees : ndarray (n_rows,) trees for which each row is out of bag (``oob=True``)
    """

    def __init__(self, values, base_values, feature_names, data, *, output_names=None,
                 values_in=None, base_values_in=None, n_oob_trees=None):
        self.values = _squeeze(values)
        self.base_values = _squeeze(base_values)
        self.values_in = _squeeze(values_in)
        self.base_values_in = _squeeze(base_values_in)
        self.feature_names = list(feature_names)
        self.data = data
        self.output_names = output_names
        self.n_oob_trees = n_oob_trees

    @property
    def oob(self) -> bool:
        return self.values_in is not None

    def __repr__(self) -> str:
        kind = "out-of-bag " if self.oob else ""
        return (f"Interactions({kind}shap, {self.values.shape[0]} rows, "
                f"{len(self.feature_names)} x {len(self.feature_names)} features)")


def interactions(cm, rows, data, names, grp=None, *, bits=None, n_jobs=None,
                 base_margin=None, group_shapley=False):
    """:class:`Interactions` of the rows (a ``RowSource`` read against ``cm.ens``, the
    TreeSHAP :class:`~treeimp.attributions.contributions.ContributionModel`): in sample,
    or with ``bits`` (a forest's packed in-bag rows, ``parsers.inbag_bits``) out of bag,
    the rows being the training rows (checked by the caller). ``grp``: feature groups
    (``resolve_groups``) or None: a pair of groups gets the sum over its members'
    pairs, or with ``group_shapley`` the interaction value of the game whose players
    are the groups (``grouped_inputs``; a combination player of CatBoost inside one
    group is then part of that group's player)."""
    ens = cm.ens
    inputs, P = cm.inputs, ens.n_features
    if group_shapley:
        inputs, P = grouped_inputs(cm, grp), len(grp.members)
        grp, names, data = None, list(grp.names), None
    elif cm.groups:
        raise ValueError(
            f"this {ens.model_name} model splits on combinations of categorical features "
            f"{list(cm.groups)[:3]}, which CatBoost's TreeSHAP credits as players of their "
            "own; CatBoost's interaction values for them follow no sharing rule among the "
            "combined features that could be checked, so treeimp does not compute them "
            "(contributions() shares such a player's value as CatBoost does; with groups "
            "that hold each combination's columns, group_shapley=True computes the groups' "
            "interaction values)")
    n, K = rows.n_rows, ens.n_outputs
    oob = bits is not None
    phi = np.zeros((n, P, K))
    inter = np.zeros((n, P, P, K))
    phi_in = np.zeros((n, P, K) if oob else (0, P, K))
    inter_in = np.zeros((n, P, P, K) if oob else (0, P, K))
    n_oob = np.zeros(n if oob else 0, np.int64)
    no_bits = np.zeros((0, 0), np.uint8)
    scale = np.ascontiguousarray(ens.tree_scale, dtype=np.float64)
    chunk_rows = max(1, min(CHUNK_ROWS, CHUNK_VALUES // (P * P * K)))
    if ens.leaf_router is not None:
        chunk_rows = max(1, min(chunk_rows, ROUTED_CHUNK_VALUES // ens.leaf_router.n_columns))
    with numba_threads(n_jobs):
        for s0, chunk in rows.chunks(chunk_rows):
            s1 = s0 + chunk.shape[0]
            strict, round32 = routing_flags(ens, chunk)
            interactions_chunk(
                chunk, s0, bits if oob else no_bits, oob, phi[s0:s1],
                phi_in[s0:s1] if oob else phi_in, inter[s0:s1].reshape(-1, P, K),
                inter_in[s0:s1].reshape(-1, P, K) if oob else inter_in,
                n_oob[s0:s1] if oob else n_oob, inputs, ens.tree_offsets,
                ens.tree_output, scale, ens.routing, strict, round32,
                rows_per_task(chunk.shape[0], numba.get_num_threads()))
    inter = _with_diagonal(inter, phi)
    if not oob:
        base = np.broadcast_to(_base_per_output(ens, cm.per_tree, ens.tree_scale),
                               (n, K)).copy()
        offset = check_base_margin(base_margin, n, ens)
        if offset is not None:
            base += ens.start_margin(offset) - ens.base_score
        inter, names, data = _grouped(grp, inter, names, data)
        return Interactions(inter, base, names, data, output_names=_output_names(ens))
    inter_in = _with_diagonal(inter_in, phi_in)
    n_in = ens.n_trees - n_oob
    with np.errstate(invalid="ignore", divide="ignore"):
        inter /= np.where(n_oob > 0, n_oob, np.nan)[:, None, None, None]
        inter_in /= np.where(n_in > 0, n_in, np.nan)[:, None, None, None]
    base_oob, base_in = _oob_bases(ens, bits, n, cm.per_tree)
    inter_in, _, _ = _grouped(grp, inter_in, names, data)
    inter, names, data = _grouped(grp, inter, names, data)
    return Interactions(inter, base_oob, names, data, output_names=_output_names(ens),
                        values_in=inter_in, base_values_in=base_in, n_oob_trees=n_oob)


def _with_diagonal(inter, phi):
    """The interaction matrices with phi_jj = phi_j - sum_{i != j} phi_ij."""
    idx = np.arange(phi.shape[1])
    inter[:, idx, idx] = 0.0
    inter[:, idx, idx] = phi - inter.sum(axis=2)
    return inter


def _grouped(grp, inter, names, data):
    """(values, names, data) with each pair of groups the sum of its members' pairs
    ((n, F, F, K) -> (n, G, G, K)); unchanged without groups."""
    if grp is None:
        return inter, names, data
    g = grp.matrix
    return np.einsum("nijk,ia,jb->nabk", inter, g, g), list(grp.names), None
