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
