"""A Dask worker lost in the middle of an explain: the in-memory result, or a clear
error, in bounded time; never a hang.

A cluster per test (2 worker processes under nannies, 1 thread each): a worker plugin
ends its process at the moment a chosen task starts executing (once per test, a file
marks that it happened), so the kill lands in the same place on a quiet or a loaded
machine. Every wait of the test is bounded (LIMIT).
"""

import os
import threading
import time

import numpy as np
import pytest

pytest.importorskip("distributed")
import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster, WorkerPlugin  # noqa: E402
from distributed.scheduler import KilledWorker  # noqa: E402
from sklearn.ensemble import RandomForestRegressor  # noqa: E402

import treeimp  # noqa: E402
from treeimp.dask.explain import explain_dask  # noqa: E402

N = 4000
CHUNKS = 500
SEED = 5
# seconds any run may take here: a worker restarted on a loaded machine loads numba's
# cached kernels again (tens of seconds at worst); a hang would last forever
LIMIT = 180


class KillOnce(WorkerPlugin):
    """Ends the worker process when a task whose key starts with ``prefix`` starts
    executing, once across all workers (the first to create ``flag`` does it)."""

    def __init__(self, prefix, flag):
        self.prefix, self.flag = prefix, flag

    def transition(self, key, start, finish, **kwargs):
        name = key[0] if isinstance(key, tuple) else key
        if finish != "executing" or not str(name).startswith(self.prefix):
            return
        try:
            fd = os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(1)  # as a crash would: no goodbye to the scheduler


@pytest.fixture
def cluster():
    # one per test: a killed worker that its nanny is slow to restart (or never does)
    # leaves no trace in the next test
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      dashboard_address=None, memory_limit="2GiB") as c, Client(c) as client:
        yield c, client


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2 * N, 5))
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(size=2 * N)
    rf = RandomForestRegressor(n_estimators=6, max_depth=6, random_state=0)
    rf.fit(X[N:], y[N:])
    mem = treeimp.explain(rf, X[:N], y[:N], random_state=SEED)
    return rf, X[:N], y[:N], mem


def _explain_killing(client, tmp_path, prefix, case, **kwargs):
    """Explain the case's rows on the cluster while the first task named ``prefix``
    kills its worker; (result or error, seconds taken, whether a worker was killed)."""
    rf, X, y, _ = case
    flag = str(tmp_path / f"killed-{prefix}")
    name = f"kill-once-{prefix}-{time.monotonic_ns()}"
    client.register_plugin(KillOnce(prefix, flag), name=name)
    outcome = []

    def run():
        try:
            outcome.append(explain_dask(treeimp.Explainer(rf),
                                        da.from_array(X, chunks=(CHUNKS, -1)),
                                        da.from_array(y, chunks=CHUNKS), random_state=SEED,
                                        **kwargs))
        except Exception as e:  # the error is the outcome looked at
            outcome.append(e)

    # a daemon thread: a run that hangs fails the test without keeping pytest alive
    thread = threading.Thread(target=run, daemon=True)
    try:
        start = time.monotonic()
        thread.start()
        thread.join(LIMIT)
        if not outcome:
            raise AssertionError(f"the explain was still running after {LIMIT} s")
        return outcome[0], time.monotonic() - start, os.path.exists(flag)
    finally:
        client.unregister_worker_plugin(name)


def _assert_in_memory(res, mem):
    assert not isinstance(res, BaseException), repr(res)
    assert res.n_rows == mem.n_rows
    for attr in ("table", "stderr", "pvalues"):
        a, b = getattr(res, attr).to_numpy(), getattr(mem, attr).to_numpy()
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13 * np.nanmax(np.abs(b)),
                                   err_msg=attr)


def test_worker_killed_during_the_warm_up_gives_the_in_memory_result(cluster, case,
                                                                      tmp_path):
    # a warm-up bound to the killed worker's address waited forever (no-worker) before
    res, took, killed = _explain_killing(cluster[1], tmp_path, "_warm_up_task", case)
    assert killed and took < LIMIT
    _assert_in_memory(res, case[3])


def test_worker_killed_in_a_partition_gives_the_in_memory_result(cluster, case, tmp_path):
    res, took, killed = _explain_killing(cluster[1], tmp_path, "_partition_stats", case)
    assert killed and took < LIMIT
    _assert_in_memory(res, case[3])


def test_no_failures_allowed_gives_killed_worker_not_a_hang(cluster, case, tmp_path):
    scheduler = cluster[0].scheduler  # a LocalCluster's scheduler runs in this process
    allowed = scheduler.allowed_failures
    scheduler.allowed_failures = 0
    try:
        err, took, killed = _explain_killing(cluster[1], tmp_path, "_partition_stats", case)
    finally:
        scheduler.allowed_failures = allowed
    assert killed
    # names the task that died with the worker: the partition's, or its chunk's if the
    # worker was also running that
    assert isinstance(err, KilledWorker), repr(err)
    assert "workers died while running it" in str(err)
    assert took < LIMIT


def _gated(block, block_info=None, gate=None):
    """Partition 3's block waits until the file ``gate`` exists (at most LIMIT s)."""
    if block_info[0]["chunk-location"][0] == 3:
        end = time.monotonic() + LIMIT
        while not os.path.exists(gate) and time.monotonic() < end:
            time.sleep(0.05)
    return block


def test_a_run_that_cannot_progress_raises_timeout_error(cluster, case, tmp_path):
    rf, X, y, mem = case
    ex = treeimp.Explainer(rf)
    gate = str(tmp_path / "gate")
    Xd = da.from_array(X, chunks=(CHUNKS, -1)).map_blocks(_gated, gate=gate, dtype=float)
    yd = da.from_array(y, chunks=CHUNKS)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        explain_dask(ex, Xd, yd, timeout=0)
    # both workers hold the kernels first: the warm-up of the gated run takes no time
    _assert_in_memory(explain_dask(ex, da.from_array(X, chunks=(CHUNKS, -1)), yd,
                                   random_state=SEED), mem)
    start = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"waited 10 s for partition statistics or "
                                               r"sums of them .* none finished"):
            explain_dask(ex, Xd, yd, random_state=SEED, timeout=10)
        assert time.monotonic() - start < 10 + LIMIT / 3
    finally:
        open(gate, "w").close()  # the partition that waited ends (its task was cancelled)
    # the cluster is usable again, the gate open
    _assert_in_memory(explain_dask(ex, Xd, yd, random_state=SEED, timeout=LIMIT), mem)
