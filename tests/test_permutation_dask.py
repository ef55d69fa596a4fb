"""permutation_importance of dask collections equals a brute force of its documented
scheme (each partition's rows permuted by ``default_rng([seed, repeat, column,
partition start])``, the model's own predict on the whole permuted set, scikit-learn's
metric), whatever the partitioning, the scheduler and the number of workers."""

import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import accuracy_score, log_loss, mean_squared_error, r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state

import treeimp

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")

SYNC = {"scheduler": "sync"}
UNEVEN = (70, 0, 1, 129)  # an empty partition and a one-row one


def _data(kind, n=400, F=5, seed=0, outputs=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    f = X[:, 0] - X[:, 1] + 0.7 * X[:, 2] * X[:, 3]
    if kind == "binary":
        return X, (f + rng.logistic(size=n) > 0).astype(int)
    y = f + rng.normal(scale=0.3, size=n)
    if outputs == 2:
        y = np.column_stack([y, X[:, 4] + rng.normal(scale=0.3, size=n)])
    return X, y


def _seed(random_state):
    return check_random_state(random_state).randint(np.iinfo(np.int32).max + 1)


def brute_force(predict, metric, X, y, w, lengths, random_state, n_repeats, columns=None):
    """Importances of the documented scheme, computed without treeimp: permute each
    partition's rows of a copy of X, predict all rows with the model's own predict and
    score the concatenation with scikit-learn's metric."""
    seed = _seed(random_state)
    columns = [[j] for j in range(X.shape[1])] if columns is None else columns
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    baseline = metric(y, predict(X), w)
    out = np.empty((len(columns), n_repeats))
    for g, cols in enumerate(columns):
        for r in range(n_repeats):
            Xp = X.copy()
            for start, n in zip(starts, lengths):
                perm = np.random.default_rng([seed, r, g, int(start)]).permutation(n)
                block = X[start:start + n][:, cols]
                Xp[start:start + n, cols] = block[perm]
            out[g, r] = metric(y, predict(Xp), w)
    return baseline - out


def _accuracy(y, labels, w):
    return accuracy_score(y, labels, sample_weight=w)


def _neg_log_loss(y, proba, w):
    return -log_loss(y, proba, sample_weight=w)


def _r2(y, pred, w):
    return r2_score(y, pred, sample_weight=w)


def _neg_mse(y, pred, w):
    return -mean_squared_error(y, pred, sample_weight=w)


@pytest.fixture(scope="module")
def forest_classifier():
    X, y = _data("binary")
    model = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0)
    return model.fit(X[:200], y[:200]), X[200:], y[200:]


@pytest.fixture(scope="module")
def forest_regressor():
    X, y = _data("regression", outputs=2)
    model = RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0)
    return model.fit(X[:200], y[:200]), X[200:], y[200:]


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_one_partition_equals_brute_force(forest_classifier):
    model, X, y = forest_classifier
    Xd, yd = da.from_array(X, chunks=(len(X), 5)), da.from_array(y, chunks=len(y))
    with dask.config.set(SYNC):
        for scoring, predict, metric in (("accuracy", model.predict, _accuracy),
                                         ("neg_log_loss", model.predict_proba, _neg_log_loss)):
            got = treeimp.permutation_importance(model, Xd, yd, scoring=scoring, n_repeats=3,
                                                 random_state=4)
            want = brute_force(predict, metric, X, y, None, [len(X)], 4, 3)
            _close(got.importances, want)
            _close(got.importances_mean, want.mean(axis=1))
            _close(got.importances_std, want.std(axis=1))
    assert np.abs(want).max() > 0.01  # the features matter: the check can fail


