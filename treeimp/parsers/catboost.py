"""CatBoost -> TreeEnsemble, from a CatBoost / CatBoostClassifier / CatBoostRegressor
object or from a model saved with ``save_model(path, format="json")``.

Both entry points read CatBoost's JSON model (a model object is saved to a temporary
JSON file), so an object and its file give the same trees; the file path never imports
catboost. Checked against catboost 1.2.10 and 1.2.7 (``tests/test_parse_catboost.py``,
fixtures in ``tests/fixtures/catboost-*``).

Trees. Symmetric (oblivious) trees, ``oblivious_trees[]``: ``splits`` in depth order,
``leaf_values`` (leaf-major, ``n_outputs`` per leaf), ``leaf_weights`` (the training
weight of each leaf). A row's CatBoost leaf index has the outcome of split d as bit d
(the first split is the lowest bit). A depth-D tree becomes a full binary tree of
2^(D+1) - 1 nodes in heap order (node i has children 2i + 1, outcome 0, and 2i + 2) with
the LAST split at the root: the node at depth d splits as split D - 1 - d, so the bits
of a leaf index read from the highest down are the path from the root and CatBoost's leaf
L is node 2^D - 1 + L (``ens.apply(X) - (2^D - 1) == model.calc_leaf_indexes(X)``). The
order matters for path-dependent TreeSHAP, whose cover ratios depend on which split is
above which: it is the order CatBoost's own ShapValues walks (``shap_values.cpp``), so
``contributions`` equals ``get_feature_importance(type="ShapValues")``. Non-symmetric
trees (grow_policy Depthwise / Lossguide), ``trees[]``: nested ``split`` / ``left`` / ``right``
with ``value`` and ``weight`` at leaves; nodes are numbered in preorder. CatBoost numbers
the leaves of such a tree in the order it stores them: in preorder, except that a node
with exactly ONE leaf child keeps that leaf with itself, so the leaf is numbered before
the sibling's subtree (a right leaf can come before leaves on its left).
:func:`catboost_leaf_ids` gives every node's CatBoost leaf index (symmetric trees too).

Routing (CatBoost's binarisation, float32): a FloatFeature split sends x to outcome 1
(right) when ``float32(x) > border``; NaN goes by the feature's ``nan_value_treatment``:
AsFalse (nan_mode Min) left, AsTrue (nan_mode Max) right, AsIs (features that had no NaN
in training, and nan_mode Forbidden) left, as a comparison with NaN is false. A
OneHotFeature split sends a category right when CatBoost's hash of its text equals the
split's ``value`` (``parsers/catboost_hash.py``); every other category, unseen or
missing, goes left. Users pass the raw categories (strings, integers, pandas
'category' labels); the ensemble hashes them (``hashed_features``) and looks the hashes
up in a table of the hashes the model splits on (``category_values``).

Outputs. Raw prediction = scale * (sum of leaf values) + bias (``scale_and_bias``):
``tree_scale`` = scale, ``base_score`` = bias. MultiClass / MultiClassOneVsAll trees
have one value per class at every leaf: each becomes one normal-form tree per class
(``output`` k, all in the boosting round of their CatBoost tree), as XGBoost's softmax
trees are. ``leaf_weights`` are the node weights (internal nodes: the sums).

In-sample importance (``mdi``): CatBoost stores no split gains. Each split's gain is the
change of the prediction values CatBoost's own ``PredictionValuesChange`` importance
measures: for a symmetric tree, the sum over the pairs of leaves that differ only in
split d's outcome of w1 (v1 - a)^2 + w2 (v2 - a)^2, a the weight-mean of the pair
(pairs with an empty leaf skipped), credited to the node at depth d above the pair; for
a non-symmetric node W_l |v_l - v_m|^2 + W_r |v_r - v_m|^2 with v the weight-mean
values. Values are on the margin scale (times ``scale``). Normalised, the mdi column of a
symmetric model equals ``model.get_feature_importance()``.

Target-statistic (CTR) splits (``OnlineCtr``) compare a statistic of CatBoost's hashed
counter tables, which treeimp does not evaluate. A model object with such splits is
routed by CatBoost's own leaf indices (``calc_leaf_indexes``; a
:class:`treeimp.model.leaf_router.LeafRouter` on the ensemble), each CTR node credited to the
first categorical feature of its statistic (TreeSHAP contributions share a statistic of
several categorical features equally among them, as CatBoost's ShapValues does: the
router's ``shap_feature`` / ``shap_groups``); the structure, leaf values and weights are
read from the model as for any other. A FILE with CTR splits cannot be routed without
catboost: loading it raises a ValueError naming the features.

Which trees: all trees in the model, as CatBoost's predict uses them (``use_best_model``
shrinks the model to its best iteration when it is fitted).
"""

from __future__ import annotations

import json
import os
import re
import tempfile

import numpy as np

from ..model.ensemble import BOOSTING, NAN_MISSING, Objective, Tree, TreeEnsemble
from ..model.leaf_router import LeafRouter
from .catboost_checks import check_split_fields, check_structure
from .catboost_hash import hash_values

