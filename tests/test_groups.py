"""Feature groups and Pipelines: group sums per tree, jackknife of the group sums,
groups='input' through a ColumnTransformer, joint permutation against a brute-force
loop and scikit-learn."""

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestClassifier
from sklearn.inspection import permutation_importance as sk_permutation_importance
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import treeimp
from treeimp.results.finalize import jackknife_stderr


def _data(n=900, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n),
                       "noise": rng.choice([f"l{i:02d}" for i in range(20)], n),
                       "b": rng.integers(0, 2, size=n).astype(float)})
    y = (df.a + 0.3 * df.b + rng.normal(size=n) * 0.6 > 0).astype(int).to_numpy()
    return df, y


@pytest.fixture(scope="module")
def pipe_data():
    df, y = _data()
    ct = ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore",
                                                 sparse_output=True), ["noise"])],
                           remainder="passthrough")
    pipe = make_pipeline(ct, RandomForestClassifier(n_estimators=40, random_state=0))
    pipe.fit(df[:600], y[:600])
    return pipe, df[600:], y[600:]


def test_group_is_sum_of_members_per_tree_and_jackknife_of_sums():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 5))
    y = X[:, 0] + X[:, 1] + 0.3 * rng.normal(size=500)
    model = HistGradientBoostingRegressor(max_iter=15, random_state=0).fit(X[:300], y[:300])
    groups = {"g01": [0, 1], "g34": ["x3", 4]}
    res = treeimp.explain(model, X[300:], y[300:], random_state=3)
    grp = treeimp.explain(model, X[300:], y[300:], random_state=3, groups=groups)
    assert list(grp.table.index) == ["g01", "x2", "g34"]
    assert grp.groups == {"g01": ["x0", "x1"], "x2": ["x2"], "g34": ["x3", "x4"]}
    for m in res.methods:
        pt = res.per_tree[m]
        np.testing.assert_allclose(grp.per_tree[m][:, 0], pt[:, 0] + pt[:, 1], atol=1e-13)
        np.testing.assert_allclose(grp.per_tree[m][:, 2], pt[:, 3] + pt[:, 4], atol=1e-13)
        np.testing.assert_allclose(grp.table[m]["g01"], res.table[m][["x0", "x1"]].sum())
        if m == "mdi":
            continue
        bv = res.block_values[m]
        sums = np.stack([bv[:, 0] + bv[:, 1], bv[:, 2], bv[:, 3] + bv[:, 4]], axis=1)
        np.testing.assert_allclose(grp.stderr[m].to_numpy(), jackknife_stderr(sums),
                                   rtol=1e-10)
        # not the root-sum-of-squares of the members' errors
        rss = np.hypot(res.stderr[m]["x0"], res.stderr[m]["x1"])
        assert abs(grp.stderr[m]["g01"] - rss) > 1e-6 * rss


def test_group_errors():
    X = np.random.default_rng(0).normal(size=(60, 3))
    rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, X[:, 0] > 0)
    y = X[:, 0] > 0
    with pytest.raises(ValueError, match="must not overlap"):
        treeimp.explain(rf, X, y, groups={"a": [0, 1], "b": [1]})
    with pytest.raises(ValueError, match="not a feature name"):
        treeimp.explain(rf, X, y, groups={"a": ["nope"]})
    with pytest.raises(ValueError, match="there are 3 features"):
        treeimp.explain(rf, X, y, groups={"a": [5]})
    with pytest.raises(ValueError, match="not a Pipeline"):
        treeimp.explain(rf, X, y, groups="input")


