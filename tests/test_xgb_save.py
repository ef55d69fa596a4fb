"""The live XGBoost booster's bytes are asked for on a worker thread (parsers/xgb_save.py):
the same bytes and model as on the caller's thread, the user's XGBoost configuration left
alone, errors raised to the caller, and a forked child starting a worker of its own."""

import json
import multiprocessing
import threading

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import treeimp  # noqa: E402
from treeimp.parsers import xgb_save  # noqa: E402


@pytest.fixture(scope="module")
def booster():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + rng.normal(size=300)
    return xgb.train({"max_depth": 3, "eta": 0.3}, xgb.DMatrix(X, y), 10), X


def test_same_bytes_and_config_as_the_callers_thread(booster):
    bst, _ = booster
    raw, config = xgb_save.saved_model(bst)
    assert bytes(raw) == bytes(bst.save_raw("ubj"))
    assert config == json.loads(bst.save_config())


def test_parsed_model_predicts_as_xgboost(booster):
    bst, X = booster
    got = treeimp.parse(bst).predict_raw(X)
    want = bst.predict(xgb.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(got.ravel(), want, rtol=1e-6, atol=1e-6)


def test_callers_xgboost_configuration_is_left_alone(booster):
    bst, _ = booster
    before = xgb.get_config()
    treeimp.parse(bst)
    assert xgb.get_config() == before
    # the worker's own (thread-local) setting: one thread, where XGBoost's global
    # configuration has nthread (xgboost >= 3.0; 2.x has none)
    worker = xgb_save._executor().submit(xgb.get_config).result()
    if "nthread" in before:
        assert worker["nthread"] == 1
    else:
        assert "nthread" not in worker


def test_worker_takes_the_callers_verbosity(booster):
    bst, _ = booster
    with xgb.config_context(verbosity=0):
        xgb_save.saved_model(bst)
        seen = xgb_save._executor().submit(xgb.get_config).result()
    assert seen["verbosity"] == 0 and seen.get("nthread", 1) == 1
    xgb_save.saved_model(bst)
    assert xgb_save._executor().submit(xgb.get_config).result()["verbosity"] == 1


def test_error_on_the_worker_reaches_the_caller():
    with pytest.raises(ValueError, match="empty"):
        treeimp.parse(xgb.Booster())


def test_other_xgboost_error_is_not_called_unfitted(booster, monkeypatch):
    # an XGBoostError of a fitted booster (here one raised by its save) is reported with
    # XGBoost's reason, not as an empty booster
    bst, _ = booster

    def failing_save(*args, **kwargs):
        raise xgb.core.XGBoostError("[12:00:00] learner.cc:1: Check failed: disk full\n"
                                    "Stack trace:\n  [bt] (0) libxgboost.so")

    monkeypatch.setattr(xgb_save, "_save", failing_save)
    with pytest.raises(ValueError) as info:
        treeimp.parse(bst)
    message = str(info.value)
    assert "disk full" in message
    assert "empty" not in message and "unfitted" not in message
    assert "Stack trace" not in message


def test_concurrent_parses_agree(booster):
    bst, X = booster
    want = treeimp.parse(bst).predict_raw(X)
    out = [None] * 4

    def run(i):
        out[i] = treeimp.parse(bst).predict_raw(X)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got in out:
        np.testing.assert_array_equal(got, want)


def _child(bst, queue):
    # the bytes only: numba's and XGBoost's OpenMP pools are not usable after a fork
    queue.put(bytes(xgb_save.saved_model(bst)[0]))


def test_forked_child_starts_its_own_worker(booster):
    bst, _ = booster
    xgb_save.saved_model(bst)  # the parent's worker is running
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(bst, queue))
    child.start()
    try:
        got = queue.get(timeout=120)  # a reused parent worker (absent in the child) hangs
        child.join(timeout=60)
    finally:
        child.kill()
    assert child.exitcode == 0
    assert got == bytes(bst.save_raw("ubj"))


def test_read_in_place_gives_what_the_copied_bytes_give(booster):
    """read_saved_model's reader sees XGBoost's own buffer (no copy): the same bytes as
    save_raw, results that outlive the buffer (another booster's save overwrites it),
    and a copy of the bytes only when the reader returns None."""
    from treeimp.parsers.xgb_flat import read_model

    bst, X = booster
    seen = []
    got, raw, config = xgb_save.read_saved_model(bst, lambda b: seen.append(bytes(b)))
    assert got is None and bytes(raw) == seen[0] == bytes(bst.save_raw("ubj"))
    assert config == json.loads(bst.save_config())
    (doc, flat), raw, _ = xgb_save.read_saved_model(bst, read_model)
    assert raw is None
    other = xgb.train({"max_depth": 5}, xgb.DMatrix(X[:, ::-1], X[:, 1]), 30)
    xgb_save.read_saved_model(other, read_model)  # the worker's buffer is rewritten
    want_doc, want = read_model(bytes(bst.save_raw("ubj")))
    assert _same(doc, want_doc)
    for name, value in vars(want).items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(getattr(flat, name), value), name
    for a, b in zip(flat.ordered, want.ordered):
        assert np.array_equal(a, b)


def _same(a, b):
    """Documents equal value by value (numpy arrays by their elements and type)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k])
                                                                    for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b
