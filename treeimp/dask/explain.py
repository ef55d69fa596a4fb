"""Importances of held-out rows that are a dask collection, computed where they lie.

Every partition becomes node statistics on a worker (``Explainer.accumulate`` with the
partition's global row positions), the statistics are added in a tree reduction and
finalised on the client. Statistics are sums whose row blocks depend on each row's global
position only, so the result is the in-memory result on the same rows (to float
rounding), whatever the partitioning, the number of workers and the order in which
partitions finish; a partition recomputed after a worker is lost is added once, as dask
keeps one result per task. With a distributed Client every wait is bounded (``timeout``):
a run that cannot finish raises a TimeoutError naming what it waited for.
"""

from __future__ import annotations

import copy
import numbers
import os
import queue

import numpy as np

from ..inputs.threads import resolve_n_jobs
from ..measures import registry
from ..measures.defaults import DEFAULT_N_BLOCKS
from ..measures.registry import check_targets
from ..measures.screening import resolve_methods
from ..stats.blocks import BlockKey, block_key, check_n_blocks
from .partitions import split_partitions

# seconds the explain pass waits, with a distributed Client, for the next of its tasks to
# finish (a partition's statistics, a sum, a warm-up) before it gives up
TIMEOUT = 1800.0


def explain_dask(explainer, X, y=None, *, oob=False, methods=None,
                 sample_weight=None, base_margin=None, groups=None,
                 n_blocks=DEFAULT_N_BLOCKS, random_state=None, alpha=None, lam=None,
                 split_every=4, timeout=TIMEOUT):
    """:meth:`treeimp.Explainer.explain` of rows held in a dask array or DataFrame.

    ``treeimp.explain`` and ``Explainer.explain`` call this when X is a dask collection;
    every argument but ``split_every`` and ``timeout`` means what it means there.

    Parameters
    ----------
    explainer : treeimp.Explainer
    X : dask.array.Array (n_rows, n_features) or dask.dataframe.DataFrame
    y, sample_weight, base_margin : dask collections with X's partitions, or in-memory
        arrays of n_rows rows (see :func:`treeimp.dask.partitions.split_partitions`:
        dask DataFrames' partition lengths are computed first, in a pass of their own).
    oob : bool
        Out-of-bag rows of a bagged forest: X, y its training rows in training order.
    split_every : int, default 4
        Fan-in of the tree reduction: each task adds up to ``split_every`` partitions'
        statistics. A worker thread holds about ``split_every + 2`` statistics arrays at
        once (each ``explainer.accumulate``'s size, independent of the partition's
        rows: 36 MB for 500 XGBoost trees of depth 6, 195 MB for a forest of 100 trees
        with 400,000 nodes, 20 blocks), and at most ``split_every / (split_every - 1)``
        times every partition's statistics cross the network; 2 for the least memory.
    timeout : float or None, default 1800
        With a distributed Client: the longest wait, in seconds, for the next of the
        call's tasks (the warm-up, a partition's statistics, a sum of them) to finish.
        When it passes, the call's tasks are cancelled and a TimeoutError says what was
        waited for and how much had finished (a worker lost in a way dask does not
        recover from, or a cluster too loaded to make progress). None waits without a
        limit. A worker that dies is otherwise handled by dask: its tasks run again
        elsewhere (the result is unchanged), or, after
        ``distributed.scheduler.allowed-failures`` deaths, ``KilledWorker`` is raised.
        Not applied with dask's local schedulers (whose ``dask.compute`` cannot be left).

    Scheduling
    ----------
    With a ``distributed.Client`` active the Explainer is scattered to every worker
    once (``broadcast=True``) and every worker first runs a warm-up task on one row
    (numba's cached kernels loaded once per process, before the partitions arrive). The
    kernels' threads times the dask threads of the workers on a host stay within its
    cores: each partition's kernels run on ``max(1, cores // dask threads)`` threads
    (the smallest over hosts; at most the Explainer's own ``n_jobs`` when set). With
    dask's local schedulers the Explainer is one node of the graph: ``threads`` and
    ``processes`` divide the cores the same way, ``synchronous`` runs one partition at
    a time on the Explainer's ``n_jobs``.

    random_state None draws one key on the client for every partition (an int gives
    the blocks of the in-memory call with that int). No progress bar is shown (dask's
    own diagnostics follow the partitions).

    Returns
    -------
    Importances
    """
    import dask


    if isinstance(split_every, bool) or not isinstance(split_every, numbers.Integral) \
            or split_every < 2:
        raise ValueError(f"split_every must be an int >= 2, got {split_every!r}")
    if not isinstance(oob, (bool, np.bool_)):
        raise TypeError(f"oob must be True or False, got {oob!r}")
    if timeout is not None and (isinstance(timeout, bool)
                                or not isinstance(timeout, numbers.Real)
                                or not timeout > 0 or not np.isfinite(timeout)):
        raise ValueError(f"timeout must be a positive number of seconds or None, got "
                         f"{timeout!r}")
    methods = resolve_methods(methods, explainer.ensemble, alpha, lam)
    check_targets(methods, explainer.ensemble)
    parts = split_partitions(X, y, sample_weight=sample_weight, base_margin=base_margin)
    if not any(registry.needs_rows(m) for m in methods):
        return _mdi_only(explainer, parts, methods, groups, n_blocks)
    check_n_blocks(n_blocks, parts.n_rows)
    key = BlockKey(block_key(random_state))
    # per-row measures (contributions) are accumulated only when named
    extra = tuple(registry.row_sum_methods(methods))

    client = _active_client()
    worker_ex = _with_n_jobs(explainer, _kernel_threads(client, explainer.n_jobs))
    if client is not None:
        ex_ref = client.scatter(worker_ex, broadcast=True, hash=False)
        _warm_up(client, ex_ref, parts, oob, n_blocks, key, extra, timeout)
    else:
        ex_ref = dask.delayed(worker_ex, pure=False)  # one node of the graph
    tasks = [
        dask.delayed(_partition_stats, pure=True)(
            ex_ref, parts.X[i], _part(parts.y, i), _part(parts.sample_weight, i),
            _part(parts.base_margin, i), parts.rows(i), oob, n_blocks, key, extra)
        for i in range(parts.n_partitions)]
    if client is None:
        (total,) = dask.compute(tree_sum(tasks, split_every))
    else:
        # the partitions' futures mark progress (each is released once it has finished:
        # the sums that need it keep it); the total's future gives the result
        futures = client.compute([*tasks, tree_sum(tasks, split_every)])
        _wait_each(client, futures, timeout, "partition statistics or sums of them",
                  release=futures[:-1])
        total = futures[-1].result()
        futures[-1].release()
    return explainer.finalize(total, methods, alpha=alpha, lam=lam, groups=groups)


