"""Python threads for the serial kernels: tasks handed out one at a time.

The statistics and contribution kernels are serial numba functions compiled with
``nogil=True``; the glue splits a pass into tasks (statistic blocks, ranges of trees,
ranges of rows) whose writes never overlap, and :func:`run_tasks` runs them on as many
threads as numba's thread count of the calling thread (what
``inputs.threads.numba_threads`` sets from ``n_jobs``), the calling thread included. A
task is taken by whichever thread is free (dynamic scheduling: a thread slowed by
another process leaves the remaining tasks to the others). Numba's own parallel loops
(``prange``) compiled each loop body about three times more, which made the first call
in a fresh environment (empty numba cache) slow; these threads need no compilation.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba

_pool = None
_pool_size = 0
_pool_lock = threading.Lock()


def thread_count() -> int:
    """The threads a pass runs on: numba's thread count of the calling thread."""
    return numba.get_num_threads()


def run_tasks(task, n_tasks, n_threads=None):
    """Call ``task(i)`` for i in 0 .. n_tasks - 1 on ``n_threads`` threads (default
    :func:`thread_count`), the calling thread one of them; return when all are done.

    Tasks run in increasing order of i as threads become free. An exception raised by
    a task stops the handing out of further tasks; once the running ones have ended,
    the exception of the lowest failed task is raised again in the calling thread.
    """
    n_tasks = int(n_tasks)
    n_threads = min(thread_count() if n_threads is None else int(n_threads), n_tasks)
    if n_threads <= 1:
        for i in range(n_tasks):
            task(i)
        return
    # the task (and the arrays it holds) is reached through ``state`` only, which is
    # emptied before returning: a cancelled helper call may stay in the pool's queue for
    # a while, and must not keep the caller's arrays alive
    state = {"next": 0, "failed": {}, "task": task}
    del task
    lock = threading.Lock()

    def work():
        while True:
            with lock:
                i, run = state["next"], state["task"]
                if run is None or i >= n_tasks or state["failed"]:
                    return
                state["next"] = i + 1
            try:
                run(i)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller
                with lock:
                    state["failed"][i] = exc
                return
            finally:
                del run

    try:
        futures = [_executor(n_threads - 1).submit(work) for _ in range(n_threads - 1)]
        work()
        for f in futures:
            if not f.cancel():  # a helper that had not started yet has nothing left to do
                f.result()
    finally:
        with lock:
            state["task"] = None
    if state["failed"]:
        raise state["failed"][min(state["failed"])]


def _executor(n_helpers):
    """The process's pool of helper threads, grown to at least ``n_helpers``."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < n_helpers:
            old = _pool
            _pool_size = max(n_helpers, numba.config.NUMBA_NUM_THREADS - 1, 1)
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="treeimp")
            if old is not None:
                old.shutdown(wait=False)
        return _pool



def task_ranges(n_items, n_threads):
    """Bounds (n_tasks + 1,) of contiguous ranges of ``n_items`` work items (trees, row
    tasks) for ``n_threads`` threads: all items in one range for one thread, else about
    four ranges per thread (threads that finish early take more), at most one item
    each."""
    n_tasks = 1 if n_threads <= 1 else min(n_items, 4 * n_threads)
    n_tasks = max(n_tasks, 1)
    return [n_items * i // n_tasks for i in range(n_tasks + 1)]
