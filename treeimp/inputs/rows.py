"""Turn user input (numpy arrays, scipy.sparse matrices, DataFrames) into float chunks
the kernels read.

Validation happens once here: column count, feature names, column dtypes. Float32 and
float64 numpy arrays (C or F order, any strides) are passed to the kernels as they are;
anything else is converted one chunk of rows at a time, so memory never holds a second
copy of X: a scipy.sparse matrix or array (CSR, CSC, COO, ...; read as CSR) is made
dense chunk by chunk, a DataFrame (pandas, polars, pyarrow and whatever else narwhals
reads) column by column.

What a value means is the model's business, recorded by its parser in the normal form
(``TreeEnsemble.from_trees``):

* an entry ABSENT from a sparse matrix is ``ens.sparse_absent`` (NaN for XGBoost, which
  reads it as missing; 0.0 for LightGBM and scikit-learn); stored entries, explicit
  zeros included, are their values;
* a value x with float32(x) == float32(``ens.missing_value``) (XGBoost's ``missing``
  sentinel, compared as XGBoost compares it) is routed as NaN;
* a categorical column (pandas 'category', polars Categorical / Enum, an arrow
  dictionary) is read as category CODES where ``ens.category_as_code``
  (one bool, or one per feature) says so
  (XGBoost, LightGBM and HistGradientBoosting categorical features: labels mapped to
  their positions in ``ens.feature_categories[j]`` when the model stores them, else
  to their positions among the column's own categories), and as its label VALUES
  otherwise, as ``np.asarray`` of the column gives them to scikit-learn
  (labels that are not numbers are then an error, as in scikit-learn);
* numeric input on a feature with a value table (``ens.category_values[j]``) is replaced
  by the value's position in the table, NaN (missing) when it is not listed; an empty
  table means the feature's categories are text and numeric input is rejected;
* on a hashed feature (``ens.hashed_features``, CatBoost's one-hot features) the raw
  value (string, integer, 'category' label, of any column dtype) is first replaced by
  ``ens.value_hasher`` of it, then looked up in the value table;
* a model with a leaf router (``ens.leaf_router``, see ``treeimp/model/leaf_router.py``) is
  routed on the router's numbers of each chunk of the user's rows, which go to the
  router as they are (only their width and column names are checked here).

DataFrame columns are matched to the model's feature names by name, whatever the
library: the same names in another order, or other names, are an error (never read by
position).
"""

from __future__ import annotations

import numpy as np

from .categories import text_as_categories

CHUNK_ROWS = 65536
# a sparse chunk made dense holds at most this many values (64 MB of float64)
SPARSE_CHUNK_VALUES = 1 << 23


