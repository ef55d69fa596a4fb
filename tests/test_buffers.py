"""The kept statistics buffer of an Explainer (treeimp/stats/buffers.py): reused zero-filled,
never shared by two users at once, never aliased by a result, freed with its Explainer."""

import copy

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp
from treeimp.stats.buffers import BufferPool


def _data(seed=0, n=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y


def _arrays(res):
    out = {"table": res.table.to_numpy(), "stderr": res.stderr.to_numpy()}
    for m, v in res.per_tree.items():
        out["per_tree_" + m] = np.asarray(v)
    for m, v in res.block_values.items():
        out["blocks_" + m] = np.asarray(v)
    for m, v in res.table_by_class.items():
        out["by_class_" + m] = v.to_numpy()
    return copy.deepcopy(out)


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_a_kept_buffer_is_refilled_with_zeros_and_results_do_not_alias_it():
    X, y = _data()
    rf = RandomForestClassifier(n_estimators=15, random_state=0).fit(X, y)
    ex = treeimp.Explainer(rf)
    first = ex.explain(X, y, oob=True, random_state=0)
    snapshot = _arrays(first)
    kept = ex._pool._idle
    assert kept is not None  # the statistics buffer was kept for the next call
    kept[:] = np.nan  # garbage where the next call's statistics will go
    second = ex.explain(X, y, oob=True, random_state=0)
    assert ex._pool._idle is kept  # reused, not reallocated
    _assert_same(_arrays(second), snapshot)  # zero-filled before use
    _assert_same(_arrays(first), snapshot)  # the first result kept no view of it


def test_calls_of_other_sizes_share_the_buffer_without_changing_results():
    X, y = _data(1)
    big = RandomForestRegressor(n_estimators=20, random_state=0).fit(X, X[:, 0])
    want = {b: _arrays(treeimp.explain(big, X, X[:, 0], oob=True, n_blocks=b,
                                       random_state=0)) for b in (5, 30)}
    ex = treeimp.Explainer(big)
    # many blocks first: the smaller statistics then use a prefix of the buffer, and back
    for b in (30, 5, 30):
        _assert_same(_arrays(ex.explain(X, X[:, 0], oob=True, n_blocks=b, random_state=0)),
                     want[b])


def test_explainers_do_not_share_buffers_and_free_them_with_themselves():
    import gc
    import weakref

    X, y = _data(2)
    rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    a, b = treeimp.Explainer(rf), treeimp.Explainer(rf)
    a.explain(X, y, oob=True, random_state=0)
    b.explain(X, y, oob=True, random_state=0)
    assert a._pool._idle is not None and not np.shares_memory(a._pool._idle, b._pool._idle)
    kept = weakref.ref(a._pool._idle)
    del a
    gc.collect()
    assert kept() is None


def test_nested_users_get_separate_buffers():
    scratch = BufferPool()
    with scratch.zeroed((3, 4)) as a:
        a[:] = 1.0
        with scratch.zeroed((3, 4)) as b:  # the kept one is in use: a fresh one
            assert not np.shares_memory(a, b)
            assert not b.any()
    with scratch.zeroed((2, 5)) as c:
        assert c.shape == (2, 5) and not c.any()


def test_keep_limit_from_the_environment(monkeypatch):
    scratch = BufferPool()
    monkeypatch.setenv("TREEIMP_KEEP_MB", "0")
    with scratch.zeroed((10,)):
        pass
    assert scratch._idle is None  # over the limit: not kept
    monkeypatch.setenv("TREEIMP_KEEP_MB", "1")
    with scratch.zeroed((10,)):
        pass
    assert scratch._idle is not None
    for bad in ("lots", "-1", "nan"):
        monkeypatch.setenv("TREEIMP_KEEP_MB", bad)
        with pytest.raises(ValueError, match="TREEIMP_KEEP_MB"):
            with scratch.zeroed((10,)):
                pass
    scratch.release()
