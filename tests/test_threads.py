"""The Python threads that run the serial kernels (``backends/threads.py``).

The statistics and contribution kernels are serial numba functions that release the
GIL; ``run_tasks`` hands their tasks (statistic blocks, ranges of trees or rows) to as
many threads as ``n_jobs`` asks for. Checked: every task runs once, on at most that
many threads; an exception raised inside a kernel in a helper thread reaches the
caller as the same exception; and the public calls give the same bits on one and two
threads (each task writes cells of its own, so the thread count cannot change a sum).
"""

import threading
import time

import numba
import numpy as np
import pytest
from numba import njit

import treeimp
from treeimp.backends.threads import run_tasks, task_ranges
from treeimp.inputs.threads import numba_threads

TWO_THREADS = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                                 reason="numba has fewer than two threads")


@njit(nogil=True)
def _fill_or_raise(out, i, bad):
    """out[i] = i * i; ValueError for task ``bad`` (from nopython code, without the GIL)."""
    if i == bad:
        raise ValueError("task failed inside the kernel")
    out[i] = i * i


def test_task_ranges_cover_every_item_once():
    for n_items in (1, 3, 7, 100):
        for threads in (1, 2, 3):
            bounds = task_ranges(n_items, threads)
            assert bounds[0] == 0 and bounds[-1] == n_items
            assert all(a < b for a, b in zip(bounds, bounds[1:]))
            assert len(bounds) - 1 == (1 if threads == 1 else min(n_items, 4 * threads))


@TWO_THREADS
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_run_tasks_runs_each_task_once_on_n_jobs_threads(n_jobs):
    seen = []
    lock = threading.Lock()

    def task(i):
        time.sleep(0.02)  # releases the GIL: a second thread takes the next task
        with lock:
            seen.append((i, threading.get_ident()))

    with numba_threads(n_jobs):
        run_tasks(task, 12)
    assert sorted(i for i, _ in seen) == list(range(12))
    assert len({ident for _, ident in seen}) == n_jobs


@TWO_THREADS
@pytest.mark.parametrize("bad", [0, 5, 11])
def test_kernel_error_in_a_thread_is_raised_in_the_caller(bad):
    """The kernel's ValueError, not a wrapper, whichever thread ran the failing task;
    the tasks handed out before it have run."""
    out = np.full(12, -1.0)
    with pytest.raises(ValueError, match="task failed inside the kernel") as direct:
        _fill_or_raise(out, bad, bad)
    with numba_threads(2), pytest.raises(ValueError) as threaded:
        run_tasks(lambda i: _fill_or_raise(out, i, bad), 12)
    assert type(threaded.value) is type(direct.value)
    assert str(threaded.value) == str(direct.value)
    done = np.flatnonzero(out >= 0)
    assert bad not in done
    np.testing.assert_array_equal(out[done], done.astype(float) ** 2)
    # the pool is usable after a failure
    out[:] = -1.0
    with numba_threads(2):
        run_tasks(lambda i: _fill_or_raise(out, i, -1), 12)
    np.testing.assert_array_equal(out, np.arange(12.0) ** 2)


