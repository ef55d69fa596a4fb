"""A pandas table's columns as the categories the model routes: the one place where text
and 'category' columns are matched to a model's categorical features, for in-memory
DataFrames (:class:`treeimp.inputs.rows.RowSource`) and for the rows of a file (the
command line, whose tables come with the types a CSV reader guessed).

What the model declares decides, feature by feature (``TreeEnsemble`` fields, never its
library):

* ``hashed_features``: the raw values are hashed later (text or numbers as they are);
* ``feature_categories[j]`` with ``category_as_code``: the training labels are known,
  a column is matched to them by label (:func:`stored_categories` for untyped files);
* :func:`own_label_features`: a categorical model that does not store the labels of
  feature j codes a 'category' column by its own categories, so a file's text column
  is read as a 'category' column with its sorted labels.

The codes themselves (label -> position, unseen labels -> missing) are made by
``RowSource`` for every table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OWN_LABELS_WARNING = ("column {name!r} holds text and the model does not store its training "
                      "categories: labels are coded 0, 1, ... in sorted order of the labels in "
                      "this file, which matches training only if training saw the same labels")


def stored_levels(ens):
    """The training labels of each feature (None where the model stores none)."""
    return ens.feature_categories or [None] * ens.n_features


def routes_codes(ens):
    """Per feature: whether a 'category' column is routed by code (not by label value)."""
    return np.broadcast_to(np.asarray(ens.category_as_code, dtype=bool), (ens.n_features,))


def own_label_features(ens):
    """The features whose 'category' column the model codes by the column's own
    categories: a model with categorical splits that routes codes and stores no
    training labels for the feature (nor hashes its values)."""
    if not np.any(ens.is_categorical):
        return frozenset()
    levels, as_code, hashed = stored_levels(ens), routes_codes(ens), set(ens.hashed_features)
    return frozenset(j for j in range(ens.n_features)
                     if as_code[j] and levels[j] is None and j not in hashed)


def text_as_categories(df, ens):
    """Plain text (str / object) columns of features whose model stores its training
    categories and routes category codes (e.g. HistGradientBoosting with
    ``categorical_features`` naming a text column, which scikit-learn ordinal-encodes by
    label) as pandas 'category' columns, matched by label like a 'category' column. A
    shallow copy: other columns are not copied."""
    levels, as_code = stored_levels(ens), routes_codes(ens)
    out = None
    for j in range(df.shape[1]):
        if levels[j] is None or not as_code[j] or not _is_text(df.dtypes.iloc[j]):
            continue
        if out is None:
            out = df.copy(deep=False)
        out.isetitem(j, df.iloc[:, j].astype("category"))
    return df if out is None else out


def file_categories(X, ens, warn, *, unseen=None):
    """The columns of a table read from a file (X, in the model's feature order) as the
    model reads them: text -> 'category' where the model routes categories.

    A feature whose training labels the model stores is matched by label, whatever type
    the file's reader gave the column (:func:`stored_categories`); a hashed feature's
    column is passed on as it is. A text column on any other feature is read as a
    'category' column only where :func:`own_label_features` holds (its codes are then
    the sorted labels of this table, and ``warn`` is told so); otherwise it is refused,
    as is any column that is neither numeric, boolean, text nor 'category'.
    """
    levels, as_code = stored_levels(ens), routes_codes(ens)
    hashed, own = set(ens.hashed_features), own_label_features(ens)
    out = {}
    for j, name in enumerate(X.columns):
        col = X[name]
        if j in hashed:
            out[name] = col
        elif levels[j] is not None and as_code[j]:
            out[name] = stored_categories(col, levels[j], name, warn, unseen)
        else:
            out[name] = _unlabelled_column(col, name, j in own, ens, warn)
    return pd.DataFrame(out, index=X.index)


def _unlabelled_column(col, name, own_labels, ens, warn):
    """A file's column of a feature without stored labels: numeric, boolean and
    'category' columns as they are, text as 'category' where the model codes its own
    labels (``own_labels``), anything else refused."""
    if _is_routable(col.dtype):
        return col
    if not _is_text(col.dtype):
        raise ValueError(f"column {name!r} has dtype {col.dtype}; only numeric, boolean, "
                         "text (categorical) and 'category' columns can be used")
    if not own_labels:
        raise ValueError(
            f"column {name!r} holds text (e.g. {example(col)!r}) but the model "
            f"({ens.library or 'custom'} {ens.kind}) has no categorical features; "
            "encode it as numbers the way the model was trained")
    warn(OWN_LABELS_WARNING.format(name=name))
    return col.astype("category")


def stored_categories(col, levels, name, warn, unseen=None):
    """A file's column as 'category' with labels of the type of the stored ``levels``
    (a CSV reader may give the labels "1", "2" as numbers, or numbers as text). Rows
    whose label the model never saw (routed as missing) are told to ``warn``, or, with
    ``unseen`` (a dict), counted there per column for one report at the end."""
    values = col.astype(object)
    if all(isinstance(v, str) for v in levels):
        values = values.map(lambda v: v if pd.isna(v) else _label_str(v))
    elif all(isinstance(v, (int, float, np.integer, np.floating)) for v in levels):
        numeric = pd.to_numeric(values, errors="coerce")
        bad = numeric.isna() & values.notna()
        if bad.any():
            raise ValueError(f"column {name!r} holds {example(values[bad])!r} but the model's "
                             f"categories for it are numbers: {short(levels)}")
        values = numeric
    cat = values.astype("category")
    new = [c for c in cat.cat.categories if c not in set(levels)]
    if new:
        n = int(cat.isin(new).sum())
        if unseen is None:
            warn_unseen(warn, name, n, new)
        elif n:
            count, labels = unseen.get(name, (0, {}))
            unseen[name] = (count + n, {**labels, **dict.fromkeys(new)})
    return cat


def warn_unseen(warn, name, n, labels):
    """Tell ``warn`` that ``n`` rows of column ``name`` hold ``labels`` the model never
    saw."""
    warn(f"column {name!r}: {n} rows have labels the model never saw "
         f"({short(labels)}); they are routed as missing")


def example(col):
    """The first non-missing value of a Series (None when it has none)."""
    nonnull = col.dropna()
    return nonnull.iloc[0] if len(nonnull) else None


def short(items, n=10):
    """At most ``n`` items as a list literal, with ", ..." when more were left off."""
    items = list(items)
    return str(items[:n])[:-1] + (", ...]" if len(items) > n else "]")


def _is_text(dtype):
    return not isinstance(dtype, pd.CategoricalDtype) and (
        pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype))


def _is_routable(dtype):
    """'category', boolean and numeric columns, read by RowSource as they are."""
    return (isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(dtype)
            or pd.api.types.is_numeric_dtype(dtype))


def _label_str(v):
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)
