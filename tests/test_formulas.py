"""The fused formula kernels (treeimp/kernels/fused_measures.py) against the formulas of
measures.md written out split by split in Python, on real forests with B > 1 blocks."""

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor, RandomForestClassifier

import treeimp
from treeimp.inputs.rows import RowSource
from treeimp.inputs.targets import forest_targets
from treeimp.measures import registry
from treeimp.measures.formulas import NodeSums as NodeStats
from treeimp.measures.formulas import mdi_oob, ufi
from treeimp.measures.per_method import by_class, class_parts
from treeimp.stats.drivers import forest_node_stats

N_BLOCKS = 4


def _forest(kind):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5))
    f = X[:, 0] + X[:, 1] * X[:, 2]
    if kind == "multiclass":
        y = np.digitize(f + rng.normal(scale=0.5, size=300), [-0.5, 0.7])
        model = RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0)
    else:
        y = f + rng.normal(scale=0.3, size=300)
        model = ExtraTreesRegressor(n_estimators=5, max_depth=6, bootstrap=True,
                                    random_state=0)
    model.fit(X, y)
    # evaluation rows: fresh ones, few enough that some children see no rows in a block
    Xe = rng.normal(size=(60, 5))
    ye = y[:60]
    return treeimp.parse(model), Xe, ye


def _stats(ens, X, y):
    Z, classification = forest_targets(ens, y)
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    arr = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS)
    return arr, classification


