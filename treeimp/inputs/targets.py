"""Evaluation targets: validate y and turn it into what the kernels accumulate."""

from __future__ import annotations

import numpy as np

# boosting objectives with one margin per class (every other boosting objective has one
# output per target)
MULTICLASS = ("softmax", "ova_logistic")
# one target, one output per quantile / expectile level (losses.py)
LEVELS = ("quantiles", "expectile_stack", "smoothed_quantile")
# one output, two label columns per row: [lower, upper] bound of a survival time
INTERVAL_LABELS = ("aft",)
# gradients over the risk sets of all evaluation rows (stats/cox.py)
RISK_SETS = ("cox",)


def as_1d_target(y, n_rows, what="y"):
    """y as a 1-D array of n_rows values (labels kept as they are)."""
    if y is None:
        raise ValueError(f"{what} is required: importances are measured against the "
                         "evaluation rows' targets")
    arr = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but {what} has {arr.shape[0]}")
    _check_no_pd_na(arr, what)
    return arr


def _check_no_pd_na(arr, what):
    """pandas' missing value pd.NA (nullable Int64/Float64/boolean/string columns) is
    neither a label nor a number: name it instead of failing on it later."""
    if arr.dtype != object:
        return
    import pandas as pd

    missing = np.fromiter((v is pd.NA for v in arr.tolist()), dtype=bool, count=arr.size)
    if missing.any():
        raise ValueError(f"{what} has {int(missing.sum())} missing values (pd.NA; first at "
                         f"row {int(np.flatnonzero(missing)[0])}); drop those rows or fill "
                         "them")


def target_classes(ens):
    """Each target's classes (a list of arrays) for a multi-output classification forest,
    else None (set by the scikit-learn forest parser)."""
    return ens.target_classes


def n_target_columns(ens):
    """Columns y must have: one per output of a multi-output regression forest or of a
    boosting model on several regression targets (XGBoost ``num_target``), one per
    target of a multi-output classification forest, 2 for survival:aft (each row's
    [lower, upper] bound), else 1."""
    if ens.objective.name in INTERVAL_LABELS:
        return 2
    if target_classes(ens) is not None:
        return len(target_classes(ens))
    if ens.kind == "forest" and ens.objective.name != "class_probability":
        return int(ens.n_outputs)
    if ens.kind != "forest" and ens.objective.name not in MULTICLASS + LEVELS:
        return int(ens.n_outputs)
    return 1


def as_target(y, n_rows, n_columns, what="y"):
    """y for a model with ``n_columns`` targets: 1-D when 1, else (n_rows, n_columns)."""
    if n_columns == 1:
        return as_1d_target(y, n_rows, what)
    if y is None:
        raise ValueError(f"{what} is required: importances are measured against the "
                         "evaluation rows' targets")
    arr = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if arr.ndim != 2 or arr.shape[1] != n_columns:
        raise ValueError(f"the model was fit on {n_columns} targets: {what} must have shape "
                         f"(n_rows, {n_columns}), got {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but {what} has {arr.shape[0]}")
    _check_no_pd_na(arr.ravel(), what)
    return arr


def class_indices(y, classes, what="y", dtype=np.int64):
    """Position of every label among the model's classes (as ``dtype``); unknown labels
    are an error.

    Labels and classes of the same kind (both integer or boolean, both floating point
    with integers exact in float64, both text) are matched by sorting, a chunk of rows
    at a time, into an output of ``dtype`` (no Python list of the rows, no int64 copy
    beside a float64 one); other labels, and every error, take the label-by-label
    dictionary lookup, whose equality (1 == 1.0 == True) the sorted match keeps."""
    classes = np.asarray(classes)
    y = np.asarray(y)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError(f"{what} contains NaN or inf")
    common = _common_label_dtype(y, classes)
    if common is not None:
        idx = _sorted_class_indices(y, classes, common, dtype)
        if idx is not None:
            return idx
    if y.dtype.kind == "O":
        missing = np.array([v is None or (isinstance(v, float) and v != v) for v in y.tolist()],
                           dtype=bool)
        if missing.any() and not any(c is None or (isinstance(c, float) and c != c)
                                     for c in classes.tolist()):
            raise ValueError(f"{what} has {int(missing.sum())} missing labels (None or NaN; "
                             f"first at row {int(np.flatnonzero(missing)[0])})")
    lookup = {c: k for k, c in enumerate(classes.tolist())}
    try:
        idx = np.array([lookup[v] for v in y.tolist()], dtype=dtype)
    except KeyError:
        unseen = sorted({v for v in y.tolist() if v not in lookup}, key=str)
        raise ValueError(f"{what} has labels the model never saw: {unseen[:10]}"
                         f"{' ...' if len(unseen) > 10 else ''}; the model's classes are "
                         f"{classes.tolist()[:20]}") from None
    return idx


