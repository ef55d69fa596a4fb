"""Node statistics + TreeEnsemble -> per-tree importances.

Every function here takes a :class:`NodeStats` whose arrays carry a block axis
(``n`` is (n_nodes, B)) and returns per-tree, per-feature values of shape
(B, n_trees, n_features). The same code serves the full evaluation set (B = 1, the
blocks summed) and the B random row blocks used for standard errors.

Formulas: ../shared/design/measures.md (Li et al. 2019 eq. 14; Zhou & Hooker 2020;
Loecher's penalized Gini). Notation: node m with children l, r; ``v`` node values on the
model's scale; ``W`` training weights; primes are evaluation-row statistics.

The measures' names, what each is defined for, their parameters and which formula here
each runs are the table of :mod:`treeimp.registry`; :func:`compute` dispatches through it.

Numpy throughout, except the per-split sums of the default measures (mdi_oob, forest
ufi), which :mod:`treeimp.kernels.formulas` evaluates in one fused pass (the formula is
written out in the docstrings here and in that kernel's comments).
"""

from __future__ import annotations

import numpy as np

from .ensemble import FOREST
from .kernels.formulas import (
    MDI_OOB,
    MDI_OOB_CENTERED,
    UFI_BOOSTING,
    UFI_CLASSIFICATION,
    UFI_REGRESSION,
    class_split_sums,
    split_sums,
)


class NodeStats:
    """Evaluation-row sums per node and block.

    n: (n_nodes, B) weighted count; S: (C, n_nodes, B) weighted target sum (boosting:
    C = 1, sum of -g); Q: (n_nodes, B) weighted squared norm of the target (forest
    regression only: None for forest class targets, whose one-hot rows have Q' = n',
    and for boosting, whose formulas do not use it); H, R: boosting only, sum of h and
    of g^2 / h.

    ``n=None`` (one-hot class targets): n' is the sum of the class planes S'. It is then
    built only when a formula reads all of it (``n``); the default measures read it at
    the tree roots (``n_at``) or sum it inside their kernel.
    """

    def __init__(self, n, S, Q, H=None, R=None):
        self._n, self.S, self.Q, self.H, self.R = n, S, Q, H, R

    @property
    def n(self) -> np.ndarray:
        if self._n is None:
            self._n = self.S.sum(axis=0)
        return self._n

    @property
    def n_is_class_sum(self) -> bool:
        """True while n' is not stored: it is the sum over c of S[c]."""
        return self._n is None

    def n_at(self, nodes) -> np.ndarray:
        """n' of the listed nodes, (len(nodes), B), without building all of n."""
        if self._n is None:
            return self.S[:, nodes].sum(axis=0)
        return self._n[nodes]

    @classmethod
    def from_array(cls, stats, boosting=False, one_hot=False):
        """Name the planes of a kernel array (D, n_nodes, B) (views, no copy).
        ``one_hot``: a forest array of class sums alone (S); n is their sum, Q None."""
        if boosting:  # planes: n, S, H, R (kernels/staged.py)
            return cls(n=stats[0], Q=None, S=stats[1:2], H=stats[2], R=stats[3])
        if one_hot:
            return cls(n=None, Q=None, S=stats)
        return cls(n=stats[0], Q=stats[1], S=stats[2:])

    def blocks(self, sl) -> NodeStats:
        """The statistics of the blocks ``sl`` (a slice; views, no copy)."""
        take = lambda a: None if a is None else a[..., sl]  # noqa: E731
        return NodeStats(n=take(self._n), S=take(self.S), Q=take(self.Q), H=take(self.H),
                         R=take(self.R))

    @property
    def n_blocks(self):
        return self.S.shape[2]


# ---------------------------------------------------------------- helpers
class _Splits:
    """Index arrays of the internal nodes of an ensemble (computed once per call)."""

    def __init__(self, ens):
        from .kernels.structure import split_arrays

        (self.m, self.l, self.r, self.tree, self.root, self.key,
         self.tree_splits) = split_arrays(ens.tree_offsets, ens.left, ens.right, ens.feature,
                                          ens.n_features)
        self.root_of_tree = ens.tree_offsets[:-1]
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


