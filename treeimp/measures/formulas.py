"""Node statistics + TreeEnsemble -> per-tree importances.

Every function here takes a :class:`NodeSums` whose arrays carry a block axis
(``n`` is (n_nodes, B)) and returns per-tree, per-feature values of shape
(B, n_trees, n_features). The same code serves the full evaluation set (B = 1, the
blocks summed) and the B random row blocks used for standard errors.

Formulas: ../shared/design/measures.md (Li et al. 2019 eq. 14; Zhou & Hooker 2020;
Loecher's penalized Gini). Notation: node m with children l, r; ``v`` node values on the
model's scale; ``W`` training weights; primes are evaluation-row statistics.

The measures' names, what each is defined for, their parameters and which formula here
each runs are the table of :mod:`treeimp.measures.registry`;
:func:`treeimp.measures.per_method.compute` dispatches through it.

Numpy throughout. The per-split sums of mdi_oob, mdi_oob_centered and ufi are written
here as readable numpy formulas (:func:`mdi_oob_parts`, :func:`mdi_oob_centered_parts`,
:func:`ufi_parts`) and, for speed, as fused numba kernels in
:mod:`treeimp.kernels.fused_measures` that evaluate the same terms in one pass without
(n_splits, B) temporaries (tests/test_formulas.py checks each against the other). The
measures use the fused kernels unless asked otherwise: ``use_fused(False)`` or
``compute(..., fused=False)``.
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from ..backends.threads import run_tasks, task_ranges, thread_count
from ..kernels.fused_measures import (
    LAYOUT_BOOSTING,
    LAYOUT_ONE_HOT,
    LAYOUT_REGRESSION,
    LINEARISED,
    MDI_OOB,
    MDI_OOB_CENTERED,
    UFI_BOOSTING,
    UFI_CLASSIFICATION,
    UFI_REGRESSION,
    leaf_root_counts,
    leaf_split_sums,
    split_sums,
)
from ..kernels.structure import split_arrays
from ..model.ensemble import FOREST, register_derived
from ..model.kernel_inputs import FusedMeasures, HeldOut, SplitIndex, SplitTerms
from ..stats.drivers import node_planes
from ..stats.node_stats import BOOSTING, ONE_HOT, REGRESSION


class NodeSums:
    """Evaluation-row sums per node and block.

    n: (n_nodes, B) weighted count; S: (C, n_nodes, B) weighted target sum (boosting:
    C = 1, sum of -g); Q: (n_nodes, B) weighted squared norm of the target (forest
    regression only: None for forest class targets, whose one-hot rows have Q' = n',
    and for boosting, whose formulas do not use it); H, R: boosting only, sum of h and
    of g^2 / h.

    ``n=None`` (one-hot class targets): n' is the sum of the class planes S'. It is then
    built only when a formula reads all of it (``n``); the default measures read it at
    the tree roots (``n_at``) or sum it inside their kernel.

    ``total_last``: the last block holds all rows and the others are its leave-one-block-out
    replicates (what the jackknife reads); ufi then takes its replicates' node ratios to
    first order about the total's (:func:`ufi_parts`). False: every block stands alone.
    """

    def __init__(self, n, S, Q, H=None, R=None, total_last=False):
        self._n, self.S, self.Q, self.H, self.R = n, S, Q, H, R
        self.total_last = bool(total_last)

    @property
    def n(self) -> np.ndarray:
        if self._n is None:
            self._n = self.S.sum(axis=0)
        return self._n

    @property
    def n_is_class_sum(self) -> bool:
        """True while n' is not stored: it is the sum over c of S[c]."""
        return self._n is None

    @property
    def boosting(self) -> bool:
        """Statistics of a boosted model (H', R' present)."""
        return self.H is not None

    @property
    def n_values(self) -> int:
        """C: the target planes of S (classes, outputs; 1 for boosting)."""
        return self.S.shape[0]

    def n_at(self, nodes) -> np.ndarray:
        """n' of the listed nodes, (len(nodes), B), without building all of n."""
        if self._n is None:
            return self.S[:, nodes].sum(axis=0)
        return self._n[nodes]

    @classmethod
    def from_array(cls, stats, boosting=False, one_hot=False, total_last=False):
        """Name the planes of a kernel array (D, n_nodes, B) (views, no copy).
        ``one_hot``: a forest array of class sums alone (S); n is their sum, Q None.
        ``total_last``: the blocks are leave-one-block-out replicates, the total last."""
        if boosting:  # planes: n, S, H, R (kernels/staged.py)
            return cls(n=stats[0], Q=None, S=stats[1:2], H=stats[2], R=stats[3],
                       total_last=total_last)
        if one_hot:
            return cls(n=None, Q=None, S=stats, total_last=total_last)
        return cls(n=stats[0], Q=stats[1], S=stats[2:], total_last=total_last)

    def blocks(self, sl) -> NodeSums:
        """The statistics of the blocks ``sl`` (a slice; views, no copy)."""
        take = lambda a: None if a is None else a[..., sl]  # noqa: E731
        return NodeSums(n=take(self._n), S=take(self.S), Q=take(self.Q), H=take(self.H),
                         R=take(self.R))

    @property
    def n_blocks(self):
        return self.S.shape[2]