class RowSource:
    """Validated rows of X: ``n_rows`` and ``chunks()`` yielding (start, 2-D float array)."""

    def __init__(self, X, ens, *, what="X"):
        self.n_features = ens.n_features
        self._frame = None
        self._array = None
        self._sparse = None
        self._tables = _value_tables(ens)
        self._missing = _sentinel(ens)
        self._absent = float(ens.sparse_absent)
        self._hashed = dict.fromkeys(ens.hashed_features)
        self._hasher = ens.value_hasher
        self._router = ens.leaf_router
        X = _in_model_order(X, ens)
        if self._router is not None:
            self._init_routed(X, ens, what)
        elif (frame := _as_dataframe(X)) is not None:
            self._init_frame(frame, ens, what)
        elif _is_sparse(X):
            self._init_sparse(X, ens, what)
        else:
            self._init_array(X, ens, what)
        if self.n_rows == 0:
            raise ValueError(f"{what} has 0 rows; at least one row is needed")

    # -------------------------------------------------------------- leaf router
    def _init_routed(self, X, ens, what):
        """Rows for a leaf router: the user's X as it is, width and names checked."""
        if _is_dataframe(X):
            _check_width(X.shape[1], self.n_features, what)
            _check_names(list(X.columns), ens, what)
            self.feature_names = [str(c) for c in X.columns]
        else:
            shape = np.shape(X)
            if len(shape) != 2:
                raise ValueError(f"{what} must be 2-D (rows x features), got shape {shape}")
            _check_width(shape[1], self.n_features, what)
            self.feature_names = None
        self._routed = X
        self.n_rows = X.shape[0]

    def rerouted(self, ens):
        """The same rows for ``ens``, the model of these rows with another leaf router
        (e.g. its ``split_router``), which reads the user's rows as they are."""
        if self._router is None or ens.leaf_router is None:
            raise ValueError("only rows of a model with a leaf router can be rerouted")
        return RowSource(self._routed, ens)

    def _routed_rows(self, rows):
        X = self._routed
        part = X.iloc[rows] if _is_dataframe(X) else np.asarray(X)[rows]
        return self._router.numbers(part)

    # -------------------------------------------------------------- numpy
    def _init_array(self, X, ens, what):
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

    # -------------------------------------------------------------- scipy.sparse
    def _init_sparse(self, X, ens, what):
        if len(X.shape) != 2:
            raise ValueError(f"{what} must be 2-D (rows x features), got shape {X.shape}")
        if X.dtype.kind not in "fiub":
            raise TypeError(f"{what} is a sparse matrix of dtype {X.dtype}; only numeric "
                            "data can be routed")
        _check_width(X.shape[1], self.n_features, what)
        for j in self._tables:
            _check_numeric_allowed(self._tables[j], j, f"{what} column {j}", ens)
        csr = X.tocsr()  # a CSR input is used as it is, other formats are converted once
        if not csr.has_canonical_format:  # duplicated entries add up, as in toarray()
            csr = csr.copy()
            csr.sum_duplicates()
        self._sparse = csr
        self.n_rows = csr.shape[0]
        self.feature_names = None

    def _sparse_chunk(self, start, stop):
        sub = self._sparse[start:stop]
        out = np.full((stop - start, self.n_features), self._absent)
        rows = np.repeat(np.arange(stop - start), np.diff(sub.indptr))
        out[rows, sub.indices] = sub.data
        for j, table in self._tables.items():
            out[:, j] = _table_codes(out[:, j], table)
        return out

    # -------------------------------------------------------------- DataFrames
    def _init_frame(self, df, ens, what):
        import narwhals.stable.v1 as nw

        self._pandas = nw.get_native_namespace(df).__name__ == "pandas"
        native = nw.to_native(df)
        raw_cols = list(native.columns) if self._pandas else list(df.columns)
        _check_width(len(raw_cols), self.n_features, what)
        cols = [str(c) for c in raw_cols]
        _check_names(raw_cols, ens, what)
        self.feature_names = cols
        self._converters = []
        levels = ens.feature_categories or [None] * self.n_features
        as_code = ens.category_as_code  # one bool, or one per feature
        if self._pandas:
            native = text_as_categories(native, ens)
        for j in range(len(raw_cols)):
            col = native.iloc[:, j] if self._pandas else df.get_column(raw_cols[j])
            dtype = col.dtype if self._pandas else None
            ndtype = df.schema[raw_cols[j]] if not self._pandas else None
            where = f"{what} column {cols[j]!r}"
            if j in self._hashed:
                self._converters.append(("hash", self._tables.get(j)))
            elif _is_categorical(dtype, ndtype):
                cats = _categories(col, self._pandas)

                def codes(col=col, cats=cats):
                    # the whole column's codes (int64), made only where an unseen or a
                    # non-numeric label must be looked for among the rows
                    return _categories_and_codes(col, self._pandas, cats)[1]

                if as_code if np.ndim(as_code) == 0 else as_code[j]:
                    lookup = _category_lookup(cats, levels[j])
                    _warn_unseen(cats, codes, lookup, where)
                else:
                    lookup = _label_values(cats, codes, where, ens)
                self._converters.append(("cat", (lookup, cats)))
            elif _is_numeric(dtype, ndtype):
                if j in self._tables:
                    _check_numeric_allowed(self._tables[j], j, where, ens)
                self._converters.append(("num", self._tables.get(j)))
            else:
                raise TypeError(f"{where} has dtype {dtype if self._pandas else ndtype}; "
                                "only numeric, boolean and categorical ('category', "
                                "Categorical, Enum) columns can be used")
        self._frame = native if self._pandas else df
        self._columns = raw_cols
        # float32 chunks, half the memory of float64 ones, where they route alike: every
        # column plain pandas float32 (read as it is, no table; float32 -> float64 is
        # exact), or a model that rounds every value to float32 before comparing it
        # (``ens.round_float32``: XGBoost, scikit-learn's trees, CatBoost), unless a value
        # table or a hashed feature looks up the float64 value
        plain32 = self._pandas and all(
            kind == "num" and lookup is None and native.dtypes.iloc[j] == np.float32
            for j, (kind, lookup) in enumerate(self._converters))
        rounds32 = bool(ens.round_float32) and not self._tables and not self._hashed
        self._frame_dtype = np.float32 if plain32 or rounds32 else np.float64
        self._plain32 = plain32
        self.n_rows = len(native) if self._pandas else len(df)

    def _frame_chunk(self, start, stop):
        df = self._frame
        out = np.empty((stop - start, self.n_features), dtype=self._frame_dtype)
        if self._plain32:
            for j in range(self.n_features):
                out[:, j] = df.iloc[start:stop, j].to_numpy()
            return out
        for j, (kind, lookup) in enumerate(self._converters):
            if self._pandas:
                col = df.iloc[start:stop, j]
            else:
                col = df.get_column(self._columns[j])[start:stop]
            if kind == "hash":
                values = col.to_numpy()
                out[:, j] = self._hash_codes(np.asarray(values, dtype=object), lookup)
            elif kind == "cat":
                table, cats = lookup
                # codes against the whole column's categories (a slice may list others)
                codes = _categories_and_codes(col, self._pandas, cats)[1]
                out[:, j] = table[codes]  # code -1 (missing) hits the last entry: NaN
            else:
                out[:, j] = _floats(col, self._pandas)
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
    def chunks(self, chunk_rows=None, *, split=False):
        """Yield (start, float array of rows start:start+len), ``chunk_rows`` rows
        (default ``CHUNK_ROWS``) at a time.

        A float32/float64 numpy array is yielded whole (no copy), or as row views of
        ``chunk_rows`` rows with ``split=True`` (for progress reporting), unless the
        model has a missing-value sentinel (then chunks are converted copies).
        """
        chunk_rows = CHUNK_ROWS if chunk_rows is None else chunk_rows
        if self._router is not None:
            for start in range(0, self.n_rows, chunk_rows):
                stop = min(self.n_rows, start + chunk_rows)
                yield start, self._routed_rows(slice(start, stop))
            return
        if (self._array is not None and self._array.dtype in (np.float32, np.float64)
                and not self._tables and self._missing is None and not self._hashed):
            if not split:
                yield 0, self._array
                return
            for start in range(0, self.n_rows, chunk_rows):
                yield start, self._array[start:start + chunk_rows]
            return
        if self._sparse is not None:  # a dense chunk of a wide matrix stays bounded
            chunk_rows = max(1, min(chunk_rows, SPARSE_CHUNK_VALUES // self.n_features))
        for start in range(0, self.n_rows, chunk_rows):
            stop = min(self.n_rows, start + chunk_rows)
            # no local name keeps a converted chunk alive while the caller holds it: a
            # caller that drops its chunk before asking for the next one (the drivers)
            # holds one converted chunk at a time, not two
            yield start, self._mark_missing(self._array_chunk(start, stop)
                                            if self._array is not None
                                            else self._sparse_chunk(start, stop)
                                            if self._sparse is not None
                                            else self._frame_chunk(start, stop))

    def _mark_missing(self, chunk):
        """Values equal to the model's missing sentinel -> NaN (in a converted copy)."""
        if self._missing is not None:
            if self._array is not None and np.may_share_memory(chunk, self._array):
                chunk = np.array(chunk, dtype=np.float64)  # never write into X
            # a converted chunk (float32 or float64) is marked in place
            chunk[chunk.astype(np.float32) == self._missing] = np.nan
        return chunk

    def take(self, rows):
        """Float64 array of the given rows (used by permutation importance)."""
        if self._router is not None:
            return self._routed_rows(np.asarray(rows))
        if (self._array is not None and not self._tables and self._missing is None
                and not self._hashed):
            return np.asarray(self._array[rows], dtype=np.float64)
        out = np.empty((len(rows), self.n_features))
        for start, chunk in self.chunks():
            sel = (rows >= start) & (rows < start + chunk.shape[0])
            out[sel] = chunk[rows[sel] - start]
        return out


def _sentinel(ens):
    """float32 missing-value sentinel of the model, or None (only NaN is missing)."""
    value = float(ens.missing_value)
    return None if np.isnan(value) else np.float32(value)


def _is_sparse(X):
    try:
        import scipy.sparse as sp
    except ImportError:  # no scipy: nothing can be a scipy matrix
        return False
    return sp.issparse(X)


def _as_dataframe(X):
    """X as a narwhals eager DataFrame when it is a DataFrame / table of any library
    narwhals reads (pandas, polars, pyarrow, ...), else None."""
    if isinstance(X, np.ndarray) or _is_sparse(X):
        return None
    import narwhals.stable.v1 as nw

    frame = nw.from_native(X, pass_through=True)
    if isinstance(frame, nw.LazyFrame):
        raise TypeError(f"X is a lazy {type(X).__module__.split('.')[0]} frame "
                        f"({type(X).__name__}); collect it into a DataFrame first")
    return frame if isinstance(frame, nw.DataFrame) else None


def _is_categorical(pandas_dtype, nw_dtype):
    if pandas_dtype is not None:
        import pandas as pd

        return isinstance(pandas_dtype, pd.CategoricalDtype)
    import narwhals.stable.v1 as nw

    return nw_dtype == nw.Categorical or nw_dtype == nw.Enum


def _is_numeric(pandas_dtype, nw_dtype):
    if pandas_dtype is not None:
        import pandas as pd

        return pd.api.types.is_bool_dtype(pandas_dtype) or \
            pd.api.types.is_numeric_dtype(pandas_dtype)
    import narwhals.stable.v1 as nw

    return nw_dtype.is_numeric() or nw_dtype == nw.Boolean


def _categories(col, pandas):
    """A categorical column's categories as a list (as :func:`_categories_and_codes`
    gives them), without coding its rows."""
    if pandas:
        return list(col.cat.categories)
    return col.cat.get_categories().to_list()


def _categories_and_codes(col, pandas, cats=None):
    """(the column's categories as a list, int64 codes of its rows: -1 = missing). A
    pandas column gives its own codes; other libraries' labels are coded by position
    among ``cats`` (default: the column's categories)."""
    if pandas:
        return list(col.cat.categories), np.asarray(col.cat.codes, dtype=np.int64)
    import pandas as pd

    if cats is None:
        cats = col.cat.get_categories().to_list()
    labels = col.to_numpy()
    codes = pd.Categorical(np.asarray(labels, dtype=object), categories=cats).codes
    return cats, np.asarray(codes, dtype=np.int64)


def _floats(col, pandas):
    """A numeric or boolean column as float64, nulls as NaN."""
    if pandas:
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    import narwhals.stable.v1 as nw

    values = col.cast(nw.Float64).to_numpy()
    return np.asarray(values, dtype=np.float64)


def _is_dataframe(X):
    """A pandas DataFrame (what a leaf router's library is handed as it is)."""
    return type(X).__name__ == "DataFrame" and hasattr(X, "iloc") and hasattr(X, "dtypes")


def _named(columns):
    return all(isinstance(c, str) for c in columns)


def _library_names(columns, ens):
    """A table's column names as the model's library stores them
    (``ens.column_names``): "space_as_underscore" spells every " " of a name as "_"."""
    cols = [str(c) for c in columns]
    if ens.column_names == "space_as_underscore":
        return [c.replace(" ", "_") for c in cols]
    return cols


def _in_model_order(X, ens):
    """X with its columns in the model's order when the model's library takes a table's
    columns by name (``ens.column_names == "by_name"``, CatBoost's rule: when every
    feature's name is among the table's unique column names, each feature reads the
    column of its name), else X as it is: a table holding the model's names in another
    order, or beside other columns, is reduced to the model's columns in its order; other
    tables are left to the name check."""
    if ens.column_names != "by_name" or ens.feature_names is None \
            or isinstance(X, np.ndarray) or _is_sparse(X):
        return X
    names = [str(n) for n in ens.feature_names]
    if _is_dataframe(X):
        cols = list(X.columns)
        if _named(cols) and cols != names and len(set(cols)) == len(cols) \
                and set(names) <= set(cols):
            return X[names]
        return X
    frame = _as_dataframe(X)
    if frame is None:
        return X
    cols = list(frame.columns)
    if cols != names and len(set(cols)) == len(cols) and set(names) <= set(cols):
        import narwhals.stable.v1 as nw

        return nw.to_native(frame.select(names))
    return X


def _check_names(columns, ens, what):
    """ValueError when a DataFrame's column names (as the model's library stores them,
    :func:`_library_names`) differ from the model's names."""
    cols = _library_names(columns, ens)
    if ens.feature_names is not None and _named(columns):
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


def _category_lookup(cats, levels):
    """Array mapping a column's category code (index; -1 = missing) to the model's code.

    With the training levels known, a label is mapped to its position among them
    (unseen labels -> NaN, as LightGBM, XGBoost and HistGradientBoosting do);
    otherwise the column's own codes are used.
    """
    lookup = np.full(len(cats) + 1, np.nan)
    if levels is None:
        lookup[: len(cats)] = np.arange(len(cats))
    else:
        position = {lv: k for k, lv in enumerate(levels)}
        for k, c in enumerate(cats):
            lookup[k] = position.get(c, np.nan)
    return lookup


def _warn_unseen(cats, codes, lookup, where):
    """Warn (as the command line does) when rows hold labels the model never saw: they
    are routed as missing. ``codes()`` gives the rows' codes."""
    unseen = np.flatnonzero(np.isnan(lookup[:-1]))
    if unseen.size == 0:
        return
    codes = codes()
    used = np.isin(codes, unseen)
    if used.any():
        import warnings

        labels = [cats[k] for k in np.unique(codes[used])]
        warnings.warn(f"{where}: {int(used.sum())} rows have labels the model never saw "
                      f"({labels[:10]}{' ...' if len(labels) > 10 else ''}); they are routed "
                      "as missing", UserWarning, stacklevel=4)


def _label_values(cats, codes, where, ens):
    """Array mapping a category code (index; -1 = missing) to the label's value as
    a float, the way ``np.asarray(column).astype(float)`` reads it (scikit-learn);
    ``codes()`` gives the rows' codes (read where a label is not a number)."""
    lookup = np.full(len(cats) + 1, np.nan)
    try:
        lookup[: len(cats)] = np.asarray(np.asarray(cats, dtype=object), dtype=np.float64)
        return lookup
    except (TypeError, ValueError):
        pass
    bad = []
    for k, label in enumerate(cats):
        try:
            lookup[k] = np.asarray([label], dtype=object).astype(np.float64)[0]
        except (TypeError, ValueError):
            bad.append(k)
    if not bad:
        return lookup
    codes = codes()
    used = np.isin(codes, bad)
    if used.any():
        label = cats[int(codes[used][0])]
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


def feature_names_of(feature_names, rows, ens):
    """The names of X's columns in the model's order: the caller's ``feature_names``,
    else the table's, else the model's, else x0, x1, ..."""
    if feature_names is not None:
        names = [str(f) for f in feature_names]
        if len(names) != ens.n_features:
            raise ValueError(f"{len(names)} feature_names for {ens.n_features} features")
        return names
    if rows.feature_names is not None:
        return rows.feature_names
    if ens.feature_names is not None:
        return list(ens.feature_names)
    return [f"x{j}" for j in range(ens.n_features)]


def check_unique_columns(X):
    """A table with two columns of the same name cannot be matched to the model by name."""
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, np.ndarray):
        return
    names = [str(c) for c in list(columns)]
    seen, dup = set(), []
    for c in names:
        if c in seen and c not in dup:
            dup.append(c)
        seen.add(c)
    if dup:
        raise ValueError(f"X has duplicated column names {dup[:10]}; every column needs "
                         "its own name to be matched to the model's features")
