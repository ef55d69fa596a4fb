"""The fingerprint of a TreeEnsemble: a short stable hash of what routes rows and what
the trees add, so that statistics accumulated for one model are never combined with
those of another (``TreeEnsemble.fingerprint``)."""

from __future__ import annotations

import hashlib

import numpy as np

# settings and arrays the fingerprint covers (tree_learning_rate_source is left out)
_FINGERPRINT_SETTINGS = ("kind", "n_features", "n_outputs", "value_dim", "comparison",
                         "round_float32", "sparse_absent", "missing_value",
                         "offset_replaces_base", "base_in_first_round", "hashed_features")
_FINGERPRINT_ARRAYS = ("base_score", "tree_offsets", "tree_output", "tree_scale",
                       "tree_stage", "left", "right", "feature", "threshold", "missing_left",
                       "nan_mode", "is_categorical", "category_offset", "category_count",
                       "category_default_left", "category_codes", "category_left", "value",
                       "weight", "cover", "impurity", "gain")


def ensemble_fingerprint(ens) -> str:
    """:attr:`TreeEnsemble.fingerprint`: blake2b (16 bytes, hex) of the settings and
    arrays listed above, each array with its dtype and shape."""
    h = hashlib.blake2b(digest_size=16)

    def add(label, a):
        a = np.ascontiguousarray(a)
        h.update(f"{label}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.view(np.uint8).reshape(-1) if a.size else b"")

    obj = ens.objective
    h.update(repr((obj.name, sorted(obj.params.items()), obj.link)).encode())
    h.update(repr(tuple(getattr(ens, k) for k in _FINGERPRINT_SETTINGS)).encode())
    for name in _FINGERPRINT_ARRAYS:
        add(name, getattr(ens, name))
    # how input values become category codes, and what the outputs are
    h.update(repr((ens.feature_categories, None if ens.classes is None
                   else ens.classes.tolist())).encode())
    add("category_as_code", np.asarray(ens.category_as_code))
    for j, table in enumerate(ens.category_values or ()):
        if table is not None:
            add(f"category_values[{j}]", table)
    linear = ens.linear_leaves
    if linear is not None:  # a model without linear leaves hashes as before
        for name, a in zip(linear._fields, linear):
            add(f"linear.{name}", a)
    router = ens.leaf_router
    if router is not None:
        h.update(router.description.encode())
        add("router.column", np.asarray(router.column))
        add("router.threshold", np.asarray(router.threshold, np.float64))
    return h.hexdigest()

