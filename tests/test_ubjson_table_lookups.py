"""The UBJSON table's numpy lookups (``kernels.ubjson_index.integers_at`` and
``key_ids``) against plain Python decoding of the same bytes."""

import numpy as np
import pytest

from treeimp.kernels import ubjson_index

# marker: (payload bytes, signed)
INTEGERS = {ord("i"): (1, True), ord("U"): (1, False), ord("I"): (2, True),
            ord("l"): (4, True), ord("L"): (8, True)}


@pytest.mark.parametrize("seed", range(6))
def test_integers_at_equal_big_endian_decoding(seed):
    rng = np.random.default_rng(seed)
    n = 40
    data = rng.integers(0, 256, 8 * n + 8).astype(np.uint8)
    codes = np.array(sorted(INTEGERS))
    marker = codes[rng.integers(0, codes.size, n)].astype(np.uint8)
    start = rng.integers(0, 8 * n, n).astype(np.int64)
    rows = rng.permutation(n)[:int(rng.integers(0, n + 1))]
    ok, got = ubjson_index.integers_at(data, marker, start, rows)
    want = []
    for r in rows.tolist():
        size, signed = INTEGERS[int(marker[r])]
        want.append(int.from_bytes(bytes(data[start[r]:start[r] + size]), "big",
                                   signed=signed))
    assert ok and got.dtype == np.int64 and got.tolist() == want
    if rows.size:  # a row holding something else (a float32 marker)
        marker[rows[-1]] = ord("d")
        assert not ubjson_index.integers_at(data, marker, start, rows)[0]


@pytest.mark.parametrize("seed", range(6))
def test_key_ids_equal_byte_comparison(seed):
    rng = np.random.default_rng(10 + seed)
    words = [b"", b"id", b"model", b"trees", b"mode", b"tree_param", b"idx"]
    wanted = [words[i] for i in rng.permutation(len(words))[:4]]
    wanted.append(wanted[0])  # a repeated key: the first index is reported
    buf, key_start, key_len = b"", [], []
    for _ in range(50):
        w = words[int(rng.integers(0, len(words)))]
        if rng.random() < 0.2:  # a key of a wanted length with other bytes
            w = bytes(rng.integers(97, 123, len(w)).astype(np.uint8))
        key_start.append(len(buf))
        key_len.append(len(w))
        buf += bytes(rng.integers(0, 256, 3).astype(np.uint8)) + w
        key_start[-1] += 3
    data = np.frombuffer(buf, np.uint8)
    keys = np.frombuffer(b"".join(wanted), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in wanted])]).astype(np.int64)
    rows = rng.integers(0, 50, 30)
    got = ubjson_index.key_ids(data, rows, np.array(key_start, np.int64),
                               np.array(key_len, np.int64), keys, offsets)
    want = []
    for r in rows.tolist():
        k = buf[key_start[r]:key_start[r] + key_len[r]]
        want.append(wanted.index(k) if k in wanted else -1)
    assert got.tolist() == want