def tree_sum(items, split_every):
    """A dask.delayed sum of ``items`` in a tree of fan-in ``split_every``: the pairing
    depends on the items' order only, never on when they finish."""
    import dask

    level = list(items)
    while len(level) > 1:
        level = [dask.delayed(_add, pure=True)(*level[i:i + split_every])
                 for i in range(0, len(level), split_every)]
    return level[0]


def _add(*stats):
    total = stats[0]
    for s in stats[1:]:
        total = total + s
    return total


def _partition_stats(ex, X, y, sample_weight, base_margin, rows, oob, n_blocks, key,
                     extra):
    """Node statistics of one partition (runs on a worker)."""
    return ex.accumulate(X, y, rows=rows, oob=oob, sample_weight=sample_weight,
                         base_margin=base_margin, n_blocks=n_blocks, random_state=key,
                         methods=extra or None, progress=False)


def _part(values, i):
    return None if values is None else values[i]


def _mdi_only(explainer, parts, methods, groups, n_blocks):
    """Measures of the model alone (in-sample MDI): only the first row is read, to check
    X's columns and name the features as in memory."""
    import dask

    nonempty = np.flatnonzero(parts.lengths)
    if len(nonempty) == 0:
        raise ValueError("X has 0 rows; at least one row is needed")
    i = int(nonempty[0])
    (head,) = dask.compute(dask.delayed(_head, pure=True)(
        parts.X[i], _part(parts.y, i), _part(parts.sample_weight, i),
        _part(parts.base_margin, i)))
    X, y, w, b = head
    res = explainer.explain(X, y, methods=methods, groups=groups, n_blocks=n_blocks,
                            sample_weight=w, base_margin=b)
    res.n_rows = parts.n_rows  # the rows given, as in memory (none were routed)
    return res


# ----------------------------------------------------------------------- scheduling
def _active_client():
    """The distributed Client dask.compute would use now, or None (local schedulers)."""
    import dask.base

    get = dask.base.get_scheduler()
    owner = getattr(get, "__self__", None)
    if owner is not None and type(owner).__module__.startswith("distributed"):
        return owner
    return None