TOP_KEYS = ("features_info", "model_info")
_SPLIT_TYPES = ("FloatFeature", "OneHotFeature", "OnlineCtr")
_ROUTER_DESCRIPTION = "leaf indices from CatBoost's calc_leaf_indexes"
_SPLIT_ROUTER_DESCRIPTION = "split outcomes from CatBoost's calc_leaf_indexes"


def parse_catboost(model) -> TreeEnsemble:
    """Normal form of a fitted ``catboost.CatBoost`` (or CatBoostClassifier /
    CatBoostRegressor).

    A model with target-statistic (CTR) splits is routed by CatBoost's own
    ``calc_leaf_indexes`` (the ensemble's ``model_name`` says so); every other model by
    treeimp's kernels.

    Raises
    ------
    ValueError
        The model is not fitted, has text or embedding features, or cannot be saved as
        JSON.
    """
    import catboost

    if not model.is_fitted():
        raise ValueError(f"this {type(model).__name__} is not fitted; call fit() first")
    with tempfile.TemporaryDirectory(prefix="treeimp-catboost-") as tmp:
        path = os.path.join(tmp, "model.json")
        try:
            model.save_model(path, format="json")
        except catboost.CatBoostError as exc:
            raise ValueError(f"cannot read this CatBoost model through its JSON form: {exc}"
                             ) from None
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    classes = getattr(model, "classes_", None)
    return parse_catboost_json(doc, model=model, classes=classes)


def parse_catboost_json(doc, *, model=None, classes=None) -> TreeEnsemble:
    """Normal form of a CatBoost JSON model document (``json.load`` of a file saved with
    ``save_model(path, format="json")``). ``model``: the live CatBoost object the document
    came from (needed for CTR splits, see the module docstring)."""
    if not isinstance(doc, dict):
        raise ValueError(f"a CatBoost JSON model is an object, got {type(doc).__name__}")
    for key in TOP_KEYS:
        if key not in doc:
            raise ValueError(f"CatBoost JSON model has no {key!r} key ({_version(doc)})")
    symmetric = "oblivious_trees" in doc
    if not symmetric and "trees" not in doc:
        raise ValueError("CatBoost JSON model has neither 'oblivious_trees' nor 'trees' "
                         f"({_version(doc)})")
    raw_trees = doc["oblivious_trees"] if symmetric else doc["trees"]
    if not isinstance(raw_trees, list) or not raw_trees:
        raise ValueError("CatBoost JSON model has no trees")
    check_structure(doc, symmetric)  # types, feature indices, floats (catboost_checks)
    feats = _Features(doc["features_info"])
    params = _dict(doc["model_info"].get("params", {}), "model_info.params")
    n_outputs, scale, bias = _scale_and_bias(doc, params)
    objective = objective_from_params(params, n_outputs, saved_version(doc))
    lr = float(_dict(params.get("boosting_options", {}), "boosting_options").get(
        "learning_rate", 1.0))
    build = _symmetric_tree if symmetric else _nonsymmetric_tree
    all_parts = [build(raw, t, feats, n_outputs) for t, raw in enumerate(raw_trees)]
    check_split_fields(doc, symmetric)  # split_index vs border / value (catboost_checks)
    trees, columns, thresholds, ctr_features = [], [], [], []
    for t, parts in enumerate(all_parts):
        _table_positions(parts, feats)  # every tree read: the hash tables are complete
        ctr_features.extend(parts.ctr_features)
        for k in range(n_outputs):
            trees.append(Tree(left=parts.left, right=parts.right, feature=parts.feature,
                              threshold=parts.threshold, value=parts.value[:, k],
                              weight=parts.weight, missing_left=parts.missing_left,
                              nan_mode=np.full(parts.left.size, NAN_MISSING, np.uint8),
                              gain=parts.gain[:, k] * scale**2,
                              categories=parts.categories, output=k,
                              scale=scale, learning_rate=lr, stage=t))
            columns.append(np.full(parts.left.size, t, np.int64))
            thresholds.append(parts.route_threshold)
    router = None
    if ctr_features:
        names = sorted({feats.name(j) for j in ctr_features})
        if model is None:
            raise ValueError(
                "this CatBoost model has target-statistic (CTR) splits on the categorical "
                f"features {names}, which can only be evaluated by CatBoost itself; pass "
                "the fitted CatBoost model object (treeimp then routes rows with its "
                "calc_leaf_indexes) instead of the model file")
        router = _leaf_router(model, all_parts, symmetric, np.concatenate(columns),
                              np.concatenate(thresholds), n_outputs, feats.n_features)
    return TreeEnsemble.from_trees(
        trees, kind=BOOSTING, n_features=feats.n_features, n_outputs=n_outputs,
        comparison="<=", round_float32=True, base_score=bias, objective=objective,
        feature_names=feats.names, category_values=feats.value_tables(),
        # CrossEntropy's targets are probabilities, not class labels
        classes=None if objective.name == "cross_entropy" else _classes(doc, classes),
        library="catboost", gain_kind="gain",
        # CatBoost takes a table's columns by name when every feature's name is among its
        # unique column names (CheckColumnRemappingPossible)
        column_names="by_name",
        impurity_kind="other", value_hasher=hash_values if feats.cat else None,
        # every categorical column takes raw categories, also those no split reads
        hashed_features=sorted(feats.cat_column(int(f["feature_index"])) for f in feats.cat),
        leaf_router=router)


