"""What ``treeimp explain`` reads: a model file and a table of held-out rows.

Every failure is a ValueError whose message names the file and says what to do, so the
command line can print it on one line.
"""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import numpy as np
import pandas as pd

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
SKOPS_SUFFIXES = (".skops",)
MODEL_FILE_SUFFIXES = (".json", ".ubj", ".txt")
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz")
PARQUET_SUFFIXES = (".parquet", ".pq")
CLASSIFIER_OBJECTIVES = ("logistic", "softmax", "ova_logistic")

# Floats must come back bit for bit: pandas < 3.1 needs the round-trip converter for that
# (3.1 uses it always and deprecates the option).
CSV_OPTIONS = ({} if tuple(int(p) for p in pd.__version__.split(".")[:2]) >= (3, 1)
               else {"float_precision": "round_trip"})

# What can go wrong inside pickle.load besides a corrupt stream: classes that no longer
# exist (ImportError / AttributeError), version mismatches (TypeError, KeyError, ...).
_UNPICKLE_ERRORS = (pickle.UnpicklingError, EOFError, ImportError, AttributeError,
                    ValueError, TypeError, KeyError, IndexError)


def _suffix(path):
    name = path.name.lower()
    for s in (CSV_SUFFIXES + PARQUET_SUFFIXES + PICKLE_SUFFIXES + SKOPS_SUFFIXES
              + MODEL_FILE_SUFFIXES):
        if name.endswith(s):
            return s
    return path.suffix.lower()


def _existing_file(path, what):
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{what} {str(path)!r} does not exist")
    if not path.is_file():
        raise ValueError(f"{what} {str(path)!r} is not a file")
    return path


def load_model(path, *, trust_pickle=False, warn=None):
    """(model, ensemble) from a saved model file.

    XGBoost ``.json``/``.ubj`` and LightGBM ``.txt`` files are parsed by
    :func:`treeimp.parsers.files.load` (model is then the ensemble itself), running no
    code from the file. ``.skops`` files are read with ``skops.io``: types it does not
    trust by default are listed and loaded only with ``trust_pickle``. ``.pkl``,
    ``.pickle`` and ``.joblib`` files are unpickled, which runs code stored in the file,
    so only with ``trust_pickle``. The object is parsed with :func:`treeimp.parsers.parse`
    (a Pipeline: its last step).
    """
    path = _existing_file(path, "model file")
    suffix = _suffix(path)
    if suffix in PICKLE_SUFFIXES:
        if not trust_pickle:
            raise ValueError(f"model file {str(path)!r} is a pickle: unpickling runs code "
                             "stored in the file, so it is loaded only with --trust-pickle "
                             "(pass it only for files you made or trust). Safer: save the "
                             "model with save_model (.json/.ubj/.txt) or skops (.skops)")
        model = _unpickle(path, suffix)
        return model, _parse_object(model)
    if suffix in SKOPS_SUFFIXES:
        model = _load_skops(path, trust_pickle, warn)
        return model, _parse_object(model)
    if suffix in MODEL_FILE_SUFFIXES:
        from .parsers.files import load

        ens = load(path)
        return ens, ens
    raise ValueError(f"model file {str(path)!r} has the unsupported suffix {suffix!r}; "
                     "expected .json or .ubj (XGBoost), .txt (LightGBM), .skops, or .pkl, "
                     ".pickle, .joblib (a pickled model, with --trust-pickle)")


def _parse_object(model):
    """The normal form of a loaded model; of a Pipeline, its last step's."""
    from .parsers import parse
    from .pipeline import is_pipeline

    return parse(model[-1] if is_pipeline(model) else model)


def _load_skops(path, trust, warn):
    """A model from a skops file; types outside skops' default trusted set are shown and
    accepted only with ``trust`` (--trust-pickle)."""
    if importlib.util.find_spec("skops") is None:
        raise ValueError(f"reading the skops file {str(path)!r} needs skops: pip install "
                         "skops (or pip install 'treeimp[cli]')")
    import skops.io as sio

    try:
        untrusted = list(sio.get_untrusted_types(file=path))
    except Exception as exc:  # skops raises assorted errors on damaged archives
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"cannot read skops file {str(path)!r}: {detail}") from None
    if untrusted and not trust:
        raise ValueError(f"skops file {str(path)!r} holds types skops does not trust by "
                         f"default: {_short(untrusted)}; loading them may run their code. "
                         "Check them and pass --trust-pickle to load the file")
    if untrusted and warn is not None:
        warn(f"loading the skops file with the untrusted types {_short(untrusted)} "
             "(--trust-pickle)")
    try:
        return sio.load(path, trusted=untrusted)
    except Exception as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"cannot load skops file {str(path)!r}: {detail}") from None