def _usable_cores():
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _kernel_threads(client, n_jobs):
    """Numba threads per partition so that kernel threads x dask threads per host stay
    within the host's cores (None: the Explainer's own n_jobs, one partition at a time)."""
    import dask
    import dask.base
    import dask.local

    if client is not None:
        info = client.scheduler_info(n_workers=-1)["workers"]
        cores = client.run(_usable_cores)
        threads_on = {}
        for w in info.values():
            threads_on[w["host"]] = threads_on.get(w["host"], 0) + int(w["nthreads"])
        per_worker = [max(1, cores[addr] // threads_on[w["host"]])
                      for addr, w in info.items() if addr in cores]
        share = min(per_worker) if per_worker else 1
    else:
        get = dask.base.get_scheduler()
        if get is dask.local.get_sync:
            return n_jobs
        share = max(1, _usable_cores() // int(dask.config.get("num_workers", None)
                                                  or _usable_cores()))
    if n_jobs is None:
        return share

    return min(share, resolve_n_jobs(n_jobs))


def _with_n_jobs(explainer, n_jobs):
    """The Explainer as the workers use it: a copy running its kernels on ``n_jobs``
    threads (the caller's Explainer is not changed)."""
    if n_jobs == explainer.n_jobs:
        return explainer
    clone = copy.copy(explainer)
    clone.n_jobs = n_jobs
    return clone


def _warm_up(client, ex_ref, parts, oob, n_blocks, key, extra, timeout):
    """Accumulate one row on every worker first: numba's kernels are loaded (from the
    cache, or compiled) once per worker process before its partitions arrive, instead
    of by every thread that meets them first. The row is the first of the first
    non-empty partition, read once (its partition is read again by the explain pass).

    Each warm-up asks for its worker but may run on another: a task bound to one
    worker waits forever once that worker is gone (a restarted worker has a new
    address), while a warm-up run twice on one worker costs one row."""
    import dask

    i = int(np.flatnonzero(parts.lengths)[0])
    head = dask.delayed(_head, pure=True)(parts.X[i], _part(parts.y, i),
                                          _part(parts.sample_weight, i),
                                          _part(parts.base_margin, i))
    (row,) = client.compute([head])
    start = int(parts.starts[i])
    warm = [client.submit(_warm_up_task, ex_ref, row, start, oob, n_blocks, key, extra,
                          workers=[addr], allow_other_workers=True, pure=False)
            for addr in client.scheduler_info(n_workers=-1)["workers"]]
    _wait_each(client, [row, *warm], timeout, "the warm-up on one row per worker")
    client.gather(warm)
    row.release()
    for f in warm:
        f.release()


def _wait_each(client, futures, timeout, what, release=()):
    """Wait until every future has finished, at most ``timeout`` seconds (None: no
    limit) from one finishing to the next; the futures in ``release`` are released as
    they finish. An erred future raises its error; a wait that runs out cancels every
    future and raises TimeoutError naming ``what``."""
    finished = queue.Queue()
    for f in futures:
        f.add_done_callback(finished.put)
    release = {id(f) for f in release}  # one key may have two futures (one partition)
    count = 0
    while count < len(futures):
        try:
            f = finished.get(timeout=timeout)
        except queue.Empty:
            client.cancel(futures)
            workers = len(client.scheduler_info(n_workers=-1)["workers"])
            raise TimeoutError(
                f"treeimp waited {timeout:g} s for {what} on the Dask cluster and none "
                f"finished ({count} of {len(futures)} tasks had finished; the cluster has "
                f"{workers} workers): a worker may have been lost without its tasks being "
                "run elsewhere, or the cluster is too loaded to progress. The tasks were "
                "cancelled; treeimp.dask.explain.explain_dask(explainer, X, y, timeout=...) "
                "(seconds, or None for no limit) waits longer") from None
        count += 1
        if f.status == "error":
            try:
                f.result()  # raises the task's error
            finally:
                client.cancel(futures)
        if f.status == "cancelled":
            raise RuntimeError(f"a Dask task of {what} was cancelled before it finished "
                               f"({f.key})")
        if id(f) in release:
            f.release()


def _head(X, y, sample_weight, base_margin):
    """The first row of a partition and its companions."""
    def first(v):
        if v is None:
            return None
        return v.iloc[:1] if hasattr(v, "iloc") else v[:1]

    return first(X), first(y), first(sample_weight), first(base_margin)


def _warm_up_task(ex, row, start, oob, n_blocks, key, extra):
    X, y, w, b = row
    _partition_stats(ex, X, y, w, b, range(start, start + 1), oob, n_blocks, key, extra)
    return True