# ---------------------------------------------------------------------- features
class _Features:
    """``features_info``: column of every float / categorical feature, names, NaN
    treatment, and the hashes each one-hot feature is split on."""

    def __init__(self, info):
        info = _dict(info, "features_info")
        for kind in ("text_features", "embedding_features"):
            if info.get(kind):
                raise ValueError(f"CatBoost models with {kind.replace('_', ' ')} are not "
                                 "supported (treeimp routes numeric and categorical "
                                 "features)")
        self.float = _list(info.get("float_features", []), "float_features")
        self.cat = _list(info.get("categorical_features", []), "categorical_features")
        self.ctrs = _list(info.get("ctrs", []), "ctrs")
        cols = [_int(f, "flat_feature_index") for f in self.float + self.cat]
        if not cols:
            raise ValueError("CatBoost JSON model lists no features")
        if min(cols) < 0 or len(set(cols)) != len(cols):
            raise ValueError(f"CatBoost features have invalid flat_feature_index values "
                             f"{sorted(cols)[:10]}")
        self.n_features = max(cols) + 1
        names = [None] * self.n_features
        for f in self.float + self.cat:
            names[int(f["flat_feature_index"])] = str(f.get("feature_id", "") or "")
        self.names = names if all(names) and len(set(names)) == len(names) else None
        self._labels = [n or f"column {j}" for j, n in enumerate(names)]
        self.one_hot = {}  # flat column -> set of hashes split on
        self.n_float_borders = sum(len(_list(f.get("borders") or [], "borders"))
                                   for f in self.float)
        self.n_one_hot_values = sum(len(_list(f.get("values") or [], "values"))
                                    for f in self.cat)

    def name(self, j):
        return self._labels[j]

    def float_column(self, i):
        return int(self._entry(self.float, i, "float")["flat_feature_index"])

    def nan_right(self, i):
        """Whether NaN takes outcome 1 on float feature i (nan_value_treatment)."""
        how = self._entry(self.float, i, "float").get("nan_value_treatment", "AsIs")
        if how not in ("AsIs", "AsFalse", "AsTrue"):
            raise ValueError(f"unknown nan_value_treatment {how!r} of float feature {i}")
        return how == "AsTrue"

    def cat_column(self, i):
        return int(self._entry(self.cat, i, "categorical")["flat_feature_index"])

    def ctr_columns(self, split):
        """The flat columns of the categorical features a CTR split's statistic combines
        (its ``cat_feature_value`` elements, in the model's order; the first is the one
        importances credit), the statistic found from the split's position among the
        binary features (float borders, one-hot values, then each CTR's borders in
        order), checked against its border."""
        pos = _int(split, "split_index") - self.n_float_borders - self.n_one_hot_values
        border = float(split["border"])
        flat = []
        for ctr in self.ctrs:
            for b in _list(ctr.get("borders", []), "ctr borders"):
                flat.append((ctr, float(b)))
        if 0 <= pos < len(flat) and flat[pos][1] == border:
            ctr = flat[pos][0]
        else:
            same = [c for c, b in flat if b == border]
            if not same:
                raise ValueError(f"CatBoost OnlineCtr split with border {border} matches "
                                 "no statistic in features_info.ctrs")
            ctr = same[0]
        # CatBoost's ShapValues shares a statistic among the categorical features it
        # combines (TFeatureCombination.CatFeatures); the one-hot and float elements of
        # a combination ("cat_feature_exact_value", "float_feature") are not among them
        cols = tuple(self.cat_column(_int(el, "cat_feature_index"))
                     for el in _list(ctr.get("elements", []), "ctr elements")
                     if _dict(el, "ctr element").get("combination_element")
                     == "cat_feature_value")
        if cols:
            return cols
        raise ValueError(f"CatBoost statistic {ctr.get('identifier')!r} has no categorical "
                         "feature")

    def value_tables(self):
        if not self.one_hot:
            return None
        out = [None] * self.n_features
        for j, hashes in self.one_hot.items():
            out[j] = np.array(sorted(hashes), np.float64)
        return out

    def _entry(self, entries, i, what):
        for f in entries:
            if int(f.get("feature_index", -1)) == i:
                return f
        raise ValueError(f"a split uses {what} feature {i}, which features_info does not "
                         "list")


class _Parts:
    """One CatBoost tree as node arrays (values (n_nodes, n_outputs)), plus the router
    threshold of every node and the columns of its CTR splits."""

    def __init__(self, n, n_outputs):
        self.left = np.full(n, -1, np.int64)
        self.right = np.full(n, -1, np.int64)
        self.feature = np.full(n, -1, np.int64)
        self.threshold = np.zeros(n)
        self.missing_left = np.zeros(n, np.bool_)
        self.value = np.zeros((n, n_outputs))
        self.weight = np.zeros(n)
        self.gain = np.full((n, n_outputs), np.nan)  # per output: one tree per output
        self.route_threshold = np.zeros(n)
        self.categories = {}
        self.ctr_features = []
        self.ctr_members = {}  # CTR node -> the columns of its statistic (ctr_columns)


