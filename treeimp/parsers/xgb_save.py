"""A live XGBoost booster's saved bytes and configuration, asked for on a worker thread.

XGBoost serialises a model (``save_raw``) on the calling thread's global ``nthread``
threads (0: every core) of its own OpenMP runtime. After such a region that runtime's
workers keep spinning for milliseconds, and take a core from the numba kernels (another
OpenMP runtime) that an explain runs next (benchmarks/README.md, "XGBoost's
serialisation on a worker thread"). So the bytes are asked for on one worker thread
whose XGBoost configuration says ``nthread=1`` (XGBoost's global configuration is
thread-local): the serialisation runs on that thread alone and leaves no spinning
workers behind. XGBoost's global configuration has ``nthread`` since xgboost 3.0 (2.1's
has none); 2.x rejects it as an unknown global parameter, so there the worker takes the
caller's configuration unchanged.

Why not ``xgboost.config_context(nthread=1)`` on the caller's thread: leaving it does
not restore ``nthread=0`` (xgboost 3.2 ignores ``set_config(nthread=0)``), so the
setting would stay in the user's session. Why one lasting worker rather than a thread
per call: XGBoost keeps the saved bytes in a buffer of the thread that asks, so a new
thread would grow a new buffer on fresh memory every time, which costs more than the
save itself. The worker holds no data of ours; it is started on first use, again in a
forked child, and ends with the interpreter.

The parser reads the bytes on the worker, in place in that buffer
(:func:`read_saved_model`): ``save_raw`` would copy them into a fresh bytearray first
(1.3 MB for 300 trees of depth 6, allocated on the worker's malloc arena and freed on
the caller's, whose pages were often faulted in again on every parse).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_LOCK = threading.Lock()
_WORKER: list = []  # [executor] once started
# [settings] the worker last gave xgboost.set_config (written on the worker only): the
# same settings again are not set again (XGBoost's configuration is thread-local, and
# nothing but this module calls into XGBoost on the worker)
_APPLIED: list = []


def _forget_worker():
    """In a forked child: the parent's worker thread (and a lock it may hold) is not
    there; the child starts its own on first use."""
    global _LOCK
    _LOCK = threading.Lock()
    _WORKER.clear()
    _APPLIED.clear()


os.register_at_fork(after_in_child=_forget_worker)


def _executor():
    with _LOCK:
        if not _WORKER:
            _WORKER.append(ThreadPoolExecutor(1, thread_name_prefix="treeimp-xgboost-save"))
        return _WORKER[0]


def _save(booster, settings=None, reader=None):
    """``settings``: the caller's XGBoost global configuration, which the worker takes
    (its verbosity, say) but for ``nthread=1`` (thread-local: the worker's only) where
    that configuration has ``nthread`` (xgboost >= 3.0). ``reader``: see
    :func:`read_saved_model`."""
    if settings is not None:
        import xgboost

        if "nthread" in settings:
            settings = {**settings, "nthread": 1}
        if _APPLIED != [settings]:
            _APPLIED.clear()
            xgboost.set_config(**settings)
            _APPLIED.append(settings)
    config = json.loads(booster.save_config())
    if reader is None:
        # a bytearray of our own (XGBoost's buffer copied), which the parser reads in place
        return booster.save_raw("ubj"), config
    view = _saved_view(booster)
    if view is None:
        raw = booster.save_raw("ubj")
        got = reader(raw)
        return got, (raw if got is None else None), config
    got = reader(view)  # before this thread's next call into XGBoost
    return got, (bytearray(view) if got is None else None), config


# what save_raw("ubj") passes to XGBoost's C function
_UBJ_CONFIG = ctypes.c_char_p(b'{"format": "ubj"}')


def _saved_view(booster):
    """A read-only view of the bytes ``booster.save_raw("ubj")`` would copy, in the
    buffer XGBoost keeps for this thread (valid until the thread's next call into
    XGBoost); None when XGBoost's Python package does not hold the function as expected
    or the call fails (then ``save_raw`` asks again and raises XGBoost's error)."""
    from xgboost import core

    save = getattr(getattr(core, "_LIB", None), "XGBoosterSaveModelToBuffer", None)
    handle = getattr(booster, "handle", None)
    if save is None or not isinstance(handle, ctypes.c_void_p):
        return None
    length, data = ctypes.c_uint64(), ctypes.c_void_p()
    if save(handle, _UBJ_CONFIG, ctypes.byref(length), ctypes.byref(data)) != 0:
        return None
    n = length.value
    if not data.value or n == 0:
        return None
    view = np.frombuffer((ctypes.c_uint8 * n).from_address(data.value), np.uint8)
    view.setflags(write=False)
    return memoryview(view)


def saved_model(booster):
    """(``booster.save_raw("ubj")``, ``json.loads(booster.save_config())``), asked for on
    the worker thread under the caller's XGBoost configuration with ``nthread=1`` (where
    it has one); an error XGBoost raises there is raised here. While the interpreter
    shuts down (no new threads) they are asked for on the caller's thread."""
    import xgboost

    try:
        future = _executor().submit(_save, booster, xgboost.get_config())
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        return _save(booster)
    return future.result()


def read_saved_model(booster, reader):
    """``(reader(saved), raw, config)``: the booster's ``save_raw("ubj")`` bytes read by
    ``reader`` (e.g. ``xgb_flat.read_model``, which returns arrays and values of its
    own, no view of its input) on the worker thread, in place in XGBoost's buffer (no
    copy of the model's bytes), before the thread's next call into XGBoost can overwrite
    it; ``raw``: a copy of the bytes when ``reader`` returned None (for another reader),
    else None; ``config`` as in :func:`saved_model`. Errors as there."""
    import xgboost

    try:
        future = _executor().submit(_save, booster, xgboost.get_config(), reader)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        return _save(booster, reader=reader)
    return future.result()