def _reference(ens, n, Q, S, classification):
    """mdi_oob per root row and ufi, per class (B, T, F, C) (ufi on regression forests:
    summed over outputs in c = 0), by plain loops over splits, blocks and classes."""
    B, C, T, F = n.shape[1], S.shape[0], ens.n_trees, ens.n_features
    mdi = np.zeros((B, T, F, C))
    u = np.zeros((B, T, F, C))
    for t in range(T):
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        root_w = ens.weight[lo]
        for m in range(lo, hi):
            l, r = ens.left[m], ens.right[m]
            if l < 0:
                continue
            f = ens.feature[m]
            v = ens.value
            wf = ens.weight / root_w
            for b in range(B):
                for c in range(C):
                    mdi[b, t, f, c] += ((v[l, c] - v[m, c]) * S[c, l, b]
                                        + (v[r, c] - v[m, c]) * S[c, r, b])
                if n[l, b] <= 0 or n[r, b] <= 0:
                    continue
                if classification:
                    for c in range(C):
                        p = S[c, :, b] / np.where(n[:, b] > 0, n[:, b], 1.0)
                        u[b, t, f, c] += (wf[l] * v[l, c] * p[l] + wf[r] * v[r, c] * p[r]
                                          - wf[m] * v[m, c] * p[m])
                else:
                    def mse(k, b=b):  # mean of |y - v_k|^2 over the node's rows
                        vs = sum(ens.value[k, c] * S[c, k, b] for c in range(C))
                        vv = sum(ens.value[k, c] ** 2 for c in range(C))
                        return (Q[k, b] - 2 * vs + vv * n[k, b]) / n[k, b]
                    # scikit-learn stores the mean of the outputs' variances
                    wi = C * ens.weight * ens.impurity
                    insample = (wi[m] - wi[l] - wi[r]) / root_w
                    u[b, t, f, 0] += (wf[m] * mse(m) - wf[l] * mse(l) - wf[r] * mse(r)
                                      + insample)
    n_root = n[ens.tree_offsets[:-1]].T  # (B, T)
    mdi = mdi / n_root[:, :, None, None]
    return mdi, u


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression", "multi-output"])
def test_fused_and_numpy_sums_equal_split_by_split_loops(kind, fused):
    from treeimp.measures.formulas import use_fused

    ens, st, classification = _forest_stats(kind)
    exp_mdi, exp_ufi = _reference(ens, st.n, st.Q, st.S, classification)
    # some split in some block has a child without rows: the skip rule is exercised
    sp_children = ens.left[ens.left >= 0]
    assert np.any(st.n[sp_children] == 0)
    with use_fused(fused):
        seen = ~np.isnan(mdi_oob(ens, st))
        assert seen.all()
        np.testing.assert_allclose(mdi_oob(ens, st), exp_mdi.sum(-1), rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(ufi(ens, st, classification=classification),
                                   exp_ufi.sum(-1), rtol=1e-12, atol=1e-12)
        if classification:
            one = st.blocks(slice(0, 1))
            for name, exp in (("mdi_oob", exp_mdi), ("ufi", exp_ufi)):
                np.testing.assert_allclose(by_class(name, ens, one), exp[0], rtol=1e-12,
                                           atol=1e-12)


def test_both_class_parts_in_one_pass_equal_the_loops():
    """registry.class_parts of mdi_oob and ufi together (one fused pass over one-hot class
    sums) gives the split-by-split loops' per-class sums, bitwise what the one-measure
    kernel gives."""
    ens, X, y = _forest("multiclass")
    arr, classification = _stats(ens, X, y)
    Z, _ = forest_targets(ens, y)
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    lean = NodeStats.from_array(
        forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS, one_hot=True),
        one_hot=True)
    exp_mdi, exp_ufi = _reference(ens, arr[0], arr[1], arr[2:], classification)
    both = registry.class_parts(("mdi_oob", "ufi"), ens, lean)
    n_root = arr[0][ens.tree_offsets[:-1]].T  # (B, T): the loops' mdi is per root row
    np.testing.assert_allclose(both["mdi_oob"] / n_root[:, :, None, None], exp_mdi,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(both["ufi"], exp_ufi, rtol=1e-12, atol=1e-12)
    for name in ("mdi_oob", "ufi"):
        np.testing.assert_array_equal(both[name], class_parts(name, ens, lean))


@pytest.mark.parametrize("kind", ["multiclass", "regression"])
def test_leave_one_out_form_equals_block_sums(kind):
    """forest_node_stats(leave_one_out=True): one block more than the rows use; the last
    holds the per-block statistics summed over blocks, and block b's replicate is that
    total minus block b's statistics."""
    ens, X, y = _forest(kind)
    Z, _ = forest_targets(ens, y)
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    per_block = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS)
    both = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS,
                             leave_one_out=True)
    assert both.shape == per_block.shape[:2] + (N_BLOCKS + 1,)
    totals, loo = both[:, :, -1], both[:, :, :-1]
    np.testing.assert_allclose(totals, per_block.sum(axis=2), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(loo, per_block.sum(axis=2, keepdims=True) - per_block,
                               rtol=1e-12, atol=1e-12)
    # the last block feeds the formulas exactly as the per-block statistics summed would
    stats = NodeStats.from_array(both)
    total, jack = stats.blocks(slice(-1, None)), stats.blocks(slice(None, -1))
    one = NodeStats.from_array(per_block.sum(axis=2, keepdims=True))
    np.testing.assert_allclose(mdi_oob(ens, total), mdi_oob(ens, one), rtol=1e-12)
    np.testing.assert_allclose(mdi_oob(ens, stats)[-1:], mdi_oob(ens, one), rtol=1e-12)
    assert jack.n_blocks == N_BLOCKS


def test_one_hot_statistics_give_the_same_measures():
    """Class sums alone (n' their sum, built only when a formula reads all of it) give
    every forest measure of the full layout (n', Q', S')."""
    from treeimp.measures import registry
    from treeimp.measures.per_method import compute

    ens, X, y = _forest("multiclass")
    Z, classification = forest_targets(ens, y)
    assert classification
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    full = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS)
    lean = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS, one_hot=True)
    from_stats = [m.name for m in registry.all_measures("forest")
                  if m.source == registry.NODE_STATS and not m.params]
    assert {"mdi_oob", "ufi", "naive_oob", "pg1"} <= set(from_stats)
    for method in from_stats:
        a = compute(method, ens, NodeStats.from_array(full), classification=True)
        one_hot = NodeStats.from_array(lean, one_hot=True)
        b = compute(method, ens, one_hot, classification=True)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14, err_msg=method)
    for method in ("mdi_oob", "ufi"):  # these never build all of n'
        one_hot = NodeStats.from_array(lean, one_hot=True)
        compute(method, ens, one_hot, classification=True)
        assert one_hot.n_is_class_sum, method