def _fused(kind, ens, sp, st, w=None, extra=None, v=None):
    """Per-split terms of ``kind`` summed per tree and feature: (B, T, F, C). ``v``: the
    node values the terms read, if not the model's (MDI_OOB: as they enter the margin)."""
    if v is None:
        v = _margin_value(ens) if kind == MDI_OOB else np.ascontiguousarray(
            ens.value, dtype=np.float64)
    B, C = st.n_blocks, st.S.shape[0]
    # key-major (n_keys, B, C): a split adds to B neighbouring cells, not to B cells a
    # whole (n_keys, C) plane apart (which also fall into one L1 cache set)
    out = np.zeros((sp.n_trees * sp.n_features, B, C))
    dummy = np.zeros(1)
    # one-hot class targets: the kernel sums n' from the class planes itself
    n_from_s = st.n_is_class_sum
    n = st.S[0] if n_from_s else st.n
    split_sums(kind, sp.m, sp.l, sp.r, sp.key, sp.tree_splits, ens.tree_offsets,
               dummy if w is None else w, v, dummy if extra is None else extra,
               n, n if st.Q is None else st.Q, st.S, n if st.H is None else st.H,
               n if st.R is None else st.R, n_from_s, out)
    return _key_major_to_parts(out, sp)


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
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape))
    return np.divide(a, b, out=out, where=np.broadcast_to(b > 0, out.shape))


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
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n_root > 0, per_tree / np.where(n_root > 0, n_root, 1.0), np.nan)


def _with_rows(sp, st, per_tree):
    """Mark trees that saw no evaluation rows (in that block) as NaN."""
    n_root = st.n_at(sp.root_of_tree).T[:, :, None]
    return np.where(n_root > 0, per_tree, np.nan)


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


def mdi_oob(ens, st: NodeStats, parts=None):
    """Li et al. (2019) eq. 14: (1/n'_root) sum_m (v_l - v_m).S'_l + (v_r - v_m).S'_r.

    For boosting (S' = sum of -g) this is the first-order decrease of the held-out mean
    loss attributable to the splits on each feature. ``parts``: the per-class sums of
    ``class_parts`` for these statistics, when already computed.
    """
    sp = _splits(ens)
    parts = _fused(MDI_OOB, ens, sp, st) if parts is None else parts
    return _per_row(sp, st, parts.sum(axis=-1))


def mdi_oob_centered(ens, st: NodeStats, parts=None):
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
    sp = _splits(ens)
    if parts is None:
        parts = _fused_centered(ens, sp, st)
    return _per_row(sp, st, parts.sum(axis=-1))


def _fused_centered(ens, sp, st: NodeStats):
    """mdi_oob_centered's per-class split sums (B, n_trees, n_features, C) in one fused
    pass (kernels/formulas.py, MDI_OOB_CENTERED): the same numbers as
    ``_fused(MDI_OOB, ...) - _centring_parts(...)``, which the tests check."""
    boosting = st.H is not None
    centre = np.ascontiguousarray(_root_centre(ens, sp, boosting).ravel())
    # the kernel reads the centring weights N' from its H argument: H' for boosting, n'
    # for forests (not read for one-hot class targets, whose n' is the sum of S')
    weights = st.H if boosting else (st.S[0] if st.n_is_class_sum else st.n)
    B, C = st.n_blocks, st.S.shape[0]
    out = np.zeros((sp.n_trees * sp.n_features, B, C))
    dummy = np.zeros(1)
    n = st.S[0] if st.n_is_class_sum else st.n
    split_sums(MDI_OOB_CENTERED, sp.m, sp.l, sp.r, sp.key, sp.tree_splits, ens.tree_offsets,
               dummy, _margin_value(ens), centre, n, n if st.Q is None else st.Q, st.S,
               weights, n if st.R is None else st.R, st.n_is_class_sum, out)
    return _key_major_to_parts(out, sp)


def _root_centre(ens, sp, boosting):
    """c_t per tree (n_trees, C): the in-bag root value (boosting: unshrunk, value / lr)."""
    roots = sp.root_of_tree
    v = np.asarray(ens.value, dtype=np.float64)[roots]
    if boosting:
        return v / ens.tree_learning_rate[:, None]
    return v


