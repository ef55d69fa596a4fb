"""Small model files of every format ``treeimp.load`` reads, and ways to damage them.

Used by ``tests/test_fuzz_readers.py`` (hypothesis, in CI) and by the standalone
``tests/fuzz/fuzz_models.py`` (many cases, each load in a worker subprocess).

:func:`build_seeds` trains tiny XGBoost, LightGBM and CatBoost models and saves them
(XGBoost as .json and .ubj). :func:`mutate` damages one file's bytes, either blindly
(bit flips, overwritten, inserted or deleted bytes, truncation) or knowing the format:
a number of the JSON document or of the LightGBM text replaced by an edge value (0,
-1, 2**31, 2**63 - 1, NaN, ...), an element dropped from or added to a list, a key
removed, a LightGBM line dropped or repeated, an integer field of the UBJSON bytes
overwritten. The structured mutations keep the file readable as JSON / UBJSON / text,
so that they reach the model parsers rather than stop at the syntax.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct

import numpy as np

# values written in place of a number: sizes, indices and offsets at and past every
# integer width, and floats that are not ordinary
EDGE_INTEGERS = (0, 1, -1, 2, 3, 7, 255, 256, 2**15, 2**31 - 1, 2**31, -(2**31), 2**32,
                 2**53 + 1, 2**62, 2**63 - 1, -(2**63), 2**64, 10**30)
EDGE_FLOATS = (0.0, -0.0, 0.5, -1.5, 1e-300, 1e30, -1e30, 3.5e38, 1e308, math.inf, -math.inf,
               math.nan)


# ---------------------------------------------------------------------- seed models
def _data(rng, n=120, p=4):
    X = rng.normal(size=(n, p))
    X[rng.random((n, p)) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(size=n) * 0.3
    return X, y


def build_seeds(folder, *, kinds=("xgboost", "lightgbm", "catboost")):
    """Train tiny models and save them in ``folder``; returns ``{name: path}``. Names
    start with the format (``xgb_json``, ``xgb_ubj``, ``lgbm``, ``cb``)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    X, y = _data(rng)
    yb = (y > 0).astype(int)
    yk = np.digitize(y, [-0.5, 0.5])
    out = {}
    if "xgboost" in kinds:
        import xgboost as xgb

        boosters = {
            "reg": xgb.train({"max_depth": 3, "nthread": 1}, xgb.DMatrix(X, y), 3),
            "bin": xgb.train({"max_depth": 2, "objective": "binary:logistic", "nthread": 1},
                             xgb.DMatrix(X, yb), 3),
            "multi": xgb.train({"max_depth": 2, "objective": "multi:softprob", "num_class": 3,
                                "nthread": 1}, xgb.DMatrix(X, yk), 2),
        }
        Xc = X.copy()
        Xc[:, 3] = rng.integers(0, 5, size=len(X))
        dm = xgb.DMatrix(Xc, y + (Xc[:, 3] == 2), feature_types=["q", "q", "q", "c"],
                         enable_categorical=True)
        boosters["cat"] = xgb.train({"max_depth": 2, "nthread": 1, "max_cat_to_onehot": 1},
                                    dm, 3)
        for name, b in boosters.items():
            for ext in ("json", "ubj"):
                path = os.path.join(folder, f"xgb_{ext}_{name}.{ext}")
                b.save_model(path)
                out[f"xgb_{ext}_{name}"] = path
    if "lightgbm" in kinds:
        import lightgbm as lgb

        common = {"num_leaves": 5, "min_data_in_leaf": 5, "verbose": -1, "num_threads": 1}
        models = {
            "reg": lgb.train(common, lgb.Dataset(X, y), 3),
            "multi": lgb.train({**common, "objective": "multiclass", "num_class": 3},
                               lgb.Dataset(X, yk), 2),
        }
        Xc = X.copy()
        Xc[:, 3] = rng.integers(0, 6, size=len(X))
        models["cat"] = lgb.train({**common, "min_data_per_group": 5, "cat_smooth": 1},
                                  lgb.Dataset(Xc, y + (Xc[:, 3] == 2), categorical_feature=[3]),
                                  3)
        for name, m in models.items():
            path = os.path.join(folder, f"lgbm_{name}.txt")
            m.save_model(path)
            out[f"lgbm_{name}"] = path
    if "catboost" in kinds:
        from catboost import CatBoostClassifier, CatBoostRegressor

        common = dict(iterations=3, depth=2, random_seed=0, verbose=0,
                      allow_writing_files=False, thread_count=1)
        models = {
            "reg": CatBoostRegressor(**common).fit(X, y),
            "bin": CatBoostClassifier(**common).fit(X, yb),
            "dw": CatBoostRegressor(**common, grow_policy="Depthwise").fit(X, y),
        }
        for name, m in models.items():
            path = os.path.join(folder, f"cb_{name}.json")
            m.save_model(path, format="json")
            out[f"cb_{name}"] = path
    return out