# ------------------------------------------------ fused kernels against the numpy forms
def _boosting_stats(library):
    """A small boosted model and its held-out statistics (4 blocks of 15 rows: many
    children without rows in some block)."""
    from treeimp.stats.drivers import staged_pass

    rng = np.random.default_rng(5)
    X = rng.normal(size=(260, 4))
    f = X[:, 0] + X[:, 1] * X[:, 2]
    if library == "xgboost":
        import xgboost as xgb

        y = (f + rng.normal(scale=0.5, size=260) > 0).astype(int)
        model = xgb.XGBClassifier(n_estimators=6, max_depth=4, learning_rate=0.3,
                                  subsample=0.7, random_state=0, n_jobs=1)
    elif library == "lightgbm":
        import lightgbm as lgb

        y = f + rng.normal(scale=0.3, size=260)
        model = lgb.LGBMRegressor(n_estimators=6, num_leaves=12, min_child_samples=5,
                                  learning_rate=0.2, verbose=-1, n_jobs=1)
    else:
        from sklearn.ensemble import GradientBoostingClassifier

        y = np.digitize(f + rng.normal(scale=0.5, size=260), [-0.5, 0.7])
        model = GradientBoostingClassifier(n_estimators=4, max_depth=3, subsample=0.7,
                                           random_state=0)
    model.fit(X[:200], y[:200])
    ens = treeimp.parse(model)
    block = (np.arange(60) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=60)
    arr, _ = staged_pass(ens, RowSource(X[200:], ens), y[200:], w, block, N_BLOCKS,
                         keep_margin=False)
    return ens, NodeStats.from_array(arr, boosting=True), False


def _forest_stats(kind):
    """A small forest of ``kind`` and its statistics on 60 fresh rows in 4 blocks."""
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestRegressor

    if kind in ("multiclass", "regression"):
        ens, X, y = _forest(kind)
    else:
        rng = np.random.default_rng(7)
        X = rng.normal(size=(300, 5))
        f = X[:, 0] - X[:, 3] * X[:, 1]
        if kind == "binary":
            y = (f + rng.normal(scale=0.5, size=300) > 0).astype(int)
            model = ExtraTreesClassifier(n_estimators=5, max_depth=6, bootstrap=True,
                                         random_state=0)
        else:  # multi-output regression
            y = np.column_stack([f, X[:, 2] ** 2]) + rng.normal(scale=0.3, size=(300, 2))
            model = RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0)
        ens = treeimp.parse(model.fit(X[:240], y[:240]))
        X, y = X[240:], y[240:]
    arr, classification = _stats(ens, X, y)
    return ens, NodeStats.from_array(arr), classification


def _case(case):
    if case.startswith("boosting"):
        return _boosting_stats(case.split()[1])
    ens, st, classification = _forest_stats(case.split()[0])
    if case.endswith("one-hot"):  # n' not stored: the sum of the class planes
        st = NodeStats(n=None, S=st.S, Q=None)
    return ens, st, classification


CASES = ["binary", "multiclass", "multiclass one-hot", "regression", "multi-output",
         "boosting xgboost", "boosting lightgbm", "boosting sklearn"]


