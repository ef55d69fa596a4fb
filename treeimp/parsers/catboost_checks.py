"""Fields of a CatBoost JSON model that another field implies must agree.

Every split of a CatBoost JSON model names its threshold twice: ``split_index``, the
position of the split's binary feature among all of them (the borders of the float
features in order, then the values of the one-hot categorical features, then the
borders of the target statistics), which is what CatBoost reads, and the feature
index and ``border`` (float) or ``value`` (one-hot hash), which treeimp reads. A file
edited in one place and not the other loads in both, with different predictions, so
the two are compared here and any disagreement is refused.

Checked per split (each must have a ``split_index``, as CatBoost writes them):

* FloatFeature: ``split_index`` lies among the float borders, it falls in the borders
  of ``float_feature_index`` and ``border == borders[split_index - first]``;
* OneHotFeature: ``split_index`` lies among the one-hot values, in those of
  ``cat_feature_index``, and ``value == values[split_index - first]``;
* OnlineCtr: ``split_index`` lies past the float borders and one-hot values.

And per float feature: its ``borders`` are strictly increasing, as CatBoost writes them
(CatBoost finds a value's bin by counting the borders below it, which is
``x > borders[k]`` only for sorted borders).
"""

from __future__ import annotations

import math

MAX_DEPTH = 64  # deeper non-symmetric trees: the parser reports them


def check_structure(doc, symmetric):
    """The parts of a CatBoost JSON document the parser walks have the types it needs
    (objects, lists, numbers), the feature indices are 0 .. n - 1
    (:func:`check_feature_indices`) and the numbers CatBoost reads as floats are ones
    it reads as Python does (:func:`check_float_fields`); any other content is reported
    naming the place. Run before anything is built from the document."""
    if not isinstance(doc["model_info"], dict):
        raise ValueError(f"CatBoost model_info must be an object, got "
                         f"{type(doc['model_info']).__name__}")
    params = doc["model_info"].get("params", {})
    options = params.get("boosting_options", {}) if isinstance(params, dict) else {}
    lr = options.get("learning_rate", 1.0) if isinstance(options, dict) else 1.0
    if isinstance(lr, bool) or not isinstance(lr, (int, float)):
        raise ValueError(f"CatBoost boosting_options learning_rate is {str(lr)[:40]!r}, not a "
                         "number")
    dp = params.get("data_processing_options", {}) if isinstance(params, dict) else {}
    weights = dp.get("class_weights") if isinstance(dp, dict) else None
    if weights is not None and not (isinstance(weights, list) and all(
            isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights)):
        raise ValueError(f"CatBoost data_processing_options class_weights is "
                         f"{str(weights)[:40]!r}, not a list of numbers")
    sb = doc.get("scale_and_bias", [1.0, [0.0]])
    if not (isinstance(sb, list) and len(sb) == 2 and isinstance(sb[1], list)):
        # CatBoost reads a bias that is not a list as 0
        raise ValueError(f"CatBoost scale_and_bias must be [scale, [bias, ...]], got "
                         f"{str(sb)[:60]!r}")
    info = doc["features_info"]
    if not isinstance(info, dict):
        raise ValueError(f"CatBoost features_info must be an object, got {type(info).__name__}")
    for kind in ("float_features", "categorical_features"):
        entries = info.get(kind) or []
        if not isinstance(entries, list) or not all(isinstance(f, dict) for f in entries):
            raise ValueError(f"CatBoost features_info.{kind} must be a list of objects")
    check_feature_indices(info)
    for t, tree in enumerate(doc["oblivious_trees"] if symmetric else doc["trees"]):
        if not isinstance(tree, dict):
            raise ValueError(f"CatBoost tree {t} must be an object, got {type(tree).__name__}")
        if symmetric:
            for key in ("splits", "leaf_values", "leaf_weights"):
                # leaf_values is required; the others may be absent
                if (key == "leaf_values" or tree.get(key) is not None) and not isinstance(
                        tree.get(key), list):
                    raise ValueError(f"CatBoost tree {t} {key} must be a list, got "
                                     f"{type(tree.get(key)).__name__}")
            if not all(isinstance(x, dict) for x in tree.get("splits") or []):
                raise ValueError(f"CatBoost tree {t}: every split must be an object")
            continue
        stack = [(tree, 0)]
        node = 0
        while stack:
            nd, depth = stack.pop()
            if not isinstance(nd, dict):
                raise ValueError(f"CatBoost tree {t} node {node} must be an object, got "
                                 f"{type(nd).__name__}")
            if "split" in nd:
                if not isinstance(nd["split"], dict):
                    raise ValueError(f"CatBoost tree {t} node {node}: split must be an object")
                for side in ("left", "right"):
                    if side not in nd:
                        raise ValueError(f"CatBoost tree {t} node {node} has a split without "
                                         f"{side!r}")
                if depth < MAX_DEPTH:
                    stack.extend((nd[side], depth + 1) for side in ("right", "left")
                                 if side in nd)
            node += 1
    check_float_fields(doc, symmetric)


