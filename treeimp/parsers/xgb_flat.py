"""XGBoost's trees gathered from the model's UBJSON bytes, all trees at once.

The per-tree reader (``xgb._read_tree``) decodes the whole document into Python
objects and then handles each tree on its own. Here the value table of the UBJSON
reader (``ubjson.index_ubjson``: every value of the document located in one pass) is
used directly: each per-node field of all trees is copied into one concatenated array
(``gather_numbers``), and only the rest of the document (learner, objective, ...;
small) is decoded (``ubjson.decode``), with the trees skipped. The arrays are the same
as the per-tree reader's, concatenated (``tests/test_xgb_flat.py`` compares them).

:func:`read_model` returns None whenever the document is not the plain layout this
reader gathers exactly, and the caller then takes the per-tree path, which handles
(or reports) everything: a document the reader refuses, trees with missing,
repeated or untyped fields, fields whose length is not the tree's node count,
integer fields stored as floats (the per-tree path checks that each is an integer),
vector-leaf trees (``size_leaf_vector`` > 1), ``default_left`` or ``split_type``
values other than 0 and 1, and trees that keep nodes deleted by pruning (unreachable
from the root) or whose children do not come after their parents (XGBoost numbers a
grown tree's nodes in the order it adds them; only pruning and regrowing can give
another order). The trees it takes are checked as ``TreeEnsemble.from_arrays`` checks
them (:func:`kernels.structure.ordered_trees`), once, in one compiled pass that also
gives what ``from_arrays`` computes next from the checked form, the post-order, the
internal nodes' values and the depths (:func:`kernels.structure.ordered_values_depths`):
all are passed on (``FlatTrees.ordered``, ``ordered_values``, ``filled``, ``weight``)
and not computed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..kernels.structure import ordered_values_depths
from ..kernels.ubjson_index import gather_numbers, integers_at, key_ids, member_rows
from ..model.ensemble import MAX_FEATURES
from .ubjson import decode, index_ubjson
from .xgb_categories import category_sets

# number marker -> big-endian dtype
_DTYPES = {ord(m): np.dtype(dt) for m, dt in (("i", ">i1"), ("U", ">u1"), ("I", ">i2"),
                                              ("l", ">i4"), ("L", ">i8"), ("d", ">f4"),
                                              ("D", ">f8"))}
# per-node fields: key -> (name, dtype as the per-tree reader converts it)
_NODE_KEYS = (
    ("left_children", "left", np.int64),
    ("right_children", "right", np.int64),
    ("split_indices", "feature", np.int64),
    ("split_conditions", "cond", np.float32),
    ("default_left", "default_left", np.bool_),
    ("split_type", "split_type", np.int64),
    ("sum_hessian", "hess", np.float32),
    ("loss_changes", "gain", np.float32),
    ("base_weights", "base_weights", np.float32),
)
_FLAGS = ("default_left", "split_type")  # 0 / 1 per node
_CATEGORY_KEYS = ("categories", "categories_nodes", "categories_segments",
                  "categories_sizes")
_TREES_PATHS = (("learner", "gradient_booster", "model"),
                ("learner", "gradient_booster", "gbtree", "model"))
# short integer lists next to the trees, decoded here too (one Python int each else)
_MODEL_LISTS = ("tree_info", "iteration_indptr")
_OBJECT = ord("{")
_STRING = ord("S")


@dataclass
class FlatTrees:
    """The per-node fields of all trees concatenated (tree t is
    ``offsets[t]:offsets[t + 1]``, child indices local, -1 at leaves), as
    ``xgb._read_tree`` reads them for a tree of one output."""

    offsets: np.ndarray
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    cond: np.ndarray
    default_left: np.ndarray
    split_type: np.ndarray
    hess: np.ndarray
    gain: np.ndarray
    base_weights: np.ndarray  # (n_nodes, 1)
    # (the per-tree reader's ``value``, the leaf values, is ``cond`` at the leaves)
    categories: list  # per tree, {node: (codes, goes_left, default_left)}
    # ``structure.ordered_trees`` of the trees for features in [0, MAX_FEATURES): the
    # int32 normal form (GLOBAL child indices, -1 everywhere at leaves) of left, right
    # and feature
    ordered: tuple
    # ``structure.order_values_depths`` of these trees: (post-order, deepest, shallowest)
    # with the values it fills (``filled``: (n_nodes, 1) float64, internal nodes
    # included) from the leaf values and ``weight`` (hess as float64)
    ordered_values: tuple
    filled: np.ndarray
    weight: np.ndarray

    @property
    def n_trees(self) -> int:
        return self.offsets.shape[0] - 1


def read_model(data: bytes):
    """``(document, FlatTrees)`` of an XGBoost UBJSON model (the document's ``trees``
    list is :data:`ubjson.SKIPPED`), or None when the per-tree path must read it (see
    the module docstring). ``data``: bytes, a bytearray or a memoryview of bytes (read
    in place; nothing returned is a view of it)."""
    index = index_ubjson(data)
    if not index.ok or index.marker[0] != _OBJECT:
        return None
    marker, elem = index.marker, index.elem
    table = _Table(index.buf, marker, elem, index.start, index.count, index.parent,
                   index.key_start, index.key_len)
    model_row = table.find_model()
    if model_row is None:
        return None
    found = table.members(np.array([model_row]), ("trees",) + _MODEL_LISTS)
    if found is None:
        return None
    trees_row = int(found[0, 0])
    if trees_row < 0 or marker[trees_row] != ord("[") or elem[trees_row]:
        return None
    flat = _gather_trees(table, trees_row)
    if flat is None:
        return None
    skip = [trees_row]
    lists = {}
    for name, r in zip(_MODEL_LISTS, found[0, 1:].tolist()):
        values = table.integer_list(r)
        if values is not None:
            skip.append(r)
            lists[name] = values
    doc = decode(index, skip)
    model = doc["learner"]["gradient_booster"]
    model = model["model"] if "model" in model else model["gbtree"]["model"]
    model.update(lists)
    return doc, flat


class _Table:
    """The value table of ``index_values`` with key lookups."""

    def __init__(self, buf, marker, elem, start, count, parent, key_start, key_len):
        self.buf, self.marker, self.elem = buf, marker, elem
        self.start, self.count, self.parent = start, count, parent
        self.key_start, self.key_len = key_start, key_len

    def ids(self, rows, keys):
        """Per row of ``rows``: the index of its key in ``keys``, -1 for other keys."""
        return key_ids(self.buf, rows, self.key_start, self.key_len, *_encoded(keys))

    def members(self, objects, keys):
        """Per object row of ``objects`` (ascending) and per key of ``keys``: the row of
        its member with that key (-1: none); None when an object repeats one."""
        # contiguous int64 (callers pass columns of earlier tables too): one compiled
        # member_rows
        objects = np.ascontiguousarray(objects, dtype=np.int64)
        ok, found = member_rows(self.buf, self.parent, self.key_start, self.key_len,
                                objects, *_encoded(keys))
        return found if ok else None

    def key(self, row):
        s = int(self.key_start[row])
        return bytes(self.buf[s:s + int(self.key_len[row])]).decode("utf-8", "replace")

    def find_model(self):
        """The row of the object holding the trees (``learner.gradient_booster.model``
        or, for DART, ``learner.gradient_booster.gbtree.model``): exactly one, an
        object; else None."""
        candidates = np.flatnonzero((self.key_len == 5) & (self.marker == _OBJECT))
        rows = [r for r in candidates[self.ids(candidates, ("model",)) == 0].tolist()
                if self._path(r) in _TREES_PATHS]
        return rows[0] if len(rows) == 1 else None

    def _path(self, r):
        path = []
        while r > 0:
            path.append(self.key(r))
            r = int(self.parent[r])
        return tuple(reversed(path)) if r == 0 else None

    def integer_list(self, row):
        """The values of the array at ``row`` as an int64 array when it is an untyped
        array of integers, else None (also for row -1: no such member)."""
        if row < 0 or self.marker[row] != ord("[") or self.elem[row]:
            return None
        ok, values = integers_at(self.buf, self.marker, self.start,
                                 np.flatnonzero(self.parent == row))
        return values if ok else None


@lru_cache(maxsize=16)
def _encoded(keys):
    """``keys`` (a tuple; the reader asks for a few fixed ones, so they are encoded
    once) as the kernels take them: their UTF-8 bytes concatenated (read-only) and the
    offsets of each (kept writeable, the type the kernels were compiled for; nothing
    writes them)."""
    encoded = [k.encode() for k in keys]
    offsets = np.zeros(len(keys) + 1, np.int64)
    np.cumsum([len(k) for k in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), offsets


# the gathered fields: the per-node ones, then the category lists
_FIELDS = tuple(k for k, _, _ in _NODE_KEYS) + _CATEGORY_KEYS
_N_NODE = len(_NODE_KEYS)
# the fields read as integers (the per-node ones of an integer dtype, the category lists)
_INTEGER_FIELDS = np.array([j for j in range(len(_FIELDS))
                            if j >= _N_NODE or np.dtype(_NODE_KEYS[j][2]).kind in "ib"])
_IS_FLOAT = np.zeros(256, np.bool_)  # per marker byte: a float32 or float64
_IS_FLOAT[[ord("d"), ord("D")]] = True


def _gather_trees(table, trees_row):
    trees = np.flatnonzero(table.parent == trees_row)
    n_trees = trees.size
    if n_trees == 0 or np.any(table.marker[trees] != _OBJECT):
        return None
    # the fields, tree_param and id (checked by _counts_agree) in one lookup
    found = table.members(trees, _FIELDS + ("tree_param", "id"))
    if found is None or np.any(found[:, :-1] < 0):
        return None  # a key repeated or missing in some tree
    rows = found[:, :len(_FIELDS)]
    elem = table.elem[rows]
    if np.any(elem[0] == 0) or np.any(elem != elem[0]):
        return None  # untyped, or typed differently from tree to tree
    if _IS_FLOAT[elem[0, _INTEGER_FIELDS]].any():
        return None  # integers stored as floats: the per-tree path checks each value
    counts = table.count[rows]
    sizes = counts[:, 0]
    if np.any(sizes == 0) or np.any(counts[:, 1:_N_NODE] != sizes[:, None]):
        return None  # a field's length is not the node count (or a vector leaf)
    cat = counts[:, _N_NODE:]
    if np.any(cat[:, 2:] != cat[:, 1:2]):  # categories_nodes, _segments, _sizes
        return None
    params = found[:, -2]  # tree_param: an object, as the per-tree reader needs
    if np.any(table.marker[params] != _OBJECT):
        return None
    found_params = table.members(params, ("size_leaf_vector", "num_nodes"))
    if found_params is None or not _single_output(table, found_params[:, 0]):
        return None
    if not _counts_agree(table, found[:, -1], found_params[:, 1], sizes):
        return None  # the per-tree path reports the disagreement
    types = [_DTYPES[m].newbyteorder("=") for m in elem[0].tolist()]
    itemsize = np.array([t.itemsize for t in types], np.int64)
    *words, at = gather_numbers(table.buf, table.start[rows], counts, itemsize)
    words = dict(zip((1, 2, 4, 8), words))  # the host's numbers, as unsigned integers
    out = {}
    for j, (key, t, n) in enumerate(zip(_FIELDS, types, counts.sum(axis=0).tolist())):
        values = words[t.itemsize][at[j]:at[j] + n].view(t)
        name, dtype = (_NODE_KEYS[j][1:] if j < _N_NODE else (key, np.int64))
        if name in _FLAGS and values.size and (values.min() < 0 or values.max() > 1):
            return None  # the per-tree path judges flags other than 0 / 1
        out[name] = values.astype(dtype, copy=False)
    offsets = np.zeros(n_trees + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    left, right = out["left"], out["right"]
    ok, *ordered, filled, weight, order, deepest, shallowest = ordered_values_depths(
        offsets, left, right, out["feature"], out["cond"], out["hess"], MAX_FEATURES)
    if not ok:
        return None  # pruned nodes to drop, another order or a corrupt tree to report
    flat = FlatTrees(
        offsets=offsets, left=left, right=right, feature=out["feature"],
        cond=out["cond"], default_left=out["default_left"], split_type=out["split_type"],
        hess=out["hess"], gain=out["gain"], base_weights=out["base_weights"][:, None],
        categories=[{}] * n_trees, ordered=tuple(ordered),
        ordered_values=(order, deepest, shallowest), filled=filled[:, None], weight=weight)
    if out["categories_nodes"].size or flat.split_type.any():
        for k, n in zip(_CATEGORY_KEYS, cat.T):
            out[k + "_counts"] = n
        flat.categories = _tree_categories(flat, out)
    return flat


def _single_output(table, found):
    """Whether every tree's ``tree_param.size_leaf_vector`` (its row in ``found``, -1:
    none) is "0" or "1", or not given (read as 1)."""
    rows = found[found >= 0]
    if rows.size == 0:
        return True
    first = table.buf[np.minimum(table.start[rows], table.buf.size - 1)]
    return bool(np.all((table.marker[rows] == _STRING) & (table.count[rows] == 1)
                       & ((first == ord("0")) | (first == ord("1")))))


def _counts_agree(table, ids, num_nodes, sizes):
    """Whether every tree's ``id`` (when it has one) is its position and its
    ``tree_param.num_nodes`` (when given) its node count, as XGBoost requires; ``ids``
    and ``num_nodes``: their rows per tree (-1: none)."""
    if np.any(ids >= 0):
        if np.any(ids < 0):
            return False
        ok, values = integers_at(table.buf, table.marker, table.start, ids)
        if not ok or np.any(values != np.arange(ids.size)):
            return False
    given = num_nodes >= 0
    rows = num_nodes[given]
    if rows.size == 0:
        return True
    if np.any(table.marker[rows] != _STRING):
        return False
    # every given count's text against the node count's decimal digits, all trees at
    # once: the texts' bytes gathered side by side and compared with the digits joined
    counts = sizes[given]  # each >= 1 (checked by the caller)
    lengths = 1 + (counts[:, None] >= _POWERS[1:]).sum(axis=1)  # decimal digits
    starts = table.start[rows].astype(np.int64)
    if np.any(table.count[rows] != lengths) or np.any(starts + lengths > table.buf.size):
        return False
    first = np.cumsum(lengths) - lengths  # each text's first byte in the joined digits
    place = np.arange(int(lengths.sum())) - np.repeat(first, lengths)  # 0: the first
    power = _POWERS[np.repeat(lengths, lengths) - 1 - place]
    digits = np.repeat(counts, lengths) // power % 10 + ord("0")
    return bool(np.array_equal(table.buf[np.repeat(starts, lengths) + place], digits))


_POWERS = 10 ** np.arange(19, dtype=np.int64)  # 1 .. 10**18


def _tree_categories(flat, out):
    """Per tree, its category sets as the per-tree reader builds them (trees without
    categorical splits: an empty dict)."""
    ends = {k: np.concatenate([[0], np.cumsum(out[k + "_counts"])]) for k in _CATEGORY_KEYS}
    o = flat.offsets
    has_cat = np.add.reduceat(flat.split_type != 0, o[:-1]) > 0
    has_cat |= np.diff(ends["categories_nodes"]) > 0
    tables = [{}] * flat.n_trees
    for t in np.flatnonzero(has_cat).tolist():
        jt = {k: out[k][ends[k][t]:ends[k][t + 1]] for k in _CATEGORY_KEYS}
        r = {"left": flat.left[o[t]:o[t + 1]], "split_type": flat.split_type[o[t]:o[t + 1]]}
        tables[t] = category_sets(jt, r, t)
    return tables
