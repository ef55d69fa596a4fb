"""Turn user input (numpy arrays, pandas DataFrames) into float chunks the kernels read.

Validation happens once here: column count, feature names, column dtypes. Float32 and
float64 numpy arrays (C or F order) are passed to the kernels as they are; anything
else is converted one chunk of rows at a time, so memory never holds a second copy of X.
"""

from __future__ import annotations

import numpy as np

CHUNK_ROWS = 65536


class RowSource:
    """Validated rows of X: ``n_rows`` and ``chunks()`` yielding (start, 2-D float array)."""

    def __init__(self, X, ens, *, what="X"):
        self.n_features = ens.n_features
        self._frame = None
        self._array = None
        if _is_dataframe(X):
            self._init_frame(X, ens, what)
        else:
            self._init_array(X, what)
        if self.n_rows == 0:
            raise ValueError(f"{what} has 0 rows; at least one row is needed")

    # -------------------------------------------------------------- numpy
    def _init_array(self, X, what):
        if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
            raise TypeError(f"{what} is a sparse matrix; pass a dense numpy array or a "
                            "pandas DataFrame")
        try:
            arr = np.asarray(X)
        except Exception as exc:  # e.g. ragged lists
            raise TypeError(f"{what} cannot be read as a 2-D numeric array: {exc}") from None
        if arr.ndim != 2:
            raise ValueError(f"{what} must be 2-D (rows x features), got shape {arr.shape}")
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"{what} has dtype {arr.dtype}; only numeric data can be "
                            "routed (use a DataFrame with 'category' columns for categories)")
        _check_width(arr.shape[1], self.n_features, what)
        self._array = arr
        self.n_rows = arr.shape[0]
        self.feature_names = None

    # -------------------------------------------------------------- pandas
    def _init_frame(self, df, ens, what):
        import pandas as pd

        _check_width(df.shape[1], self.n_features, what)
        cols = [str(c) for c in df.columns]
        if ens.feature_names is not None and _named(df.columns):
            expected = list(ens.feature_names)
            if cols != expected:
                missing = [c for c in expected if c not in cols]
                extra = [c for c in cols if c not in expected]
                if not missing and not extra:
                    raise ValueError(f"{what} has the model's feature names in a different "
                                     f"order; expected {expected[:10]}, got {cols[:10]}")
                raise ValueError(f"{what}'s columns do not match the model's feature names: "
                                 f"missing {missing[:10]}, unexpected {extra[:10]}")
        self.feature_names = cols
        self._converters = []
        levels = ens.feature_categories or [None] * self.n_features
        for j in range(df.shape[1]):
            col = df.iloc[:, j]
            dtype = col.dtype
            if isinstance(dtype, pd.CategoricalDtype):
                self._converters.append(("cat", _category_lookup(col, levels[j])))
            elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
                self._converters.append(("num", None))
            else:
                raise TypeError(f"{what} column {cols[j]!r} has dtype {dtype}; only numeric, "
                                "boolean and pandas 'category' columns can be used")
        self._frame = df
        self.n_rows = df.shape[0]

    def _frame_chunk(self, start, stop):
        df = self._frame
        out = np.empty((stop - start, self.n_features), dtype=np.float64)
        for j, (kind, lookup) in enumerate(self._converters):
            col = df.iloc[start:stop, j]
            if kind == "cat":
                codes = np.asarray(col.cat.codes, dtype=np.int64)
                out[:, j] = lookup[codes]  # code -1 (missing) hits the last entry: NaN
            else:
                out[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
        return out

    # -------------------------------------------------------------- chunks
    def chunks(self, chunk_rows=CHUNK_ROWS, *, split=False):
        """Yield (start, float array of rows start:start+len).

        A float32/float64 numpy array is yielded whole (no copy), or as row views of
        ``chunk_rows`` rows with ``split=True`` (for progress reporting).
        """
        if self._array is not None and self._array.dtype in (np.float32, np.float64):
            if not split:
                yield 0, self._array
                return
            for start in range(0, self.n_rows, chunk_rows):
                yield start, self._array[start:start + chunk_rows]
            return
        for start in range(0, self.n_rows, chunk_rows):
            stop = min(self.n_rows, start + chunk_rows)
            if self._array is not None:
                yield start, np.asarray(self._array[start:stop], dtype=np.float64)
            else:
                yield start, self._frame_chunk(start, stop)

    def take(self, rows):
        """Float64 array of the given rows (used by permutation importance)."""
        if self._array is not None:
            return np.asarray(self._array[rows], dtype=np.float64)
        out = np.empty((len(rows), self.n_features))
        for start, chunk in self.chunks():
            sel = (rows >= start) & (rows < start + chunk.shape[0])
            out[sel] = chunk[rows[sel] - start]
        return out


def _is_dataframe(X):
    return type(X).__name__ == "DataFrame" and hasattr(X, "iloc") and hasattr(X, "dtypes")


def _named(columns):
    return all(isinstance(c, str) for c in columns)


def _check_width(n_cols, n_features, what):
    if n_cols != n_features:
        raise ValueError(f"{what} has {n_cols} columns but the model was trained on "
                         f"{n_features} features")


def _category_lookup(col, levels):
    """Array mapping a pandas category code (index; -1 = missing) to the model's code.

    With the training levels known, a label is mapped to its position among them
    (unseen labels -> NaN, as LightGBM, XGBoost and HistGradientBoosting do);
    otherwise the column's own codes are used.
    """
    cats = list(col.cat.categories)
    lookup = np.full(len(cats) + 1, np.nan)
    if levels is None:
        lookup[: len(cats)] = np.arange(len(cats))
    else:
        position = {lv: k for k, lv in enumerate(levels)}
        for k, c in enumerate(cats):
            lookup[k] = position.get(c, np.nan)
    return lookup