@pytest.mark.parametrize("case", CASES)
def test_fused_kernels_equal_their_numpy_forms(case):
    from treeimp.measures import formulas as measures
    from treeimp.measures import per_method

    if case.startswith("boosting"):
        pytest.importorskip(case.split()[-1])
    ens, st, classification = _case(case)
    # some split in some block has one child with evaluation rows and one without (ufi's
    # skip rule decides), and some blocks see both children
    sp = measures._splits(ens)
    n = measures._counts(st)
    assert np.any((n[sp.l] > 0) != (n[sp.r] > 0))
    assert np.any((n[sp.l] > 0) & (n[sp.r] > 0))
    forms = {"mdi_oob": (measures.mdi_oob_class_parts, measures.mdi_oob_parts),
             "mdi_oob_centered": (measures.mdi_oob_centered_class_parts,
                                  measures.mdi_oob_centered_parts),
             "ufi": (lambda e, s: measures._fused_ufi(e, s, classification=classification),
                     lambda e, s: measures.ufi_parts(e, s, classification=classification))}
    for name, (fused_form, numpy_form) in forms.items():
        a, b = fused_form(ens, st), numpy_form(ens, st)
        assert a.shape == b.shape == (N_BLOCKS, ens.n_trees, ens.n_features, b.shape[-1])
        scale = np.abs(b).max()
        assert scale > 0, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * scale, err_msg=name)
        # and through the measures: compute(fused=False), use_fused(False)
        fused = per_method.compute(name, ens, st, classification=classification)
        with measures.use_fused(False):
            assert not measures.using_fused()
            plain = per_method.compute(name, ens, st, classification=classification)
        assert measures.using_fused()
        np.testing.assert_allclose(plain, fused, rtol=1e-12, atol=1e-12 * np.nanmax(
            np.abs(fused)), err_msg=name)
        np.testing.assert_array_equal(
            per_method.compute(name, ens, st, classification=classification, fused=False),
            plain)
    if case.startswith("multiclass"):
        both = registry.class_parts(("mdi_oob", "ufi"), ens, st)
        with measures.use_fused(False):
            plain = registry.class_parts(("mdi_oob", "ufi"), ens, st)
        for name in both:
            np.testing.assert_allclose(plain[name], both[name], rtol=1e-12, atol=1e-13)
        if case.endswith("one-hot"):  # the numpy forms leave the lean statistics lean
            assert st.n_is_class_sum


def test_use_fused_takes_a_bool():
    from treeimp.measures import formulas as measures
    from treeimp.measures import per_method

    with pytest.raises(TypeError, match="True or False"):
        with measures.use_fused("no"):
            pass
    with pytest.raises(TypeError, match="True or False"):
        ens, st, _ = _case("regression")
        per_method.compute("mdi_oob", ens, st, classification=False, fused=1)


def _reference_centered(ens, n, S):
    """mdi_oob_centered's per-class split sums (B, T, F, C) of a forest by plain loops:
    (v_l - v_m)(S'_l - c_t n'_l) + (v_r - v_m)(S'_r - c_t n'_r), c_t the root value."""
    B, C, T, F = n.shape[1], S.shape[0], ens.n_trees, ens.n_features
    v = ens.value
    out = np.zeros((B, T, F, C))
    for t in range(T):
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        for m in range(lo, hi):
            l, r, f = ens.left[m], ens.right[m], ens.feature[m]
            if l < 0:
                continue
            for b in range(B):
                for c in range(C):
                    out[b, t, f, c] += ((v[l, c] - v[m, c]) * (S[c, l, b] - v[lo, c] * n[l, b])
                                        + (v[r, c] - v[m, c]) * (S[c, r, b] - v[lo, c] * n[r, b]))
    return out


def _reference_boosting(ens, st):
    """mdi_oob, mdi_oob_centered and ufi split sums (B, T, F) of a boosted model by plain
    loops: values as they enter the margin (tree_scale * value), unshrunk estimates
    mu = value / learning rate, centre c_t = mu_root, Newton impurity
    (R' - 2 mu S' + mu^2 H') / H', in-sample fractions W / W_root."""
    n, S, H, R = st.n, st.S[0], st.H, st.R
    B, T, F = n.shape[1], ens.n_trees, ens.n_features
    mdi, cen, u = (np.zeros((B, T, F)) for _ in range(3))
    mu = ens.value[:, 0] / ens.tree_learning_rate[ens.node_tree]

    def newton(k, b):
        return (R[k, b] - 2 * mu[k] * S[k, b] + mu[k] ** 2 * H[k, b]) / H[k, b]

    for t in range(T):
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        v = ens.value[:, 0] * ens.tree_scale[t]
        wf = ens.weight / ens.weight[lo]
        for m in range(lo, hi):
            l, r, f = ens.left[m], ens.right[m], ens.feature[m]
            if l < 0:
                continue
            for b in range(B):
                mdi[b, t, f] += (v[l] - v[m]) * S[l, b] + (v[r] - v[m]) * S[r, b]
                cen[b, t, f] += ((v[l] - v[m]) * (S[l, b] - mu[lo] * H[l, b])
                                 + (v[r] - v[m]) * (S[r, b] - mu[lo] * H[r, b]))
                if min(n[l, b], n[r, b], H[l, b], H[r, b]) <= 0:
                    continue
                insample = (wf[l] * mu[l] ** 2 + wf[r] * mu[r] ** 2 - wf[m] * mu[m] ** 2)
                u[b, t, f] += (wf[m] * newton(m, b) - wf[l] * newton(l, b)
                               - wf[r] * newton(r, b) + insample)
    return {"mdi_oob": mdi, "mdi_oob_centered": cen, "ufi": u}


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("case", ["multiclass", "regression", "multi-output",
                                  "boosting xgboost", "boosting lightgbm",
                                  "boosting sklearn"])