def fmt_of(name):
    """'xgb_json', 'xgb_ubj', 'lgbm' or 'cb' of a seed name."""
    for f in ("xgb_json", "xgb_ubj", "lgbm", "cb"):
        if name.startswith(f):
            return f
    raise ValueError(name)


# ---------------------------------------------------------------------- UBJSON writing
# how XGBoost types its arrays, by key ("" for an untyped, counted array); other
# lists: int32 / int64 / float32 by their values, untyped when mixed or empty
_XGB_ARRAYS = {"categories": "l", "categories_nodes": "l", "categories_segments": "L",
               "categories_sizes": "L", "left_children": "l", "right_children": "l",
               "split_indices": "l", "parents": "l", "feature_segments": "l",
               "sorted_idx": "l", "default_left": "U", "split_type": "U",
               "base_weights": "d", "split_conditions": "d", "loss_changes": "d",
               "sum_hessian": "d", "leaf_weights": "d", "version": "", "tree_info": "",
               "iteration_indptr": "", "enc": ""}
_PACK = {"U": ">B", "l": ">i", "L": ">q", "d": ">f4"}


def ubjson(value) -> bytes:
    """UBJSON bytes of a JSON-like value, laid out as XGBoost writes it: int64 lengths,
    numeric arrays typed per key as XGBoost types them (``_XGB_ARRAYS``)."""
    out = bytearray()
    _put(out, value)
    return bytes(out)


def _put_len(out, n):
    out += b"L" + struct.pack(">q", n)


def _typed(out, v, t):
    """A typed array of marker t, or None when a value does not fit t."""
    if t == "d":
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            return None
        out += b"[$d#"
        _put_len(out, len(v))
        with np.errstate(over="ignore"):
            out += np.asarray(v, ">f4").tobytes()
        return out
    lo, hi = {"U": (0, 256), "l": (-(2**31), 2**31), "L": (-(2**63), 2**63)}[t]
    if not all(type(x) is int and lo <= x < hi for x in v):
        return None
    out += b"[$" + t.encode() + b"#"
    _put_len(out, len(v))
    out += struct.pack(">" + _PACK[t][1] * len(v), *v)
    return out


def _put(out, v, key=None):
    if v is None:
        out += b"Z"
    elif v is True:
        out += b"T"
    elif v is False:
        out += b"F"
    elif isinstance(v, int):
        if -(2**63) <= v < 2**63:
            out += b"L" + struct.pack(">q", v)
        else:
            s = str(v).encode()
            out += b"H"
            _put_len(out, len(s))
            out += s
    elif isinstance(v, float):
        out += b"D" + struct.pack(">d", v)
    elif isinstance(v, str):
        s = v.encode("utf-8", "surrogatepass")
        out += b"S"
        _put_len(out, len(s))
        out += s
    elif isinstance(v, dict):
        out += b"{"
        for k, x in v.items():
            s = str(k).encode()
            _put_len(out, len(s))
            out += s
            _put(out, x, str(k))
        out += b"}"
    elif isinstance(v, list):
        t = _XGB_ARRAYS.get(key)
        if t is None and v and all(type(x) is int for x in v):
            t = "l" if all(-(2**31) <= x < 2**31 for x in v) else "L"
        elif t is None and v and all(type(x) is float for x in v):
            t = "d"
        if t and _typed(out, v, t) is not None:
            return
        out += b"[#"
        _put_len(out, len(v))
        for x in v:
            _put(out, x)
    else:
        raise TypeError(type(v))


