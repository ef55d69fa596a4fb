"""In-bag rows of scikit-learn bagged forests, for out-of-bag evaluation."""

from __future__ import annotations

import numpy as np
from numba import njit


def sklearn_inbag_bits(model, n_rows):
    """Packed in-bag indicator (n_trees, ceil(n_rows / 8)), little bit order.

    Uses the public ``estimators_samples_`` (scikit-learn >= 1.4), which follows
    ``max_samples`` and sample-weight-proportional bootstrap. ``n_rows`` must be the
    number of training rows; it is checked against the forest's own record.
    """
    from sklearn.ensemble._forest import BaseForest

    name = type(model).__name__
    if not isinstance(model, BaseForest):
        raise ValueError(f"oob=True needs a bagged forest (RandomForest or ExtraTrees with "
                         f"bootstrap=True); {name} has no out-of-bag rows. Pass held-out "
                         "rows instead (oob=False)")
    if not getattr(model, "bootstrap", False):
        raise ValueError(f"oob=True needs bootstrap=True, but this {name} was fit with "
                         "bootstrap=False: every tree saw every row. Pass held-out rows "
                         "instead (oob=False)")
    n_train = getattr(model, "_n_samples", None)
    if n_train is not None and int(n_train) != n_rows:
        raise ValueError(f"oob=True needs the training rows: the forest was fit on {n_train} "
                         f"rows but X has {n_rows}")
    try:
        samples = model.estimators_samples_
    except Exception as exc:  # private state missing or changed in this sklearn version
        import sklearn

        raise ValueError(f"cannot recover the in-bag rows of this {name} (scikit-learn "
                         f"{sklearn.__version__}): {exc}") from None
    if len(samples) != len(model.estimators_):
        raise ValueError(f"{name} reports in-bag rows for {len(samples)} trees but has "
                         f"{len(model.estimators_)} trees")
    bits = np.zeros((len(samples), (n_rows + 7) // 8), np.uint8)
    for t, idx in enumerate(samples):
        idx = np.asarray(idx)
        if not np.issubdtype(idx.dtype, np.integer) or idx.ndim != 1:
            raise ValueError(f"tree {t} of the {name} reports in-bag rows of dtype {idx.dtype} "
                             f"and shape {idx.shape}; expected a 1-D integer array")
        bad = set_bits(idx, n_rows, bits[t])
        if bad >= 0:
            raise ValueError(f"tree {t} of the {name} drew row {int(idx[bad])} but X has "
                             f"{n_rows} rows: pass the training rows with oob=True")
    return bits


@njit(cache=True)
def set_bits(idx, n_rows, out):
    """Set bit idx[i] of ``out`` (little bit order) for every i; returns the first i with
    idx[i] outside [0, n_rows) (nothing set from there on), or -1."""
    for i in range(idx.shape[0]):
        r = idx[i]
        if r < 0 or r >= n_rows:
            return i
        out[r >> 3] |= np.uint8(1 << (r & 7))
    return -1
