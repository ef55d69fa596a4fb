"""What ``treeimp explain`` reads: a model file and a table of held-out rows.

Every failure is a ValueError whose message names the file and says what to do, so the
command line can print it on one line.
"""

from __future__ import annotations

import importlib.util
import pickle
import stat
from pathlib import Path

import numpy as np
import pandas as pd

from ..inputs.categories import (
    OWN_LABELS_WARNING,
    example,
    file_categories,
    own_label_features,
    short,
    stored_levels,
    warn_unseen,
)
from ..inputs.files import kind_of, stat_path
from ..inputs.rows import _library_names
from ..parsers.files import load
from .skops_trust import TREE_MODEL_TYPES, untrusted_outside
from .table_batches import CSV_OPTIONS, CSV_SUFFIXES, PARQUET_SUFFIXES, open_csv

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
SKOPS_SUFFIXES = (".skops",)
MODEL_FILE_SUFFIXES = (".json", ".ubj", ".txt")
CLASSIFIER_OBJECTIVES = ("logistic", "softmax", "ova_logistic")

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
    """``path`` as a Path, after checking that it names a regular file (symlinks
    followed; a symlink loop, a FIFO or a device is named as such)."""
    path = Path(path)
    st = stat_path(str(path), what)
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{what} {str(path)!r} is not a file (a directory)")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what} {str(path)!r} is {kind_of(st.st_mode)}, not a regular "
                         "file")
    return path


def load_model(path, *, trust_pickle=False, warn=None, trust_types=()):
    """The model of a saved model file, to be parsed once by a :class:`treeimp.Explainer`.

    XGBoost ``.json``/``.ubj`` and LightGBM ``.txt`` files are parsed by
    :func:`treeimp.parsers.files.load` (the model is then its TreeEnsemble), running no
    code from the file. ``.skops`` files are read with ``skops.io`` trusting skops'
    default types and the tree-model types of :mod:`treeimp.cli.skops_trust`; any other type
    in the file is loaded only when ``trust_types`` names it and ``trust_pickle`` is set
    (--trust-pickle --trust-types). ``.pkl``, ``.pickle`` and ``.joblib`` files are
    unpickled, which runs code stored in the file, so only with ``trust_pickle``.
    """
    path = _existing_file(path, "model file")
    suffix = _suffix(path)
    trust_types = list(trust_types)
    if trust_types and not trust_pickle:
        raise ValueError("--trust-types needs --trust-pickle: a type trusted in a skops file "
                         "may run its code when the file is loaded")
    if trust_types and suffix not in SKOPS_SUFFIXES:
        raise ValueError(f"--trust-types names types of a skops file, but model file "
                         f"{str(path)!r} is not a .skops file")
    if suffix in PICKLE_SUFFIXES:
        if not trust_pickle:
            raise ValueError(f"model file {str(path)!r} is a pickle: unpickling runs code "
                             "stored in the file, so it is loaded only with --trust-pickle "
                             "(pass it only for files you made or trust). Safer: save the "
                             "model with save_model (.json/.ubj/.txt) or skops (.skops)")
        return _unpickle(path, suffix)
    if suffix in SKOPS_SUFFIXES:
        return _load_skops(path, trust_types, warn)
    if suffix in MODEL_FILE_SUFFIXES:
        return load(path)
    raise ValueError(f"model file {str(path)!r} has the unsupported suffix {suffix!r}; "
                     "expected .json or .ubj (XGBoost), .txt (LightGBM), .skops, or .pkl, "
                     ".pickle, .joblib (a pickled model, with --trust-pickle)")


def _load_skops(path, trust_types, warn):
    """A model from a skops file, trusting skops' default types, the tree-model types
    treeimp has vetted (:data:`treeimp.cli.skops_trust.TREE_MODEL_TYPES`) and the types the
    user names in ``trust_types`` (--trust-types, with --trust-pickle); any other type
    in the file is refused, named."""
    if importlib.util.find_spec("skops") is None:
        raise ValueError(f"reading the skops file {str(path)!r} needs skops: pip install "
                         "skops (or pip install 'treeimp[cli]')")
    import skops.io as sio


    try:
        untrusted = list(sio.get_untrusted_types(file=path))
    except Exception as exc:  # skops raises assorted errors on damaged archives
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"cannot read skops file {str(path)!r}: {detail}") from None
    refused = untrusted_outside(untrusted, trust_types)
    if refused:
        flag = ",".join(refused)
        raise ValueError(f"skops file {str(path)!r} holds {len(refused)} type"
                         f"{'s' if len(refused) > 1 else ''} that neither skops nor treeimp "
                         f"trusts: {short(refused)}; loading them may run their code. "
                         "Check them, and to load the file anyway name each one: "
                         f"--trust-pickle --trust-types {flag}")
    named = [t for t in untrusted if t not in TREE_MODEL_TYPES]
    if named and warn is not None:
        warn(f"loading the skops file with the types you trust (--trust-types): "
             f"{short(named)}")
    unused = [t for t in trust_types if t not in untrusted]
    if unused and warn is not None:
        warn(f"--trust-types names {short(unused)}, which the skops file does not hold "
             "as untrusted types")
    try:
        return sio.load(path, trusted=[t for t in untrusted
                                       if t in TREE_MODEL_TYPES or t in named])
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
        def reader():  # a regular file, lines bounded (table_batches.open_csv)
            with open_csv(str(path)) as fh:
                return pd.read_csv(fh, **CSV_OPTIONS)
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


