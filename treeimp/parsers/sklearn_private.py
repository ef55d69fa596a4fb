"""Every read of scikit-learn's PRIVATE state, each behind one named function.

treeimp reads a few attributes and helpers that scikit-learn does not promise to keep.
They live here and nowhere else, each checked by a test against the installed
scikit-learn (``tests/test_sklearn_private.py``). When one is missing or no longer
behaves as expected, the function either takes a public path (slower, or rounded
differently) and says so with a ``UserWarning`` naming the scikit-learn version, or,
where scikit-learn offers no public path (HistGradientBoosting's trees), raises a
ValueError naming the attribute and the version.

Facts checked on scikit-learn 1.9:

* bagged forests (``sklearn.ensemble._forest.BaseForest``) keep ``_n_samples`` (training
  rows), ``_n_samples_bootstrap`` (draws per tree) and ``_sample_weight`` (None unless
  the bootstrap is weighted, new in 1.9); tree ``t`` draws
  ``_generate_sample_indices(estimators_[t].random_state, _n_samples,
  _n_samples_bootstrap, _sample_weight)``; the public ``estimators_samples_`` draws the
  same rows again for every tree;
* gradient boosting's starting margin is ``_raw_predict_init(X)``; publicly, the first
  stage of ``staged_decision_function`` / ``staged_predict`` minus the first trees'
  ``learning_rate * predict`` gives it up to rounding;
* HistGradientBoosting keeps its trees in ``_predictors``, its category encoder in
  ``_preprocessor`` and the known categories in ``_bin_mapper``: there is no public
  path to them; its starting margin ``_baseline_prediction`` is, for a model without
  categorical features, the public raw prediction of one row minus its trees.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

# the private names read (tests rename them to force each fallback)
N_SAMPLES = "_n_samples"
N_BOOTSTRAP = "_n_samples_bootstrap"
SAMPLE_WEIGHT = "_sample_weight"
GENERATOR = "_generate_sample_indices"  # of sklearn.ensemble._forest
GB_INIT = "_raw_predict_init"
HGB_BASELINE = "_baseline_prediction"


def sklearn_version() -> str:
    import sklearn

    return sklearn.__version__


def _fallback(what, path):
    warnings.warn(f"scikit-learn {sklearn_version()}: {what}; treeimp takes {path} instead",
                  UserWarning, stacklevel=3)


def _no_public_path(model, attr, use):
    return ValueError(f"{type(model).__name__} has no {attr} (scikit-learn "
                      f"{sklearn_version()}); treeimp reads {use} through it and scikit-learn "
                      "offers no public way to them")


# ---------------------------------------------------------------- bagged forests
def base_forest():
    """``sklearn.ensemble._forest.BaseForest``, or None when it cannot be imported."""
    try:
        from sklearn.ensemble._forest import BaseForest
    except ImportError:
        return None
    return BaseForest


def is_forest(model) -> bool:
    """Whether ``model`` is a scikit-learn forest (``BaseForest``); without that private
    class, an instance of one of the four public forest classes (warned)."""
    cls = base_forest()
    if cls is not None:
        return isinstance(model, cls)
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        ExtraTreesRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )

    _fallback("sklearn.ensemble._forest.BaseForest cannot be imported",
              "the four public forest classes (RandomForest*, ExtraTrees*)")
    return isinstance(model, (ExtraTreesClassifier, ExtraTreesRegressor,
                              RandomForestClassifier, RandomForestRegressor))


def overrides_samples(model) -> bool:
    """Whether the model's class replaces scikit-learn's own ``estimators_samples_`` or
    ``_get_estimators_indices`` (then its own answer is the truth); True when that
    cannot be told (no ``BaseForest``)."""
    cls = base_forest()
    if cls is None:
        return True
    return any(inspect.getattr_static(type(model), name, None) is not cls.__dict__.get(name)
               for name in ("estimators_samples_", "_get_estimators_indices"))


def n_training_rows(model):
    """``_n_samples``: the rows a fitted forest or bagging model was trained on; None
    (warned: the row count of ``oob=True`` is then not checked) when it is missing."""
    n = getattr(model, N_SAMPLES, None)
    if n is None:
        _fallback(f"{type(model).__name__} has no {N_SAMPLES}",
                  "the in-bag rows without checking the number of training rows")
    return n


def bootstrap_draws(model):
    """``_n_samples_bootstrap``: rows drawn per tree; None when missing (warned: the
    public ``estimators_samples_`` path is taken)."""
    n = getattr(model, N_BOOTSTRAP, None)
    if n is None:
        _fallback(f"{type(model).__name__} has no {N_BOOTSTRAP}",
                  "the public estimators_samples_ (slower)")
    return n


_ABSENT = object()


def bootstrap_weighted(model):
    """Whether the bootstrap draws rows in proportion to sample weights
    (``_sample_weight`` is not None, scikit-learn >= 1.9); None when that cannot be told
    (warned: the public ``estimators_samples_`` path is taken). Before 1.9 the
    bootstrap is never weighted."""
    w = getattr(model, SAMPLE_WEIGHT, _ABSENT)
    if w is not _ABSENT:
        return w is not None
    if _version_tuple() < (1, 9):
        return False
    _fallback(f"{type(model).__name__} has no {SAMPLE_WEIGHT}",
              "the public estimators_samples_ (slower)")
    return None


def _version_tuple():
    parts = []
    for p in sklearn_version().split(".")[:2]:
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def generated_sample_indices(model, seed):
    """The rows scikit-learn's private ``_generate_sample_indices`` draws for a tree of
    ``model`` seeded ``seed`` (looked up at call time); None, with a warning, when it is
    missing or fails (the caller then takes the public path)."""
    try:
        from sklearn.ensemble import _forest

        generate = getattr(_forest, GENERATOR)
        args = (seed, getattr(model, N_SAMPLES), getattr(model, N_BOOTSTRAP))
        weight = getattr(model, SAMPLE_WEIGHT, _ABSENT)
        if weight is _ABSENT:  # scikit-learn < 1.9 (bootstrap_weighted): never weighted
            rows = generate(*args)
        else:
            try:
                rows = generate(*args, weight)
            except TypeError:  # a generator without sample_weight (same randint stream)
                rows = generate(*args)
        rows = np.asarray(rows)
        if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
            raise TypeError(f"it returned {rows.dtype} rows of shape {rows.shape}")
    except Exception as exc:  # the private generator is missing or changed
        _fallback(f"sklearn.ensemble._forest.{GENERATOR} is missing or changed "
                  f"({type(exc).__name__}: {exc})",
                  "the public estimators_samples_ (slower)")
        return None
    return rows


def regenerated_rows_differ():
    """Warn that the regenerated bootstrap of tree 0 differs from scikit-learn's own."""
    _fallback("the bootstrap rows regenerated from each tree's random_state differ from "
              "those of sklearn.ensemble._forest._generate_sample_indices",
              "the public estimators_samples_ (slower)")