class LeafStats(NodeSums):
    """Node statistics as they were accumulated: sums at the leaves only, per leaf slot
    and row block, (n_leaves, B, D) (:class:`treeimp.stats.node_stats.NodeSums`), shown as the
    B + 1 blocks of the other NodeSums here: the leave-one-block-out replicates and
    the total last.

    The fused per-split sums (mdi_oob, mdi_oob_centered, ufi and their per-class parts)
    and n' at the tree roots are computed from them tree by tree
    (``kernels.formulas.leaf_split_sums``, ``leaf_root_counts``): each tree is summed up
    and turned into replicates in a small buffer while it is in cache, so the leaf sums
    are read once and never written. Any other read of the planes (``n``, ``S``, ``Q``,
    ``H``, ``R``: the numpy formulas) lays them out by node and propagates them once.
    ``layout`` is the layout name of :mod:`treeimp.stats.node_stats`.
    """

    _CODES = {REGRESSION: LAYOUT_REGRESSION, ONE_HOT: LAYOUT_ONE_HOT,
              BOOSTING: LAYOUT_BOOSTING}

    def __init__(self, leaves, ens, layout, *, blocks=None, cache=None):
        if layout not in self._CODES:
            raise ValueError(f"unknown statistics layout {layout!r}")
        self._leaves = leaves
        self._ens = ens
        self._layout = layout
        self._code = self._CODES[layout]
        # the blocks (of the B + 1: replicates, then the total) this view shows
        self._sel = np.arange(leaves.shape[1] + 1) if blocks is None else blocks
        # shared by the views of blocks(): the propagated NodeSums, the root counts
        self._cache = {} if cache is None else cache

    # what the formulas ask before reading planes: answered without building them
    @property
    def boosting(self) -> bool:
        return self._code == LAYOUT_BOOSTING

    @property
    def n_is_class_sum(self) -> bool:
        return self._code == LAYOUT_ONE_HOT

    @property
    def n_values(self) -> int:
        D = self._leaves.shape[2]
        return {LAYOUT_REGRESSION: D - 2, LAYOUT_ONE_HOT: D, LAYOUT_BOOSTING: 1}[self._code]

    @property
    def n_blocks(self):
        return self._sel.shape[0]

    @property
    def total_last(self) -> bool:
        """All B + 1 blocks in view: the replicates and the total last."""
        return self._all_blocks()

    def blocks(self, sl) -> LeafStats:
        return LeafStats(self._leaves, self._ens, self._layout, blocks=self._sel[sl],
                         cache=self._cache)

    def _all_blocks(self):
        return self._sel.shape[0] == self._leaves.shape[1] + 1

    def _pick(self, a):
        """``a`` (..., B + 1) restricted to this view's blocks."""
        return a if self._all_blocks() else a[..., self._sel]

    # the planes: the propagated statistics, built once
    def _propagated(self) -> NodeSums:
        full = self._cache.get("full")
        if full is None:
            arr = node_planes(self._ens, self._leaves, leave_one_out=True, propagate=True)
            full = self._cache["full"] = NodeSums.from_array(
                arr, boosting=self.boosting, one_hot=self.n_is_class_sum, total_last=True)
        return full if self._all_blocks() else full.blocks(self._sel)

    n = property(lambda self: self._propagated().n)
    S = property(lambda self: self._propagated().S)
    Q = property(lambda self: self._propagated().Q)
    H = property(lambda self: self._propagated().H)
    R = property(lambda self: self._propagated().R)

    def root_counts(self) -> np.ndarray:
        """n' at every tree's root, (n_trees, B) for this view's blocks."""
        roots = self._cache.get("roots")
        if roots is None:
            ens = self._ens
            roots = np.empty((ens.n_trees, self._leaves.shape[1] + 1))
            leaf_root_counts(ens.postorder, ens.tree_offsets, ens.left, ens.right,
                             ens.leaf_slots, self._leaves, self._code, roots)
            self._cache["roots"] = roots
        return self._pick(roots)

    def n_at(self, nodes) -> np.ndarray:
        roots = self._ens.tree_offsets[:-1]
        if np.shape(nodes) == roots.shape and np.array_equal(nodes, roots):
            return self.root_counts()
        return self._propagated().n_at(nodes)

    def split_sums(self, requests, sp) -> list:
        """The per-split sums of several fused measures in one pass over the trees:
        ``requests`` [(kind, SplitTerms, C)] -> [(B, n_trees, n_features, C)], the sums
        ``kernels.formulas.split_sums`` gives on propagated statistics."""
        ens = self._ens
        B1 = self._leaves.shape[1] + 1
        out = np.zeros((len(requests), B1, sp.n_trees * sp.n_features,
                        max(c for _, _, c in requests)))
        roots = np.empty((ens.n_trees, B1))
        measures = _fused_measures(requests)
        ranges = task_ranges(ens.n_trees, thread_count())
        family = _family(self.boosting)

        def trees(i):  # a tree's cells of out and roots are its own
            leaf_split_sums(measures, sp.index, ens.postorder, ens.left, ens.right,
                            ens.leaf_slots, self._leaves, self._code, out, roots,
                            ranges[i], ranges[i + 1], *family)

        run_tasks(trees, len(ranges) - 1)
        self._cache.setdefault("roots", roots)
        sel = slice(None) if self._all_blocks() else self._sel
        return [o[sel, :, :c].reshape(-1, sp.n_trees, sp.n_features, c)
                for o, (_, _, c) in zip(out, requests)]


def _family(boosting):
    """The fused kernels' ``(boosting, forests)`` arguments: (True, None) for boosting
    statistics, (None, True) for a forest's. The kernels compile the ufi forms of that
    family only (the ufi kind follows from the same layout: :func:`_ufi_request`)."""
    return (True, None) if boosting else (None, True)


