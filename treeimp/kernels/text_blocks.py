"""LightGBM's tree blocks located in one pass over the model text's bytes.

The trees of a LightGBM model text are blocks of lines::

    Tree=0
    num_leaves=3
    split_feature=0 2
    ...
    <blank>
    Tree=1
    ...
    end of trees

``scan_blocks`` reads them in the layout LightGBM writes: line feeds alone end lines,
``Tree=t`` labels count up from 0 in plain digits, every other line of a block is
``key=value`` with a key from the caller's list, at most once per block, and no byte is
outside printable ASCII, tab and line feed. It records where each key's value is. Any
other text (another line end, an unknown key, a label out of order, a duplicate key, a
stray line) stops it with STATUS_OTHER, and the caller reads that text line by line in
Python, which names the problem.
"""

import numpy as np
from numba import njit

STATUS_OK = 0
STATUS_OTHER = 1  # not the layout above: left to the caller's line-by-line reader

_END = np.frombuffer(b"end of trees", dtype=np.uint8).copy()
_TREE = np.frombuffer(b"Tree=", dtype=np.uint8).copy()


@njit(cache=True)
def _line_end(buf, pos):
    """The offset of the line feed ending the line at ``pos`` (or len(buf)), and
    whether every byte before it is printable ASCII or a tab."""
    n = buf.shape[0]
    ok = True
    while pos < n:
        c = buf[pos]
        if c < 32 or c > 126:  # one test for the printable bytes, nearly all of them
            if c == 10:
                break
            if c != 9:
                ok = False
        pos += 1
    return pos, ok


@njit(cache=True)
def _equals(buf, a, b, word):
    """Whether ``buf[a:b]`` is ``word``."""
    if b - a != word.shape[0]:
        return False
    for i in range(word.shape[0]):
        if buf[a + i] != word[i]:
            return False
    return True


@njit(cache=True)
def _starts_with(buf, a, b, word):
    """Whether ``buf[a:b]`` starts with ``word``."""
    if b - a < word.shape[0]:
        return False
    for i in range(word.shape[0]):
        if buf[a + i] != word[i]:
            return False
    return True


@njit(cache=True)
def _label(buf, a, b):
    """The number of a ``Tree=`` label ``buf[a:b]`` written as LightGBM does (digits, no
    leading zero, below 10**15), else -1."""
    if b <= a or b - a > 15 or (buf[a] == 48 and b - a > 1):
        return -1
    value = 0
    for i in range(a, b):
        c = buf[i]
        if c < 48 or c > 57:
            return -1
        value = value * 10 + (c - 48)
    return value


@njit(cache=True)
def _key(buf, a, b, keys, key_offsets):
    """The index of ``buf[a:b]`` among the keys (``keys[key_offsets[k]:key_offsets[k +
    1]]``), else -1."""
    for k in range(key_offsets.shape[0] - 1):
        k0, k1 = key_offsets[k], key_offsets[k + 1]
        if k1 - k0 == b - a:
            same = True
            for i in range(k1 - k0):
                if buf[a + i] != keys[k0 + i]:
                    same = False
                    break
            if same:
                return k
    return -1


@njit(cache=True)
def scan_blocks(buf, pos, keys, key_offsets, spans, block_starts):
    """Locate the tree blocks of ``buf`` (uint8) from the ``Tree=0`` line at ``pos`` to
    the ``end of trees`` line.

    ``spans`` (max_blocks, n_keys, 2), filled with -1 by the caller, receives per block
    and key the value's [start, end) in ``buf`` (the bytes after ``=`` to the line's
    end); ``block_starts`` (max_blocks + 1) each block's first byte and, after the last
    block, the ``end of trees`` line's.

    Returns (status, n_blocks, end): STATUS_OK with the number of blocks and the offset
    after the ``end of trees`` line; or STATUS_OTHER (text of another layout, or more
    than max_blocks blocks).
    """
    n = buf.shape[0]
    max_blocks = spans.shape[0]
    t = 0
    while True:
        while pos < n and buf[pos] == 10:  # blank lines between blocks
            pos += 1
        e, ok = _line_end(buf, pos)
        if not ok or pos >= n:
            return STATUS_OTHER, t, pos
        if _equals(buf, pos, e, _END):
            block_starts[t] = pos
            return STATUS_OK, t, min(e + 1, n)
        if (t == max_blocks or not _starts_with(buf, pos, e, _TREE)
                or _label(buf, pos + 5, e) != t):
            return STATUS_OTHER, t, pos
        block_starts[t] = pos
        pos = e + 1
        while pos < n and buf[pos] != 10:  # the block's key=value lines
            e, ok = _line_end(buf, pos)
            if not ok:
                return STATUS_OTHER, t, pos
            if _starts_with(buf, pos, e, _TREE) or _equals(buf, pos, e, _END):
                break  # the next block or the end, without a blank line
            q = pos
            while q < e and buf[q] != 61:  # =
                q += 1
            k = _key(buf, pos, q, keys, key_offsets)
            if q == e or k < 0 or spans[t, k, 0] >= 0:
                return STATUS_OTHER, t, pos
            spans[t, k, 0] = q + 1
            spans[t, k, 1] = e
            pos = e + 1
        t += 1