def check_feature_indices(info):
    """``flat_feature_index`` of the float and categorical features are 0 .. n - 1, each
    once, and each kind's ``feature_index`` 0 .. (its count) - 1, as CatBoost numbers
    them (ignored features keep their entries). Checked before anything is sized by
    them: a damaged index of 10**9 would otherwise make a list of 10**9 names. Entries
    of the wrong type are left to the parser to report."""
    if not isinstance(info, dict):
        return
    kinds = {k: info.get(k) or [] for k in ("float_features", "categorical_features")}
    if not all(isinstance(v, list) and all(isinstance(f, dict) for f in v)
               for v in kinds.values()):
        return
    flat = []
    for kind, entries in kinds.items():
        own = [_index_of(f, "feature_index") for f in entries]
        if sorted(own) != list(range(len(own))):
            raise ValueError(f"CatBoost {kind} have feature_index values {sorted(own)[:10]}; "
                             f"expected 0..{len(own) - 1}, each once")
        flat += [_index_of(f, "flat_feature_index") for f in entries]
    if sorted(flat) != list(range(len(flat))):
        raise ValueError(f"CatBoost features have flat_feature_index values {sorted(flat)[:10]}"
                         f"; expected 0..{len(flat) - 1} ({len(flat)} features), each once")


def _index_of(f, key):
    v = f.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v != int(v):
        raise ValueError(f"CatBoost features_info entry has {key} {v!r}, not an integer")
    return int(v)


def check_split_fields(doc, symmetric):
    """Raise a ValueError naming the tree, the node and both fields when a split's
    ``split_index`` and its ``border`` / ``value`` / feature index disagree (see the
    module docstring). ``doc``: a CatBoost JSON document the parser has already read
    (trees and features_info are well formed)."""
    info = doc["features_info"]
    floats = sorted(info.get("float_features") or [], key=_feature_index)
    cats = sorted(info.get("categorical_features") or [], key=_feature_index)
    # binary feature position -> (kind, feature index, its border or hash)
    table = []
    for f in floats:
        borders = f.get("borders") or []
        for k, b in enumerate(borders if isinstance(borders, list) else [borders]):
            if isinstance(b, bool) or not isinstance(b, (int, float)):
                raise ValueError(f"CatBoost float feature {_feature_index(f)} borders[{k}] is "
                                 f"{str(b)[:40]!r}, not a number")
        for k in range(1, len(borders)):
            if not float(borders[k - 1]) < float(borders[k]):
                raise ValueError(
                    f"CatBoost float feature {_feature_index(f)} has borders that are not "
                    f"strictly increasing: borders[{k - 1}] = {borders[k - 1]!r}, "
                    f"borders[{k}] = {borders[k]!r}")
        table.extend(("FloatFeature", _feature_index(f), float(b)) for b in borders)
    for f in cats:
        table.extend(("OneHotFeature", _feature_index(f), v)
                     for v in f.get("values") or [])
    for t, node, split in _splits(doc, symmetric):
        if "split_index" not in split:
            raise ValueError(f"CatBoost tree {t} node {node}: the split has no split_index, "
                             "which CatBoost predicts with (its border / value alone do "
                             "not say what CatBoost does)")
        s = split["split_index"]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or s != int(s) or s < 0:
            raise ValueError(f"CatBoost tree {t} node {node}: split_index {s!r} is not a "
                             "non-negative integer")
        s = int(s)
        kind = split["split_type"]
        if kind == "OnlineCtr":
            if s < len(table):
                raise ValueError(
                    f"CatBoost tree {t} node {node}: an OnlineCtr split has split_index {s}, "
                    f"which is a {table[s][0]} position (the first {len(table)} are float "
                    "borders and one-hot values)")
            continue
        if s >= len(table) or table[s][0] != kind:
            raise ValueError(
                f"CatBoost tree {t} node {node}: a {kind} split has split_index {s}, but "
                f"features_info has {len(table)} float borders and one-hot values and that "
                f"position is {'past them' if s >= len(table) else 'a ' + table[s][0]}")
        _, feature, expected = table[s]
        key = "float_feature_index" if kind == "FloatFeature" else "cat_feature_index"
        if split[key] != feature:
            raise ValueError(
                f"CatBoost tree {t} node {node}: {key} is {split[key]!r} but split_index {s} "
                f"is a {'border' if kind == 'FloatFeature' else 'value'} of feature {feature}")
        if kind == "FloatFeature":
            border = float(split["border"])
            if not (border == expected or (math.isnan(border) and math.isnan(expected))):
                raise ValueError(
                    f"CatBoost tree {t} node {node}: border {split['border']!r} disagrees "
                    f"with split_index {s}, which is border {expected!r} of float feature "
                    f"{feature} (CatBoost predicts with the split_index one)")
        elif split["value"] != expected:
            raise ValueError(
                f"CatBoost tree {t} node {node}: value {split['value']!r} disagrees with "
                f"split_index {s}, which is value {expected!r} of categorical feature "
                f"{feature} (CatBoost predicts with the split_index one)")


