"""Per-row margin offsets (``base_margin``): XGBoost's ``base_margin``, LightGBM's
``init_score``, a GLM's offset such as log exposure. A boosting model's margin on a row
is base score + offset + its trees, so held-out margins, gradients and predictions all
start from base score + offset."""

from __future__ import annotations

import numpy as np

from .kinds import FOREST


def check_base_margin(base_margin, n_rows, ens):
    """``base_margin`` as a C-contiguous float64 (n_rows, n_outputs) array, or None.

    Accepts one value per row (1-D, models with one output) or rows x outputs."""
    if base_margin is None:
        return None
    if ens.kind == FOREST:
        raise ValueError("base_margin is an offset added to a boosting model's margin; a "
                         "forest's output is an average of its trees and takes none")
    if _is_sparse(base_margin):
        raise TypeError("base_margin must be a dense array, not a sparse matrix")
    try:
        b = np.asarray(base_margin, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"base_margin must be numeric, got {type(base_margin).__name__}"
                        ) from None
    K = ens.n_outputs
    if b.ndim == 1 and K == 1:
        b = b[:, None]
    if b.ndim != 2 or b.shape != (n_rows, K):
        expected = f"({n_rows},) or ({n_rows}, 1)" if K == 1 else f"({n_rows}, {K})"
        raise ValueError(f"base_margin has shape {np.shape(base_margin)}; expected "
                         f"{expected}: one offset per row{'' if K == 1 else ' and output'} "
                         f"of X ({n_rows} rows, the model has {K} output"
                         f"{'' if K == 1 else 's'})")
    if not np.all(np.isfinite(b)):
        bad = int(np.argmax(~np.isfinite(b).all(axis=1)))
        raise ValueError(f"base_margin must be finite; row {bad} holds {b[bad].tolist()}")
    return np.ascontiguousarray(b)


def _is_sparse(x):
    return type(x).__module__.startswith("scipy.sparse")