def ubjson_document(data: bytes):
    """The document of XGBoost UBJSON bytes as plain JSON values (lists, not arrays)."""
    from treeimp.parsers.ubjson import read_ubjson

    def plain(v):
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, np.ndarray):
            return v.tolist()
        return v

    return plain(read_ubjson(data))


# ---------------------------------------------------------------------- mutations
def _edge_number(rng, old):
    if isinstance(old, float) or rng.random() < 0.3:
        pick = rng.integers(len(EDGE_FLOATS) + 2)
        if pick >= len(EDGE_FLOATS):
            return float(old) * float(rng.choice([-1.0, 2.0, 1e6, 1e-6])) if isinstance(
                old, (int, float)) else 1.0
        return EDGE_FLOATS[pick]
    pick = rng.integers(len(EDGE_INTEGERS) + 3)
    if pick >= len(EDGE_INTEGERS):
        base = old if isinstance(old, int) else 0
        return base + int(rng.integers(-3, 4))  # Python ints: no overflow
    v = EDGE_INTEGERS[pick]
    return -v if rng.random() < 0.2 else v


def _containers(doc):
    """Every (container, key or index) pair of a JSON document."""
    out = []
    stack = [doc]
    while stack:
        c = stack.pop()
        items = c.items() if isinstance(c, dict) else enumerate(c)
        for k, v in items:
            out.append((c, k))
            if isinstance(v, (dict, list)):
                stack.append(v)
    return out