# ---------------------------------------------------------------- gradient boosting
def gb_init_margin(model, rows):
    """``_raw_predict_init(rows)`` of a GradientBoosting model: the margin every row
    starts from, (n_rows, K). Without it (warned): the first stage of the public
    ``staged_decision_function`` (classifiers) / ``staged_predict`` (regressors) minus
    ``learning_rate`` times the first stage's trees, equal up to rounding."""
    method = getattr(model, GB_INIT, None)
    if method is not None:
        return np.asarray(method(rows), dtype=np.float64)
    _fallback(f"{type(model).__name__} has no {GB_INIT}",
              "the first stage of its public staged predictions minus its first trees")
    staged = getattr(model, "staged_decision_function", None) or model.staged_predict
    first = np.asarray(next(iter(staged(rows))), dtype=np.float64).reshape(len(rows), -1)
    trees = np.asarray(model.estimators_, dtype=object)[0]
    step = np.column_stack([tree.predict(rows) for tree in trees]).astype(np.float64)
    return first - float(model.learning_rate) * step


# ---------------------------------------------------------------- HistGradientBoosting
def _hgb_private(model, attr, use):
    if not hasattr(model, attr):
        raise _no_public_path(model, attr, use)
    return getattr(model, attr)


def hgb_predictors(model):
    """``_predictors``: one list of TreePredictor per iteration."""
    return _hgb_private(model, "_predictors", "the trees of HistGradientBoosting")


def hgb_baseline_prediction(model):
    """``_baseline_prediction``: the starting margin (1, n_trees_per_iteration); None,
    with a warning, when it is missing (then :func:`hgb_public_baseline`)."""
    base = getattr(model, HGB_BASELINE, None)
    if base is None:
        _fallback(f"{type(model).__name__} has no {HGB_BASELINE}",
                  "its public decision_function / predict on one row minus its trees")
    return base


def hgb_public_baseline(model, ens):
    """The starting margin of a HistGradientBoosting model from public predictions:
    the raw margin of one all-zero row (``decision_function`` of classifiers, the
    inverse of the log link on ``predict`` for poisson / gamma, ``predict`` otherwise)
    minus what ``ens`` (its parsed trees, base score 0) adds for that row. Only for
    models without categorical features (a row valid for any category encoding cannot
    be made up): those raise."""
    categorical = getattr(model, "is_categorical_", None)  # public: None or a mask
    if categorical is not None and np.any(categorical):
        raise _no_public_path(model, HGB_BASELINE, "the starting margin of a "
                              "HistGradientBoosting model with categorical features")
    row = np.zeros((1, ens.n_features))
    names = getattr(model, "feature_names_in_", None)
    X = row
    if names is not None:
        import pandas as pd

        X = pd.DataFrame(row, columns=list(names))
    if hasattr(model, "decision_function"):
        raw = np.asarray(model.decision_function(X), np.float64)
    else:
        raw = np.asarray(model.predict(X), np.float64)
        if ens.objective.link == "exp":
            raw = np.log(raw)
    return raw.reshape(1, -1)[0] - ens.predict_raw(row)[0]


def hgb_preprocessor(model):
    """``_preprocessor``: None or the ColumnTransformer that encodes categories."""
    return _hgb_private(model, "_preprocessor",
                        "the category encoding of HistGradientBoosting")


def hgb_bin_mapper(model):
    """``_bin_mapper``: knows each categorical feature's known categories."""
    return _hgb_private(model, "_bin_mapper", "the known categories of HistGradientBoosting")