def _set_split(parts, node, split, feats):
    """Node ``node`` of ``parts`` splits as CatBoost's ``split`` does (outcome 1 right)."""
    split = _dict(split, "split")
    kind = split.get("split_type")
    if kind not in _SPLIT_TYPES:
        raise ValueError(f"unknown CatBoost split_type {kind!r}; supported: {_SPLIT_TYPES}")
    if kind == "FloatFeature":
        i = _int(split, "float_feature_index")
        parts.feature[node] = feats.float_column(i)
        parts.threshold[node] = _float(split, "border")
        parts.missing_left[node] = not feats.nan_right(i)
    elif kind == "OneHotFeature":
        j = feats.cat_column(_int(split, "cat_feature_index"))
        h = _int(split, "value")
        feats.one_hot.setdefault(j, set()).add(h)
        parts.feature[node] = j
        parts.missing_left[node] = True
        parts.categories[node] = h  # hash; made a table position once all are known
    else:
        cols = feats.ctr_columns(split)
        j = cols[0]
        parts.ctr_members[node] = cols
        parts.feature[node] = j
        parts.threshold[node] = _float(split, "border")
        parts.ctr_features.append(j)


def _table_positions(parts, feats):
    """Turn one-hot split hashes into (code, goes right, unlisted left) categories."""
    for node, h in list(parts.categories.items()):
        table = sorted(feats.one_hot[int(parts.feature[node])])
        parts.categories[node] = ([table.index(h)], [False], True)


def _symmetric_tree(raw, t, feats, n_outputs):
    raw = _dict(raw, f"oblivious_trees[{t}]")
    splits = _list(raw.get("splits") or [], f"tree {t} splits")
    D = len(splits)
    if D > 30:
        raise ValueError(f"CatBoost tree {t} has depth {D}; at most 30 is supported")
    n_leaves = 1 << D
    values = np.asarray(_list(raw.get("leaf_values"), f"tree {t} leaf_values"), np.float64)
    if values.shape != (n_leaves * n_outputs,):
        raise ValueError(f"CatBoost tree {t} of depth {D} has {values.size} leaf values, "
                         f"expected {n_leaves} x {n_outputs}")
    weights = raw.get("leaf_weights")
    weights = (np.ones(n_leaves) if weights is None else
               np.asarray(_list(weights, f"tree {t} leaf_weights"), np.float64))
    if weights.shape != (n_leaves,):
        raise ValueError(f"CatBoost tree {t} has {weights.size} leaf weights, expected "
                         f"{n_leaves}")
    parts = _Parts(2 * n_leaves - 1, n_outputs)
    values = values.reshape(n_leaves, n_outputs)
    for d in range(D):  # depth d splits as split D - 1 - d, outcome bit s
        s = D - 1 - d
        for q in range(1 << d):  # q: the bits of splits D - 1 .. s + 1, highest first
            node = (1 << d) - 1 + q
            parts.left[node] = 2 * node + 1
            parts.right[node] = 2 * node + 2
            _set_split(parts, node, splits[s], feats)
            span = 1 << (D - d)  # the node's leaves are q * span .. (q + 1) * span - 1
            parts.route_threshold[node] = q * span + span // 2 - 0.5
            # leaf pairs below this node differing in outcome s: CatBoost's
            # PredictionValuesChange terms (empty leaves skipped)
            gain = np.zeros(n_outputs)
            for r in range(1 << s):
                a = q * span + r
                b = a + (1 << s)
                wa, wb = weights[a], weights[b]
                if wa > 0 and wb > 0:
                    avg = (wa * values[a] + wb * values[b]) / (wa + wb)
                    gain += wa * (values[a] - avg) ** 2 + wb * (values[b] - avg) ** 2
            parts.gain[node] = gain
    parts.value[n_leaves - 1:] = values
    parts.weight[n_leaves - 1:] = weights
    _sum_weights(parts)
    return parts


def _nonsymmetric_tree(raw, t, feats, n_outputs):
    nodes = []  # preorder: (dict, parent index, is right child)
    stack = [(_dict(raw, f"trees[{t}]"), -1, False, 0)]
    while stack:
        nd, parent, is_right, depth = stack.pop()
        if depth > 64:
            raise ValueError(f"CatBoost tree {t} is deeper than 64 levels")
        nodes.append((nd, parent, is_right))
        if "split" in nd:
            for side in ("right", "left"):  # left popped first: preorder
                if side not in nd:
                    raise ValueError(f"CatBoost tree {t} has a split without {side!r}")
                stack.append((_dict(nd[side], f"tree {t} {side}"), len(nodes) - 1,
                              side == "right", depth + 1))
    parts = _Parts(len(nodes), n_outputs)
    leaf_number = 0
    for i, (nd, parent, is_right) in enumerate(nodes):
        if parent >= 0:
            if is_right:
                parts.right[parent] = i
            else:
                parts.left[parent] = i
        if "split" in nd:
            _set_split(parts, i, nd["split"], feats)
        else:
            v = np.asarray(nd.get("value"), np.float64).reshape(-1)
            if v.shape != (n_outputs,):
                raise ValueError(f"CatBoost tree {t} has a leaf with {v.size} values, "
                                 f"expected {n_outputs}")
            parts.value[i] = v
            parts.weight[i] = float(nd.get("weight", 1.0))
            parts.route_threshold[i] = leaf_number
            leaf_number += 1
    _sum_weights(parts)
    # router thresholds: a node goes left when the leaf number is below its right
    # subtree's first leaf; leaf numbers are in preorder, so that is the smallest
    # number below the right child
    first = parts.route_threshold.copy()
    for i in range(len(nodes) - 1, -1, -1):
        if parts.left[i] >= 0:
            first[i] = first[parts.left[i]]
            parts.route_threshold[i] = first[parts.right[i]] - 0.5
    # mdi: W_l |v_l - v_m|^2 + W_r |v_r - v_m|^2 with weight-mean node values
    mean = _weighted_means(parts)
    for i in range(len(nodes)):
        l_, r_ = parts.left[i], parts.right[i]
        if l_ >= 0:
            parts.gain[i] = (parts.weight[l_] * (mean[l_] - mean[i]) ** 2
                             + parts.weight[r_] * (mean[r_] - mean[i]) ** 2)
    return parts


