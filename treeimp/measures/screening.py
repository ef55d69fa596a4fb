"""The default screening measure per model kind and task (ImportanceSelector,
Importances.select, the command line): the measure benchmarks/screening.py found to
hold the false discovery rate with the most power (numbers and designs in
benchmarks/README.md, "Default screening measure")."""

from __future__ import annotations

from ..inputs.targets import target_classes
from ..model.ensemble import BOOSTING, FOREST
from ..model.ranking import is_ranking
from . import registry
from .defaults import DEFAULT_METHODS
from .scoring import CLASSIFICATION_OBJECTIVES

CLASSIFICATION = "classification"
REGRESSION = "regression"
TASKS = (CLASSIFICATION, REGRESSION)

DEFAULT_SCREENING = {
    (FOREST, CLASSIFICATION): "mdi_oob_centered",
    (FOREST, REGRESSION): "mdi_oob_centered",
    # on overconfident classifiers (e.g. XGBClassifier's defaults) ufi's Newton
    # pseudo-response -g/h is unbounded (h = p(1 - p) near 0) and its standard errors
    # swamp every feature; mdi_oob_centered held FDR cross-fitted on every
    # classification design of the study
    (BOOSTING, CLASSIFICATION): "mdi_oob_centered",
    # fewer false selections on Friedman #1 (mdi_oob_centered's noise z-scores are
    # heavy-tailed for rarely used noise features), the same power cross-fitted
    (BOOSTING, REGRESSION): "ufi",
}

# boosting regression objectives whose hessian is bounded away from zero, so that ufi's
# pseudo-response -g/h is as bounded as the gradient; the others (poisson, gamma,
# tweedie: h proportional to the predicted mean; pseudo_huber, log_cosh: h -> 0 for large
# residuals; CatBoost's huber: h = 0 beyond delta) share the classifiers' failure and
# keep mdi_oob_centered
BOUNDED_HESSIAN = frozenset({"squared_error", "absolute_error", "quantile", "expectile", "mape"})
UNBOUNDED_HESSIAN_DEFAULT = "mdi_oob_centered"
# forest classifiers fitted with class_weight (default_screening_method)
CLASS_WEIGHTED_FOREST_DEFAULT = "ufi"


def default_methods(ens):
    """The measures :func:`treeimp.explain` computes when none are named:
    :data:`treeimp.measures.defaults.DEFAULT_METHODS` and the model's default screening measure
    (:func:`default_screening_method`), so that ``Importances.select()`` finds the
    measure it screens with, and for a model with linear leaf models ``leaf_models``;
    in the registry's order."""

    wanted = set(DEFAULT_METHODS)
    wanted.add(screening_method_of(ens))
    # the leaf models' share too (a linear-tree ranker is refused by the staged pass)
    if getattr(ens, "linear_leaves", None) is not None and not is_ranking(ens.objective):
        wanted.add("leaf_models")
    return [m for m in registry.names() if m in wanted]


def class_weighted(ens):
    """Whether a forest classifier was fitted with scikit-learn's ``class_weight``."""
    objective = getattr(ens, "objective", None)
    return bool(objective is not None and objective.name == "class_probability"
                and objective.params.get("class_weighted", False))


def screening_method_of(ens):
    """The default screening measure of a parsed ensemble: :func:`default_screening_method`
    of its kind, task and objective, with ``class_weighted`` for forest classifiers
    fitted with ``class_weight``."""
    return default_screening_method(ens.kind, model_task(ens), objective_name(ens),
                                    class_weighted=class_weighted(ens))


def model_task(ens):
    """``"classification"`` or ``"regression"`` for a parsed ensemble: classification
    for forest classifiers (also with several targets) and classification objectives
    (logistic, softmax, one-vs-all, exponential), regression otherwise."""

    name = objective_name(ens)
    classification = (ens.classes is not None or target_classes(ens) is not None
                      or name in CLASSIFICATION_OBJECTIVES)
    return CLASSIFICATION if classification else REGRESSION


def objective_name(ens):
    """The ensemble's canonical objective name, or None if it has none."""
    objective = getattr(ens, "objective", None)
    return None if objective is None else objective.name


def default_screening_method(kind, task, objective=None, *, class_weighted=False):
    """The default screening measure for a model of ``kind`` ("forest" or "boosting")
    fitted for ``task`` ("classification" or "regression").

    ``objective``: the model's canonical objective name (``Ensemble.objective.name``),
    if known; boosting regression objectives whose hessian can approach zero (Poisson,
    gamma, Tweedie, pseudo-Huber, log-cosh, Huber, XGBoost 3.4's smoothed absolute error
    and quantile) and quantile / expectile levels get "mdi_oob_centered" rather than
    "ufi" (see :data:`BOUNDED_HESSIAN`).

    ``class_weighted``: a forest classifier fitted with scikit-learn's ``class_weight``
    gets "ufi". Its node values are class-weighted shares, and a split that isolates a
    few up-weighted in-bag rows moves them far; on rows it did not see, noise features
    then get large positive ``mdi_oob`` / ``mdi_oob_centered`` (z 11 to 21 on pure noise
    with 5% positives and ``class_weight="balanced"``; weighting the evaluation rows by
    class does not remove it), while ``ufi``'s noise z-scores stay within +-1.5
    (``tests/test_class_weight.py``)."""
    if kind not in (FOREST, BOOSTING):
        raise ValueError(f"kind must be one of {[FOREST, BOOSTING]}, got {kind!r}")
    if task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    if objective is not None and not isinstance(objective, str):
        raise TypeError(f"objective must be None or an objective name (str), got "
                        f"{type(objective).__name__}")
    if kind == FOREST and task == CLASSIFICATION and class_weighted:
        return CLASS_WEIGHTED_FOREST_DEFAULT
    if (kind == BOOSTING and task == REGRESSION and objective is not None
            and objective not in BOUNDED_HESSIAN):
        return UNBOUNDED_HESSIAN_DEFAULT
    return DEFAULT_SCREENING[(kind, task)]


def resolve_methods(methods, ens, alpha, lam):
    """``methods`` as a checked list: None gives the defaults with the model's screening
    measure; every name registered, defined for this model, its parameters valid."""
    if methods is None:  # the defaults, with the model's screening measure
        return registry.check_methods(default_methods(ens), ens, {"alpha": alpha, "lam": lam})
    if isinstance(methods, str):
        methods = (methods,)
    if not hasattr(methods, "__iter__"):
        raise TypeError(f"methods must be a method name or a sequence of them (e.g. "
                        f"{list(DEFAULT_METHODS)}), got {methods!r}")
    methods = list(dict.fromkeys(methods))
    bad = [m for m in methods if not isinstance(m, str)]
    if bad:
        raise TypeError(f"methods must be strings, got {bad[0]!r}")
    # registered, defined for this model (kind, node values, targets), parameters
    return registry.check_methods(methods, ens, {"alpha": alpha, "lam": lam})