def test_explainer_permutation_importance_on_dask_equals_brute_force(forest_classifier):
    """An Explainer (model parsed once) takes the same dask path."""
    model, X, y = forest_classifier
    Xd, yd = da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100)
    ex = treeimp.Explainer(model)
    with dask.config.set(SYNC):
        got = ex.permutation_importance(Xd, yd, scoring="accuracy", n_repeats=2,
                                        random_state=5)
    want = brute_force(model.predict, _accuracy, X, y, None, [100] * (len(X) // 100), 5, 2)
    _close(got.importances, want)


def test_uneven_partitions_equal_brute_force_weighted_two_outputs(forest_regressor):
    """r2 and mean squared error of a two-output forest, with weights, on partitions
    of 70, 0, 1 and 129 rows, the data as a dask array and as a dask DataFrame."""
    model, X, y = forest_regressor
    w = np.random.default_rng(1).uniform(0.2, 2.0, size=len(X))
    Xd = da.from_array(X, chunks=(UNEVEN, 5))
    yd = da.from_array(y, chunks=(UNEVEN, 1))
    wd = da.from_array(w, chunks=(UNEVEN,))
    names = [f"f{j}" for j in range(5)]
    frame = dd.from_dask_array(Xd, columns=names)
    with dask.config.set(SYNC):
        for scoring, metric in (("r2", _r2), ("neg_mean_squared_error", _neg_mse)):
            want = brute_force(model.predict, metric, X, y, w, UNEVEN, 7, 2)
            got = treeimp.permutation_importance(model, Xd, yd, scoring=scoring,
                                                 n_repeats=2, random_state=7,
                                                 sample_weight=wd)
            _close(got.importances, want)
            # in-memory y and weights are cut at X's partition boundaries
            got = treeimp.permutation_importance(model, frame, y, scoring=scoring,
                                                 n_repeats=2, random_state=7,
                                                 sample_weight=w)
            _close(got.importances, want)
            # chunks of unknown size (boolean selection) are counted first
            keep = da.from_array(np.ones(len(X), dtype=bool), chunks=(UNEVEN,))
            assert np.isnan(Xd[keep].chunks[0]).all()
            got = treeimp.permutation_importance(model, Xd[keep], yd[keep], scoring=scoring,
                                                 n_repeats=2, random_state=7,
                                                 sample_weight=wd[keep])
            _close(got.importances, want)
    assert np.abs(want).max() > 0.01


def test_xgboost_multiclass_dataframe_matches_brute_force():
    """XGBoost softmax on a dask DataFrame: accuracy and neg_log_loss of the documented
    scheme equal scikit-learn's metrics of XGBoost's own predict_proba (float32, hence
    the tolerance)."""
    xgb = pytest.importorskip("xgboost")
    X, y = _data("regression", n=500)
    y = np.digitize(y, [-0.7, 0.7])
    model = xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(X[:250], y[:250])
    X, y = X[250:], y[250:]
    names = [f"x{j}" for j in range(5)]
    frame = dd.from_pandas(pd.DataFrame(X, columns=names), npartitions=3, sort=False)
    lengths = [int(v) for v in frame.map_partitions(len).compute()]
    ys = dd.from_pandas(pd.Series(y), npartitions=3, sort=False)
    with dask.config.set(SYNC):
        for scoring, predict, metric in (("accuracy", model.predict, _accuracy),
                                         ("neg_log_loss", model.predict_proba, _neg_log_loss)):
            got = treeimp.permutation_importance(model, frame, ys, scoring=scoring,
                                                 n_repeats=2, random_state=2)
            want = brute_force(predict, metric, X, y, None, lengths, 2, 2)
            np.testing.assert_allclose(got.importances, want, rtol=1e-5, atol=1e-6)
    assert np.abs(want).max() > 0.01


def test_partitions_in_blocks_of_rows(forest_regressor, monkeypatch):
    """A partition larger than the leaf index's memory is re-predicted in blocks of
    rows (here 16), each block taking its rows' permuted values from the whole
    partition: the same importances."""
    from treeimp.dask import permutation as permutation_dask

    model, X, y = forest_regressor
    Xd = da.from_array(X, chunks=(UNEVEN, 5))
    yd = da.from_array(y, chunks=(UNEVEN, 2))
    monkeypatch.setattr(permutation_dask, "LEAF_INDEX_BYTES", 0)
    monkeypatch.setattr(permutation_dask, "BATCH_ROWS", 16)
    groups = {"ab": [0, 1]}  # a joint permutation too
    with dask.config.set(SYNC):
        got = treeimp.permutation_importance(model, Xd, yd, n_repeats=2, random_state=5,
                                             groups=groups)
    columns = [[0, 1], [2], [3], [4]]
    want = brute_force(model.predict, _r2, X, y, None, UNEVEN, 5, 2, columns)
    _close(got.importances, want)


def test_groups_and_dataframe_target(forest_classifier):
    model, X, y = forest_classifier
    names = [f"x{j}" for j in range(5)]
    pdf = pd.DataFrame(X, columns=names).assign(target=y)
    frame = dd.from_pandas(pdf, npartitions=3, sort=False)
    lengths = [int(v) for v in frame.map_partitions(len).compute()]
    model_named = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0)
    model_named.fit(pd.DataFrame(X, columns=names), y)  # fitted on names: checked by name
    groups = {"ab": ["x0", "x1"], "c": ["x2"]}
    with dask.config.set(SYNC):
        got = treeimp.permutation_importance(model_named, frame[names], frame["target"],
                                             n_repeats=2, random_state=1, groups=groups)
    columns = [[0, 1], [2], [3], [4]]  # each feature outside a group is its own group

    def predict(A):
        return model_named.predict(pd.DataFrame(A, columns=names))
    want = brute_force(predict, _accuracy, X, y, None, lengths, 1, 2, columns)
    _close(got.importances, want)
    assert got.group_names == ["ab", "c", "x3", "x4"]


def test_objective_with_base_margin_matches_own_loss():
    """Scoring 'objective' (LightGBM squared error: half the squared error) with
    per-row offsets given as a dask array: LightGBM's prediction plus the offset."""
    lgb = pytest.importorskip("lightgbm")
    X, y = _data("regression", n=300)
    offset = np.random.default_rng(2).normal(size=len(X))
    model = lgb.LGBMRegressor(n_estimators=10, num_leaves=7, verbose=-1)
    model.fit(X[:150], y[:150], init_score=offset[:150])
    X, y, offset = X[150:], y[150:], offset[150:]
    chunks = (40, 1, 0, 109)

    def predict(A):
        return model.predict(A) + offset

    def neg_half_mse(y_true, pred, w):
        return -0.5 * mean_squared_error(y_true, pred)
    with dask.config.set(SYNC):
        got = treeimp.permutation_importance(
            model, da.from_array(X, chunks=(chunks, 5)), da.from_array(y, chunks=(chunks,)),
            scoring="objective", n_repeats=2, random_state=3,
            base_margin=da.from_array(offset, chunks=(chunks,)))
    want = brute_force(predict, neg_half_mse, X, y, None, chunks, 3, 2)
    np.testing.assert_allclose(got.importances, want, rtol=1e-9, atol=1e-12)


def test_in_memory_input_keeps_sklearn_permutations(forest_classifier):
    """The dispatch leaves in-memory data on scikit-learn's permutations."""
    from sklearn.inspection import permutation_importance as sk_permutation_importance

    model, X, y = forest_classifier
    got = treeimp.permutation_importance(model, X, y, n_repeats=3, random_state=0)
    want = sk_permutation_importance(model, X, y, n_repeats=3, random_state=0)
    _close(got.importances, want.importances)


def test_bad_inputs(forest_classifier, monkeypatch):
    model, X, y = forest_classifier
    Xd = da.from_array(X, chunks=(UNEVEN, 5))
    yd = da.from_array(y, chunks=(UNEVEN,))
    with dask.config.set(SYNC):
        with pytest.raises(ValueError, match=r"y's partition 0 has 71 rows but X's has 70"):
            treeimp.permutation_importance(model, Xd, da.from_array(y, chunks=(71, 0, 1, 128)))
        with pytest.raises(ValueError, match="y has 2 row chunks but X has 4 partitions"):
            treeimp.permutation_importance(model, Xd, da.from_array(y, chunks=100))
        with pytest.raises(ValueError, match="X has 200 rows but sample_weight has 199"):
            treeimp.permutation_importance(model, Xd, yd, sample_weight=np.ones(199))
        with pytest.raises(TypeError, match="y is a dask collection but X is a ndarray"):
            treeimp.permutation_importance(model, X, yd)
        with pytest.raises(ValueError, match="roc_auc.*not a sum over rows.*'accuracy'"):
            treeimp.permutation_importance(model, Xd, yd, scoring="roc_auc")
        with pytest.raises(ValueError, match="scoring must be None or one of"):
            treeimp.permutation_importance(model, Xd, yd, scoring="f1")
        with pytest.raises(ValueError, match="sample_weight sums to 0.0 over all 200 rows"):
            treeimp.permutation_importance(model, Xd, yd, sample_weight=np.zeros(200))
        with pytest.raises(ValueError, match="2 negative values in partition 3"):
            w = np.ones(200)
            w[[150, 160]] = -1
            treeimp.permutation_importance(model, Xd, yd, sample_weight=w)
        with pytest.raises(ValueError, match="X has 4 columns but the model was trained on 5"):
            treeimp.permutation_importance(model, Xd[:, :4], yd)
        with pytest.raises(ValueError, match="n_repeats must be a positive integer"):
            treeimp.permutation_importance(model, Xd, yd, n_repeats=0)
        with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
            treeimp.permutation_importance(model, Xd, yd, n_jobs=0)
        # a dask Series with X's partition count but other lengths: found in the task
        frame = dd.from_pandas(pd.DataFrame(X, columns=list("abcde")), npartitions=2,
                               sort=False)
        ys = dd.from_pandas(pd.Series(y), npartitions=2, sort=False).repartition(
            divisions=[0, 50, 199])
        with pytest.raises(ValueError, match=r"y has 1?50 rows in X's partition [01] "
                                             r"\(rows (0 to 99|100 to 199)\) of 100 rows"):
            treeimp.permutation_importance(RandomForestClassifier(n_estimators=2).fit(X, y),
                                           frame, ys)
        with pytest.raises(ValueError, match="y has 3 partitions but X has 2"):
            treeimp.permutation_importance(model, frame,
                                           dd.from_pandas(pd.Series(y), npartitions=3))
        cat = frame.assign(e=frame["e"].astype(str).astype("category"))
        cat = cat.assign(e=cat["e"].cat.as_unknown())
        with pytest.raises(ValueError, match=r"categorical columns \['e'\] have unknown "
                                             r"categories.*categorize"):
            treeimp.permutation_importance(model, cat, yd)
        pipe = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=2))
        with pytest.raises(TypeError, match="a Pipeline on dask input"):
            treeimp.permutation_importance(pipe.fit(X, y), Xd, yd)

    class FakeDaskArray:  # what a dask collection looks like without dask importable
        __module__ = "dask.array.core"

        def __dask_graph__(self):
            return {}
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r'pip install "treeimp\[dask\]"'):
        treeimp.permutation_importance(model, FakeDaskArray(), y)