def _sum_weights(parts):
    """Internal node weights := sum of their children's (nodes after their parents)."""
    for i in range(parts.left.size - 1, -1, -1):
        if parts.left[i] >= 0:
            parts.weight[i] = parts.weight[parts.left[i]] + parts.weight[parts.right[i]]


def _weighted_means(parts):
    mean = parts.value.copy()
    for i in range(parts.left.size - 1, -1, -1):
        l_, r_ = parts.left[i], parts.right[i]
        if l_ >= 0:
            w = parts.weight[l_] + parts.weight[r_]
            mean[i] = ((parts.weight[l_] * mean[l_] + parts.weight[r_] * mean[r_]) / w
                       if w > 0 else 0.5 * (mean[l_] + mean[r_]))
    return mean


def catboost_leaf_ids(ens):
    """CatBoost's leaf index of every node of a parsed CatBoost ensemble (-1 at split
    nodes), so that ``catboost_leaf_ids(ens)[offsets + ens.apply(X)]`` is
    ``model.calc_leaf_indexes(X)`` (one column per normal-form tree; a multiclass
    CatBoost tree is ``n_outputs`` normal-form trees with equal columns)."""
    out = np.full(ens.n_nodes, -1, np.int64)
    for t in range(ens.n_trees):
        o, e = int(ens.tree_offsets[t]), int(ens.tree_offsets[t + 1])
        out[o:e] = _leaf_ids(ens.left[o:e] - np.where(ens.left[o:e] >= 0, o, 0),
                             ens.right[o:e] - np.where(ens.right[o:e] >= 0, o, 0))
    return out


def _leaf_ids(left, right):
    """CatBoost's leaf index per node of one tree (local child indices, -1 at leaves)."""
    n = left.size
    ids = np.full(n, -1, np.int64)
    D = int(np.log2(n + 1)) - 1
    n_split = (1 << D) - 1
    heap_layout = 2 * np.arange(n_split) + 1
    if n == (2 << D) - 1 and np.array_equal(left[:n_split], heap_layout) and np.all(
            left[n_split:] < 0):
        ids[n_split:] = np.arange(1 << D)  # symmetric: node 2^D - 1 + L is leaf L
        return ids
    counter, stack = 0, [0]
    while stack:
        i = stack.pop()
        if left[i] < 0:
            ids[i] = counter
            counter += 1
            continue
        l_, r_ = left[i], right[i]
        l_leaf, r_leaf = left[l_] < 0, left[r_] < 0
        if l_leaf != r_leaf:  # the one leaf child is stored with its parent
            leaf, other = (l_, r_) if l_leaf else (r_, l_)
            ids[leaf] = counter
            counter += 1
            stack.append(other)
        else:
            stack.extend((r_, l_))  # left first
    return ids


# ---------------------------------------------------------------------- router
class _CatBoostLeafNumbers:
    """``route`` of the leaf router: CatBoost's leaf index of every row in every tree
    (``calc_leaf_indexes``), as the leaf's number from the left (picklable)."""

    def __init__(self, model, numbers):
        self.model = model
        self.numbers = numbers  # per CatBoost tree: leaf index -> leaf number

    def __call__(self, X):
        leaves = np.asarray(self.model.calc_leaf_indexes(X), dtype=np.int64)
        if leaves.ndim != 2 or leaves.shape[1] != len(self.numbers):
            raise ValueError(f"CatBoost's calc_leaf_indexes returned shape {leaves.shape} "
                             f"for a model of {len(self.numbers)} trees")
        out = np.empty(leaves.shape, np.float64)
        for t, table in enumerate(self.numbers):
            out[:, t] = table[leaves[:, t]]
        return out


class _CatBoostSplitBits:
    """``route`` of the split router of a symmetric model: per row, CatBoost tree t and
    depth d < D_t the row's outcome (0 or 1) of the split at that depth, bit D_t - 1 - d
    of its ``calc_leaf_indexes`` leaf index (picklable). A symmetric tree applies every
    split to every row, so these are the outcomes at every node, also off the row's path."""

    def __init__(self, model, depths):
        self.model = model
        self.depths = depths  # per CatBoost tree

    def __call__(self, X):
        leaves = np.asarray(self.model.calc_leaf_indexes(X), dtype=np.int64)
        if leaves.ndim != 2 or leaves.shape[1] != len(self.depths):
            raise ValueError(f"CatBoost's calc_leaf_indexes returned shape {leaves.shape} "
                             f"for a model of {len(self.depths)} trees")
        out = np.empty((leaves.shape[0], max(1, sum(self.depths))), np.float64)
        col = 0
        for t, D in enumerate(self.depths):
            for d in range(D):
                out[:, col] = (leaves[:, t] >> (D - 1 - d)) & 1
                col += 1
        return out