def _fused_measures(requests):
    """kernel_inputs.FusedMeasures of [(kind, SplitTerms, C)]: the arrays of several
    measures in one bundle, each distinct w and v array once (stacked, read-only)."""
    def stack(arrays):
        rows, of = [], []
        for a in arrays:
            hit = next((i for i, r in enumerate(rows) if r is a), None)
            if hit is None:
                rows.append(a)
                hit = len(rows) - 1
            of.append(hit)
        width = max(r.shape[0] for r in rows)
        tail = rows[0].shape[1:]
        if len(rows) == 1 and rows[0].shape[0] == width:
            out = np.ascontiguousarray(rows[0], dtype=np.float64)[None]
        else:  # a one-element dummy (not read) padded with zeros to the others' length
            out = np.empty((len(rows), width) + tail)
            for i, r in enumerate(rows):
                out[i, :r.shape[0]] = r
                out[i, r.shape[0]:] = 0.0
        out = out.view()
        out.flags.writeable = False  # one kernel type whether copied or a view of the model
        return out, np.array(of, dtype=np.int64)

    terms = [t for _, t, _ in requests]
    w, w_of = stack([np.asarray(t.w, dtype=np.float64) for t in terms])
    v, v_of = stack([np.asarray(t.v, dtype=np.float64) for t in terms])
    extras = [np.asarray(t.extra, dtype=np.float64).ravel() for t in terms]
    start = np.concatenate([[0], np.cumsum([e.shape[0] for e in extras])]).astype(np.int64)
    extra = np.concatenate(extras)
    extra.flags.writeable = False
    return FusedMeasures(np.array([k for k, _, _ in requests], dtype=np.int64), w_of, v_of,
                         start, w, v, extra)


# ---------------------------------------------------------------- helpers
class _Splits:
    """Index arrays of the internal nodes of an ensemble (computed once per call)."""

    def __init__(self, ens):
        (self.m, self.l, self.r, self.tree, self.root, self.key,
         self.tree_splits) = split_arrays(ens.tree_offsets, ens.left, ens.right, ens.feature,
                                          ens.n_features, ens.node_tree)
        self.root_of_tree = ens.tree_offsets[:-1]
        # the same arrays as the fused formula kernels take them
        self.index = SplitIndex(self.m, self.l, self.r, self.key, self.tree_splits,
                                ens.tree_offsets)
        self.n_trees, self.n_features = ens.n_trees, ens.n_features
        self._insample = None
        self._decrease = None

    def insample_fraction(self, ens):
        """w_m = W_m / W_root for every node (built once)."""
        if self._insample is None:
            root_w = ens.weight[ens.tree_offsets[:-1]][ens.node_tree]
            self._insample = _safe_div(ens.weight, root_w)
        return self._insample

    def insample_decrease(self, ens):
        """In-sample variance decrease per split (built once, read-only):
        :func:`_insample_variance_decrease`."""
        if self._decrease is None:
            self._decrease = _insample_variance_decrease(ens, self)
        return self._decrease


register_derived("splits", _Splits)


def _splits(ens) -> _Splits:
    """The ensemble's _Splits (its cached property ``splits``: built once)."""
    return ens.splits


def _margin_value(ens):
    """Node values as each tree adds them to the boosted margin: ``tree_scale * value``.

    ``tree_scale`` is 1 except for XGBoost DART (its per-tree ``weight_drop``). Forests
    keep the unscaled tree values: their 1 / n_trees is the mean over trees taken later.
    """
    v = np.asarray(ens.value, dtype=np.float64)
    if ens.kind == FOREST or np.all(ens.tree_scale == 1.0):
        return np.ascontiguousarray(v)
    return np.ascontiguousarray(v * ens.tree_scale[ens.node_tree][:, None])


# ---------------------------------------------------------------- fused or numpy
# whether the measures evaluate their per-split sums with the fused kernels (the default)
# or the numpy forms; a context variable, so a use_fused block affects only its own
# thread (or asyncio task)
_FUSED = contextvars.ContextVar("treeimp_measures_fused", default=True)


@contextlib.contextmanager
def use_fused(fused: bool):
    """Within the ``with`` block (in this thread), mdi_oob, mdi_oob_centered, ufi and their
    per-class parts evaluate their per-split sums with the fused numba kernels
    (``fused=True``, the default outside any block) or with the readable numpy forms
    (``fused=False``), which give the same numbers to float rounding."""
    if not isinstance(fused, (bool, np.bool_)):
        raise TypeError(f"use_fused takes True or False, got {fused!r}")
    token = _FUSED.set(bool(fused))
    try:
        yield
    finally:
        _FUSED.reset(token)


def using_fused() -> bool:
    """Whether the measures currently use the fused kernels (see :func:`use_fused`)."""
    return _FUSED.get()


def _request(kind, ens, st, w=None, extra=None, v=None):
    """(kind, SplitTerms, C) of a fused kernel call: C = 1 for the one-number terms of
    UFI_REGRESSION and UFI_BOOSTING. ``v``: the node values the terms read, if not the
    model's (MDI_OOB: as they enter the margin)."""
    if v is None:
        v = _margin_value(ens) if kind == MDI_OOB else np.ascontiguousarray(
            ens.value, dtype=np.float64)
    C = 1 if kind in (UFI_REGRESSION, UFI_BOOSTING) else st.n_values
    dummy = np.zeros(1)
    return kind, SplitTerms(dummy if w is None else w, v, dummy if extra is None else extra), C


def _fused(kind, ens, sp, st, w=None, extra=None, v=None):
    """Per-split terms of ``kind`` summed per tree and feature by the fused kernel:
    (B, T, F, C) (see :func:`_request`)."""
    return _run_split_sums(_request(kind, ens, st, w, extra, v), sp, st)


def _run_split_sums(request, sp, st):
    """The fused kernel's sums (B, n_trees, n_features, C) of ``request``
    (:func:`_request`): from the leaf sums of a :class:`LeafStats`, tree by tree, or by
    ``split_sums`` over propagated statistics."""
    if isinstance(st, LeafStats):
        return st.split_sums([request], sp)[0]
    kind, terms, C = request
    H = None
    if kind == MDI_OOB_CENTERED:
        # the kernel reads the centring weights N' from its H argument: H' for boosting,
        # n' for forests (not read for one-hot class targets, whose n' is the sum of S')
        H = st.H if st.boosting else (st.S[0] if st.n_is_class_sum else st.n)
    # key-major (n_keys, B, C): a split adds to B neighbouring cells, not to B cells a
    # whole (n_keys, C) plane apart (which also fall into one L1 cache set)
    out = np.zeros((sp.n_trees * sp.n_features, st.n_blocks, C))
    split_sums(kind, sp.index, terms, _held_out(st, H=H), out, *_family(st.boosting))
    return _key_major_to_parts(out, sp)


