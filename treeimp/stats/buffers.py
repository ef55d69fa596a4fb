"""A kept buffer for an Explainer's per-node statistics, reused by its next call.

The statistics of a large forest are big (100 deep trees, twenty blocks: hundreds of
MB) and live only during one ``explain`` call. Fresh memory of that size is slow at
first touch: the operating system maps and zeroes every page, and on a virtual machine
the host may have to back it first, with long stalls when it is shared; zero-filling a
reused buffer is much cheaper (measurements in benchmarks/README.md).

So each :class:`treeimp.Explainer` owns one :class:`BufferPool`: ``explain`` takes its
statistics buffer from it and hands it back when it has computed the importances (no
result keeps a view of it). One idle buffer is kept, if at most ``TREEIMP_KEEP_MB``
megabytes (default 1024; 0 keeps none); a call that finds it in use (another thread) or
too small allocates its own. The buffer is freed with the Explainer.
"""

from __future__ import annotations

import contextlib
import os
import threading

import numpy as np


def keep_limit_bytes() -> int:
    """Largest buffer kept between calls (``TREEIMP_KEEP_MB``, default 1024 MB)."""
    text = os.environ.get("TREEIMP_KEEP_MB", "1024")
    try:
        mb = float(text)
    except ValueError:
        raise ValueError(f"TREEIMP_KEEP_MB must be a number of megabytes, got {text!r}") from None
    if not mb >= 0:
        raise ValueError(f"TREEIMP_KEEP_MB must be >= 0, got {text!r}")
    return int(mb * 2**20)


class BufferPool:
    """One kept, reusable float64 buffer (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle = None  # the kept 1-D float64 buffer, not in use by any call

    @contextlib.contextmanager
    def zeroed(self, shape):
        """A zero-filled float64 array of ``shape`` for the duration of the ``with``
        block: the kept buffer when it is idle and large enough, else fresh memory;
        afterwards the buffer is kept for the next call (within the limit). Nothing may
        keep a view of the array beyond the block."""
        limit = keep_limit_bytes()
        size = int(np.prod(shape))
        with self._lock:
            buf, self._idle = self._idle, None
        if buf is None or buf.size < size:
            buf = None  # too small: let it go before allocating the larger one
            buf = np.zeros(size)
        else:
            buf[:size].fill(0.0)
        try:
            yield buf[:size].reshape(shape)
        finally:
            if buf.nbytes <= limit:
                with self._lock:
                    self._idle = buf

    def release(self):
        """Drop the kept buffer (its memory returns to the system)."""
        with self._lock:
            self._idle = None

    def __getstate__(self):  # a pickled Explainer carries no buffer
        return {}

    def __setstate__(self, state):
        self.__init__()
