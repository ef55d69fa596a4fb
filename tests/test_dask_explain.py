"""Explaining dask collections: equal to the in-memory result on the same rows.

On a LocalCluster of 2 worker processes (1 thread each) and on the synchronous
scheduler, with uneven partitions (one empty, one of a single row) whose blocks finish
in a shuffled order; models trained with Dask explained directly; a worker killed in
the middle of a run.
"""
# ruff: noqa: F811  (the dask_client fixture is imported, then named as an argument)

import concurrent.futures
import os
import time

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402

import treeimp  # noqa: E402
from tests.dask_fixtures import dask_client  # noqa: E402, F401

CHUNKS = (300, 0, 1, 450, 249)  # 1000 held-out rows: an empty and a one-row partition
N = sum(CHUNKS)
SEED = 11


def _slow_block(block, block_info=None, delay=0.05):
    """A block returned after a pause drawn from its position: blocks finish out of
    order on a cluster."""
    i = block_info[0]["chunk-location"][0]
    time.sleep(delay * np.random.default_rng(i).random())
    return block


def _dask(values, chunks=CHUNKS, delay=0.05):
    values = np.asarray(values)
    arr = da.from_array(values, chunks=(chunks,) + values.shape[1:])
    return arr.map_blocks(_slow_block, delay=delay, dtype=arr.dtype)


def _data(n, seed, classes=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[rng.random(size=X.shape) < 0.03] = np.nan
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2 + rng.normal(size=n)
    return X, ((s > 0.5).astype(int) if classes else s)


def assert_same_result(res, mem):
    assert res.n_rows == mem.n_rows
    assert list(res.table.index) == list(mem.table.index)
    for attr in ("table", "stderr", "stderr_trees", "pvalues", "qvalues"):
        a, b = getattr(res, attr).to_numpy(), getattr(mem, attr).to_numpy()
        scale = np.nanmax(np.abs(b)) if np.isfinite(b).any() else 1.0
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13 * scale, err_msg=attr)
    assert sorted(res.per_tree) == sorted(mem.per_tree)
    for m, v in mem.per_tree.items():
        np.testing.assert_allclose(res.per_tree[m], v, rtol=1e-10,
                                   atol=1e-13 * np.nanmax(np.abs(v)), err_msg=m)


def _models():
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier

    Xc, yc = _data(500, 0, classes=True)
    Xr, yr = _data(500, 1)
    Xr_filled = np.nan_to_num(Xr)
    return {
        "forest": (RandomForestClassifier(n_estimators=8, min_samples_leaf=3,
                                          random_state=0).fit(np.nan_to_num(Xc), yc), True),
        "xgboost": (xgb.XGBClassifier(n_estimators=15, max_depth=3, n_jobs=1).fit(Xc, yc),
                    True),
        "lightgbm": (lgb.LGBMRegressor(n_estimators=15, num_leaves=7, verbose=-1,
                                       n_jobs=1).fit(Xr, yr), False),
        "sklearn_gb": (GradientBoostingRegressor(n_estimators=15, max_depth=3,
                                                 random_state=0).fit(Xr_filled, yr), False),
    }


MODELS = _models() if pytest.importorskip("xgboost") and pytest.importorskip("lightgbm") \
    else {}


def _case(name):
    model, classes = MODELS[name]
    X, y = _data(N, 2, classes=classes)
    if name in ("forest", "sklearn_gb"):
        X = np.nan_to_num(X)
    rng = np.random.default_rng(3)
    kwargs = {}
    if name == "xgboost":
        kwargs["base_margin"] = 0.3 * rng.normal(size=N)
    if name == "lightgbm":
        kwargs["sample_weight"] = rng.uniform(0.5, 2.0, size=N)
    return model, X, y, kwargs


@pytest.mark.parametrize("name", ["forest", "xgboost", "lightgbm", "sklearn_gb"])
def test_cluster_equals_in_memory(dask_client, name, monkeypatch):
    model, X, y, kwargs = _case(name)
    methods = ("mdi", "mdi_oob", "ufi") + (("shap_oob",) if name == "forest" else ())
    mem = treeimp.explain(model, X, y, methods=methods, random_state=SEED, **kwargs)
    dkw = {k: _dask(v) for k, v in kwargs.items()}
    scattered = []
    scatter = type(dask_client).scatter

    def counting_scatter(self, data, **kw):
        scattered.append((type(data).__name__, kw.get("broadcast")))
        return scatter(self, data, **kw)

    monkeypatch.setattr(type(dask_client), "scatter", counting_scatter)
    res = treeimp.explain(model, _dask(X), _dask(y), methods=methods, random_state=SEED,
                          **dkw)
    assert scattered == [("Explainer", True)]  # the model travels once, to every worker
    assert_same_result(res, mem)


