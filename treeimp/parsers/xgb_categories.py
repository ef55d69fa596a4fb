"""Training category labels that XGBoost >= 3.1 stores in a model trained on pandas.

``learner.gradient_booster.model.cats`` (checked on xgboost 3.2.0)::

    {"enc": [per feature: {"offsets": int32 [n+1], "values": int8 UTF-8 bytes}   (strings)
                       or {"type": <json.h ValueKind of the array>, "values": [...]}
                                                                        (integer labels)
                       or empty offsets/values for a numeric feature],
     "feature_segments": int32 [n_features + 1] (prefix sums of the label counts),
     "sorted_idx": ...}

A tree's category code ``c`` of feature ``j`` is the position of the label in
``enc[j]`` (the training DataFrame's category order).

XGBoost 3.2 stores non-ASCII string labels wrongly: ``offsets`` count characters but
``values`` keeps only that many BYTES of the UTF-8 text, so such labels come back cut
and shifted (``["x", "zé"]`` is stored as ``"x"``, ``"z\\xc3"``). For such a feature the
labels are not returned (None: a DataFrame column is then read by its own codes, which
must follow the training order) and a warning says so.
"""

from __future__ import annotations

import warnings

import numpy as np

from .xgb_arrays import numeric_array

# first XGBoost version assumed to store non-ASCII labels correctly (3.2.0 does not)
_UTF8_FIXED = (3, 3)


def stored_categories(model, categorical, n_features, version):
    """Per feature the training labels (list) or None; None when nothing is stored.

    Parameters
    ----------
    model : dict
        ``learner.gradient_booster.model`` of an XGBoost model document.
    categorical : list of bool or None
        Which features are categorical (``feature_types == "c"``); None when the
        model stores no feature types.
    n_features : int
    version : str
        The document's XGBoost version ("3.2.0"), for messages and the UTF-8 check.
    """
    cats = model.get("cats")
    if not cats or not categorical or not any(categorical):
        return None
    enc = cats.get("enc", [])
    if len(enc) == 0:
        return None
    if len(enc) != n_features:
        raise ValueError(f"XGBoost model stores categories for {len(enc)} features but has "
                         f"{n_features} (version {version})")
    seg = np.asarray(cats.get("feature_segments", []), dtype=np.int64)
    out = []
    for j in range(n_features):
        col = enc[j]
        if not isinstance(col, dict):
            raise ValueError(f"XGBoost stored categories of feature {j} are not an object")
        if not categorical[j] or (seg.size == n_features + 1 and seg[j + 1] == seg[j]):
            out.append(None)
        elif "offsets" in col:
            out.append(_string_labels(col, j, version))
        else:
            out.append(np.asarray(col.get("values", [])).tolist())
    return out


def _string_labels(col, j, version):
    values = np.asarray(col.get("values", []))
    offsets = np.asarray(col["offsets"], dtype=np.int64)
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 \
            or np.any(np.diff(offsets) < 0) or offsets[-1] > values.size:
        raise ValueError(f"XGBoost stored categories of feature {j} are corrupt (offsets "
                         f"{offsets[:5].tolist()}..., {values.size} bytes)")
    raw = (values.astype(np.int64) & 0xFF).astype(np.uint8).tobytes()
    labels = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        try:
            label = raw[a:b].decode("utf-8")
        except UnicodeDecodeError:
            label = None
        if label is None or (not label.isascii() and _version_tuple(version) < _UTF8_FIXED):
            warnings.warn(f"XGBoost {version} stored the non-ASCII category labels of "
                          f"feature {j} incorrectly; that column's pandas categories are "
                          "read by their own codes, which must follow the training order",
                          UserWarning, stacklevel=4)
            return None
        labels.append(label)
    return labels


def _version_tuple(version):
    try:
        return tuple(int(x) for x in str(version).split("."))
    except ValueError:
        return (0,)


def category_sets(jt, r, i):
    """Tree ``i``'s category sets {node: (codes, False, True)} from its JSON fields ``jt``
    and node arrays ``r``: the listed codes go right, every other code left."""
    nodes, segs, sizes, codes = (
        numeric_array(jt[key], f"tree {i}: {key!r}", np.int64)
        for key in ("categories_nodes", "categories_segments", "categories_sizes",
                    "categories"))
    if codes.size and (codes.min() < 0 or codes.max() > np.iinfo(np.int32).max):
        bad = codes[(codes < 0) | (codes > np.iinfo(np.int32).max)][0]
        raise ValueError(f"XGBoost tree {i}: categories holds the code {bad}, outside "
                         "0..2**31-1 (XGBoost stores codes as int32)")
    if not nodes.size == segs.size == sizes.size:
        raise ValueError(f"XGBoost tree {i}: categories_nodes/segments/sizes have different "
                         f"lengths ({nodes.size}, {segs.size}, {sizes.size})")
    n = r["left"].size
    if nodes.size == 0 and not r["split_type"].any():
        return {}  # no categorical split (the common case: skip the set comparison)
    cat_split = np.flatnonzero((r["split_type"] == 1) & (r["left"] >= 0))
    if set(nodes.tolist()) != set(cat_split.tolist()):
        raise ValueError(f"XGBoost tree {i}: categorical nodes {sorted(cat_split.tolist())[:10]} "
                         f"but category sets for {sorted(nodes.tolist())[:10]}")
    out = {}
    for node, s, z in zip(nodes, segs, sizes):
        if not 0 <= node < n or s < 0 or z < 0 or s + z > codes.size:
            raise ValueError(f"XGBoost tree {i}: category set of node {node} "
                             f"[{s}, {s + z}) is outside its {codes.size} categories")
        # the listed codes go RIGHT; every other code (unseen ones too) goes left
        out[int(node)] = (codes[s:s + z], False, True)
    return out
