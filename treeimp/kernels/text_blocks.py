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

from numba import njit

STATUS_OK = 0
STATUS_OTHER = 1  # not the layout above: left to the caller's line-by-line reader


@njit(cache=True)
def scan_blocks(buf, pos, keys, key_offsets, spans, block_starts):
    """Locate the tree blocks of ``buf`` (uint8) from the ``Tree=0`` line at ``pos`` to
    the ``end of trees`` line.

    ``keys``: the key names' bytes one after another, key k at
    ``keys[key_offsets[k]:key_offsets[k + 1]]``. ``spans`` (max_blocks, n_keys, 2),
    filled with -1 by the caller, receives per block and key the value's [start, end)
    in ``buf`` (the bytes after ``=`` to the line's end); ``block_starts`` (max_blocks +
    1) each block's first byte and, after the last block, the ``end of trees`` line's.

    Returns (status, n_blocks, end): STATUS_OK with the number of blocks and the offset
    after the ``end of trees`` line; or STATUS_OTHER (text of another layout, or more
    than max_blocks blocks).

    One function, its helpers written out: each compiled function adds to the first
    call's compile time.
    """
    n = buf.shape[0]
    max_blocks = spans.shape[0]
    n_keys = key_offsets.shape[0] - 1
    t = 0
    in_block = False
    while True:
        if pos >= n:
            return STATUS_OTHER, t, pos
        if buf[pos] == 10:  # a blank line ends the block
            in_block = False
            pos += 1
            continue
        # the line: [pos, e), its bytes printable ASCII or tabs
        e = pos
        while e < n:
            c = buf[e]
            if c < 32 or c > 126:  # one test for the printable bytes, nearly all of them
                if c == 10:
                    break
                if c != 9:
                    return STATUS_OTHER, t, pos
            e += 1
        width = e - pos
        # "end of trees" (101 110 100 32 111 102 32 116 114 101 101 115)
        if (width == 12 and buf[pos] == 101 and buf[pos + 1] == 110 and buf[pos + 2] == 100
                and buf[pos + 3] == 32 and buf[pos + 4] == 111 and buf[pos + 5] == 102
                and buf[pos + 6] == 32 and buf[pos + 7] == 116 and buf[pos + 8] == 114
                and buf[pos + 9] == 101 and buf[pos + 10] == 101 and buf[pos + 11] == 115):
            block_starts[t] = pos
            return STATUS_OK, t, min(e + 1, n)
        # "Tree=" (84 114 101 101 61) and a label: the next block
        if (width >= 5 and buf[pos] == 84 and buf[pos + 1] == 114 and buf[pos + 2] == 101
                and buf[pos + 3] == 101 and buf[pos + 4] == 61):
            # the label as LightGBM writes it: digits, no leading zero, equal to t
            a = pos + 5
            if t == max_blocks or e == a or e - a > 15 or (buf[a] == 48 and e - a > 1):
                return STATUS_OTHER, t, pos
            label = 0
            for i in range(a, e):
                c = buf[i]
                if c < 48 or c > 57:
                    return STATUS_OTHER, t, pos
                label = label * 10 + (c - 48)
            if label != t:
                return STATUS_OTHER, t, pos
            block_starts[t] = pos
            t += 1
            in_block = True
            pos = e + 1
            continue
        if not in_block:  # a line between blocks that starts none
            return STATUS_OTHER, t, pos
        # key=value with a known key, once per block
        q = pos
        while q < e and buf[q] != 61:  # =
            q += 1
        k = -1
        for j in range(n_keys):
            k0 = key_offsets[j]
            if key_offsets[j + 1] - k0 == q - pos:
                same = True
                for i in range(q - pos):
                    if buf[pos + i] != keys[k0 + i]:
                        same = False
                        break
                if same:
                    k = j
                    break
        if q == e or k < 0 or spans[t - 1, k, 0] >= 0:
            return STATUS_OTHER, t, pos
        spans[t - 1, k, 0] = q + 1
        spans[t - 1, k, 1] = e
        pos = e + 1