def test_kernel_threads_share_the_cores(dask_client):
    from treeimp.dask.explain import _kernel_threads, _usable_cores

    cores = _usable_cores()
    # the session cluster: 2 single-threaded workers on this host
    assert _kernel_threads(dask_client, None) == max(1, cores // 2)
    assert _kernel_threads(dask_client, 1) == 1
    with dask.config.set(scheduler="threads", num_workers=1):
        assert _kernel_threads(None, None) == cores
    with dask.config.set(scheduler="synchronous"):
        assert _kernel_threads(None, None) is None  # the Explainer's own n_jobs
        assert _kernel_threads(None, 3) == 3


@pytest.mark.parametrize("name", ["forest", "xgboost"])
def test_synchronous_scheduler_and_small_split_every(name):
    model, X, y, kwargs = _case(name)
    mem = treeimp.explain(model, X, y, random_state=SEED, **kwargs)
    ex = treeimp.Explainer(model)
    with dask.config.set(scheduler="synchronous"):
        res = ex.explain(_dask(X, delay=0), _dask(y, delay=0), random_state=SEED,
                         **kwargs)  # in-memory companions are cut at X's partitions
        from treeimp.dask.explain import explain_dask

        res2 = explain_dask(ex, _dask(X, delay=0), _dask(y, delay=0), random_state=SEED,
                            split_every=2, **kwargs)
    assert_same_result(res, mem)
    assert_same_result(res2, mem)


def test_dataframe_with_unknown_divisions_and_threads():
    model, X, y, kwargs = _case("lightgbm")
    cols = [f"f{j}" for j in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols).assign(y=y, w=kwargs["sample_weight"])
    d = dd.from_pandas(df, npartitions=7).clear_divisions()
    mem = treeimp.explain(model, df[cols], y, sample_weight=df["w"], random_state=SEED)
    with dask.config.set(scheduler="threads"):
        res = treeimp.explain(model, d[cols], d["y"], sample_weight=d["w"],
                              random_state=SEED)
    assert_same_result(res, mem)
    assert list(res.table.index) == cols


def test_out_of_bag_forest_on_dask():
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data(N, 4)
    X = np.nan_to_num(X)
    rf = RandomForestRegressor(n_estimators=8, min_samples_leaf=3, random_state=0).fit(X, y)
    mem = treeimp.explain(rf, X, y, oob=True, random_state=SEED)
    with dask.config.set(scheduler="synchronous"):
        res = treeimp.explain(rf, _dask(X, delay=0), _dask(y, delay=0), oob=True,
                              random_state=SEED)
    assert_same_result(res, mem)


def test_dask_trained_models_explained_directly(dask_client):
    import lightgbm as lgb
    import xgboost.dask as xgb_dask

    X, yc = _data(N, 5, classes=True)
    clf = xgb_dask.DaskXGBClassifier(n_estimators=10, max_depth=3, tree_method="hist")
    clf.client = dask_client
    clf.fit(_dask(X, delay=0, chunks=500), _dask(yc, delay=0, chunks=500))
    res = treeimp.explain(clf, _dask(X), _dask(yc), random_state=SEED)
    local = treeimp.parse(clf.get_booster())
    assert_same_result(res, treeimp.explain(local, X, yc, random_state=SEED))

    _, yr = _data(N, 5)
    reg = lgb.DaskLGBMRegressor(n_estimators=10, num_leaves=7, min_child_samples=10,
                                verbose=-1, client=dask_client)
    reg.fit(_dask(X, delay=0, chunks=500), _dask(yr, delay=0, chunks=500))
    res = treeimp.explain(reg, _dask(X), _dask(yr), random_state=SEED)
    assert_same_result(res, treeimp.explain(reg.to_local(), X, yr, random_state=SEED))


def _exit_soon():
    """End this worker process abruptly, just after replying (as a crash would)."""
    import threading

    threading.Timer(0.05, os._exit, (1,)).start()


def _wait_for_partition_task(client, run, timeout=120):
    """The address of a worker running a partition's statistics task."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert not run.done(), "the run finished before a worker could be killed"
        for addr, keys in client.processing().items():
            if any("_partition_stats" in str(k) for k in keys):
                return addr
        time.sleep(0.02)
    raise AssertionError("no partition task started")


def test_bad_split_every_and_mdi_only():
    model, X, y, _ = _case("forest")
    with pytest.raises(ValueError, match="split_every must be an int >= 2, got 1"):
        treeimp.dask.explain.explain_dask(treeimp.Explainer(model), _dask(X), _dask(y),
                                          split_every=1)
    with dask.config.set(scheduler="synchronous"):
        res = treeimp.explain(model, _dask(X, delay=0), methods=("mdi",))
    np.testing.assert_allclose(res.table["mdi"], treeimp.explain(model, X, methods=("mdi",))
                               .table["mdi"], rtol=1e-12)


def test_worker_killed_mid_run_gives_the_same_result(dask_client):
    # last in this file: the replaced worker loads numba's cached kernels again
    client = dask_client
    model, X, y, _ = _case("xgboost")
    mem = treeimp.explain(model, X, y, random_state=SEED)
    chunks = (50,) * (N // 50)
    before = set(client.scheduler_info()["workers"])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        run = pool.submit(treeimp.explain, model, _dask(X, chunks, delay=0.3),
                          _dask(y, chunks, delay=0.3), random_state=SEED)
        victim = _wait_for_partition_task(client, run)
        client.run(_exit_soon, workers=[victim])
        res = run.result(timeout=240)
    client.wait_for_workers(2, timeout=60)
    after = set(client.scheduler_info()["workers"])
    assert victim in before and victim not in after  # the worker was replaced
    assert_same_result(res, mem)
