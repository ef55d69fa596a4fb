"""Thread-count control for numba kernels (scikit-learn's n_jobs convention)."""

import contextlib
import os

import numba


def resolve_n_jobs(n_jobs) -> int:
    """None -> all of numba's threads; -1 -> all cores; -2 -> all but one; k -> k."""
    max_threads = numba.config.NUMBA_NUM_THREADS
    if n_jobs is None:
        return max_threads
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    if n_jobs < 0:
        n_jobs = (os.cpu_count() or 1) + 1 + n_jobs
    return max(1, min(int(n_jobs), max_threads))


@contextlib.contextmanager
def numba_threads(n_jobs, *, dynamic=False):
    """Run the enclosed kernels on ``n_jobs`` threads, restoring the count after.

    ``dynamic``: hand out the iterations of their ``prange`` loops one at a time to
    whichever thread is free (numba's chunk size 1) instead of splitting them into
    equal shares up front. For loops of a few long, equal iterations (the staged
    kernel's statistic blocks) on a shared machine: when another process slows one
    core, the other thread takes over the remaining iterations instead of waiting
    (benchmarks/README.md has the measurements)."""
    previous = numba.get_num_threads()
    numba.set_num_threads(resolve_n_jobs(n_jobs))
    chunks = numba.set_parallel_chunksize(1) if dynamic else None
    try:
        yield
    finally:
        if dynamic:
            numba.set_parallel_chunksize(chunks)
        numba.set_num_threads(previous)


# the parameters in which tree-ensemble libraries take their thread count (XGBoost,
# LightGBM and scikit-learn: n_jobs; XGBoost's native name: nthread; CatBoost:
# thread_count)
THREAD_PARAMS = ("n_jobs", "nthread", "thread_count")


def estimator_threads(estimator):
    """The positive thread count ``estimator`` was given (its ``n_jobs``, ``nthread`` or
    ``thread_count`` parameter), or None where it has none or leaves the count to its
    library (None, 0 or negative values)."""
    get_params = getattr(estimator, "get_params", None)
    if get_params is None:
        return None
    params = get_params(deep=False)
    for name in THREAD_PARAMS:
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# threadpoolctl's controllers by the estimator's top-level package: building one scans
# the loaded shared libraries (milliseconds), limiting through it does not
_CONTROLLERS = {}


@contextlib.contextmanager
def fit_threads(estimator):
    """Fit ``estimator`` on the threads it was given: OpenMP limited to its positive
    ``n_jobs`` / ``nthread`` / ``thread_count`` for the enclosed code, nothing changed
    otherwise. XGBoost with ``n_jobs=1`` still sets its labels and weights on all of
    OpenMP's threads, whose idle threads then spin: with two cores the CPU time of
    XGBoost fits doubled (benchmarks/README.md, issue 32's timing section). The OpenMP
    libraries are found once per library of estimators (the first fit of one, after it
    was imported)."""
    threads = estimator_threads(estimator)
    if threads is None:
        yield
        return
    from threadpoolctl import ThreadpoolController

    package = type(estimator).__module__.split(".")[0]
    controller = _CONTROLLERS.get(package)
    if controller is None:
        controller = _CONTROLLERS[package] = ThreadpoolController()
    with controller.limit(limits=threads, user_api="openmp"):
        yield
