"""The kept statistics buffer (treeimp/kernels/scratch.py): reused zero-filled, never
shared by two users at once, never aliased by a result."""

import copy

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp
from treeimp.kernels import scratch


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
    scratch.release()
    first = treeimp.explain(rf, X, y, oob=True, random_state=0)
    snapshot = _arrays(first)
    kept = scratch._idle
    assert kept is not None  # the statistics buffer was kept for the next call
    kept[:] = np.nan  # garbage where the next call's statistics will go
    second = treeimp.explain(rf, X, y, oob=True, random_state=0)
    assert scratch._idle is kept  # reused, not reallocated
    _assert_same(_arrays(second), snapshot)  # zero-filled before use
    _assert_same(_arrays(first), snapshot)  # the first result kept no view of it


def test_models_of_other_sizes_share_the_buffer_without_changing_results():
    X, y = _data(1)
    small = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    big = RandomForestRegressor(n_estimators=20, random_state=0).fit(X, X[:, 0])
    scratch.release()
    want_small = _arrays(treeimp.explain(small, X, y, oob=True, random_state=0))
    scratch.release()
    want_big = _arrays(treeimp.explain(big, X, X[:, 0], oob=True, random_state=0))
    # big first: the small model then uses a prefix of the big buffer, and back
    for model, target, want in ((big, X[:, 0], want_big), (small, y, want_small),
                                (big, X[:, 0], want_big)):
        _assert_same(_arrays(treeimp.explain(model, X, target, oob=True, random_state=0)),
                     want)


def test_nested_users_get_separate_buffers():
    scratch.release()
    with scratch.zeroed((3, 4)) as a:
        a[:] = 1.0
        with scratch.zeroed((3, 4)) as b:  # the kept one is in use: a fresh one
            assert not np.shares_memory(a, b)
            assert not b.any()
    with scratch.zeroed((2, 5)) as c:
        assert c.shape == (2, 5) and not c.any()


def test_keep_limit_from_the_environment(monkeypatch):
    scratch.release()
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