def _feature_index(f):
    return _index_of(f, "feature_index")


def _splits(doc, symmetric):
    """(tree, node, split) of every split: a symmetric tree's depth-d split is node d
    (it stands for every node of that depth), a non-symmetric tree's nodes are numbered
    in preorder as the parser numbers them."""
    if symmetric:
        for t, tree in enumerate(doc["oblivious_trees"]):
            for d, split in enumerate(tree.get("splits") or []):
                yield t, f"at depth {d}", split
        return
    for t, tree in enumerate(doc["trees"]):
        stack = [tree]
        node = 0
        while stack:
            nd = stack.pop()
            if "split" in nd:
                yield t, node, nd["split"]
                stack.extend((nd["right"], nd["left"]))
            node += 1


def check_float_fields(doc, symmetric):
    """Refuse a JSON integer past 2**53 (and below 2**64), a boolean or anything else
    that is not a number where CatBoost reads a float (scale and bias, leaf values and
    weights, borders): CatBoost's JSON reader reads such an integer as 0
    (``scale_and_bias`` ``[9007199254740993, [b]]`` predicts b everywhere) and a leaf
    value ``true`` as 0, Python (numpy) as the number and as 1."""

    def check(v, where, optional=False):
        if v is None and optional:
            return
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            # CatBoost reads true as 0, where Python reads it as 1
            raise ValueError(f"CatBoost {where} is {str(v)[:40]!r}, not a number")
        if isinstance(v, int) and 2**53 < abs(v) < 2**64:
            raise ValueError(f"CatBoost {where} is the integer {v}, past 2**53: CatBoost "
                             "reads such an integer as 0 where it expects a float (write "
                             "it as a float, e.g. 9.007e15)")

    def check_all(values, where):
        if isinstance(values, list):
            for k, v in enumerate(values):
                check(v, f"{where}[{k}]")

    sb = doc.get("scale_and_bias")
    if isinstance(sb, list) and len(sb) == 2:
        check(sb[0], "scale_and_bias scale")
        check_all(sb[1] if isinstance(sb[1], list) else [sb[1]], "scale_and_bias bias")
    for f in doc["features_info"].get("float_features") or []:
        check_all(f.get("borders"), f"float feature {f.get('feature_index')} borders")
    for t, node, split in _splits(doc, symmetric):
        check(split.get("border"), f"tree {t} node {node} border", optional=True)
    if symmetric:
        for t, tree in enumerate(doc["oblivious_trees"]):
            check_all(tree.get("leaf_values"), f"tree {t} leaf_values")
            check_all(tree.get("leaf_weights"), f"tree {t} leaf_weights")
        return
    for t, tree in enumerate(doc["trees"]):
        stack = [(tree, 0)]
        node = 0
        while stack:
            nd, depth = stack.pop()
            if "split" in nd:
                if depth < MAX_DEPTH:
                    stack.extend((nd[side], depth + 1) for side in ("right", "left")
                                 if side in nd)
            else:
                value = nd.get("value")
                check_all(value if isinstance(value, list) else [value],
                          f"tree {t} node {node} value")
                if "weight" in nd:  # absent: weight 1
                    check(nd["weight"], f"tree {t} node {node} weight")
            node += 1
