"""treeimp.permutation_importance equals scikit-learn's on the same permutations, and
its kernel's permuted margins equal a full re-prediction of the permuted rows bitwise."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.inspection import permutation_importance as sk_permutation_importance

import treeimp
from treeimp.inputs.rows import RowSource
from treeimp.inputs.threads import numba_threads
from treeimp.measures.scoring import make_scorer
from treeimp.model.routing import _forest_scale, routing_flags
from treeimp.permutation.importance import _working_copy
from treeimp.permutation.leaf_index import LeafIndex

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def _data(kind, n=300, F=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    f = X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3]
    if kind == "regression":
        return X, f + rng.normal(scale=0.3, size=n)
    if kind == "binary":
        return X, (f + rng.logistic(size=n) > 0).astype(int)
    return X, np.digitize(f + rng.normal(scale=0.3, size=n), [-0.7, 0.7])


CASES = [
    ("rf binary", lambda: RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0),
     "binary", ["accuracy", "neg_log_loss", "roc_auc"]),
    ("rf regression", lambda: RandomForestRegressor(n_estimators=15, max_depth=6,
                                                    random_state=0),
     "regression", [None, "r2", "neg_mean_squared_error"]),
    ("xgb binary", lambda: xgb.XGBClassifier(n_estimators=15, max_depth=3), "binary",
     [None, "neg_log_loss", "roc_auc"]),
    ("xgb multiclass", lambda: xgb.XGBClassifier(n_estimators=10, max_depth=3), "multi",
     ["accuracy", "neg_log_loss"]),
    ("xgb regression", lambda: xgb.XGBRegressor(n_estimators=15, max_depth=3), "regression",
     ["r2", "neg_mean_squared_error"]),
    ("lgb binary", lambda: lgb.LGBMClassifier(n_estimators=15, num_leaves=7, verbose=-1),
     "binary", ["accuracy", "neg_log_loss", "roc_auc"]),
    ("lgb regression", lambda: lgb.LGBMRegressor(n_estimators=15, num_leaves=7, verbose=-1),
     "regression", [None, "r2", "neg_mean_squared_error"]),
]


@pytest.mark.parametrize("name,make,kind,scorings", CASES, ids=[c[0] for c in CASES])
def test_equals_sklearn(name, make, kind, scorings):
    X, y = _data(kind)
    model = make().fit(X[:200], y[:200])
    Xv, yv = X[200:], y[200:]
    # XGBoost predicts in float32 (its predict_proba is float32), treeimp in float64:
    # continuous scores agree to float32 rounding; scikit-learn and LightGBM to 1e-9
    tol = dict(rtol=1e-4, atol=1e-6) if name.startswith("xgb") else dict(rtol=1e-9,
                                                                         atol=1e-12)
    for scoring in scorings:
        ours = treeimp.permutation_importance(model, Xv, yv, scoring=scoring, n_repeats=4,
                                              random_state=3)
        ref = sk_permutation_importance(model, Xv, yv, scoring=scoring, n_repeats=4,
                                        random_state=3)
        np.testing.assert_allclose(ours.importances, ref.importances, **tol,
                                   err_msg=str(scoring))
        np.testing.assert_allclose(ours.importances_mean, ref.importances_mean, **tol)


def test_sample_weight_and_dataframe_match_sklearn():
    pd = pytest.importorskip("pandas")
    X, y = _data("binary")
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    model = RandomForestClassifier(n_estimators=10, random_state=0).fit(df[:200], y[:200])
    w = np.random.default_rng(1).uniform(0.1, 2.0, 100)
    ours = treeimp.permutation_importance(model, df[200:], y[200:], sample_weight=w,
                                          n_repeats=3, random_state=np.random.RandomState(7))
    ref = sk_permutation_importance(model, df[200:], y[200:], sample_weight=w, n_repeats=3,
                                    random_state=np.random.RandomState(7))
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-9, atol=1e-12)


def test_objective_scoring_is_negative_mean_own_loss():
    X, y = _data("binary")
    model = xgb.XGBClassifier(n_estimators=10, max_depth=3).fit(X[:200], y[:200])
    ours = treeimp.permutation_importance(model, X[200:], y[200:], scoring="objective",
                                          n_repeats=2, random_state=0)
    ref = sk_permutation_importance(model, X[200:], y[200:], scoring="neg_log_loss",
                                    n_repeats=2, random_state=0)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-5, atol=1e-7)


def test_bad_input():
    X, y = _data("regression")
    model = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="scoring"):
        treeimp.permutation_importance(model, X, y, scoring="f1_macro")
    with pytest.raises(ValueError, match="'accuracy' cannot score this regressor"):
        treeimp.permutation_importance(model, X, y, scoring="accuracy")
    with pytest.raises(ValueError, match="n_repeats"):
        treeimp.permutation_importance(model, X, y, n_repeats=0)
    with pytest.raises(ValueError, match="rows"):
        treeimp.permutation_importance(model, X, y[:-1])


# ============================================ the kernel against a full re-prediction
def _leaf_index(ens, X, leaf_dtype=None):
    Xw = _working_copy(RowSource(X, ens))
    return Xw, LeafIndex(ens, Xw, *_forest_scale(ens), *routing_flags(ens, Xw),
                         leaf_dtype=leaf_dtype)


def _assert_permuted_margins_bitwise(model, X, n_repeats=3, seed=5, n_jobs=2,
                                     leaf_dtype=None):
    """For every column and repeat (scikit-learn's compounding shuffles), the kernel's
    margin equals predict_raw of the permuted matrix bit for bit, its leaf matrix holds
    the permuted rows' leaves, exactly the rows that changed leaf were recomputed, and
    the original leaves are back after each column."""
    ens = treeimp.parse(model)
    Xw, index = _leaf_index(ens, X, leaf_dtype)
    L0, order0 = index.L.copy(), index.order.copy()
    leaves0 = ens.apply(Xw)
    np.testing.assert_array_equal(index.leaves(), leaves0)
    margin = index.margin()
    assert np.array_equal(margin, ens.predict_raw(Xw))
    out = np.empty_like(margin)
    n = len(Xw)
    partial = moved_any = 0
    for j in range(ens.n_features):
        rng = np.random.RandomState(seed)
        idx = np.arange(n)
        original = Xw[:, j].copy()
        index.begin(j)
        for _ in range(n_repeats):
            rng.shuffle(idx)
            Xw[:, j] = Xw[idx, j]
            out[:] = np.nan
            with numba_threads(n_jobs):
                n_moved = index.permuted_margin(Xw, margin, out)
            expected = ens.predict_raw(Xw)
            assert np.array_equal(out, expected), (j, np.max(np.abs(out - expected)))
            leaves = ens.apply(Xw)
            np.testing.assert_array_equal(index.leaves(), leaves)  # of the permuted rows
            assert n_moved == np.any(leaves != leaves0, axis=1).sum()
            assert not index.changed.any()
            partial += 0 < n_moved < n
            moved_any += n_moved > 0
        index.finish()
        np.testing.assert_array_equal(index.L, L0)
        np.testing.assert_array_equal(index.order, order0)
        Xw[:, j] = original
    # the comparisons are not vacuous: margins moved, and only some rows were recomputed
    assert moved_any > 0 and partial > 0
    return ens, index


def _nan_data(kind, n=700, F=6, seed=0, frac=0.1):
    X, y = _data(kind, n=n, F=F, seed=seed)
    X[np.random.default_rng(seed + 1).random(X.shape) < frac] = np.nan
    return X, y


def test_kernel_xgb_binary_nan_float64():
    X, y = _nan_data("binary")
    model = xgb.XGBClassifier(n_estimators=30, max_depth=5).fit(X, y)
    # float64 rows: rounded to float32; float32 leaf values: exact sums, so the kernel
    # adds the changes of the moved rows' terms to their margins (on 1 and 2 threads)
    _, index = _assert_permuted_margins_bitwise(model, X)
    assert index.add_deltas
    _assert_permuted_margins_bitwise(model, X, n_repeats=2, n_jobs=1)
    # the full sums over every tree give the same bits
    _, full = _leaf_index(treeimp.parse(model), X)
    full.add_deltas = False
    _assert_index_margins(full, X, index)


def _assert_index_margins(index, X, reference, n_repeats=2, seed=1):
    """Two indexes of the same rows give bitwise equal permuted margins."""
    Xw = _working_copy(RowSource(X, index.ens))
    margin = index.margin()
    assert np.array_equal(margin, reference.margin())
    out, ref = np.empty_like(margin), np.empty_like(margin)
    for j in range(Xw.shape[1]):
        rng, original = np.random.RandomState(seed), Xw[:, j].copy()
        index.begin(j)
        reference.begin(j)
        for _ in range(n_repeats):
            Xw[:, j] = Xw[rng.permutation(len(Xw)), j]
            assert (index.permuted_margin(Xw, margin, out)
                    == reference.permuted_margin(Xw, margin, ref))
            assert np.array_equal(out, ref), j
        index.finish()
        reference.finish()
        Xw[:, j] = original


def test_kernel_xgb_multiclass_float32():
    X, y = _data("multi", n=700)
    X = X.astype(np.float32)
    model = xgb.XGBClassifier(n_estimators=15, max_depth=4).fit(X, y)
    ens, index = _assert_permuted_margins_bitwise(model, X)
    assert ens.n_outputs == 3 and index.add_deltas


def test_exact_sums():
    """The test for order-free float64 sums of the leaf terms: float32 values of a few
    binary orders of magnitude pass; a term far below the others, full float64
    mantissas, or a bound at the limit fail."""
    from treeimp.permutation.leaf_index import exact_sums

    rng = np.random.default_rng(0)
    terms = rng.normal(scale=0.1, size=(600, 1)).astype(np.float32).astype(np.float64)
    leaf_off = np.arange(0, 601, 6)  # 100 trees of 6 leaves
    base = np.array([0.25])
    assert exact_sums(base, terms, leaf_off)
    assert not exact_sums(base, rng.normal(size=(600, 1)), leaf_off)  # 53-bit mantissas
    tiny = terms.copy()
    tiny[7, 0] = 2.0**-60  # lowest bit 2^-60: sums up to ~10 need 64 bits
    assert not exact_sums(base, tiny, leaf_off)
    assert not exact_sums(np.array([2.0**-60]), terms, leaf_off)
    # the bound, one tree with leaves 1 (q = 0) and 2^51 or 2^52: S = 2^51 passes,
    # S = 2^52 (changes up to 2 S = 2^53) fails
    one_tree = np.array([0, 2])
    assert exact_sums(np.array([0.0]), np.array([[1.0], [2.0**51]]), one_tree)
    assert not exact_sums(np.array([0.0]), np.array([[1.0], [2.0**52]]), one_tree)


def test_kernel_lgb_multiclass_nan():
    X, y = _nan_data("multi")
    model = lgb.LGBMClassifier(n_estimators=10, num_leaves=15, verbose=-1).fit(X, y)
    _, index = _assert_permuted_margins_bitwise(model, X, n_jobs=1)
    assert not index.add_deltas  # float64 leaf values: the full sums


def test_kernel_random_forest_deep_nan():
    """Deep trees (the same feature splits again below its topmost node), value_dim 3,
    summed then divided by the tree count."""
    X, y = _nan_data("multi", n=1200, frac=0.05)
    rng = np.random.default_rng(9)
    y = np.where(rng.random(len(y)) < 0.5, rng.integers(0, 3, len(y)), y)  # label noise
    model = RandomForestClassifier(n_estimators=8, random_state=0).fit(X, y)
    ens, index = _assert_permuted_margins_bitwise(model, X)
    assert ens.value_dim == 3
    assert index.L.dtype == np.uint16  # more than 256 leaves in a tree
    _, wide = _assert_permuted_margins_bitwise(model, X, n_repeats=1, leaf_dtype=np.int32)
    assert wide.L.dtype == np.int32
    # some topmost node has a descendant splitting on its feature again
    tops = index.tops
    below = [np.flatnonzero(ens.feature[index.preorder[index.pre_pos[t] + 1:
                                                       index.pre_pos[t] + index.size[t]]]
                            == ens.feature[t]).size for t in tops]
    assert max(below) > 0


def test_kernel_categorical_splits():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    n = 800
    X, _ = _data("regression", n=n, F=4, seed=3)
    colour = rng.integers(0, 12, n)
    effect = rng.normal(size=12)
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(4)])
    df.loc[rng.random(n) < 0.1, "x1"] = np.nan
    df["colour"] = pd.Categorical(colour)
    y = X[:, 0] + 2 * effect[colour] + rng.normal(scale=0.2, size=n)
    lgb_model = lgb.LGBMRegressor(n_estimators=20, num_leaves=15, min_child_samples=5,
                                  cat_smooth=1, min_data_per_group=5,
                                  verbose=-1).fit(df, y)
    ens, _ = _assert_permuted_margins_bitwise(lgb_model, df)
    assert ens.is_categorical[ens.feature == 4].any()
    xgb_model = xgb.XGBRegressor(n_estimators=20, max_depth=4, enable_categorical=True,
                                 tree_method="hist", max_cat_to_onehot=1).fit(df, y)
    ens, _ = _assert_permuted_margins_bitwise(xgb_model, df)
    assert ens.is_categorical.any()


def _on_thresholds(model, X, frac=0.3, seed=0):
    """X with a fraction of every column's values replaced by split thresholds of that
    column (values on the boundary of a path's interval), infinities and NaN."""
    ens = treeimp.parse(model)
    X = np.array(X, dtype=np.float64)
    rng = np.random.default_rng(seed)
    numeric = (ens.left >= 0) & ~ens.is_categorical
    for j in range(X.shape[1]):
        thresholds = ens.threshold[numeric & (ens.feature == j)]
        pick = np.flatnonzero(rng.random(len(X)) < frac)
        if thresholds.size:
            X[pick, j] = rng.choice(thresholds, pick.size)
        X[rng.choice(len(X), 6, replace=False), j] = [np.inf, -np.inf, np.nan, np.nan,
                                                      0.0, -0.0]
    return X


@pytest.mark.parametrize("name", ["xgb", "lgb zero as missing", "rf"])
def test_kernel_interval_edges(name):
    """Rows on the thresholds of their path (strict and non-strict splits), infinite,
    NaN and zero values (LightGBM zero_as_missing: tested node by node), many NaN in a
    leaf (candidates that stay on the path, over more than one batch of exits)."""
    X, y = _nan_data("binary", n=1500, frac=0.2)
    if name == "xgb":
        model = xgb.XGBClassifier(n_estimators=20, max_depth=4).fit(X, y)
    elif name == "rf":
        X = np.nan_to_num(X)
        model = RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0).fit(X, y)
    else:
        X[np.random.default_rng(4).random(X.shape) < 0.1] = 0.0
        model = lgb.LGBMClassifier(n_estimators=10, num_leaves=15, zero_as_missing=True,
                                   verbose=-1).fit(X, y)
    X = _on_thresholds(model, X)
    if name == "rf":
        X = np.where(np.isnan(X), 0.5, X)  # (a forest fitted without NaN)
    _assert_permuted_margins_bitwise(model, X, n_repeats=2)


def test_permutation_importance_equals_full_repredict_scores():
    """End to end, on a forest with ties: the scores are those of a full re-prediction
    of every permuted matrix, scored the same way (exactly equal)."""
    X, y = _data("binary", n=400)
    X = np.round(X, 1)  # many equal rows and equal probabilities: roc_auc ties
    model = RandomForestClassifier(n_estimators=8, min_samples_leaf=10,
                                   random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    res = treeimp.permutation_importance(model, X, y, scoring="roc_auc", n_repeats=3,
                                         random_state=2)
    scorer = make_scorer(ens, "roc_auc")
    seed = np.random.RandomState(2).randint(np.iinfo(np.int32).max + 1)
    base = scorer(ens.predict_raw(X), y, None)
    expected = np.empty_like(res.importances)
    for j in range(X.shape[1]):
        rng, idx, Xp = np.random.RandomState(seed), np.arange(len(X)), X.copy()
        for r in range(3):
            rng.shuffle(idx)
            Xp[:, j] = Xp[idx, j]
            expected[j, r] = base - scorer(ens.predict_raw(Xp), y, None)
    assert np.array_equal(res.importances, expected)


# ============================================ prepared scorers
SCORER_CASES = [
    ("xgb binary", lambda: xgb.XGBClassifier(n_estimators=10, max_depth=3), "binary",
     ["neg_log_loss", "accuracy"]),
    ("xgb multiclass", lambda: xgb.XGBClassifier(n_estimators=8, max_depth=3), "multi",
     ["neg_log_loss", "accuracy"]),
    ("rf binary", lambda: RandomForestClassifier(n_estimators=10, random_state=0), "binary",
     ["neg_log_loss", "accuracy"]),
    ("lgb regression", lambda: lgb.LGBMRegressor(n_estimators=10, verbose=-1), "regression",
     ["r2", "neg_mean_squared_error"]),
    ("rf regression", lambda: RandomForestRegressor(n_estimators=10, random_state=0),
     "regression", ["r2", "neg_mean_squared_error"]),
]


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("name,make,kind,scorings", SCORER_CASES,
                         ids=[c[0] for c in SCORER_CASES])
def test_bound_scorer_equals_sklearn_bitwise(name, make, kind, scorings, weighted):
    """The scorer that does the target-only work once gives scikit-learn's metric bit for
    bit on permuted margins (and is the one used, not the fallback)."""
    from treeimp.measures.scoring import bind_scorer

    X, y = _data(kind, n=400)
    if kind == "regression":
        y = y.astype(np.float32)  # as the benchmark's targets
    model = make().fit(X[:200], y[:200])
    ens = treeimp.parse(model)
    Xv, yv = X[200:], y[200:]
    w = np.random.default_rng(2).uniform(0.1, 2.0, len(yv)) if weighted else None
    rng = np.random.default_rng(4)
    for scoring in scorings:
        slow = make_scorer(ens, scoring)
        score, base = bind_scorer(ens, scoring, yv, w, ens.predict_raw(Xv))
        assert score.prepared, scoring
        for j in range(3):
            Xp = Xv.copy()
            Xp[:, j] = Xp[rng.permutation(len(Xp)), j]
            m = ens.predict_raw(Xp)
            assert score(m) == slow(m, yv, w), scoring


def test_bound_scorer_falls_back_to_sklearn():
    """String labels (no shortcut for accuracy) and probabilities scikit-learn warns
    about go through scikit-learn."""
    from treeimp.measures.scoring import bind_scorer

    X, y = _data("binary")
    labels = np.array(["no", "yes"])[y]
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, labels)
    ens = treeimp.parse(model)
    m = ens.predict_raw(X)
    score, base = bind_scorer(ens, "accuracy", labels, None, m)
    assert not score.prepared and score(m) == base
    score, base = bind_scorer(ens, "neg_log_loss", labels, None, m)
    assert score.prepared
    bad = m * 0.9  # rows not summing to one: scikit-learn's own warning and value
    with pytest.warns(UserWarning):
        assert score(bad) == make_scorer(ens, "neg_log_loss")(bad, labels, None)
    with pytest.raises(ValueError, match="greater than 1"):
        score(m * 1.5)


def test_bound_scorer_one_output_falls_back_on_bad_margins():
    """A binary model with one output (XGBoost) takes the log-loss shortcut on its single
    probability column; a margin giving NaN probabilities goes to scikit-learn, which
    raises its own error."""
    from treeimp.measures.scoring import bind_scorer

    X, y = _data("binary")
    ens = treeimp.parse(xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, y))
    m = ens.predict_raw(X)
    assert m.ndim == 1 or m.shape[1] == 1
    score, base = bind_scorer(ens, "neg_log_loss", y, None, m)
    assert score.prepared
    bad = m.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        score(bad)