def test_pipeline_input_groups_and_noise_categorical(pipe_data):
    pipe, X, y = pipe_data
    res = treeimp.explain(pipe, X, y, groups="input", random_state=0)
    assert set(res.table.index) == {"a", "noise", "b"}
    assert len(res.groups["noise"]) == 20
    assert res.groups["a"] == ["remainder__a"]
    # in-sample MDI ranks the 20-level noise categorical above the real binary feature b
    assert res.table["mdi"]["noise"] > res.table["mdi"]["b"]
    # ... out of sample the group is not significant
    assert res.pvalues["mdi_oob"]["noise"] > 0.05
    assert res.pvalues["mdi_oob"]["a"] < 0.01
    # the pipeline explains its last step on the transformed rows, columns named by
    # get_feature_names_out
    flat = treeimp.explain(pipe, X, y, random_state=0)
    Xt = pipe[:-1].transform(X).toarray()
    direct = treeimp.explain(pipe[-1], Xt, y, random_state=0)
    assert list(flat.table.index) == list(pipe[:-1].get_feature_names_out())
    np.testing.assert_allclose(flat.table.to_numpy(), direct.table.to_numpy())


def test_group_permutation_joint_and_sklearn(pipe_data):
    pipe, X, y = pipe_data
    r = treeimp.permutation_importance(pipe, X, y, groups="input", n_repeats=3,
                                       random_state=7)
    assert r.group_names == ["noise", "a", "b"]
    # brute force: scikit-learn's loop, all member columns permuted by the same rows
    Xt = pipe[:-1].transform(X).toarray()
    rf = pipe[-1]
    base = rf.score(Xt, y)
    seed = np.random.RandomState(7).randint(np.iinfo(np.int32).max + 1)
    for g, name in enumerate(r.group_names):
        cols = [list(pipe[:-1].get_feature_names_out()).index(c) for c in r.groups[name]]
        rng = np.random.RandomState(seed)
        idx = np.arange(Xt.shape[0])
        Xp = Xt.copy()
        for k in range(3):
            rng.shuffle(idx)
            Xp[:, cols] = Xp[np.ix_(idx, cols)]
            assert r.importances[g, k] == pytest.approx(base - rf.score(Xp, y), abs=1e-12)
    # one column per group: scikit-learn's permutation importance exactly
    single = treeimp.permutation_importance(rf, Xt, y, n_repeats=3, random_state=7,
                                            groups={"a": [20]})
    sk = sk_permutation_importance(rf, Xt, y, n_repeats=3, random_state=7)
    np.testing.assert_allclose(single.importances, sk.importances, atol=1e-12)


def test_pipeline_scaler_only_and_passthrough_names():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=300)
    pipe = make_pipeline(StandardScaler(), HistGradientBoostingRegressor(
        max_iter=10, random_state=0)).fit(X[:200], y[:200])
    res = treeimp.explain(pipe, X[200:], y[200:], groups="input", random_state=0)
    assert list(res.table.index) == ["x0", "x1", "x2"]
    assert res.ranking("mdi_oob")[0] == "x0"


def test_selector_keeps_or_drops_whole_groups():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(500, 5))
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=30, min_samples_leaf=3, random_state=0)
    sel = treeimp.ImportanceSelector(rf, random_state=0,
                                     groups={"s": [0, 1], "n": [3, 4]}).fit(X, y)
    # group s (x0 with the noise x1) is kept whole, the noise group n dropped whole
    assert sel.get_support(indices=True).tolist() == [0, 1, 2]
    assert list(sel.importances_.table.index) == ["s", "x2", "n"]
    with pytest.raises(TypeError, match="groups must be None or a dict"):
        treeimp.ImportanceSelector(rf, groups="input").fit(X, y)


def test_input_groups_permutation_equals_sklearn_on_the_pipeline(pipe_data):
    # permuting a categorical's one-hot columns jointly by rows is permuting the
    # categorical itself: scikit-learn's permutation importance of the whole Pipeline
    pipe, X, y = pipe_data
    ours = treeimp.permutation_importance(pipe, X, y, groups="input", n_repeats=3,
                                          random_state=5)
    ref = sk_permutation_importance(pipe, X, y, n_repeats=3, random_state=5)
    order = [ours.group_names.index(c) for c in X.columns]
    np.testing.assert_allclose(ours.importances[order], ref.importances, atol=1e-12)