def _feature_columns(columns, target, drop, source):
    """The ``columns`` besides the target and ``drop``, after checking that both name
    columns the table has."""
    cols = list(columns)
    if target not in cols:
        raise ValueError(f"{source} has no target column {target!r}; its columns are "
                         f"{short(cols)}")
    missing_drop = [c for c in drop if c not in cols]
    if missing_drop:
        raise ValueError(f"--drop names columns that {source} does not have: "
                         f"{short(missing_drop)}")
    if target in drop:
        raise ValueError(f"--drop lists the target column {target!r}")
    return [c for c in cols if c != target and c not in set(drop)]


def model_features(columns, target, ens, *, drop=(), source="data file",
                   by_position=False):
    """The table's feature columns (of ``columns``, its column names) in the model's
    order: the target and ``drop`` columns out.

    A model without stored feature names cannot match the table's named columns: it is
    refused unless ``by_position`` (``--columns-by-position``) says to take the feature
    columns in their order."""

    features = _feature_columns(columns, target, drop, source)
    if ens.feature_names is not None:
        expected = list(ens.feature_names)
        # each column under the name the model's library stores for it (the model's
        # column_names rule, e.g. " " -> "_"), so that the table the model was fit on
        # matches
        stored = {}
        for name, column in zip(_library_names(features, ens), features):
            if name in stored:
                raise ValueError(f"{source} columns {stored[name]!r} and {column!r} are both "
                                 f"the model's feature {name!r} (its library stores every "
                                 "space of a name as '_'); keep one of them")
            stored[name] = column
        missing = [c for c in expected if c not in stored]
        extra = [column for name, column in stored.items() if name not in expected]
        if missing:
            raise ValueError(f"{source} lacks {len(missing)} of the model's "
                             f"{len(expected)} features: {short(missing)}"
                             + (f" (it has other columns: {short(extra)})" if extra else ""))
        if extra:
            raise ValueError(f"{source} has {_count(extra, 'column')} the model does not use: "
                             f"{short(extra)}; remove them or pass --drop "
                             f"{','.join(extra[:3])}{',...' if len(extra) > 3 else ''}")
        return [stored[c] for c in expected]
    if not by_position:
        raise ValueError(f"the model stores no feature names, so the {len(features)} named "
                         f"columns of {source} cannot be matched to its {ens.n_features} "
                         "features by name; if the columns (besides the target and --drop) "
                         "are in the model's feature order, pass --columns-by-position")
    if len(features) != ens.n_features:
        raise ValueError(f"{source} has {len(features)} feature columns besides the target "
                         f"{target!r} but the model was trained on {ens.n_features} features "
                         "(--columns-by-position: columns are taken in order)")
    return features


def split_target(df, target, ens, *, drop=(), source="data file", by_position=False):
    """(X, y): the target column out, ``drop`` columns removed, features in model order
    (see :func:`model_features`)."""
    features = model_features(df.columns, target, ens, drop=drop, source=source,
                              by_position=by_position)
    return df[features], df[target]


def split_pipeline_target(df, target, pipeline, *, drop=(), source="data file"):
    """(X, y) for a fitted Pipeline: the target out, ``drop`` columns removed, and the
    columns the Pipeline was fit on (``feature_names_in_``) in its order; the Pipeline's
    own steps encode them."""
    features = pipeline_features(df.columns, target, pipeline, drop=drop, source=source)
    return df[features], df[target]


def pipeline_features(columns, target, pipeline, *, drop=(), source="data file"):
    """The input columns of a fitted Pipeline (``feature_names_in_``, in its order; else
    the table's columns besides the target and ``drop``)."""
    features = _feature_columns(columns, target, drop, source)
    expected = getattr(pipeline, "feature_names_in_", None)
    if expected is not None:
        expected = [str(c) for c in expected]
        missing = [c for c in expected if c not in features]
        if missing:
            raise ValueError(f"{source} lacks {len(missing)} of the Pipeline's "
                             f"{len(expected)} input columns: {short(missing)}")
        features = expected
    return features


