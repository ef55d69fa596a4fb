"""Turn user input (numpy arrays, pandas DataFrames) into float chunks the kernels read.

Validation happens once here: column count, feature names, column dtypes. Float32 and
float64 numpy arrays (C or F order, any strides) are passed to the kernels as they are;
anything else is converted one chunk of rows at a time, so memory never holds a second
copy of X.

What a value means is the model's business, recorded by its parser in the normal form
(``TreeEnsemble.from_trees``):

* a pandas 'category' column is read as category CODES where ``ens.category_as_code``
  (one bool, or one per feature) says so
  (XGBoost, LightGBM and HistGradientBoosting categorical features: labels mapped to
  their positions in ``ens.feature_categories[j]`` when the model stores them), and as
  its label VALUES otherwise, as ``np.asarray`` of the column gives them to scikit-learn
  (labels that are not numbers are then an error, as in scikit-learn);
* numeric input on a feature with a value table (``ens.category_values[j]``) is replaced
  by the value's position in the table, NaN (missing) when it is not listed; an empty
  table means the feature's categories are text and numeric input is rejected;
* on a hashed feature (``ens.hashed_features``, CatBoost's one-hot features) the raw
  value (string, integer, 'category' label, of any column dtype) is first replaced by
  ``ens.value_hasher`` of it, then looked up in the value table;
* a model with a leaf router (``ens.leaf_router``, see ``treeimp/leaf_router.py``) is
  routed on the router's numbers of each chunk of the user's rows, which go to the
  router as they are (only their width and column names are checked here).
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
        self._tables = _value_tables(ens)
        self._hashed = dict.fromkeys(getattr(ens, "hashed_features", ()) or ())
        self._hasher = getattr(ens, "value_hasher", None)
        self._router = getattr(ens, "leaf_router", None)
        if self._router is not None:
            self._init_routed(X, ens, what)
        elif _is_dataframe(X):
            self._init_frame(X, ens, what)
        else:
            self._init_array(X, ens, what)
        if self.n_rows == 0:
            raise ValueError(f"{what} has 0 rows; at least one row is needed")

    # -------------------------------------------------------------- leaf router
    def _init_routed(self, X, ens, what):
        """Rows for a leaf router: the user's X as it is, width and names checked."""
        if _is_dataframe(X):
            _check_width(X.shape[1], self.n_features, what)
            _check_names(X, ens, what)
            self.feature_names = [str(c) for c in X.columns]
        else:
            shape = np.shape(X)
            if len(shape) != 2:
                raise ValueError(f"{what} must be 2-D (rows x features), got shape {shape}")
            _check_width(shape[1], self.n_features, what)
            self.feature_names = None
        self._routed = X
        self.n_rows = X.shape[0]

    def _routed_rows(self, rows):
        X = self._routed
        part = X.iloc[rows] if _is_dataframe(X) else np.asarray(X)[rows]
        return self._router.numbers(part)

    # -------------------------------------------------------------- numpy
    def _init_array(self, X, ens, what):
        if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
            raise TypeError(f"{what} is a sparse matrix; pass a dense numpy array or a "
                            "pandas DataFrame")
        try:
            arr = np.asarray(X)
        except Exception as exc:  # e.g. ragged lists
            raise TypeError(f"{what} cannot be read as a 2-D numeric array: {exc}") from None
        if arr.ndim != 2:
            raise ValueError(f"{what} must be 2-D (rows x features), got shape {arr.shape}")
        if arr.dtype.kind not in "fiub" and not (arr.dtype.kind in "OUS" and self._hashed):
            raise TypeError(f"{what} has dtype {arr.dtype}; only numeric data can be "
                            "routed (use a DataFrame with 'category' columns for categories)")
        if arr.dtype.kind in "OUS":  # raw categories (hashed features) beside numbers
            self._check_numeric_columns(arr, what)
        _check_width(arr.shape[1], self.n_features, what)
        for j in self._tables:
            if j not in self._hashed:
                _check_numeric_allowed(self._tables[j], j, f"{what} column {j}", ens)
        self._array = arr
        self.n_rows = arr.shape[0]
        self.feature_names = None

    # -------------------------------------------------------------- pandas
    def _init_frame(self, df, ens, what):
        import pandas as pd

        _check_width(df.shape[1], self.n_features, what)
        cols = [str(c) for c in df.columns]
        _check_names(df, ens, what)
        self.feature_names = cols
        self._converters = []
        levels = ens.feature_categories or [None] * self.n_features
        as_code = ens.category_as_code  # one bool, or one per feature
        for j in range(df.shape[1]):
            col = df.iloc[:, j]
            dtype = col.dtype
            if j in self._hashed:
                self._converters.append(("hash", self._tables.get(j)))
            elif isinstance(dtype, pd.CategoricalDtype):
                if as_code if np.ndim(as_code) == 0 else as_code[j]:
                    lookup = _category_lookup(col, levels[j])
                else:
                    lookup = _label_values(col, f"{what} column {cols[j]!r}", ens)
                self._converters.append(("cat", lookup))
            elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
                if j in self._tables:
                    _check_numeric_allowed(self._tables[j], j, f"{what} column {cols[j]!r}",
                                           ens)
                self._converters.append(("num", self._tables.get(j)))
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
            elif kind == "hash":
                out[:, j] = self._hash_codes(np.asarray(col, dtype=object), lookup)
            else:
                out[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
                if lookup is not None:
                    out[:, j] = _table_codes(out[:, j], lookup)
        return out

    def _array_chunk(self, start, stop):
        if not self._tables and not self._hashed:
            return np.asarray(self._array[start:stop], dtype=np.float64)
        part = self._array[start:stop]
        if part.dtype.kind in "OUS":  # text / object: numeric columns one by one
            out = np.empty(part.shape, np.float64)
            for j in range(part.shape[1]):
                if j not in self._hashed:
                    out[:, j] = part[:, j].astype(np.float64)
        else:
            out = np.array(part, dtype=np.float64)  # never write into X
        for j in self._hashed:
            out[:, j] = self._hash_codes(self._array[start:stop, j], self._tables.get(j))
        for j, table in self._tables.items():
            if j not in self._hashed:
                out[:, j] = _table_codes(out[:, j], table)
        return out

    def _check_numeric_columns(self, arr, what):
        """TypeError naming the first column that is not a hashed feature and whose
        values are not numbers (an object / text array)."""
        for j in range(arr.shape[1]):
            if j in self._hashed:
                continue
            try:
                arr[:, j].astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"{what} column {j} holds values that are not numbers "
                                f"({exc}); only the model's one-hot categorical features "
                                f"{list(self._hashed)} may hold text") from None

    def _hash_codes(self, values, table):
        """Positions of the hashes of raw values in a hashed feature's table (NaN where
        missing or not listed; all NaN when the model never splits on the feature)."""
        if table is None:
            return np.full(len(values), np.nan)
        return _table_codes(self._hasher(values), table)

    # -------------------------------------------------------------- chunks
    def chunks(self, chunk_rows=CHUNK_ROWS, *, split=False):
        """Yield (start, float array of rows start:start+len).

        A float32/float64 numpy array is yielded whole (no copy), or as row views of
        ``chunk_rows`` rows with ``split=True`` (for progress reporting).
        """
        if self._router is not None:
            for start in range(0, self.n_rows, chunk_rows):
                stop = min(self.n_rows, start + chunk_rows)
                yield start, self._routed_rows(slice(start, stop))
            return
        if (self._array is not None and self._array.dtype in (np.float32, np.float64)
                and not self._tables and not self._hashed):
            if not split:
                yield 0, self._array
                return
            for start in range(0, self.n_rows, chunk_rows):
                yield start, self._array[start:start + chunk_rows]
            return
        for start in range(0, self.n_rows, chunk_rows):
            stop = min(self.n_rows, start + chunk_rows)
            if self._array is not None:
                yield start, self._array_chunk(start, stop)
            else:
                yield start, self._frame_chunk(start, stop)

    def take(self, rows):
        """Float64 array of the given rows (used by permutation importance)."""
        if self._router is not None:
            return self._routed_rows(np.asarray(rows))
        if self._array is not None and not self._tables and not self._hashed:
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