@TWO_THREADS
def test_one_and_two_threads_give_the_same_bits():
    """explain (staged statistics of XGBoost, forest statistics, the fused measures) and
    contributions (TreeSHAP, Saabas) on one and two threads; the TreeSHAP values also
    add up to XGBoost's margins (an independent check that the threaded kernel ran
    every row)."""
    xgb = pytest.importorskip("xgboost")
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(3)
    X = rng.normal(size=(900, 5)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=900) > 0).astype(int)
    models = (xgb.XGBClassifier(n_estimators=12, max_depth=3, n_jobs=1).fit(X[:500], y[:500]),
              RandomForestClassifier(n_estimators=9, min_samples_leaf=3,
                                     random_state=0).fit(X[:500], y[:500]))
    for model in models:
        one = treeimp.explain(model, X[500:], y[500:], n_jobs=1, random_state=0)
        two = treeimp.explain(model, X[500:], y[500:], n_jobs=2, random_state=0)
        assert np.asarray(one.table).tobytes() == np.asarray(two.table).tobytes()
        assert np.asarray(one.stderr).tobytes() == np.asarray(two.stderr).tobytes()
        for method in ("shap", "saabas"):
            c1 = treeimp.contributions(model, X[500:], n_jobs=1, method=method)
            c2 = treeimp.contributions(model, X[500:], n_jobs=2, method=method)
            assert c1.values.tobytes() == c2.values.tobytes()
    booster = models[0].get_booster()
    margin = booster.predict(xgb.DMatrix(X[500:]), output_margin=True)
    c = treeimp.contributions(models[0], X[500:], n_jobs=2)
    total = c.values.sum(axis=1) + c.base_values
    np.testing.assert_allclose(total, margin, rtol=1e-5, atol=1e-5)


def test_run_tasks_keeps_no_reference_to_the_task():
    """Once run_tasks returns, nothing of it (a helper call cancelled before it started
    and still queued in the pool included) holds the task or the arrays it reaches: a
    pass over chunks of rows must not keep every chunk alive."""
    import weakref

    refs, alive = [], []
    for _ in range(20):
        alive.append(sum(ref() is not None for ref in refs))
        chunk = np.ones(1000)
        refs.append(weakref.ref(chunk))

        def task(i, chunk=chunk):
            chunk[i] += 1.0

        run_tasks(task, 2, 2)
        del task, chunk
    assert max(alive) == 0, alive


def _openmp_threads():
    """OpenMP's thread count now (the largest over the loaded OpenMP libraries)."""
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp"),
               default=0)


class _RecordsThreads:
    """A stand-in estimator that records OpenMP's thread count while it is fitted."""

    def __init__(self, n_jobs=None):
        self.n_jobs = n_jobs

    def get_params(self, deep=True):
        return {"n_jobs": self.n_jobs}

    def fit(self, X, y):
        self.seen_ = _openmp_threads()
        return self


def test_estimator_threads_reads_positive_thread_parameters():
    from sklearn.ensemble import RandomForestRegressor

    from treeimp.inputs.threads import estimator_threads

    assert estimator_threads(RandomForestRegressor(n_jobs=3)) == 3
    for n_jobs in (None, -1, 0):
        assert estimator_threads(RandomForestRegressor(n_jobs=n_jobs)) is None
    assert estimator_threads(object()) is None


def test_fit_threads_limits_openmp_to_the_estimators_n_jobs_and_restores_it():
    import sklearn.ensemble  # noqa: F401  (loads scikit-learn's OpenMP library)

    from treeimp.inputs.threads import fit_threads

    before = _openmp_threads()
    if before < 2:
        pytest.skip("OpenMP has fewer than two threads")
    one, free = _RecordsThreads(n_jobs=1), _RecordsThreads(n_jobs=None)
    for est in (one, free):
        with fit_threads(est):
            est.fit(None, None)
    assert one.seen_ == 1
    assert free.seen_ == before  # no thread count given: left to the library
    assert _openmp_threads() == before


def test_xgboost_fit_under_fit_threads_is_the_same_model():
    """Faithfulness: the thread limit changes no split of an XGBoost model fitted with
    n_jobs=1 (the same predictions to the bit)."""
    xgb = pytest.importorskip("xgboost")
    from treeimp.inputs.threads import fit_threads

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = X[:, 0] + rng.normal(size=300)
    params = dict(n_estimators=20, max_depth=3, subsample=0.8, random_state=0, n_jobs=1)
    free = xgb.XGBRegressor(**params).fit(X, y)
    limited = xgb.XGBRegressor(**params)
    with fit_threads(limited):
        limited.fit(X, y)
    np.testing.assert_array_equal(free.predict(X), limited.predict(X))