# ------------------------------------------------------------------ distributed
@pytest.fixture(scope="session")
def cluster_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                       dashboard_address=":0")
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


def test_independent_of_scheduler_and_workers(forest_classifier, cluster_client,
                                              monkeypatch):
    """The same importances on the synchronous scheduler (one worker), the threaded one
    and a cluster of two worker processes, to which the model is scattered once."""
    model, X, y = forest_classifier
    Xd = da.from_array(X, chunks=(UNEVEN, 5))
    yd = da.from_array(y, chunks=(UNEVEN,))
    w = da.from_array(np.random.default_rng(5).uniform(0.5, 1.5, size=len(X)),
                      chunks=(UNEVEN,))

    def run():
        return treeimp.permutation_importance(model, Xd, yd, scoring="neg_log_loss",
                                              n_repeats=3, random_state=11, sample_weight=w)
    with dask.config.set(SYNC):
        sync = run()
    with dask.config.set(scheduler="threads", num_workers=2):
        threads = run()
    scattered = []
    scatter = type(cluster_client).scatter

    def spy(self, data, **kwargs):
        scattered.append((type(data).__name__, kwargs.get("broadcast")))
        return scatter(self, data, **kwargs)
    monkeypatch.setattr(type(cluster_client), "scatter", spy)
    with dask.config.set(scheduler=cluster_client, split_every=2):
        cluster = run()
    assert scattered == [("TreeEnsemble", True)]
    _close(threads.importances, sync.importances)
    _close(cluster.importances, sync.importances)
    want = brute_force(model.predict_proba, _neg_log_loss, X, y, w.compute(), UNEVEN, 11, 3)
    _close(sync.importances, want)