def test_kernel_tasks_split_the_rows_evenly():
    """``begin(j)`` splits the topmost j-nodes into 16 tasks per thread of consecutive
    nodes that together hold every one once, with about equal numbers of rows below
    them (the static share of each thread is then about equal work): no task exceeds
    an equal share by more than the largest single node's rows."""
    X, y = _data("binary", n=3000)
    ens = treeimp.parse(xgb.XGBClassifier(n_estimators=40, max_depth=5).fit(X, y))
    Xw, index = _leaf_index(ens, X)
    leaves = ens.apply(Xw)
    for threads in (1, 2):
        for j in range(ens.n_features):
            with numba_threads(threads):
                index.begin(j)
            tops, top_tree = index._tops(j)
            bounds = index.task_start
            assert bounds[0] == 0 and bounds[-1] == len(tops)
            assert np.all(np.diff(bounds) >= 0)
            assert len(bounds) - 1 == min(len(tops), 16 * threads)
            # rows below each topmost node, counted from the rows' leaves
            below = np.array([np.isin(leaves[:, t],
                                      _subtree_leaves(ens, t, top)).sum()
                              for top, t in zip(tops, top_tree)])
            per_task = np.add.reduceat(np.append(below + 1, 0), bounds)[:-1]
            per_task[np.diff(bounds) == 0] = 0
            share = (below + 1).sum() / (len(bounds) - 1)
            assert per_task.max() <= share + below.max() + 1, j
        index.finish()


def _subtree_leaves(ens, t, top):
    """Local leaf ids of tree t below node ``top`` (a global node index, as the
    children in the flat arrays)."""
    stack, leaves = [top], []
    while stack:
        v = stack.pop()
        if ens.left[v] < 0:
            leaves.append(v - ens.tree_offsets[t])
        else:
            stack += [ens.left[v], ens.right[v]]
    return leaves