def _held_out(st: NodeSums, H=None):
    """The statistics as the fused kernels take them (kernel_inputs.HeldOut): planes a
    layout lacks are filled by n' (not read); ``H``: what the kernel reads as H, if not
    st.H. One-hot class targets: the kernel sums n' from the class planes itself."""
    n_from_s = st.n_is_class_sum
    n = st.S[0] if n_from_s else st.n
    if H is None:
        H = n if st.H is None else st.H
    return HeldOut(n, n if st.Q is None else st.Q, st.S, H, n if st.R is None else st.R,
                   n_from_s)


def _key_major_to_parts(out, sp):
    """A fused kernel's (n_keys, B, C) sums as (B, n_trees, n_features, C)."""
    B, C = out.shape[1:]
    return np.ascontiguousarray(out.transpose(1, 0, 2)).reshape(B, sp.n_trees,
                                                                sp.n_features, C)


def _per_tree(sp: _Splits, term):
    """Sum node terms (n_splits, B) into (B, n_trees, n_features)."""
    term = np.atleast_2d(term.T).T if term.ndim == 1 else term
    size = sp.n_trees * sp.n_features
    out = np.empty((term.shape[1], sp.n_trees, sp.n_features))
    for b in range(term.shape[1]):
        out[b] = np.bincount(sp.key, weights=term[:, b], minlength=size).reshape(
            sp.n_trees, sp.n_features)
    return out


