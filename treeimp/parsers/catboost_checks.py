"""Fields of a CatBoost JSON model that another field implies must agree.

Every split of a CatBoost JSON model names its threshold twice: ``split_index``, the
position of the split's binary feature among all of them (the borders of the float
features in order, then the values of the one-hot categorical features, then the
borders of the target statistics), which is what CatBoost reads, and the feature
index and ``border`` (float) or ``value`` (one-hot hash), which treeimp reads. A file
edited in one place and not the other loads in both, with different predictions, so
the two are compared here and any disagreement is refused.

Checked per split (when it has a ``split_index``; CatBoost 1.2 always writes one):

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
            continue
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
    v = f.get("feature_index")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise ValueError(f"CatBoost features_info entry {str(f)[:80]} has feature_index "
                         f"{v!r}, not an integer")
    return int(v)


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
