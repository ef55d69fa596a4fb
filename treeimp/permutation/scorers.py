"""The ``scoring`` of :func:`treeimp.permutation_importance`: everything
``sklearn.inspection.permutation_importance`` takes, each scorer turned into a function of
the permuted rows' margins where that gives scikit-learn's value, else called on the
model itself with the permuted X.

Three ways to score one permuted copy of X, tried in this order:

- treeimp's own scorings (None, "accuracy", "neg_log_loss", "roc_auc", "r2",
  "neg_mean_squared_error", "objective"): ``treeimp.measures.scoring``, from the margin;
- any other scikit-learn scorer object (a name of ``sklearn.metrics.get_scorer_names()``,
  or a ``make_scorer`` / ``get_scorer`` object): called with a stand-in estimator whose
  ``predict`` / ``predict_proba`` / ``decision_function`` return what the model's would,
  computed from the margin (the stand-in has exactly the response methods the model has,
  its classes and its estimator type, so the scorer picks the same one). It is used only
  if, on the unpermuted rows, every response method it has equals the model's own bit for
  bit (values, shape and dtype kind); otherwise, and for any other callable, the scorer is
  called on the model (the pipeline's last step) with the permuted X, as scikit-learn
  does;
- a model given as a TreeEnsemble, a file or a library object that is not a scikit-learn
  estimator (an XGBoost Booster) has no methods to call: its scorers get the stand-in
  (``predict``, and ``predict_proba`` for classifiers; no ``decision_function``).
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, is_classifier
from sklearn.metrics import get_scorer, get_scorer_names
from sklearn.metrics._scorer import _BaseScorer
from sklearn.utils.validation import _check_response_method

from ..measures.scoring import (
    SCORINGS,
    class_probabilities,
    model_classes,
    regression_prediction,
)
from ..measures.scoring import (
    is_classifier as ensemble_is_classifier,
)

RESPONSES = ("predict", "predict_proba", "decision_function")


def scoring_names(scoring):
    """(keys of the result, or None for one score; {key: scorer spec}) of ``scoring`` as
    ``sklearn.inspection.permutation_importance`` takes it: None, a scorer name, a
    callable, a list or tuple of unique names, a dict {name: scorer}. A TypeError or
    ValueError names what is wrong."""
    names = set(get_scorer_names())
    if scoring is None or isinstance(scoring, str):
        if isinstance(scoring, str) and scoring not in names and scoring not in SCORINGS:
            raise ValueError(f"scoring={scoring!r} is not a scorer name: use one of "
                             f"sklearn.metrics.get_scorer_names(), 'objective', a callable "
                             "scorer(estimator, X, y), a list, tuple or dict of them, or "
                             "None")
        return None, {None: scoring}
    if callable(scoring):
        return None, {None: scoring}
    if isinstance(scoring, (list, tuple)):
        bad = [s for s in scoring if not isinstance(s, str)]
        if bad or not scoring:
            raise ValueError(f"a list or tuple scoring must hold scorer names (strings), got "
                             f"{list(scoring)!r}")
        if len(set(scoring)) != len(scoring):
            raise ValueError(f"scoring names must be unique, got {list(scoring)!r}")
        for s in scoring:
            scoring_names(s)
        return list(scoring), {s: s for s in scoring}
    if isinstance(scoring, dict):
        if not scoring:
            raise ValueError("scoring is an empty dict; give {name: scorer}")
        for key, s in scoring.items():
            if not isinstance(key, str):
                raise ValueError(f"the keys of a scoring dict must be strings, got {key!r}")
            if not (isinstance(s, str) or callable(s)):
                raise ValueError(f"scoring[{key!r}] must be a scorer name or a callable, got "
                                 f"{s!r}")
            if isinstance(s, str):
                scoring_names(s)
        return list(scoring), dict(scoring)
    raise TypeError(f"scoring must be None, a scorer name, a callable, a list, tuple or "
                    f"dict of them, got {type(scoring).__name__}")


def is_margin_scoring(spec, ens):
    """Whether treeimp computes this scorer from margins itself: its own scorings, for
    the task they are defined for (scikit-learn also scores a classifier's labels with
    r2, say: that goes through the stand-in)."""
    if spec is None or spec == "objective":
        return True
    if not (isinstance(spec, str) and spec in SCORINGS):
        return False
    classification = ensemble_is_classifier(ens)
    if spec in ("accuracy", "neg_log_loss"):
        return classification
    if spec == "roc_auc":
        return classification and len(model_classes(ens)) == 2
    return not classification  # r2, neg_mean_squared_error


def check_max_samples(max_samples, n):
    """The rows scored per column, as scikit-learn reads ``max_samples``: an int in
    [1, n], or a float in (0, 1] (its share of n, rounded down)."""
    if isinstance(max_samples, bool) or not isinstance(max_samples, numbers.Real):
        raise TypeError(f"max_samples must be an int >= 1 or a float in (0, 1], got "
                        f"{max_samples!r}")
    if isinstance(max_samples, numbers.Integral):
        if not 1 <= max_samples <= n:
            raise ValueError(f"max_samples must be in [1, {n}] (the rows of X) as an int, "
                             f"got {max_samples}")
        return int(max_samples)
    if not 0 < max_samples <= 1:
        raise ValueError(f"max_samples must be in (0, 1] as a float, got {max_samples}")
    k = int(max_samples * n)
    if k < 1:
        raise ValueError(f"max_samples={max_samples} of {n} rows is no row")
    return k


def scikit_learn_estimator(model):
    """``model`` when scikit-learn's scorers can call it (it has predict and is not a
    TreeEnsemble / file / Booster), else None."""
    return model if callable(getattr(model, "predict", None)) and hasattr(
        model, "__sklearn_tags__") else None


class Responses:
    """What the model's response methods return for a margin (see the module)."""

    def __init__(self, ens, estimator):
        self.ens = ens
        # several classification targets: predict_proba is a list per target, not
        # reproduced here
        self.usable = ens.target_classes is None
        self.classifier = ensemble_is_classifier(ens)
        if estimator is not None:
            self.classifier = is_classifier(estimator)
            self.classes = getattr(estimator, "classes_", None)
            self.methods = tuple(m for m in RESPONSES if hasattr(estimator, m))
        else:
            self.classes = model_classes(ens) if self.classifier else None
            self.methods = ("predict", "predict_proba") if self.classifier else ("predict",)

    def __call__(self, method, margin):
        ens = self.ens
        if method == "predict_proba":
            return class_probabilities(ens, margin)
        if method == "decision_function":
            m = np.asarray(margin, dtype=np.float64)
            return m[:, 0] if m.ndim == 2 and m.shape[1] == 1 else m
        if self.classifier:
            proba = class_probabilities(ens, margin)
            return np.asarray(self.classes)[np.argmax(proba, axis=1)]
        return regression_prediction(ens, margin)