def _unpickle(path, suffix):
    try:
        if suffix == ".joblib":
            import joblib

            return joblib.load(path)
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except OSError:
        raise
    except _UNPICKLE_ERRORS as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"cannot unpickle model file {str(path)!r}: {detail}") from None


def read_table(path):
    """DataFrame from a CSV (``.csv``, optionally compressed) or Parquet file."""
    path = _existing_file(path, "data file")
    suffix = _suffix(path)
    if suffix in CSV_SUFFIXES:
        reader = lambda: pd.read_csv(path, **CSV_OPTIONS)  # noqa: E731
    elif suffix in PARQUET_SUFFIXES:
        if importlib.util.find_spec("pyarrow") is None:
            raise ValueError(f"reading the Parquet file {str(path)!r} needs pyarrow: "
                             "pip install pyarrow (or save the data as CSV)")
        reader = lambda: pd.read_parquet(path, engine="pyarrow")  # noqa: E731
    else:
        raise ValueError(f"data file {str(path)!r} has the unsupported suffix {suffix!r}; "
                         "expected .csv (optionally .gz/.bz2/.zip/.xz) or .parquet")
    try:
        df = reader()
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"cannot read data file {str(path)!r}: {detail}") from None
    if df.shape[0] == 0:
        raise ValueError(f"data file {str(path)!r} has no rows")
    df.columns = [str(c) for c in df.columns]
    dup = sorted({c for c in df.columns if list(df.columns).count(c) > 1})
    if dup:
        raise ValueError(f"data file {str(path)!r} has duplicated column names {dup[:10]}")
    return df


def _feature_columns(df, target, drop, source):
    """The columns of ``df`` besides the target and ``drop``, after checking that both
    name columns it has."""
    cols = list(df.columns)
    if target not in cols:
        raise ValueError(f"{source} has no target column {target!r}; its columns are "
                         f"{_short(cols)}")
    missing_drop = [c for c in drop if c not in cols]
    if missing_drop:
        raise ValueError(f"--drop names columns that {source} does not have: "
                         f"{_short(missing_drop)}")
    if target in drop:
        raise ValueError(f"--drop lists the target column {target!r}")
    return [c for c in cols if c != target and c not in set(drop)]


def split_target(df, target, ens, *, drop=(), source="data file", by_position=False):
    """(X, y): the target column out, ``drop`` columns removed, features in model order.

    A model without stored feature names cannot match the table's named columns: it is
    refused unless ``by_position`` (``--columns-by-position``) says to take the feature
    columns in their order."""
    features = _feature_columns(df, target, drop, source)
    y = df[target]
    if ens.feature_names is not None:
        expected = list(ens.feature_names)
        missing = [c for c in expected if c not in features]
        extra = [c for c in features if c not in expected]
        if missing:
            raise ValueError(f"{source} lacks {len(missing)} of the model's "
                             f"{len(expected)} features: {_short(missing)}"
                             + (f" (it has other columns: {_short(extra)})" if extra else ""))
        if extra:
            raise ValueError(f"{source} has {_count(extra, 'column')} the model does not use: "
                             f"{_short(extra)}; remove them or pass --drop "
                             f"{','.join(extra[:3])}{',...' if len(extra) > 3 else ''}")
        features = expected
    elif not by_position:
        raise ValueError(f"the model stores no feature names, so the {len(features)} named "
                         f"columns of {source} cannot be matched to its {ens.n_features} "
                         "features by name; if the columns (besides the target and --drop) "
                         "are in the model's feature order, pass --columns-by-position")
    elif len(features) != ens.n_features:
        raise ValueError(f"{source} has {len(features)} feature columns besides the target "
                         f"{target!r} but the model was trained on {ens.n_features} features "
                         "(--columns-by-position: columns are taken in order)")
    return df[features], y


def split_pipeline_target(df, target, pipeline, *, drop=(), source="data file"):
    """(X, y) for a fitted Pipeline: the target out, ``drop`` columns removed, and the
    columns the Pipeline was fit on (``feature_names_in_``) in its order; the Pipeline's
    own steps encode them."""
    features = _feature_columns(df, target, drop, source)
    expected = getattr(pipeline, "feature_names_in_", None)
    if expected is not None:
        expected = [str(c) for c in expected]
        missing = [c for c in expected if c not in features]
        if missing:
            raise ValueError(f"{source} lacks {len(missing)} of the Pipeline's "
                             f"{len(expected)} input columns: {_short(missing)}")
        features = expected
    return df[features], df[target]