def _safe_div(a, b):
    """a / b where b > 0, else 0 (b broadcast against a)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    positive = b > 0
    if positive.all():  # the usual case: every quotient, without the mask
        return np.divide(a, b, out=np.empty(shape))
    return np.divide(a, b, out=np.zeros(shape), where=np.broadcast_to(positive, shape))


def _insample_fraction(ens):
    """w_m = W_m / W_root for every node (kept with the ensemble's _Splits)."""
    return _splits(ens).insample_fraction(ens)


def _decrease(sp, node_h, w, keep):
    """w_m H(m) - w_l H(l) - w_r H(r) on kept splits; node_h (n_nodes, B), w (n_nodes,)."""
    wm, wl, wr = w[sp.m, None], w[sp.l, None], w[sp.r, None]
    term = wm * node_h[sp.m] - wl * node_h[sp.l] - wr * node_h[sp.r]
    return np.where(keep, term, 0.0)


def _both_children_seen(sp, st):
    return (st.n[sp.l] > 0) & (st.n[sp.r] > 0)


def _per_row(sp, st, per_tree):
    """Divide per-tree sums by the tree's evaluation weight n'_root (0 rows -> NaN)."""
    n_root = st.n_at(sp.root_of_tree).T[:, :, None]  # (B, n_trees, 1)
    seen = n_root > 0
    if seen.all():  # every tree saw rows in every block: nothing to mark
        return np.divide(per_tree, n_root)
    out = np.divide(per_tree, np.where(seen, n_root, 1.0))
    np.copyto(out, np.nan, where=~seen)
    return out


def _with_rows(sp, st, per_tree):
    """Mark trees that saw no evaluation rows (in that block) as NaN."""
    seen = st.n_at(sp.root_of_tree).T[:, :, None] > 0
    if seen.all():  # nothing to mark: the sums themselves (a view when already float64)
        return np.asarray(per_tree, dtype=np.float64)
    out = np.array(per_tree, dtype=np.float64)
    np.copyto(out, np.nan, where=~seen)
    return out


def _over_classes(parts):
    """Per-class split sums (..., C) summed over the classes (C = 1: that one, no sum)."""
    return parts[..., 0] if parts.shape[-1] == 1 else parts.sum(axis=-1)


# ---------------------------------------------------------------- measures
def mdi(ens):
    """In-sample importance per tree, (n_trees, n_features): no evaluation rows needed.

    gain_kind "impurity" (scikit-learn trees): (W_m I_m - W_l I_l - W_r I_r) / W_root;
    gain_kind "gain" (XGBoost, LightGBM, HistGradientBoosting): the stored split gain;
    CatBoost, which stores none: the change of its leaf values that its
    PredictionValuesChange importance sums (``treeimp/parsers/catboost.py``).
    """
    sp = _splits(ens)
    if ens.gain_kind == "impurity":
        wi = ens.weight * ens.impurity
        root_w = ens.weight[sp.root]
        term = _safe_div(wi[sp.m] - wi[sp.l] - wi[sp.r], root_w)
    else:
        term = np.nan_to_num(ens.gain[sp.m])
    return _per_tree(sp, term[:, None])[0]


def mdi_oob(ens, st: NodeSums, parts=None):
    """Li et al. (2019) eq. 14: (1/n'_root) sum_m (v_l - v_m).S'_l + (v_r - v_m).S'_r.

    For boosting (S' = sum of -g) this is the first-order decrease of the held-out mean
    loss attributable to the splits on each feature. ``parts``: the per-class sums of
    ``class_parts`` for these statistics, when already computed.
    """
    parts = mdi_oob_class_parts(ens, st) if parts is None else parts
    return _per_row(_splits(ens), st, _over_classes(parts))


def mdi_oob_centered(ens, st: NodeSums, parts=None):
    """MDI-oob with the target centred per tree at the tree's own in-bag root value c_t:
    (1/n'_root) sum_m (v_l - v_m).(S'_l - c_t N'_l) + (v_r - v_m).(S'_r - c_t N'_r).

    This is the mean over evaluation rows of (z_i - c_t h_i).f_k(x_i), f_k the Saabas
    contribution of feature k, because sum_i w_i h_i f_k(x_i) is the sum over splits on
    k of N'_l (v_l - v_m) + N'_r (v_r - v_m). Forests: h = 1 (N' = n'), c_t = v_root
    (regression: the in-bag mean of y; classification: the in-bag class proportions).
    Boosting: the tree is the weighted least-squares fit of -g/h with weights h, so the
    centred target is -g - mu_root h (N' = H'), mu_root = v_root / learning rate the
    tree's unshrunk root estimate -G/(H + lambda) (exactly -G/H, for which the in-sample
    sum of (-g - mu_root h) is zero, when lambda = 0).

    In-bag, contributions sum to zero (h-weighted for boosting, lambda = 0), so centring
    changes nothing there; out of bag it removes the term c_t . mean(f_k), which on a
    noise feature is a bias proportional to E[y] and makes mdi_oob change when a
    constant is added to y. ``parts``: the per-class sums of ``class_parts`` when
    already computed.
    """
    parts = mdi_oob_centered_class_parts(ens, st) if parts is None else parts
    return _per_row(_splits(ens), st, _over_classes(parts))


def _fused_centered(ens, sp, st: NodeSums):
    """mdi_oob_centered's per-class split sums (B, n_trees, n_features, C) in one fused
    pass (kernels/fused_measures.py, MDI_OOB_CENTERED): the same numbers as
    ``_fused(MDI_OOB, ...) - _centring_parts(...)``, which the tests check."""
    return _run_split_sums(_centered_request(ens, sp, st), sp, st)


def _centered_request(ens, sp, st):
    """The fused request (:func:`_request`) of mdi_oob_centered: the centres c_t."""
    centre = np.ascontiguousarray(_root_centre(ens, sp, st.boosting).ravel())
    return MDI_OOB_CENTERED, SplitTerms(np.zeros(1), _margin_value(ens), centre), st.n_values


def _root_centre(ens, sp, boosting):
    """c_t per tree (n_trees, C): the in-bag root value (boosting: unshrunk, value / lr)."""
    roots = sp.root_of_tree
    v = np.asarray(ens.value, dtype=np.float64)[roots]
    if boosting:
        return v / ens.tree_learning_rate[:, None]
    return v


def centring_parts(ens, st: NodeSums):
    """What mdi_oob_centered subtracts from mdi_oob's per-class split sums:
    (B, n_trees, n_features, C), see :func:`_centring_parts`."""
    return _centring_parts(ens, _splits(ens), st)


def _centring_parts(ens, sp, st: NodeSums):
    """(B, n_trees, n_features, C): c_t,c times the sum over splits on k of
    N'_l (v_lc - v_mc) + N'_r (v_rc - v_mc), N' = n' (forests) or H' (boosting); i.e.
    c_t,c sum_i w_i h_i f_k,c(x_i), what mdi_oob_centered subtracts from mdi_oob's sums."""
    boosting = st.boosting
    v = _margin_value(ens)
    c = _root_centre(ens, sp, boosting)[sp.tree]  # (n_splits, C)
    coef_l = c * (v[sp.l] - v[sp.m])
    coef_r = c * (v[sp.r] - v[sp.m])
    B, C = st.n_blocks, st.S.shape[0]
    size = sp.n_trees * sp.n_features
    out = np.empty((B, sp.n_trees, sp.n_features, C))
    for b in range(B):
        if boosting:
            N = st.H[:, b]
        elif st.n_is_class_sum:
            N = st.S[:, :, b].sum(axis=0)
        else:
            N = st.n[:, b]
        nl, nr = N[sp.l], N[sp.r]
        for j in range(C):
            out[b, :, :, j] = np.bincount(sp.key, weights=coef_l[:, j] * nl + coef_r[:, j] * nr,
                                          minlength=size).reshape(sp.n_trees, sp.n_features)
    return out


def ufi(ens, st: NodeSums, *, classification: bool, parts=None):
    """Zhou & Hooker (2020) unbiased feature importance, in-sample weights w_m = W_m/W_root.

    Splits whose children include one without evaluation rows contribute 0. Boosting:
    the regression form on the Newton pseudo-response, exact for squared error with
    lambda = 0 and an approximation otherwise (see :func:`_ufi_boosting_parts`).
    ``parts``: its split sums (``ufi_class_parts`` of a classification forest,
    ``fused_parts``), when already computed.
    """
    if parts is None:
        parts = (_fused_ufi if using_fused() else ufi_parts)(ens, st, classification=classification)
    return _with_rows(_splits(ens), st, _over_classes(parts))


def _fused_ufi(ens, st: NodeSums, *, classification: bool):
    """:func:`ufi_parts` by the fused kernel (UFI_BOOSTING, UFI_CLASSIFICATION or
    UFI_REGRESSION of kernels/fused_measures.py)."""
    sp = _splits(ens)
    return _run_split_sums(_ufi_request(ens, sp, st, classification), sp, st)


def _ufi_request(ens, sp, st, classification):
    """The fused request (:func:`_request`) of ufi's form for this model and target."""
    w = _insample_fraction(ens)
    # the replicates' ratios linearised about the total (kernels.fused_measures.LINEARISED)
    lin = LINEARISED if st.total_last else 0
    if st.boosting:
        mu, delta_in = _ufi_boosting_parts(ens, sp)
        kind, terms, C = _request(UFI_BOOSTING, ens, st, w=w, extra=delta_in, v=mu[:, None])
    elif classification:  # the constant 1 of the Gini cancels: W_m = W_l + W_r
        kind, terms, C = _request(UFI_CLASSIFICATION, ens, st, w=w)
    else:
        kind, terms, C = _request(UFI_REGRESSION, ens, st, w=w,
                                  extra=_insample_decrease(ens, sp, "ufi"))
    return kind + lin, terms, C


def fused_parts(methods, ens, st: NodeSums, classification: bool) -> dict:
    """{method: per-class split sums (B, n_trees, n_features, C)} of the measures among
    mdi_oob, mdi_oob_centered and ufi in ``methods``, by the fused kernels: statistics
    still at the leaves (:class:`LeafStats`) give all of them from one pass over the
    trees. The same numbers as ``class_parts`` (classification forests) or as the
    measures compute on their own."""
    sp = _splits(ens)
    build = {"mdi_oob": lambda: _request(MDI_OOB, ens, st),
             "mdi_oob_centered": lambda: _centered_request(ens, sp, st),
             "ufi": lambda: _ufi_request(ens, sp, st, classification)}
    names = [m for m in methods if m in build]
    if isinstance(st, LeafStats) and names:
        sums = st.split_sums([build[m]() for m in names], sp)
    else:
        sums = [_run_split_sums(build[m](), sp, st) for m in names]
    return dict(zip(names, sums))


def check_node_means(method, ens):
    """ValueError when this is a regression forest whose node values are medians
    (``impurity_kind`` "median", e.g. scikit-learn's criterion="absolute_error"):
    ``method`` (ufi, penalized Gini) reads the in-sample variance about node means, which
    its Zhou-Hooker / Loecher regression form needs. The registry's ``needs_node_means``
    says which measures call this."""
    if (ens.kind == FOREST and ens.objective.name != "class_probability"
            and ens.impurity_kind == "median"):
        raise ValueError(
            f"{method!r} needs the in-sample variance about node means, but this regression "
            f"forest was grown with criterion={ens.objective.source!r} (node values are "
            "medians, impurities absolute deviations); use 'mdi_oob' or 'naive_oob', or "
            "grow the forest with criterion='squared_error'")


def _insample_decrease(ens, sp, method):
    """:func:`_insample_variance_decrease` (kept with the splits), after checking that
    ``method`` is defined for the model."""
    check_node_means(method, ens)
    return sp.insample_decrease(ens)


def _insample_variance_decrease(ens, sp):
    """In-sample variance decrease (W_m I_m - W_l I_l - W_r I_r) / W_root for regression
    trees whose impurity I is the variance; otherwise (impurity not stored, or another
    criterion's, e.g. a Poisson deviance) the equal variance form
    (W_l |v_l|^2 + W_r |v_r|^2 - W_m |v_m|^2) / W_root, exact for node means.

    Multi-output targets (K outputs): the vector form's variance is the mean of
    |y - v_m|^2, the SUM of the per-output variances, while scikit-learn stores their
    MEAN as ``tree_.impurity``: I is then K times the stored impurity."""
    W = ens.weight
    root_w = W[sp.root]
    n_out = ens.value.shape[1] if ens.value.ndim == 2 else 1
    if ens.impurity_kind == "variance" and np.all(np.isfinite(ens.impurity[sp.m])):
        wi = n_out * W * ens.impurity
        return _safe_div(wi[sp.m] - wi[sp.l] - wi[sp.r], root_w)
    sq = np.einsum("nc,nc->n", ens.value, ens.value) if ens.value.ndim == 2 else ens.value ** 2
    return _safe_div(W[sp.l] * sq[sp.l] + W[sp.r] * sq[sp.r] - W[sp.m] * sq[sp.m], root_w)


def _ufi_boosting_parts(ens, sp):
    """(mu per node, in-sample Delta per split) of the Zhou-Hooker regression form on the
    Newton pseudo-response -g/h with weights h; kernels/fused_measures.py (UFI_BOOSTING) adds
    the held-out part.

    mu = unshrunk node estimate v / learning_rate; in-sample
    Delta_m = (W_l mu_l^2 + W_r mu_r^2 - W_m mu_m^2) / W_root; held-out
    H'(m) = (R' + 2 mu G' + mu^2 H') / H' with G' = -S'; Delta'_m the w-weighted decrease
    of H', on splits whose children both have held-out rows with H' > 0.

    Exact (the Zhou-Hooker regression UFI of each tree on its residuals) for squared
    error with lambda = 0, any learning rate; an approximation otherwise: with lambda > 0
    mu is the shrunk -G/(H + lambda), not the node mean; scikit-learn GB/HGB record
    sample counts, not hessian sums, as W; losses whose leaves are refit after the split
    (absolute error, quantile) have leaf values that are not Newton steps.

    XGBoost DART: mu is the tree's own fit (value / learning_rate), not rescaled by the
    tree's ``weight_drop``, which only changes how much of that fit enters the margin
    (mdi_oob uses the rescaled values). DART trees were fit with some earlier trees
    dropped, so the held-out gradient at the full margin is only approximately the
    response the tree fitted.
    """
    rates = ens.tree_learning_rate
    # one rate for every tree (the usual case): the same quotients without a gather
    lr = (rates[0] if rates.shape[0] and np.all(rates == rates[0])
          else rates[ens.node_tree])
    mu = ens.value[:, 0] / lr
    W = ens.weight
    wmu2 = W * mu ** 2  # W mu^2 of every node, then read at the splits' three nodes
    delta_in = _safe_div(wmu2[sp.l] + wmu2[sp.r] - wmu2[sp.m], W[sp.root])
    return mu, delta_in


def naive_oob(ens, st: NodeSums):
    """Impurity decrease measured on evaluation rows alone (the strawman of Li et al.).

    Forests: (n'_m G'(m) - n'_l G'(l) - n'_r G'(r)) / n'_root with the held-out Gini or
    variance, which equals (|S'_l|^2/n'_l + |S'_r|^2/n'_r - |S'_m|^2/n'_m) / n'_root.
    Boosting: the held-out Newton gain per row,
    (S'_l^2/H'_l + S'_r^2/H'_r - S'_m^2/H'_m) / (2 n'_root).
    """
    sp = _splits(ens)
    keep = _both_children_seen(sp, st)
    if st.boosting:
        denom, half = st.H, 0.5
        keep = keep & (st.H[sp.l] > 0) & (st.H[sp.r] > 0)
    else:
        denom, half = st.n, 1.0
    s2 = np.einsum("cnb,cnb->nb", st.S, st.S)
    node = _safe_div(s2, denom)
    term = half * (node[sp.l] + node[sp.r] - node[sp.m])
    return _per_row(sp, st, _per_tree(sp, np.where(keep, term, 0.0)))


def pg_oob(ens, st: NodeSums, *, alpha: float, lam: float, classification: bool):
    """Loecher's penalized Gini: PG(m) = alpha G'(m) + (1-alpha) G(m) + (lam/2)|p'_m - p_m|^2,
    decrease weighted by in-sample fractions, skip rule as ufi.

    G is the in-sample Gini 1 - |p_m|^2 (classification) or impurity (regression);
    G' the held-out Gini 1 - |p'_m|^2 or held-out variance.
    """
    sp = _splits(ens)
    w = _insample_fraction(ens)
    keep = _both_children_seen(sp, st)
    v = ens.value
    p_held = _safe_div(st.S, st.n[None])
    held_sq = np.einsum("cnb,cnb->nb", p_held, p_held)
    diff = p_held - v.T[:, :, None]
    gap = np.einsum("cnb,cnb->nb", diff, diff)
    if classification:
        g_held = 1.0 - held_sq
        g_in = (1.0 - np.einsum("nc,nc->n", v, v))[:, None]
        node = alpha * g_held + (1.0 - alpha) * g_in + 0.5 * lam * gap
        term = _decrease(sp, node, w, keep)
    else:
        g_held = _safe_div(st.Q, st.n) - held_sq
        node = alpha * g_held + 0.5 * lam * gap
        term = _decrease(sp, node, w, keep)
        term = term + (1.0 - alpha) * _insample_decrease(ens, sp, "pg_oob")[:, None]
        term = np.where(keep, term, 0.0)
    return _with_rows(sp, st, _per_tree(sp, term))


# ------------------------------------------- per-split sums: the numpy forms
# Each returns (B, n_trees, n_features, C): the measure's terms for every split m (children
# l, r) and block b, summed over the splits of each tree on each feature. Node-indexed
# arrays are read at the split's nodes (x[l] is x_l for every split at once); class or
# output planes come first, (C, n_splits, B), as in NodeSums.S. The fused kernels of
# kernels/fused_measures.py compute the same sums (tests/test_formulas.py).
def mdi_oob_parts(ens, st: NodeSums):
    """mdi_oob per class c: (v_lc - v_mc) S'_lc + (v_rc - v_mc) S'_rc, with node values v
    as they enter the margin (:func:`_margin_value`)."""
    sp = _splits(ens)
    m, l, r = sp.m, sp.l, sp.r
    v, S = _margin_value(ens).T[:, :, None], st.S  # v (C, n_nodes, 1)
    term = (v[:, l] - v[:, m]) * S[:, l] + (v[:, r] - v[:, m]) * S[:, r]
    return _sum_per_key(sp, term)


def mdi_oob_centered_parts(ens, st: NodeSums):
    """mdi_oob_centered per class c:
    (v_lc - v_mc)(S'_lc - c_tc N'_l) + (v_rc - v_mc)(S'_rc - c_tc N'_r), c_t the root
    value of the split's tree (boosting: unshrunk, :func:`_root_centre`), N' = n'
    (forests) or H' (boosting)."""
    sp = _splits(ens)
    m, l, r = sp.m, sp.l, sp.r
    boosting = st.boosting
    v, S = _margin_value(ens).T[:, :, None], st.S
    N = st.H if boosting else _counts(st)  # (n_nodes, B)
    c = _root_centre(ens, sp, boosting)[sp.tree].T[:, :, None]  # (C, n_splits, 1)
    term = (v[:, l] - v[:, m]) * (S[:, l] - c * N[l]) + (v[:, r] - v[:, m]) * (S[:, r] - c * N[r])
    return _sum_per_key(sp, term)


def ufi_parts(ens, st: NodeSums, *, classification: bool):
    """ufi's split sums, on splits whose children both saw evaluation rows (n'_l, n'_r > 0;
    boosting also H'_l, H'_r > 0), in-sample weight fractions w = W / W_root:

    classification forests, per class c: w_l v_lc p'_lc + w_r v_rc p'_rc - w_m v_mc p'_mc
    with held-out class shares p' = S' / n' (the Gini's constant 1 cancels: W_m = W_l +
    W_r); regression forests (C = 1, summed over outputs): the held-out decrease
    w_m H'(m) - w_l H'(l) - w_r H'(r) of the mean squared error H' = (Q' - 2 v.S' +
    |v|^2 n') / n', plus the in-sample decrease (:func:`_insample_variance_decrease`);
    boosting (C = 1): the same with the Newton impurity H' = (R' - 2 mu S' + mu^2 H') / H'
    of the unshrunk node estimates mu and their in-sample decrease
    (:func:`_ufi_boosting_parts`).

    Statistics whose last block is the total and the others its leave-one-block-out
    replicates (``st.total_last``): the node ratio A' / N' (held-out impurity, class
    share) of a replicate b, at a node whose total evaluation weight n' is k > 1, is
    r + sqrt(k / (k - 1)) (A'_b - r N'_b) / N' with r = A' / N' of the total: its
    first-order expansion about the total's, scaled so that the jackknife variance of a
    node mean whose rows fall in different blocks is s^2 / k (the exact ratios give
    s^2 / (k - 1)); nodes with one row keep the exact ratio; the total is unchanged
    (:data:`treeimp.kernels.fused_measures.LINEARISED`).
    """
    sp = _splits(ens)
    m, l, r = sp.m, sp.l, sp.r
    w = _insample_fraction(ens)
    n, S = _counts(st), st.S
    k = n if st.total_last else None  # the expansion's row counts, or exact ratios
    keep = (n[l] > 0) & (n[r] > 0)  # (n_splits, B)
    if st.boosting:
        mu, delta_in = _ufi_boosting_parts(ens, sp)
        H = st.H
        mu = mu[:, None]
        newton = _ratio(st.R - 2.0 * mu * S[0] + mu ** 2 * H, H, k)
        keep = keep & (H[l] > 0) & (H[r] > 0)
        term = _decrease(sp, newton, w, keep) + np.where(keep, delta_in[:, None], 0.0)
        return _sum_per_key(sp, term[None])
    v = np.asarray(ens.value, dtype=np.float64)
    if classification:
        wvp = w[:, None] * v.T[:, :, None] * _ratio(S, n[None], k)  # w_j v_jc p'_jc
        term = np.where(keep, wvp[:, l] + wvp[:, r] - wvp[:, m], 0.0)
        return _sum_per_key(sp, term)
    held_mse = _ratio(st.Q - 2.0 * np.einsum("nc,cnb->nb", v, S)
                      + np.einsum("nc,nc->n", v, v)[:, None] * n, n, k)
    delta_in = _insample_decrease(ens, sp, "ufi")
    term = _decrease(sp, held_mse, w, keep) + np.where(keep, delta_in[:, None], 0.0)
    return _sum_per_key(sp, term[None])


def _ratio(A, N, counts=None):
    """A / N per block (0 where N = 0). ``counts`` (n' per node and block, the total
    last): the blocks but the last, at nodes whose total count k exceeds 1, become
    r + sqrt(k / (k - 1)) (A_b - r N_b) / N with r = A / N of the total (ufi_parts)."""
    exact = _safe_div(A, N)
    if counts is None:
        return exact
    N_all = np.broadcast_to(N, A.shape)
    k = np.broadcast_to(counts, A.shape)[..., -1:]
    r = exact[..., -1:]
    scale = np.sqrt(_safe_div(k, np.where(k > 1, k - 1, 1.0)))
    out = np.where(k > 1, r + scale * _safe_div(A - r * N_all, N_all[..., -1:]), exact)
    out[..., -1:] = r  # the total exactly
    return out


def _counts(st: NodeSums):
    """n' (n_nodes, B); for one-hot class targets the sum of the class planes, built here
    without keeping it in ``st`` (whose lean form the default measures keep)."""
    return st.S.sum(axis=0) if st.n_is_class_sum else st.n


def _sum_per_key(sp, term):
    """Split terms (C, n_splits, B) summed per tree and feature: (B, n_trees, n_features,
    C)."""
    C, _, B = term.shape
    size = sp.n_trees * sp.n_features
    out = np.empty((B, sp.n_trees, sp.n_features, C))
    for b in range(B):
        for c in range(C):
            out[b, :, :, c] = np.bincount(sp.key, weights=term[c, :, b],
                                          minlength=size).reshape(sp.n_trees, sp.n_features)
    return out


def mdi_oob_class_parts(ens, st: NodeSums):
    """mdi_oob's per-class split sums (B, n_trees, n_features, C) (any model; on a
    classification forest its per-class form), before the per-tree scaling
    (``mdi_oob(..., parts=)``, ``by_class``): :func:`mdi_oob_parts`, by the fused kernel
    unless ``use_fused(False)``."""
    if using_fused():
        return _fused(MDI_OOB, ens, _splits(ens), st)
    return mdi_oob_parts(ens, st)


def mdi_oob_centered_class_parts(ens, st: NodeSums):
    """mdi_oob_centered's per-class split sums (B, n_trees, n_features, C):
    :func:`mdi_oob_centered_parts`, by the fused kernel unless ``use_fused(False)``."""
    if using_fused():
        return _fused_centered(ens, _splits(ens), st)
    return mdi_oob_centered_parts(ens, st)


def ufi_class_parts(ens, st: NodeSums):
    """ufi's per-class split sums (B, n_trees, n_features, C) on a classification forest:
    w_l p_lc p'_lc + w_r p_rc p'_rc - w_m p_mc p'_mc (the Gini's constant 1 cancels);
    :func:`ufi_parts`, by the fused kernel unless ``use_fused(False)``."""
    return (_fused_ufi if using_fused() else ufi_parts)(ens, st, classification=True)


def class_values_per_row(ens, st: NodeSums, parts):
    """Per-class values (n_trees, n_features, C) of split sums that are divided by the
    tree's evaluation weight n'_root (mdi_oob, mdi_oob_centered); B = 1."""
    sp = _splits(ens)
    n_root = st.n_at(sp.root_of_tree)[:, 0]
    seen = n_root > 0
    scale = np.where(seen, 1.0 / np.where(seen, n_root, 1.0), np.nan)
    return parts[0] * scale[:, None, None]


def class_values_per_tree(ens, st: NodeSums, parts):
    """Per-class values (n_trees, n_features, C) of split sums that are the tree's value
    as they are (ufi), NaN for a tree without evaluation rows; B = 1."""
    sp = _splits(ens)
    seen = st.n_at(sp.root_of_tree)[:, 0] > 0
    return parts[0] * np.where(seen, 1.0, np.nan)[:, None, None]