class StreamedRows:
    """The rows of a table read in batches (``table_batches.open_table``), as
    :func:`treeimp.explain` takes held-out rows that need not fit in memory: iterating
    gives ``(X, y)`` per batch, X in the model's feature order and encoded as
    :func:`split_target` + :func:`~treeimp.inputs.categories.file_categories` +
    :func:`check_class_labels` encode the whole table read at once, so that the
    importances are the same.

    Category codes must not depend on the batch: a column the model gives no stored
    categories (a text column the model codes by its own labels,
    :func:`~treeimp.inputs.categories.own_label_features`, or a Parquet dictionary
    column) is read once beforehand for its labels (only that column,
    memory: its distinct labels), and every batch is coded with the labels of the whole
    table. ``n_rows``: the table's row count when its files state it (Parquet), else
    None. Labels the model never saw are reported once, for all batches, when the
    iteration ends.
    """

    def __init__(self, table, ens, target, *, drop=(), source="data file",
                 by_position=False, pipeline=None, warn=None):
        self.table, self.ens, self.target, self.source = table, ens, target, source
        self.pipeline, self.warn = pipeline, warn or (lambda message: None)
        self.n_rows = table.n_rows
        if pipeline is not None:  # its own steps encode the input columns
            self.features = pipeline_features(table.columns, target, pipeline, drop=drop,
                                              source=source)
        else:
            self.features = model_features(table.columns, target, ens, drop=drop,
                                           source=source, by_position=by_position)
        self._numeric = []  # columns read as numbers where text would need categories
        self.labels, self._raw = self._whole_table_labels()

    def _whole_table_labels(self):
        """({column: categories of the whole table}, CSV columns to read as text)."""
        if self.pipeline is not None:
            return {}, []
        levels, hashed = stored_levels(self.ens), set(self.ens.hashed_features)
        open_ = [c for j, c in enumerate(self.features) if levels[j] is None
                 and j not in hashed]
        # columns the model codes by their own labels: their text is read as categories
        own = own_label_features(self.ens)
        coded = [c for j, c in enumerate(self.features) if j in own]
        dictionary = [c for c in open_ if self.table.is_dictionary(c)]
        if not coded and not dictionary:
            return {}, []  # text columns are refused batch by batch, as in one read
        candidates = self.table.text_candidates(coded) if coded else dictionary
        # columns read as numbers: a batch of text in one of them cannot be coded alike
        self._numeric = [c for c in coded if c not in candidates]
        if not candidates:
            return {}, []
        text, labels = self.table.text_labels(candidates)
        for c in text:
            if not self.table.is_dictionary(c):
                self.warn(OWN_LABELS_WARNING.format(name=c))
        return labels, (text if self.table.kind == "csv" else [])

    def __iter__(self):
        unseen = {}
        for X, y in self.table.batches(self.features, self.target, text=self._raw):
            if self.pipeline is None:
                for c in self._numeric:
                    if not (pd.api.types.is_numeric_dtype(X[c].dtype)
                            or pd.api.types.is_bool_dtype(X[c].dtype)):
                        raise ValueError(
                            f"{self.source}: column {c!r} holds text (e.g. "
                            f"{example(X[c])!r}) in rows {X.index[0]}.. but numbers in "
                            "the first rows; read in batches its labels cannot be coded "
                            "as one read of the file codes them: make the column text "
                            "throughout or numbers throughout")
                for c, cats in self.labels.items():
                    col = X[c]
                    X[c] = (col.cat.set_categories(cats)
                            if isinstance(col.dtype, pd.CategoricalDtype)
                            else pd.Categorical(col.astype(object), categories=cats))
                X = file_categories(X, self.ens, self.warn, unseen=unseen)
            yield X, check_class_labels(y, self.ens, self.source)
        for name, (n, labels) in unseen.items():
            warn_unseen(self.warn, name, n, list(labels))


def check_class_labels(y, ens, source):
    """Model files store no class labels: a classifier's labels must be 0..K-1."""
    if ens.classes is not None or ens.objective.name not in CLASSIFIER_OBJECTIVES:
        return y
    K = 2 if ens.objective.name == "logistic" else int(ens.objective.params["n_classes"])
    hint = (f"the model stores no class labels, so the target column must hold the class "
            f"indices 0..{K - 1} it was trained on")
    values = y.to_numpy()
    if not (pd.api.types.is_numeric_dtype(y.dtype) or pd.api.types.is_bool_dtype(y.dtype)):
        raise ValueError(f"{source}: {hint}; found labels {short(_uniques(values))}")
    raw, values = values, values.astype(np.float64)
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < 0) | (values > K - 1)
    if bad.any():
        raise ValueError(f"{source}: {hint}; found {_count(np.flatnonzero(bad), 'row')} with "
                         f"other values: {short(_uniques(raw[bad]))}")
    return pd.Series(values.astype(np.int64), index=y.index, name=y.name)


def _count(items, noun):
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _uniques(values):
    return sorted({v for v in pd.unique(values).tolist()}, key=str)


# the encoding of a file's columns is the library's (treeimp.inputs.categories); the
# command line's callers know it under this name
encode_categories = file_categories