def _shap_players(all_parts, n_outputs, n_features):
    """How CatBoost's ShapValues credits every node of the normal form (each CatBoost
    tree repeated ``n_outputs`` times): (per node the column, or ``n_features + g`` for a
    statistic of the g-th combination of several categorical features, whose value is
    shared equally among its columns; the combinations). CatBoost treats every such
    combination as one feature of its own (``MapBinFeaturesToClasses``), and a statistic
    of one categorical feature as that feature."""
    groups = {}
    players = []
    for parts in all_parts:
        p = parts.feature.copy()
        for node, cols in parts.ctr_members.items():
            if len(cols) > 1:
                p[node] = n_features + groups.setdefault(cols, len(groups))
        players.extend([p] * n_outputs)
    return np.concatenate(players), tuple(groups)


def _leaf_router(model, all_parts, symmetric, columns, thresholds, n_outputs, n_features):
    numbers = []
    for parts in all_parts:
        if symmetric:
            D = int(np.log2(parts.left.size + 1)) - 1
            numbers.append(np.arange(1 << D, dtype=np.float64))  # heap order
        else:  # leaf number from the left = rank of the leaf in preorder
            ids = _leaf_ids(parts.left, parts.right)
            leaves = np.flatnonzero(parts.left < 0)
            table = np.empty(leaves.size, np.float64)
            table[ids[leaves]] = np.arange(leaves.size)
            numbers.append(table)
    shap_feature, shap_groups = _shap_players(all_parts, n_outputs, n_features)
    return LeafRouter(route=_CatBoostLeafNumbers(model, numbers), column=columns,
                      threshold=thresholds, n_columns=len(all_parts),
                      description=_ROUTER_DESCRIPTION, shap_feature=shap_feature,
                      shap_groups=shap_groups,
                      split_router=(_split_router(model, all_parts, n_outputs) if symmetric
                                    else None))


def _split_router(model, all_parts, n_outputs):
    """The router of a symmetric model that gives every node the row's own outcome of its
    split (one routing column per CatBoost tree and depth, holding the outcome bit;
    threshold 0.5), as TreeSHAP needs it also at the nodes off the row's path."""

    depths = [int(np.log2(parts.left.size + 1)) - 1 for parts in all_parts]
    first = np.concatenate([[0], np.cumsum(depths)])
    columns = []
    for t, D in enumerate(depths):
        depth = np.floor(np.log2(np.arange(2 << D) + 1)).astype(np.int64)[:(2 << D) - 1]
        col = np.where(depth < D, first[t] + depth, 0)  # leaves read no column
        columns.extend([col] * n_outputs)
    columns = np.concatenate(columns)
    router = LeafRouter(route=_CatBoostSplitBits(model, depths), column=columns,
                        threshold=np.full(columns.size, 0.5), n_columns=max(1, int(first[-1])),
                        description=_SPLIT_ROUTER_DESCRIPTION)
    router.check(columns.size)
    return router


# ---------------------------------------------------------------------- outputs
def _scale_and_bias(doc, params):
    sb = doc.get("scale_and_bias", [1.0, [0.0]])
    if not isinstance(sb, list) or len(sb) != 2:
        raise ValueError(f"CatBoost scale_and_bias must be [scale, [bias, ...]], got {sb!r}")
    scale = float(sb[0])
    bias = np.atleast_1d(np.asarray(sb[1], np.float64))
    if not np.isfinite(scale) or scale == 0.0:
        raise ValueError(f"CatBoost scale_and_bias has scale {scale}")
    trees = doc.get("oblivious_trees") or doc.get("trees")
    first = trees[0]
    if "leaf_values" in first:
        D = len(first.get("splits") or [])
        n_outputs = len(first["leaf_values"]) // (1 << D)
    else:
        nd = first
        while "split" in nd:
            nd = nd["left"]
        n_outputs = np.asarray(nd.get("value")).size
    if n_outputs < 1:
        raise ValueError("CatBoost tree 0 has no leaf values")
    if bias.size == 1 and n_outputs > 1:
        bias = np.repeat(bias, n_outputs)
    if bias.size != n_outputs:
        raise ValueError(f"CatBoost scale_and_bias has {bias.size} biases for {n_outputs} "
                         "outputs")
    return n_outputs, scale, bias


def _classes(doc, classes):
    if classes is not None and len(classes):  # a CatBoostRegressor's classes_ is empty
        return np.asarray(classes)
    cp = doc["model_info"].get("class_params")
    if isinstance(cp, dict) and cp.get("class_names"):
        return np.asarray(cp["class_names"])
    return None


# ---------------------------------------------------------------------- objective
SUPPORTED_OBJECTIVES = ("RMSE", "MAE", "Quantile", "Huber", "Expectile", "LogCosh",
                        "Logloss", "CrossEntropy", "MultiClass", "MultiClassOneVsAll",
                        "Poisson", "Tweedie", "QueryRMSE", "PairLogit", "PairLogitPairwise",
                        "YetiRank", "YetiRankPairwise", "Cox", "SurvivalAft")