# rows matched at a time by ``_sorted_class_indices`` (bounds its temporaries)
LABEL_CHUNK = 1 << 14
_EXACT_INT = 2 ** 53  # integers up to this size are exact in float64


def _common_label_dtype(y, classes):
    """The dtype in which labels and classes compare as Python's dict lookup would (int64,
    float64, or their own text dtype), or None where only that lookup is sure."""
    ky, kc = y.dtype.kind, classes.dtype.kind
    if y.ndim != 1 or classes.ndim != 1 or classes.size == 0:
        return None
    if ky == kc and ky in "US":
        return np.result_type(y, classes)
    if ky not in "biuf" or kc not in "biuf":
        return None
    if max(y.dtype.itemsize, classes.dtype.itemsize) > 8:  # long double: not float64
        return None
    ints = [a for a in (y, classes) if a.dtype.kind in "biu"]
    if len(ints) == 2:  # int64 holds both exactly, unless a uint64 is larger
        big = [a for a in ints if a.dtype == np.uint64 and a.size and a.max() > 2 ** 63 - 1]
        return None if big else np.dtype(np.int64)
    # floating point beside integers: the integers must be exact in float64
    for a in ints:
        if a.size and (a.min() < -_EXACT_INT or a.max() > _EXACT_INT):
            return None
    return np.dtype(np.float64)


def _sorted_class_indices(y, classes, common, dtype):
    """Positions of the labels among the classes by sorted search (the last of equal
    classes, as a dict built in order keeps it), or None when some label is not a
    class (the caller's lookup then names them)."""
    keys = classes.astype(common)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    out = np.empty(y.shape[0], dtype=dtype)
    for s in range(0, y.shape[0], LABEL_CHUNK):
        part = y[s:s + LABEL_CHUNK].astype(common, copy=False)
        pos = np.searchsorted(sorted_keys, part, side="right") - 1
        if pos.size and (pos.min() < 0 or not np.array_equal(sorted_keys[pos], part)):
            return None
        out[s:s + LABEL_CHUNK] = order[pos]
    return out


def regression_target(y, what="y"):
    try:
        arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be numeric for a regression model") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{what} has {int(bad.sum())} NaN or inf values (first at row "
                         f"{int(np.flatnonzero(bad)[0])})")
    return arr


def forest_class_targets(ens) -> bool:
    """Whether a forest's per-tree targets are one-hot classes (classifiers, also with
    several targets) rather than the regression values."""
    return ens.kind == "forest" and (ens.objective.name == "class_probability"
                                     or target_classes(ens) is not None)


def forest_targets(ens, y):
    """Per-row target matrix Z for a forest: one-hot classes or the regression value."""
    per_target = target_classes(ens)
    if per_target is not None:  # the one-hot vectors of each target, side by side
        blocks = []
        for j, classes in enumerate(per_target):
            idx = class_indices(y[:, j], classes, what=f"y[:, {j}]")
            block = np.zeros((len(idx), len(classes)))
            block[np.arange(len(idx)), idx] = 1.0
            blocks.append(block)
        return np.hstack(blocks), True
    if ens.objective.name == "class_probability":
        idx = class_indices(y, ens.classes)
        Z = np.zeros((len(idx), ens.n_outputs))
        Z[np.arange(len(idx)), idx] = 1.0
        return Z, True
    Z = regression_target(y)
    return (Z[:, None] if Z.ndim == 1 else Z), False


def check_sample_weight(sample_weight, n_rows):
    if sample_weight is None:
        return np.ones(n_rows)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim != 1 or w.shape[0] != n_rows:
        raise ValueError(f"sample_weight has shape {w.shape} but X has {n_rows} rows")
    if not np.all(np.isfinite(w)):
        raise ValueError("sample_weight contains NaN or inf")
    if np.any(w < 0):
        raise ValueError(f"sample_weight has {int((w < 0).sum())} negative values")
    if not np.any(w > 0):
        raise ValueError("sample_weight is zero for every row")
    with np.errstate(over="ignore"):
        total = w.sum()
    if not np.isfinite(total):
        raise ValueError(f"sample_weight sums to infinity (largest weight {w.max():.3g} over "
                         f"{w.size} rows): rescale the weights, e.g. divide by their maximum")
    return w