def mutate_document(doc, rng, n_edits=1):
    """Edit a JSON document in place: numbers replaced by edge values, list elements
    dropped, repeated or added, keys removed, values replaced by another type."""
    for _ in range(n_edits):
        slots = _containers(doc)
        if not slots:
            return doc
        numbers = [s for s in slots if isinstance(s[0][s[1]], (int, float))
                   and not isinstance(s[0][s[1]], bool)]
        strings = [s for s in slots if isinstance(s[0][s[1]], str)]
        lists = [s for s in slots if isinstance(s[0][s[1]], list)]
        op = rng.integers(8)
        if op <= 2 and numbers:
            c, k = numbers[rng.integers(len(numbers))]
            c[k] = _edge_number(rng, c[k])
        elif op == 3 and strings:
            c, k = strings[rng.integers(len(strings))]
            s = c[k]
            m = re.search(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", s)
            if m:  # numbers inside strings (XGBoost's params, CatBoost's ...)
                new = _edge_number(rng, float(m.group()) if "." in m.group() else
                                   int(float(m.group())))
                c[k] = s[:m.start()] + repr(new).replace("inf", "Infinity") + s[m.end():]
            else:
                c[k] = s + rng.choice(["x", "", " ", "0"])
        elif op in (4, 5) and lists:
            c, k = lists[rng.integers(len(lists))]
            lst = c[k]
            if lst and rng.random() < 0.5:
                del lst[rng.integers(len(lst))]
            elif lst:
                lst.insert(rng.integers(len(lst) + 1), lst[rng.integers(len(lst))])
            else:
                lst.append(0)
        elif op == 6:
            c, k = slots[rng.integers(len(slots))]
            del c[k]
        else:
            c, k = slots[rng.integers(len(slots))]
            c[k] = [None, "", "0", [], {}, True, 1.5, -1][rng.integers(8)]
    return doc


_NUMBER = re.compile(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?")


def mutate_text_numbers(data: bytes, rng, n_edits=1) -> bytes:
    """Replace numbers of a text file (LightGBM, JSON) by edge values."""
    for _ in range(n_edits):
        spans = [m.span() for m in _NUMBER.finditer(data)]
        if not spans:
            return data
        a, b = spans[rng.integers(len(spans))]
        old = data[a:b]
        try:
            old_v = int(old) if re.fullmatch(rb"-?\d+", old) else float(old)
        except ValueError:
            old_v = 0
        new = _edge_number(rng, old_v)
        text = repr(new) if isinstance(new, float) else str(new)
        data = data[:a] + text.encode() + data[b:]
    return data


def mutate_lines(data: bytes, rng) -> bytes:
    """Drop, repeat or swap lines of a text file."""
    lines = data.split(b"\n")
    if len(lines) < 3:
        return data
    i, j = rng.integers(len(lines), size=2)
    op = rng.integers(4)
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[j])
    elif op == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:  # drop one value of a line of values
        parts = lines[i].split(b" ")
        if len(parts) > 1:
            del parts[rng.integers(len(parts))]
            lines[i] = b" ".join(parts)
    return b"\n".join(lines)


def mutate_ubjson_integers(data: bytes, rng) -> bytes:
    """Overwrite the payload of one integer marker (a length, count or value) of UBJSON
    bytes with an edge value of the same width."""
    buf = bytearray(data)
    widths = {ord("i"): 1, ord("U"): 1, ord("I"): 2, ord("l"): 4, ord("L"): 8}
    spots = [i for i in range(len(buf) - 1) if buf[i] in widths]
    if not spots:
        return data
    i = spots[rng.integers(len(spots))]
    w = widths[buf[i]]
    v = int(EDGE_INTEGERS[rng.integers(len(EDGE_INTEGERS))]) * int(rng.choice([1, -1]))
    payload = (v % (1 << (8 * w))).to_bytes(w, "big")
    buf[i + 1:i + 1 + w] = payload[:len(buf) - i - 1]
    return bytes(buf)


def mutate_bytes(data: bytes, rng) -> bytes:
    """Blind damage: bit flips, overwritten / inserted / deleted bytes, truncation."""
    buf = bytearray(data)
    if not buf:
        return bytes(rng.integers(0, 256, size=8, dtype=np.uint8))
    op = rng.integers(6)
    n = len(buf)
    if op == 0:
        for _ in range(int(rng.integers(1, 9))):
            i = int(rng.integers(n))
            buf[i] ^= 1 << int(rng.integers(8))
    elif op == 1:
        i = int(rng.integers(n))
        k = int(rng.integers(1, 17))
        buf[i:i + k] = rng.integers(0, 256, size=k, dtype=np.uint8).tobytes()
    elif op == 2:
        i = int(rng.integers(n + 1))
        buf[i:i] = rng.integers(0, 256, size=int(rng.integers(1, 17)), dtype=np.uint8).tobytes()
    elif op == 3:
        i = int(rng.integers(n))
        del buf[i:i + int(rng.integers(1, 65))]
    elif op == 4:
        del buf[int(rng.integers(1, n + 1)):]
    else:  # a chunk repeated elsewhere
        i, j = sorted(rng.integers(n, size=2).tolist())
        k = int(rng.integers(n + 1))
        buf[k:k] = buf[i:j + 1][:256]
    return bytes(buf)


def mutate(data: bytes, fmt: str, rng) -> tuple[bytes, str]:
    """One damaged version of a seed file's bytes: (bytes, what was done)."""
    r = rng.random()
    if r < 0.2:
        return mutate_bytes(data, rng), "bytes"
    n_edits = int(rng.integers(1, 4))
    if fmt == "lgbm":
        if r < 0.45:
            return mutate_lines(data, rng), "lines"
        return mutate_text_numbers(data, rng, n_edits), "numbers"
    if fmt == "xgb_ubj" and r < 0.4:
        return mutate_ubjson_integers(data, rng), "ubjson_integers"
    if fmt in ("xgb_json", "cb") and r < 0.35:
        return mutate_text_numbers(data, rng, n_edits), "numbers"
    doc = ubjson_document(data) if fmt == "xgb_ubj" else json.loads(data)
    mutate_document(doc, rng, n_edits)
    if fmt == "xgb_ubj":
        return ubjson(doc), "document"
    return json.dumps(doc).encode(), "document"
