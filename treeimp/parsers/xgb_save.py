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
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

_LOCK = threading.Lock()
_WORKER: list = []  # [executor] once started


def _forget_worker():
    """In a forked child: the parent's worker thread (and a lock it may hold) is not
    there; the child starts its own on first use."""
    global _LOCK
    _LOCK = threading.Lock()
    _WORKER.clear()


os.register_at_fork(after_in_child=_forget_worker)


def _executor():
    with _LOCK:
        if not _WORKER:
            _WORKER.append(ThreadPoolExecutor(1, thread_name_prefix="treeimp-xgboost-save"))
        return _WORKER[0]


def _save(booster, settings=None):
    """``settings``: the caller's XGBoost global configuration, which the worker takes
    (its verbosity, say) but for ``nthread=1`` (thread-local: the worker's only) where
    that configuration has ``nthread`` (xgboost >= 3.0)."""
    if settings is not None:
        import xgboost

        if "nthread" in settings:
            settings = {**settings, "nthread": 1}
        xgboost.set_config(**settings)
    # a bytearray of our own (XGBoost's buffer copied), which the parser reads in place
    return booster.save_raw("ubj"), json.loads(booster.save_config())


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