def test_centered_and_boosting_sums_equal_split_by_split_loops(case, fused):
    """mdi_oob_centered on forests, and all three measures' split sums on boosted models,
    by both paths against the loops."""
    from treeimp.measures import formulas as measures

    if case.startswith("boosting"):
        pytest.importorskip(case.split()[-1])
    ens, st, classification = _case(case)
    with measures.use_fused(fused):
        if not case.startswith("boosting"):
            exp = _reference_centered(ens, st.n, st.S)
            got = measures.mdi_oob_centered_class_parts(ens, st)
            np.testing.assert_allclose(got, exp, rtol=1e-12, atol=1e-12 * np.abs(exp).max())
            return
        exp = _reference_boosting(ens, st)
        got = {"mdi_oob": measures.mdi_oob_class_parts(ens, st),
               "mdi_oob_centered": measures.mdi_oob_centered_class_parts(ens, st),
               # every tree saw rows in every block: ufi's values are its split sums
               "ufi": measures.ufi(ens, st, classification=False)[..., None]}
    for name, e in exp.items():
        assert np.abs(e).max() > 0, name
        np.testing.assert_allclose(got[name][..., 0], e, rtol=1e-12,
                                   atol=1e-12 * np.abs(e).max(), err_msg=name)


def test_explain_on_the_numpy_forms_equals_the_default():
    """An explain inside use_fused(False) (numpy forms end to end: per-block values,
    standard errors, per-class tables) gives the default's numbers."""
    from sklearn.ensemble import GradientBoostingRegressor

    from treeimp.measures.formulas import use_fused

    rng = np.random.default_rng(11)
    X = rng.normal(size=(240, 4))
    yc = np.digitize(X[:, 0] + rng.normal(scale=0.5, size=240), [-0.5, 0.5])
    yr = X[:, 1] + rng.normal(scale=0.5, size=240)
    methods = ("mdi_oob", "mdi_oob_centered", "ufi")
    for model, y, oob in ((RandomForestClassifier(n_estimators=6, random_state=0), yc, True),
                          (GradientBoostingRegressor(n_estimators=6, random_state=0), yr,
                           False)):
        model.fit(X[:160], y[:160])
        Xe, ye = (X[:160], y[:160]) if oob else (X[160:], y[160:])
        kw = dict(oob=oob, methods=methods, n_blocks=4, random_state=0)
        a = treeimp.explain(model, Xe, ye, **kw)
        with use_fused(False):
            b = treeimp.explain(model, Xe, ye, **kw)
        for m in methods:
            scale = np.abs(a.per_tree[m]).max()
            for attr in ("table", "stderr", "per_tree", "block_values"):
                np.testing.assert_allclose(np.asarray(getattr(b, attr)[m], float),
                                           np.asarray(getattr(a, attr)[m], float),
                                           rtol=1e-10, atol=1e-12 * scale,
                                           err_msg=f"{m} {attr}")
        assert set(b.table_by_class) == set(a.table_by_class)
        assert set(a.table_by_class) == (set(methods) if oob else set())
        for m, t in a.table_by_class.items():
            np.testing.assert_allclose(np.asarray(b.table_by_class[m], float),
                                       np.asarray(t, float), rtol=1e-10, atol=1e-13)


def _planes(st):
    return {"n": None if st.n_is_class_sum else st.n, "S": st.S, "Q": st.Q, "H": st.H,
            "R": st.R}


