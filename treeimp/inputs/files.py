"""Paths that must name regular files: symlinks are followed, and what is not a regular
file is refused before it is read.

A device (``/dev/zero`` never ends), a FIFO or a socket (reading blocks until a writer
comes) behind a file name would make a reader hang or grow without bound; a symlink
loop would be reported by ``os.path.exists`` as a missing file. Every failure is a
ValueError naming the path and what it is.
"""

from __future__ import annotations

import errno
import os
import stat


def kind_of(mode):
    """What a file of ``mode`` (``st_mode``) is, in words (e.g. "a FIFO (named pipe)")."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _missing(name, what, exc):
    """The ValueError for an ``os.stat`` / ``os.open`` failure on ``name``, or None when
    the failure is not about the path (e.g. permission denied: the OSError stands)."""
    if exc.errno == errno.ELOOP:
        return ValueError(f"{what} {name!r} is a symlink loop (a chain of symbolic links "
                          "that leads back to itself), not a file")
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if os.path.islink(name):
            return ValueError(f"{what} {name!r} is a symbolic link to "
                              f"{os.readlink(name)!r}, which does not exist")
        return ValueError(f"{what} {name!r} does not exist")
    return None


def stat_path(name, what):
    """``os.stat(name)`` (symlinks followed); a missing path, a dangling symlink and a
    symlink loop are ValueErrors saying which, with ``what`` ("data file") in front."""
    try:
        return os.stat(name)
    except OSError as exc:
        err = _missing(name, what, exc)
        if err is None:
            raise
        raise err from None


def require_regular(name, what, hint=""):
    """The stat of ``name``, which must be a regular file (symlinks followed)."""
    st = stat_path(name, what)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what} {name!r} is {kind_of(st.st_mode)}, not a regular file"
                         + (f"; {hint}" if hint else ""))
    return st


def open_regular(name, what, hint=""):
    """``name`` opened for binary reading, after checking on the open descriptor that it
    is a regular file (so it cannot be swapped for a FIFO in between). The open does not
    block on a FIFO (O_NONBLOCK, which changes nothing for a regular file)."""
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        err = _missing(name, what, exc)
        if err is None:
            raise
        raise err from None
    fh = os.fdopen(fd, "rb")
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        fh.close()
        raise ValueError(f"{what} {name!r} is {kind_of(mode)}, not a regular file"
                         + (f"; {hint}" if hint else ""))
    return fh