def stand_in(responses, margin):
    """An estimator whose response methods answer for ``margin`` (their X is ignored);
    it has exactly the methods in ``responses.methods``."""
    est = _stand_in_class(responses.classifier, responses.methods)()
    est._responses, est._margin = responses, margin
    if responses.classes is not None:
        est.classes_ = np.asarray(responses.classes)
    return est


def predict(self, X):
    return self._responses("predict", self._margin)


def predict_proba(self, X):
    return self._responses("predict_proba", self._margin)


def decision_function(self, X):
    return self._responses("decision_function", self._margin)


_METHODS = {"predict": predict, "predict_proba": predict_proba,
            "decision_function": decision_function}


@functools.cache
def _stand_in_class(classifier, methods):
    """A scikit-learn classifier or regressor class with the response methods
    ``methods`` (scorers choose among the methods an estimator has)."""
    base = (ClassifierMixin, BaseEstimator) if classifier else (RegressorMixin, BaseEstimator)
    name = "StandInClassifier" if classifier else "StandInRegressor"
    return type(name, base, {m: _METHODS[m] for m in methods})


def response_methods(scorer, estimator, responses):
    """The response methods ``scorer`` calls on ``estimator``: the one scikit-learn's
    scorer objects pick (the first of their ``response_method`` the estimator has), else
    all of the stand-in's."""
    try:
        return (_check_response_method(estimator, scorer._response_method).__name__,)
    except (AttributeError, TypeError, ValueError):
        return responses.methods


def stand_in_matches(responses, estimator, X, margin, methods, checked):
    """Whether the stand-in's ``methods`` give the estimator's own output on X (the
    unpermuted rows, whose margin is ``margin``) bit for bit: values, shape and dtype
    kind (floats: the dtype). ``checked``: {method: result} of earlier checks, updated."""
    for method in methods:
        if method not in checked:
            checked[method] = _same(np.asarray(getattr(estimator, method)(X)),
                                    np.asarray(responses(method, margin)))
        if not checked[method]:
            return False
    return True


def _same(own, ours):
    if own.shape != ours.shape or own.dtype.kind != ours.dtype.kind:
        return False
    if own.dtype.kind == "f":
        return own.dtype == ours.dtype and np.array_equal(own, ours, equal_nan=True)
    return bool(np.array_equal(own, ours))


def scorer_object(spec):
    """A scikit-learn scorer for a name or callable ``spec`` (a name: ``get_scorer``)."""
    return get_scorer(spec) if isinstance(spec, str) else spec


def uses_responses_only(scorer):
    """Whether ``scorer`` reads the estimator only through its response methods
    (scikit-learn's scorer objects), so that the stand-in can take its place."""
    return isinstance(scorer, _BaseScorer)