def _check_names(df, ens, what):
    """ValueError when a DataFrame's column names differ from the model's names."""
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


def _label_values(col, where, ens):
    """Array mapping a pandas category code (index; -1 = missing) to the label's value as
    a float, the way ``np.asarray(column).astype(float)`` reads it (scikit-learn)."""
    cats = col.cat.categories
    lookup = np.full(len(cats) + 1, np.nan)
    try:
        lookup[: len(cats)] = np.asarray(cats.to_numpy(), dtype=np.float64)
        return lookup
    except (TypeError, ValueError):
        pass
    bad = []
    for k, label in enumerate(cats):
        try:
            lookup[k] = np.asarray([label], dtype=object).astype(np.float64)[0]
        except (TypeError, ValueError):
            bad.append(k)
    used = np.isin(np.asarray(col.cat.codes), bad)
    if used.any():
        label = cats[int(np.asarray(col.cat.codes)[used][0])]
        raise ValueError(f"{where} is a 'category' column with the label {label!r}, which is "
                         f"not a number; the model ({ens.library or 'custom'} {ens.kind}) "
                         "treats this feature as numeric and reads the labels' values (as "
                         "scikit-learn does, which fails with 'could not convert string to "
                         "float'). Encode the labels as numbers the way the model was trained")
    return lookup


def _value_tables(ens):
    """{feature: (sorted table values, their codes as floats)} for numeric input."""
    tables = ens.category_values
    if tables is None:
        return {}
    out = {}
    for j, values in enumerate(tables):
        if values is not None:
            order = np.argsort(values, kind="stable")
            out[j] = (np.asarray(values, dtype=np.float64)[order], order.astype(np.float64))
    return out


def _table_codes(x, table):
    """Positions of the values ``x`` in a value table; NaN for values not listed."""
    values, codes = table
    if values.size == 0:
        return np.full(x.shape, np.nan)
    k = np.minimum(np.searchsorted(values, x), values.size - 1)
    return np.where(values[k] == x, codes[k], np.nan)


def _check_numeric_allowed(table, j, where, ens):
    if table[0].size == 0:
        cats = (ens.feature_categories or [None] * ens.n_features)[j] or []
        raise TypeError(f"{where} holds numbers but the model's categories for feature {j} "
                        f"are text ({', '.join(map(repr, cats[:5]))}"
                        f"{', ...' if len(cats) > 5 else ''}); pass a pandas DataFrame with "
                        "a 'category' column for it")