# SurvivalAft's dist -> treeimp's aft distribution number (losses.AFT_DISTRIBUTIONS)
_AFT_DISTS = {"Normal": 0, "Logistic": 1, "Extreme": 2}
# CatBoost's arithmetic of its survival losses, as flags of treeimp's objectives
# (model/losses.py): float32 targets, no grouping of tied times, a fast log of the times,
# -1 for an open interval end, derivatives without the sample weight
_COX_FLAGS = {"float32_times": 1.0, "sequential_ties": 1.0, "weights_ignored": 1.0}
_AFT_FLAGS = {"fast_log": 1.0, "minus_one_open": 1.0, "weights_ignored": 1.0}


def objective_from_params(params, n_outputs, version=None):
    """Objective of CatBoost's ``loss_function`` (``model_info.params``), its derivatives
    as CatBoost defines them (treeimp/model/losses.py, "CatBoost"). An objective without a
    treeimp gradient keeps CatBoost's name (prefixed "catboost:"): prediction and
    "mdi" work, held-out methods raise a ValueError naming it.

    ``version``: the release that saved the model (:func:`saved_version`), None when not
    known. Cox and SurvivalAft's derivatives changed between releases (checked against
    every release 1.2 to 1.2.10 on the package index, 1.2.4 is not on it):

    * Cox. Up to 1.2.3: XGBoost's handling of tied times (tied events share one risk set)
      after an unstable sort of the rows by time, whose order of tied rows treeimp cannot
      reproduce; without an event time shared by two rows the derivatives equal 1.2.6's,
      with one the held-out measures refuse the evaluation rows (param ``unstable_ties``,
      ``stats/cox.py``). 1.2.5: the first derivative of the opposite sign (catboost issue
      2701), the second as 1.2.6, still an unstable sort: refused ("catboost:Cox@1.2.5").
      From 1.2.6: the sequential risk sets of ``kernels/cox.py``.
    * SurvivalAft with dist Normal. Up to 1.2.3 the normal distribution function is a
      Chebyshev approximation of erfc (param ``erfc_approx``), from 1.2.5 erf.
    * A release not known: Cox and SurvivalAft Normal are refused ("catboost:Cox@unknown",
      "catboost:SurvivalAft@unknown"), as the releases differ; Logistic and Extreme
      SurvivalAft are the same in all of them.
    """
    lf = params.get("loss_function")
    if not isinstance(lf, dict) or not isinstance(lf.get("type"), str):
        raise ValueError(f"CatBoost model_info.params has no loss_function type ({lf!r})")
    name = lf["type"]
    p = {k: v for k, v in _dict(lf.get("params", {}), "loss_function params").items()
         if not k.startswith("__")}
    dp = _dict(params.get("data_processing_options", {}), "data_processing_options")
    weights = [float(w) for w in dp.get("class_weights") or []]

    def number(key, default):
        try:
            return float(p.get(key, default))
        except (TypeError, ValueError):
            raise ValueError(f"CatBoost {name} parameter {key}={p.get(key)!r} is not a "
                             "number") from None

    def unit_class_weights():
        if any(w != 1.0 for w in weights):
            raise ValueError(f"CatBoost {name} with class_weights {weights} is not supported "
                             "(treeimp's gradient has no per-class weights for it)")

    source = name + (":" + ";".join(f"{k}={v}" for k, v in p.items()) if p else "")
    if name == "RMSE":
        return Objective("squared_error", {}, "identity", source)
    if name in ("MAE", "Quantile"):
        alpha = 0.5 if name == "MAE" else number("alpha", 0.5)
        # CatBoost's der1 is 0 within delta (default 1e-6) of the target
        return Objective("quantile", {"alpha": alpha, "tie_gradient": 0.0,
                                      "delta": number("delta", 1e-6)}, "identity", source)
    if name == "Huber":
        return Objective("huber", {"delta": number("delta", np.nan), "outer_hessian": 0.0},
                         "identity", source)
    if name == "Expectile":
        return Objective("expectile", {"alpha": number("alpha", 0.5)}, "identity", source)
    if name == "LogCosh":
        return Objective("log_cosh", {}, "identity", source)
    if name == "Logloss":
        neg, pos = (weights + [1.0, 1.0])[:2] if weights else (1.0, 1.0)
        return Objective("logistic", {"sigmoid": 1.0, "pos_weight": pos, "neg_weight": neg},
                         "sigmoid", source)
    if name == "CrossEntropy":
        return Objective("cross_entropy", {}, "sigmoid", source)
    if name == "MultiClass":
        unit_class_weights()
        return Objective("softmax", {"n_classes": n_outputs, "hess_factor": 1.0},
                         "softmax", source)
    if name == "MultiClassOneVsAll":
        unit_class_weights()
        return Objective("ova_logistic", {"sigmoid": 1.0, "n_classes": n_outputs},
                         "sigmoid", source)
    if name == "Poisson":
        return Objective("poisson", {"max_delta_step": 0.0}, "exp", source)
    if name == "Tweedie":
        return Objective("tweedie", {"variance_power": number("variance_power", np.nan)},
                         "exp", source)
    if name == "QueryRMSE":  # a ranking loss: gradients per query (model/ranking.py)
        return Objective("query_rmse", {}, "identity", source)
    # survival: CatBoost's predict returns the raw value (log hazard ratio / log time)
    if name == "Cox":
        if version is None or version == (1, 2, 5):
            at = "unknown" if version is None else "1.2.5"
            return Objective(f"catboost:Cox@{at}", {}, "identity", source)
        if version < (1, 2, 5):
            return Objective("cox", {**_COX_FLAGS, "unstable_ties": 1.0}, "identity", source)
        return Objective("cox", dict(_COX_FLAGS), "identity", source)
    if name == "SurvivalAft":
        dist = p.get("dist", "Normal")
        if dist not in _AFT_DISTS:
            raise ValueError(f"CatBoost SurvivalAft dist {dist!r} is not one of "
                             f"{list(_AFT_DISTS)}")
        scale = number("scale", 1.0)
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"CatBoost SurvivalAft scale must be a finite number > 0, got "
                             f"{scale}")
        aft = {"distribution": _AFT_DISTS[dist], "sigma": scale, **_AFT_FLAGS}
        if dist == "Normal" and version is None:
            return Objective("catboost:SurvivalAft@unknown", {}, "identity", source)
        if dist == "Normal" and version < (1, 2, 5):
            aft["erfc_approx"] = 1.0
        return Objective("aft", aft, "identity", source)
    if name in ("PairLogit", "PairLogitPairwise"):  # pairs within queries (model/ranking.py)
        max_pairs = number("max_pairs", 0)
        if max_pairs != int(max_pairs) or max_pairs < 0:
            raise ValueError(f"CatBoost {name} max_pairs={p.get('max_pairs')!r} is not a "
                             "non-negative integer")
        # CatBoost's "all pairs" default (MAX_AUTOGENERATED_PAIRS_COUNT) is the largest i32
        max_pairs = 0 if max_pairs >= 2 ** 31 - 1 else int(max_pairs)
        return Objective("pair_logit", {"max_pairs": max_pairs}, "identity", source)
    if name in ("YetiRank", "YetiRankPairwise"):  # random pairs: their expectation
        decay = number("decay", 0.85)
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"CatBoost {name} decay={decay} is not in [0, 1]")
        return Objective("yeti_rank", {"decay": decay, "mode": str(p.get("mode", "Classic")),
                                       "noise": str(p.get("noise", "Gumbel"))},
                         "identity", source)
    return Objective(f"catboost:{name}", {}, "identity", source)