def _ufi_replicates_by_loops(ens, reps, classification):
    """ufi (B + 1, T, F) from replicates with the total last, by plain loops: a node's
    ratio A / N (class share S_c / n, held-out MSE, Newton impurity) in replicate b is
    r + sqrt(k / (k - 1)) (A_b - r N_b) / N where its total count k > 1 (r, N the
    total's), the exact A_b / N_b otherwise; each block's own skip rule."""
    n = reps["n"] if reps["n"] is not None else reps["S"].sum(axis=0)
    S, Q, H, R = reps["S"], reps["Q"], reps["H"], reps["R"]
    B1, C, T, F = n.shape[1], S.shape[0], ens.n_trees, ens.n_features
    boosting = H is not None
    out = np.zeros((B1, T, F))
    v = ens.value
    mu = v[:, 0] / ens.tree_learning_rate[ens.node_tree] if boosting else None

    def numer_denom(j, b):
        if boosting:
            return R[j, b] - 2 * mu[j] * S[0, j, b] + mu[j] ** 2 * H[j, b], H[j, b]
        if classification:
            return S[:, j, b], n[j, b]
        vs = sum(v[j, c] * S[c, j, b] for c in range(C))
        return Q[j, b] - 2 * vs + (v[j] @ v[j]) * n[j, b], n[j, b]

    def ratio(j, b):
        a, d = numer_denom(j, b)
        exact = a / d if d > 0 else 0 * a
        k = n[j, -1]
        if b == B1 - 1 or k <= 1:
            return exact
        at, dt = numer_denom(j, B1 - 1)
        rt = at / dt
        return rt + np.sqrt(k / (k - 1)) * (a - rt * d) / dt

    for t in range(T):
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        wf = ens.weight / ens.weight[lo]
        for m in range(lo, hi):
            l, r, f = ens.left[m], ens.right[m], ens.feature[m]
            if l < 0:
                continue
            if boosting:
                insample = (wf[l] * mu[l] ** 2 + wf[r] * mu[r] ** 2 - wf[m] * mu[m] ** 2)
            elif not classification:
                wi = C * ens.weight * ens.impurity
                insample = (wi[m] - wi[l] - wi[r]) / ens.weight[lo]
            for b in range(B1):
                if n[l, b] <= 0 or n[r, b] <= 0 or (boosting and min(H[l, b], H[r, b]) <= 0):
                    continue
                if classification:
                    out[b, t, f] += sum(wf[l] * v[l, c] * ratio(l, b)[c]
                                        + wf[r] * v[r, c] * ratio(r, b)[c]
                                        - wf[m] * v[m, c] * ratio(m, b)[c] for c in range(C))
                else:
                    out[b, t, f] += (wf[m] * ratio(m, b) - wf[l] * ratio(l, b)
                                     - wf[r] * ratio(r, b) + insample)
    return out


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("case", ["binary", "multiclass", "multiclass one-hot", "regression",
                                  "multi-output", "boosting xgboost"])
def test_ufi_replicates_expanded_about_the_total(case, fused):
    """With the leave-one-block-out replicates and the total last (``total_last``), ufi's
    replicates take each node ratio to first order about the total's, scaled by
    sqrt(k / (k - 1)) (plain loops); the total is the exact value."""
    from treeimp.measures.formulas import use_fused

    if case.startswith("boosting"):
        pytest.importorskip("xgboost")
    ens, st, classification = _case(case)
    planes = _planes(st)
    total = {k: None if a is None else a.sum(axis=-1, keepdims=True) for k, a in planes.items()}
    reps = {k: None if a is None else np.concatenate([total[k] - a, total[k]], axis=-1)
            for k, a in planes.items()}
    with use_fused(fused):
        got = ufi(ens, NodeStats(**reps, total_last=True), classification=classification)
        exact = ufi(ens, NodeStats(**reps), classification=classification)
    seen = np.isfinite(got)
    expected = _ufi_replicates_by_loops(ens, reps, classification)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got[seen], expected[seen], rtol=1e-10, atol=1e-12 * scale)
    # the total is the exact value; the replicates differ from the exact ratios' own
    np.testing.assert_allclose(got[-1], exact[-1], rtol=1e-12, atol=1e-12 * scale)
    assert not np.allclose(got[:-1][seen[:-1]], exact[:-1][seen[:-1]])