def test_catboost_routed_by_its_library(cluster_client):
    """A CatBoost model with target-statistic splits is routed by CatBoost: each
    permuted partition (a pandas frame with a string column) is re-predicted through
    it, on the synchronous scheduler and on the cluster."""
    catboost = pytest.importorskip("catboost")
    rng = np.random.default_rng(3)
    n = 400
    X = pd.DataFrame({"x": rng.normal(size=n), "s": rng.choice(list("abcdefgh"), n),
                      "z": rng.normal(size=n)})
    y = ((X["x"] + 1.5 * X["s"].isin(["a", "b", "c"]) + 0.5 * rng.logistic(size=n))
         > 0.7).astype(int).to_numpy()
    model = catboost.CatBoostClassifier(iterations=10, depth=3, one_hot_max_size=2,
                                        cat_features=["s"], verbose=0, random_seed=0,
                                        allow_writing_files=False, thread_count=1)
    model.fit(X[:200], y[:200])
    assert treeimp.parse(model).leaf_router is not None
    Xv, yv = X[200:].reset_index(drop=True), y[200:]
    frame = dd.from_pandas(Xv, npartitions=3, sort=False)
    lengths = [int(v) for v in frame.map_partitions(len).compute()]
    seed = _seed(0)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    baseline = _neg_log_loss(yv, model.predict_proba(Xv), None)
    want = np.empty((3, 2))
    for j in range(3):
        for r in range(2):
            parts = []
            for start, m in zip(starts, lengths):
                part = Xv.iloc[start:start + m].copy()
                perm = np.random.default_rng([seed, r, j, int(start)]).permutation(m)
                part.iloc[:, j] = part.iloc[perm, j].to_numpy()
                parts.append(part)
            want[j, r] = baseline - _neg_log_loss(yv, model.predict_proba(pd.concat(parts)),
                                                  None)
    for scheduler in ("sync", cluster_client):
        with dask.config.set(scheduler=scheduler):
            got = treeimp.permutation_importance(model, frame, yv, scoring="neg_log_loss",
                                                 n_repeats=2, random_state=0)
        np.testing.assert_allclose(got.importances, want, rtol=1e-9, atol=1e-12)
    assert want[1].min() > 0.01  # the string feature matters


def test_without_dask_in_memory_input_still_works():
    """With dask unimportable, treeimp imports and in-memory permutation importance
    runs (the dispatch never imports dask for data that is not a dask collection)."""
    import subprocess

    code = ("import sys; sys.modules['dask'] = None\n"
            "import numpy as np, treeimp\n"
            "from sklearn.tree import DecisionTreeRegressor\n"
            "X = np.random.default_rng(0).normal(size=(50, 3)); y = X[:, 0]\n"
            "m = DecisionTreeRegressor(max_depth=3).fit(X, y)\n"
            "r = treeimp.permutation_importance(m, X, y, n_repeats=2, random_state=0)\n"
            "assert r.importances_mean[0] > 0.5, r.importances_mean\n"
            "assert 'dask' not in [k for k, v in sys.modules.items() if v is not None]\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