# ---------------------------------------------------------------------- helpers
# The git commits that the package-index wheels 1.2.1 to 1.2.3 record (they name no
# release); 1.2.1.1 and 1.2.2 record the same commit
_RELEASE_COMMITS = {"f68bd8c0af356cca521c19f85b8761cf6541456a": (1, 2, 1),
                    "ff8f073eea240c11e49e51cb774c2df5249c157c": (1, 2, 2),
                    "ad980dac979d2d8b4d633dffab06cb2e7303c126": (1, 2, 3)}
_RELEASE = re.compile(r"(?:Branch:\s*tags/v|CatBoost release\s+)(\d+(?:\.\d+)+)",
                      re.IGNORECASE)


def saved_version(doc):
    """The CatBoost release that saved a JSON model, as a tuple of ints, or None.

    Read from ``model_info.catboost_version_info``: the release tag or the "CatBoost
    release X" summary (1.2.5 and later), the git commit of the 1.2.1 to 1.2.3 wheels,
    or "Summary: No VCS", which the 1.2 wheel writes (taken as 1.2; a build from source
    without git information writes it too)."""
    info = doc.get("model_info") if isinstance(doc, dict) else None
    text = info.get("catboost_version_info", "") if isinstance(info, dict) else ""
    text = text if isinstance(text, str) else ""
    found = _RELEASE.search(text)
    if found:
        return tuple(int(p) for p in found.group(1).split("."))
    commit = re.search(r"Commit:\s*([0-9a-f]{40})", text)
    if commit and commit.group(1) in _RELEASE_COMMITS:
        return _RELEASE_COMMITS[commit.group(1)]
    if re.search(r"Summary:\s*No VCS", text):
        return (1, 2)
    return None


def _version(doc):
    info = doc.get("model_info") if isinstance(doc, dict) else None
    text = info.get("catboost_version_info", "") if isinstance(info, dict) else ""
    for line in str(text).splitlines():
        if "Branch:" in line:
            return "saved by " + line.split("Branch:")[1].strip()
    return "catboost version unknown"


def _dict(x, what):
    if not isinstance(x, dict):
        raise ValueError(f"CatBoost {what} must be an object, got {type(x).__name__}")
    return x


def _list(x, what):
    if not isinstance(x, list):
        raise ValueError(f"CatBoost {what} must be a list, got {type(x).__name__}")
    return x


def _int(d, key):
    if key not in d:
        raise ValueError(f"CatBoost entry has no {key!r}: {str(d)[:120]}")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise ValueError(f"CatBoost {key} must be an integer, got {v!r}")
    return int(v)


def _float(d, key):
    if key not in d:
        raise ValueError(f"CatBoost entry has no {key!r}: {str(d)[:120]}")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise ValueError(f"CatBoost {key} must be a number, got {v!r}")
    return float(v)
