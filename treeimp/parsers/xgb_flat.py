"""XGBoost's trees gathered from the model's UBJSON bytes, all trees at once.

The per-tree reader (``xgb._read_tree``) decodes the whole document into Python
objects and then handles each tree on its own. Here
``kernels.ubjson_index.index_values`` locates every value of the document in one
pass, each per-node field of all trees is copied into one concatenated array
(``gather_numbers``), and the rest of the document (learner, objective, ...; small)
is decoded by the strict reader with the trees skipped. The arrays are the same as
the per-tree reader's, concatenated (``tests/test_xgb_flat.py`` compares them).

:func:`read_model` returns None whenever the document is not the plain layout this
reader gathers exactly, and the caller then takes the per-tree path, which handles
(or reports) everything: a document the index cannot walk, trees with missing,
repeated or untyped fields, fields whose length is not the tree's node count,
vector-leaf trees (``size_leaf_vector`` > 1), ``default_left`` or ``split_type``
values other than 0 and 1, and trees that keep nodes deleted by pruning (unreachable
from the root).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.structure import children_partitions
from ..kernels.ubjson_index import gather_bytes, index_values, key_ids
from .ubjson import MAX_DEPTH, read_ubjson

# number marker -> big-endian dtype
_DTYPES = {ord(m): np.dtype(dt) for m, dt in (("i", ">i1"), ("U", ">u1"), ("I", ">i2"),
                                              ("l", ">i4"), ("L", ">i8"), ("d", ">f4"),
                                              ("D", ">f8"))}
_INTEGERS = tuple(ord(m) for m in "iUIlL")
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
    value: np.ndarray  # (n_nodes, 1): the leaf value at leaves, 0 elsewhere
    categories: list  # per tree, {node: (codes, goes_left, default_left)}

    @property
    def n_trees(self) -> int:
        return self.offsets.shape[0] - 1


def read_model(data: bytes):
    """``(document, FlatTrees)`` of an XGBoost UBJSON model (the document's ``trees``
    list is :data:`ubjson.SKIPPED`), or None when the per-tree path must read it (see
    the module docstring)."""
    buf = np.frombuffer(data, np.uint8)
    status, marker, elem, start, count, parent, key_start, key_len, end = index_values(
        buf, MAX_DEPTH)
    if status != 0 or marker.size == 0 or marker[0] != _OBJECT:
        return None
    table = _Table(buf, marker, elem, start, count, parent, key_start, key_len)
    model_row = table.find_model()
    if model_row is None:
        return None
    members = np.flatnonzero(parent == model_row)
    ids = table.ids(members, ("trees",) + _MODEL_LISTS)
    rows = [members[ids == j] for j in range(1 + len(_MODEL_LISTS))]
    if rows[0].size != 1 or marker[rows[0][0]] != ord("[") or elem[rows[0][0]]:
        return None
    trees_row = int(rows[0][0])
    flat = _gather_trees(table, trees_row)
    if flat is None:
        return None
    skip = {int(start[trees_row]): int(end[trees_row])}
    lists = {}
    for name, found in zip(_MODEL_LISTS, rows[1:]):
        values = table.integer_list(found)
        if values is not None:
            r = int(found[0])
            skip[int(start[r])] = int(end[r])
            lists[name] = values
    doc = read_ubjson(data, skip=skip)
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
        encoded = [k.encode() for k in keys]
        offsets = np.zeros(len(keys) + 1, np.int64)
        np.cumsum([len(k) for k in encoded], out=offsets[1:])
        return key_ids(self.buf, rows, self.key_start, self.key_len,
                       np.frombuffer(b"".join(encoded), np.uint8), offsets)

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

    def integer_list(self, rows):
        """The values of the array at ``rows`` (exactly one row) as an int64 array
        when it is an untyped array of integers, else None."""
        if rows.size != 1 or self.marker[rows[0]] != ord("[") or self.elem[rows[0]]:
            return None
        items = np.flatnonzero(self.parent == rows[0])
        markers = self.marker[items]
        out = np.empty(items.size, np.int64)
        for m in np.unique(markers).tolist():
            if m not in _INTEGERS:
                return None
            sel = markers == m
            dtype = _DTYPES[m]
            raw = gather_bytes(self.buf, self.start[items[sel]],
                               np.ones(int(sel.sum()), np.int64), dtype.itemsize)
            out[sel] = raw.view(dtype)
        return out


def _gather_trees(table, trees_row):
    trees = np.flatnonzero(table.parent == trees_row)
    n_trees = trees.size
    if n_trees == 0 or np.any(table.marker[trees] != _OBJECT):
        return None
    tree_of = np.full(table.parent.size + 1, -1, np.int64)  # index -1: no parent
    tree_of[trees] = np.arange(n_trees)
    members = np.flatnonzero(tree_of[table.parent] >= 0)
    keys = tuple(k for k, _, _ in _NODE_KEYS) + _CATEGORY_KEYS + ("tree_param",)
    ids = table.ids(members, keys)
    every_tree = np.arange(n_trees)

    def one_per_tree(key):
        rows = members[ids == keys.index(key)]
        if rows.size != n_trees or np.any(tree_of[table.parent[rows]] != every_tree):
            return None
        return rows

    out = {}
    sizes = None
    for key, name, dtype in _NODE_KEYS + tuple((k, k, np.int64) for k in _CATEGORY_KEYS):
        rows = one_per_tree(key)
        if rows is None:
            return None
        elem = table.elem[rows]
        if elem[0] == 0 or np.any(elem != elem[0]):
            return None  # untyped, or typed differently from tree to tree
        big = _DTYPES[int(elem[0])]
        counts = table.count[rows]
        values = gather_bytes(table.buf, table.start[rows], counts, big.itemsize).view(big)
        if name in _FLAGS and np.any((values != 0) & (values != 1)):
            return None  # the per-tree path judges flags other than 0 / 1
        out[name] = values.astype(dtype)
        if key in _CATEGORY_KEYS:
            out[name + "_counts"] = counts
        elif sizes is None:
            sizes = counts
        elif not np.array_equal(counts, sizes):
            return None  # a field's length is not the node count (or a vector leaf)
    n_sets = out["categories_nodes_counts"]
    if np.any(sizes == 0) or not _single_output(table, one_per_tree("tree_param")) \
            or not np.array_equal(n_sets, out["categories_segments_counts"]) \
            or not np.array_equal(n_sets, out["categories_sizes_counts"]):
        return None
    offsets = np.zeros(n_trees + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    left, right = out["left"], out["right"]
    if not np.all(children_partitions(offsets, left, right)):
        return None  # pruned nodes to drop (or a corrupt tree to report)
    leaf = left < 0
    flat = FlatTrees(
        offsets=offsets, left=left, right=right, feature=out["feature"],
        cond=out["cond"], default_left=out["default_left"], split_type=out["split_type"],
        hess=out["hess"], gain=out["gain"], base_weights=out["base_weights"][:, None],
        value=np.where(leaf, out["cond"], np.float32(0.0))[:, None],
        categories=[{}] * n_trees)
    if out["categories_nodes"].size or flat.split_type.any():
        flat.categories = _tree_categories(flat, out)
    return flat


def _single_output(table, params):
    """Whether every tree's ``tree_param`` (an object, as the per-tree reader needs)
    gives ``size_leaf_vector`` "0" or "1", or none (read as 1)."""
    if params is None or np.any(table.marker[params] != _OBJECT):
        return False
    is_param = np.zeros(table.parent.size + 1, bool)
    is_param[params] = True
    inside = np.flatnonzero(is_param[table.parent])
    rows = inside[table.ids(inside, ("size_leaf_vector",)) == 0]
    if rows.size == 0:
        return True
    first = table.buf[np.minimum(table.start[rows], table.buf.size - 1)]
    return bool(np.all((table.marker[rows] == _STRING) & (table.count[rows] == 1)
                       & ((first == ord("0")) | (first == ord("1")))))


def _tree_categories(flat, out):
    """Per tree, its category sets as the per-tree reader builds them (trees without
    categorical splits: an empty dict)."""
    from .xgb import _categories

    ends = {k: np.concatenate([[0], np.cumsum(out[k + "_counts"])]) for k in _CATEGORY_KEYS}
    o = flat.offsets
    has_cat = np.add.reduceat(flat.split_type != 0, o[:-1]) > 0
    has_cat |= np.diff(ends["categories_nodes"]) > 0
    tables = [{}] * flat.n_trees
    for t in np.flatnonzero(has_cat).tolist():
        jt = {k: out[k][ends[k][t]:ends[k][t + 1]] for k in _CATEGORY_KEYS}
        r = {"left": flat.left[o[t]:o[t + 1]], "split_type": flat.split_type[o[t]:o[t + 1]]}
        tables[t] = _categories(jt, r, t)
    return tables