def centring_parts(ens, st: NodeStats):
    """What mdi_oob_centered subtracts from mdi_oob's per-class split sums:
    (B, n_trees, n_features, C), see :func:`_centring_parts`."""
    return _centring_parts(ens, _splits(ens), st)


def _centring_parts(ens, sp, st: NodeStats):
    """(B, n_trees, n_features, C): c_t,c times the sum over splits on k of
    N'_l (v_lc - v_mc) + N'_r (v_rc - v_mc), N' = n' (forests) or H' (boosting); i.e.
    c_t,c sum_i w_i h_i f_k,c(x_i), what mdi_oob_centered subtracts from mdi_oob's sums."""
    boosting = st.H is not None
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


def ufi(ens, st: NodeStats, *, classification: bool, parts=None):
    """Zhou & Hooker (2020) unbiased feature importance, in-sample weights w_m = W_m/W_root.

    Splits whose children include one without evaluation rows contribute 0. Boosting:
    the regression form on the Newton pseudo-response, exact for squared error with
    lambda = 0 and an approximation otherwise (see :func:`_ufi_boosting_terms`).
    """
    sp = _splits(ens)
    w = _insample_fraction(ens)
    if st.H is not None:
        mu, delta_in = _ufi_boosting_parts(ens, sp)
        parts = _fused(UFI_BOOSTING, ens, sp, st, w=w, extra=delta_in, v=mu[:, None])
        return _with_rows(sp, st, parts[..., 0])
    if classification:  # the constant 1 of the Gini cancels: W_m = W_l + W_r
        if parts is None:
            parts = _fused(UFI_CLASSIFICATION, ens, sp, st, w=w)
    else:
        parts = _fused(UFI_REGRESSION, ens, sp, st, w=w,
                       extra=_insample_decrease(ens, sp, "ufi"))
    return _with_rows(sp, st, parts.sum(axis=-1))


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
    Newton pseudo-response -g/h with weights h; kernels/formulas.py (UFI_BOOSTING) adds
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
    lr = ens.tree_learning_rate[ens.node_tree]
    mu = ens.value[:, 0] / lr
    W = ens.weight
    delta_in = _safe_div(W[sp.l] * mu[sp.l] ** 2 + W[sp.r] * mu[sp.r] ** 2
                         - W[sp.m] * mu[sp.m] ** 2, W[sp.root])
    return mu, delta_in


def naive_oob(ens, st: NodeStats):
    """Impurity decrease measured on evaluation rows alone (the strawman of Li et al.).

    Forests: (n'_m G'(m) - n'_l G'(l) - n'_r G'(r)) / n'_root with the held-out Gini or
    variance, which equals (|S'_l|^2/n'_l + |S'_r|^2/n'_r - |S'_m|^2/n'_m) / n'_root.
    Boosting: the held-out Newton gain per row,
    (S'_l^2/H'_l + S'_r^2/H'_r - S'_m^2/H'_m) / (2 n'_root).
    """
    sp = _splits(ens)
    keep = _both_children_seen(sp, st)
    if st.H is not None:
        denom, half = st.H, 0.5
        keep = keep & (st.H[sp.l] > 0) & (st.H[sp.r] > 0)
    else:
        denom, half = st.n, 1.0
    s2 = np.einsum("cnb,cnb->nb", st.S, st.S)
    node = _safe_div(s2, denom)
    term = half * (node[sp.l] + node[sp.r] - node[sp.m])
    return _per_row(sp, st, _per_tree(sp, np.where(keep, term, 0.0)))


def pg_oob(ens, st: NodeStats, *, alpha: float, lam: float, classification: bool):
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


def mdi_oob_class_parts(ens, st: NodeStats):
    """mdi_oob's per-class split sums (B, n_trees, n_features, C) on a classification
    forest, before the per-tree scaling (``mdi_oob(..., parts=)``, ``by_class``)."""
    return _fused(MDI_OOB, ens, _splits(ens), st)


def mdi_oob_centered_class_parts(ens, st: NodeStats):
    """mdi_oob_centered's per-class split sums (B, n_trees, n_features, C)."""
    return _fused_centered(ens, _splits(ens), st)


