"""Optional progress bar (tqdm) for long runs: off unless stderr is a terminal."""

from __future__ import annotations

import sys

# rows x trees above which a run takes more than a couple of seconds on one core
AUTO_WORK = 5e7


class _Silent:
    enabled = False

    def update(self, n=1):
        pass

    def close(self):
        pass


def progress_bar(progress, *, total, work, desc):
    """A bar with ``update(n)`` / ``close()``.

    ``progress``: None (automatic: on when stderr is a terminal, tqdm is installed and
    ``work`` exceeds AUTO_WORK), True (on; needs tqdm) or False (off).
    """
    if progress is None:
        progress = bool(work > AUTO_WORK and getattr(sys.stderr, "isatty", lambda: False)())
        if progress:
            try:
                import tqdm  # noqa: F401
            except ImportError:
                return _Silent()
    if progress is False:
        return _Silent()
    if progress is not True:
        raise TypeError(f"progress must be None, True or False, got {progress!r}")
    try:
        from tqdm.auto import tqdm
    except ImportError:
        raise ImportError("progress=True needs tqdm: pip install tqdm (or treeimp[progress])"
                          ) from None
    bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
    bar.enabled = True
    return bar
