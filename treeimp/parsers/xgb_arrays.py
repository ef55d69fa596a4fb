"""Arrays of an XGBoost model document checked as they are read: a field that must be an
array of numbers (of an integer dtype's range, when asked) and is not is a damaged file,
reported naming the field."""

from __future__ import annotations

import numpy as np


def numeric_array(value, what, dtype=None):
    """``value`` (a list or a UBJSON array) as a 1-D numeric array, converted to
    ``dtype`` when given: anything else (objects, strings, nesting, a single number) and,
    for an integer ``dtype``, values that are not integers in its range are a damaged
    file, reported naming ``what``; XGBoost refuses them too."""
    try:
        a = np.asarray(value)
    except (TypeError, ValueError, OverflowError):  # ragged nesting, huge integers
        a = np.asarray([None])
    if a.ndim != 1 or (a.dtype.kind not in "biuf" and a.size):
        if isinstance(value, list):
            k = next((k for k, v in enumerate(value) if isinstance(v, (bool, str, list, dict))
                      or v is None), 0)
            shown = f"entry {k} is {str(value[k])[:40] if value else value!r}"
        else:
            shown = f"got {type(value).__name__} {str(value)[:40]!r}"
        raise ValueError(f"XGBoost {what} must be an array of numbers, but {shown}")
    if dtype is None or a.dtype == dtype:
        return a
    if np.dtype(dtype).kind in "iu" and a.dtype.kind in "fu":
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):
            bad = ~((a == np.floor(a)) & (a >= info.min) & (a <= info.max))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"XGBoost {what} must hold integers, but entry {k} is "
                             f"{a[k].item()!r}")
    with np.errstate(over="ignore"):  # float64 -> float32: XGBoost's rounding too
        return a.astype(dtype, copy=False)