def ufi_class_parts(ens, st: NodeStats):
    """ufi's per-class split sums (B, n_trees, n_features, C) on a classification forest:
    w_l p_lc p'_lc + w_r p_rc p'_rc - w_m p_mc p'_mc (the Gini's constant 1 cancels)."""
    return _fused(UFI_CLASSIFICATION, ens, _splits(ens), st, w=_insample_fraction(ens))


def class_parts(method, ens, st: NodeStats):
    """The per-class split sums (B, n_trees, n_features, C) of a measure with a per-class
    form (mdi_oob, mdi_oob_centered, ufi) on a classification forest, before the
    per-tree scaling: computed once, they serve both the measure (``compute(...,
    parts=)``) and ``by_class``."""
    return _per_class_form(method).parts(ens, st)


def _per_class_form(method):
    from . import registry

    form = registry.get(method).per_class
    if form is None:
        have = [m.name for m in registry.all_measures() if m.per_class is not None]
        raise ValueError(f"per-class values exist for {', '.join(map(repr, have))}, "
                         f"not {method!r}")
    return form


def class_parts_both(ens, st: NodeStats):
    """{"mdi_oob": ..., "ufi": ...}: ``class_parts`` of both from one pass over one-hot
    class statistics (the default methods read the same cells)."""
    sp = _splits(ens)
    B, C = st.n_blocks, st.S.shape[0]
    if not st.n_is_class_sum:
        return {m: class_parts(m, ens, st) for m in ("mdi_oob", "ufi")}
    out = {m: np.zeros((sp.n_trees * sp.n_features, B, C)) for m in ("mdi_oob", "ufi")}
    class_split_sums(sp.m, sp.l, sp.r, sp.key, sp.tree_splits, ens.tree_offsets,
                     _insample_fraction(ens),
                     _margin_value(ens), np.ascontiguousarray(ens.value, dtype=np.float64),
                     st.S, out["mdi_oob"], out["ufi"])
    return {m: _key_major_to_parts(o, sp) for m, o in out.items()}


def by_class(method, ens, st: NodeStats, parts=None):
    """Per-class parts of "mdi_oob", "mdi_oob_centered" or "ufi" for a classification
    forest, summing to the measure: (n_trees, n_features, n_classes) on the full
    statistics ``st`` (B = 1).

    mdi_oob: the class-c terms (v_lc - v_mc) S'_lc + (v_rc - v_mc) S'_rc over n'_root;
    mdi_oob_centered: the same with S'_c - c_t,c n' (c_t,c the in-bag class-c share);
    ufi: w_l p_lc p'_lc + w_r p_rc p'_rc - w_m p_mc p'_mc (its constant 1 cancels since
    W_m = W_l + W_r). ``parts``: ``class_parts(method, ens, st)`` when already computed.
    """
    form = _per_class_form(method)
    return form.values(ens, st, form.parts(ens, st) if parts is None else parts)


def class_values_per_row(ens, st: NodeStats, parts):
    """Per-class values (n_trees, n_features, C) of split sums that are divided by the
    tree's evaluation weight n'_root (mdi_oob, mdi_oob_centered); B = 1."""
    sp = _splits(ens)
    n_root = st.n_at(sp.root_of_tree)[:, 0]
    seen = n_root > 0
    scale = np.where(seen, 1.0 / np.where(seen, n_root, 1.0), np.nan)
    return parts[0] * scale[:, None, None]


def class_values_per_tree(ens, st: NodeStats, parts):
    """Per-class values (n_trees, n_features, C) of split sums that are the tree's value
    as they are (ufi), NaN for a tree without evaluation rows; B = 1."""
    sp = _splits(ens)
    seen = st.n_at(sp.root_of_tree)[:, 0] > 0
    return parts[0] * np.where(seen, 1.0, np.nan)[:, None, None]


def compute(method, ens, st, *, classification, alpha=None, lam=None, parts=None):
    """The per-tree values (B, n_trees, n_features) of the node-statistics measure
    ``method``, through its registry entry (:mod:`treeimp.registry`). ``alpha``, ``lam``:
    pg_oob's parameters; ``parts``: ``class_parts(method, ens, st)`` (mdi_oob,
    mdi_oob_centered, ufi on a classification forest)."""
    from . import registry

    return registry.compute(method, ens, st, classification=classification,
                            params={"alpha": alpha, "lam": lam}, parts=parts)