def encode_categories(X, ens, warn):
    """Text columns -> pandas 'category' where the model can route categories.

    A feature whose training categories the model stores (``ens.feature_categories``) is
    matched by label, whatever its dtype in the file; a CatBoost categorical column
    (``ens.hashed_features``) is passed on as it is. Otherwise text columns are only
    accepted by XGBoost / LightGBM models with categorical splits; their codes are then
    the sorted labels of this file (the model file does not say which label had which
    code), and ``warn`` is told so.
    """
    levels = ens.feature_categories or [None] * ens.n_features
    has_cat_splits = ens.library in ("xgboost", "lightgbm") and bool(
        np.any(ens.is_categorical))
    # CatBoost's categorical columns take the raw values (treeimp hashes them as
    # CatBoost does): text or numbers as the file holds them
    hashed = set(ens.hashed_features)
    out = {}
    for j, name in enumerate(X.columns):
        col = X[name]
        dtype = col.dtype
        if j in hashed:
            out[name] = col
        elif levels[j] is not None:
            out[name] = _as_stored_categories(col, levels[j], name, warn)
        elif isinstance(dtype, pd.CategoricalDtype):
            out[name] = col
        elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            out[name] = col
        elif pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
            if not has_cat_splits:
                raise ValueError(
                    f"column {name!r} holds text (e.g. {_example(col)!r}) but the model "
                    f"({ens.library or 'custom'} {ens.kind}) has no categorical features; "
                    "encode it as numbers the way the model was trained")
            warn(f"column {name!r} holds text and the model does not store its training "
                 "categories: labels are coded 0, 1, ... in sorted order of the labels in "
                 "this file, which matches training only if training saw the same labels")
            out[name] = col.astype("category")
        else:
            raise ValueError(f"column {name!r} has dtype {dtype}; only numeric, boolean, "
                             "text (categorical) and 'category' columns can be used")
    return pd.DataFrame(out, index=X.index)


def _as_stored_categories(col, levels, name, warn):
    """Column as 'category' with labels of the same type as the stored levels."""
    values = col.astype(object)
    if all(isinstance(v, str) for v in levels):
        values = values.map(lambda v: v if pd.isna(v) else _label_str(v))
    elif all(isinstance(v, (int, float, np.integer, np.floating)) for v in levels):
        numeric = pd.to_numeric(values, errors="coerce")
        bad = numeric.isna() & values.notna()
        if bad.any():
            raise ValueError(f"column {name!r} holds {_example(values[bad])!r} but the model's "
                             f"categories for it are numbers: {_short(levels)}")
        values = numeric
    cat = values.astype("category")
    unseen = [c for c in cat.cat.categories if c not in set(levels)]
    if unseen:
        n = int(cat.isin(unseen).sum())
        warn(f"column {name!r}: {n} rows have labels the model never saw "
             f"({_short(unseen)}); they are routed as missing")
    return cat


def _label_str(v):
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def check_class_labels(y, ens, source):
    """Model files store no class labels: a classifier's labels must be 0..K-1."""
    if ens.classes is not None or ens.objective.name not in CLASSIFIER_OBJECTIVES:
        return y
    K = 2 if ens.objective.name == "logistic" else int(ens.objective.params["n_classes"])
    hint = (f"the model stores no class labels, so the target column must hold the class "
            f"indices 0..{K - 1} it was trained on")
    values = y.to_numpy()
    if not (pd.api.types.is_numeric_dtype(y.dtype) or pd.api.types.is_bool_dtype(y.dtype)):
        raise ValueError(f"{source}: {hint}; found labels {_short(_uniques(values))}")
    raw, values = values, values.astype(np.float64)
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < 0) | (values > K - 1)
    if bad.any():
        raise ValueError(f"{source}: {hint}; found {_count(np.flatnonzero(bad), 'row')} with "
                         f"other values: {_short(_uniques(raw[bad]))}")
    return pd.Series(values.astype(np.int64), index=y.index, name=y.name)


def _count(items, noun):
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _uniques(values):
    return sorted({v for v in pd.unique(values).tolist()}, key=str)


def _example(col):
    nonnull = col.dropna()
    return nonnull.iloc[0] if len(nonnull) else None


def _short(items, n=10):
    items = list(items)
    return str(items[:n])[:-1] + (", ...]" if len(items) > n else "]")
