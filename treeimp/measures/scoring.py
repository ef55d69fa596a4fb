"""Scores computed from raw margins of the normal form, as scikit-learn's scorers do.

Permutation importance scores thousands of perturbed margins; going through the model's
own predict each time is what makes scikit-learn's version slow. Here a margin is turned
into the same predictions (probabilities, labels, values) the library would return, and
scored with scikit-learn's metric functions.
"""

from __future__ import annotations

import numpy as np

from ..inputs.targets import n_target_columns
from ..model.losses import check_target, link, loss
from .concordance import SURVIVAL_OBJECTIVES, concordance_scorer

CLASSIFICATION_OBJECTIVES = {"logistic", "softmax", "ova_logistic", "exponential",
                             "class_probability"}
SCORINGS = ("accuracy", "neg_log_loss", "roc_auc", "r2", "neg_mean_squared_error",
            "objective", "concordance_index")


def default_scoring(ens):
    """scikit-learn's default score: accuracy for classifiers, r2 for regressors;
    survival models (cox, aft): Harrell's concordance index."""
    if ens.objective.name in SURVIVAL_OBJECTIVES:
        return "concordance_index"
    return "accuracy" if is_classifier(ens) else "r2"


def is_classifier(ens):
    return ens.classes is not None or ens.objective.name in CLASSIFICATION_OBJECTIVES


def model_classes(ens):
    if ens.classes is not None:
        return np.asarray(ens.classes)
    return np.arange(max(2, ens.n_outputs))


def class_probabilities(ens, margin):
    """(n, n_classes) probabilities from a raw margin, as predict_proba returns them."""

    return _class_columns(np.asarray(link(ens.objective, margin), dtype=np.float64))


def _class_columns(pred):
    """predict_proba's columns from the link's output (one column: 1 - p and p)."""
    if pred.ndim == 1:
        pred = pred[:, None]
    if pred.shape[1] == 1:
        return np.column_stack([1.0 - pred[:, 0], pred[:, 0]])
    return pred


def regression_prediction(ens, margin):
    pred = np.asarray(link(ens.objective, margin), dtype=np.float64).reshape(len(margin), -1)
    # a multi-output regression forest, or a boosting model on several regression targets,
    # predicts its target vector (scikit-learn's metrics then average over targets);
    # every other regressor one value
    multi = ens.n_outputs > 1 and (ens.objective.name == "squared_error"
                                   if ens.kind == "forest" else not is_classifier(ens))
    return pred if multi else pred[:, 0]


def make_scorer(ens, scoring):
    """A function (margin, y, sample_weight) -> score (greater is better)."""
    from sklearn import metrics

    classification = is_classifier(ens)
    if ens.target_classes is not None:
        return _multi_target_accuracy(ens, scoring)
    if scoring is None:
        scoring = default_scoring(ens)
    if not isinstance(scoring, str) or scoring not in SCORINGS:
        raise ValueError(f"scoring must be None or one of {list(SCORINGS)}, got {scoring!r}")
    if scoring == "concordance_index":
        return concordance_scorer(ens)
    if ens.objective.name in SURVIVAL_OBJECTIVES and scoring != "objective":
        raise ValueError(f"scoring={scoring!r} is not defined for survival model "
                         f"({ens.objective.name!r}); use 'concordance_index'")
    classes = model_classes(ens) if classification else None
    if scoring in ("accuracy", "neg_log_loss", "roc_auc") and not classification:
        raise ValueError(f"scoring={scoring!r} needs a classifier; this model is a regressor")
    if scoring in ("r2", "neg_mean_squared_error") and classification:
        raise ValueError(f"scoring={scoring!r} needs a regressor; this model is a classifier")

    if scoring == "accuracy":
        def score(margin, y, w):
            labels = classes[np.argmax(class_probabilities(ens, margin), axis=1)]
            return metrics.accuracy_score(y, labels, sample_weight=w)
    elif scoring == "neg_log_loss":
        def score(margin, y, w):
            return -metrics.log_loss(y, class_probabilities(ens, margin), labels=classes,
                                     sample_weight=w)
    elif scoring == "roc_auc":
        if len(classes) != 2:
            raise ValueError(f"scoring='roc_auc' needs a binary classifier; this model has "
                             f"{len(classes)} classes")

        def score(margin, y, w):
            return metrics.roc_auc_score(y, class_probabilities(ens, margin)[:, 1],
                                         sample_weight=w)
    elif scoring == "r2":
        def score(margin, y, w):
            return metrics.r2_score(y, regression_prediction(ens, margin), sample_weight=w)
    elif scoring == "neg_mean_squared_error":
        def score(margin, y, w):
            return -metrics.mean_squared_error(y, regression_prediction(ens, margin),
                                               sample_weight=w)
    else:  # the model's own objective: negative mean loss
        def score(margin, y, w):
            y_t = check_target(ens.objective, y, ens.classes, n_target_columns(ens))
            return -np.average(loss(ens.objective, margin, y_t), weights=w)
    return score


def _multi_target_accuracy(ens, scoring):
    """Scorer of a multi-output classification forest: scikit-learn's ``score`` (and
    scoring "accuracy"), accuracy_score of the predicted label of every target (the
    argmax of each target's probability block, in an array of ``classes_[0]``'s dtype, as
    the forest's ``predict``), i.e. the share of rows with all targets right. Like
    scikit-learn, accuracy_score refuses targets that are not all binary
    ("multiclass-multioutput is not supported"). The probability scorings are not
    reproduced for several targets."""
    from sklearn import metrics

    if scoring not in (None, "accuracy"):
        raise ValueError(f"scoring={scoring!r} is not supported for a classification forest "
                         f"with {len(ens.target_classes)} targets; use scoring=None or "
                         "'accuracy' (the model's own score)")
    per_target = ens.target_classes
    bounds = np.cumsum([0] + [len(c) for c in per_target])
    dtype = per_target[0].dtype

    def score(margin, y, w):
        proba = class_probabilities(ens, margin)
        labels = np.empty((len(proba), len(per_target)), dtype=dtype)
        for j, classes in enumerate(per_target):
            labels[:, j] = classes[np.argmax(proba[:, bounds[j]:bounds[j + 1]], axis=1)]
        return metrics.accuracy_score(y, labels, sample_weight=w)
    return score


def bind_scorer(ens, scoring, y, sample_weight, margin):
    """(score(margin) -> float for these targets and weights, score of ``margin``).

    scikit-learn's metric functions validate and re-encode the same targets on every
    call, which costs as much as re-routing the permuted rows. For
    neg_log_loss, accuracy, r2 and neg_mean_squared_error the work on the targets alone
    is done once here and each call does the rest of the metric's arithmetic, with the
    same numpy operations as scikit-learn; that shortcut is used only if it gives
    scikit-learn's value bit for bit on ``margin`` (and, per call, only on predictions
    scikit-learn would accept without a warning). Otherwise, and for the other
    scorings, every call goes through ``make_scorer``.
    """
    slow = make_scorer(ens, scoring)
    reference = slow(margin, y, sample_weight)  # scikit-learn's checks and errors
    scoring = scoring or default_scoring(ens)
    # several class targets: scikit-learn's accuracy on each call (no prepared form)
    prepare = None if ens.target_classes is not None \
        else _PREPARED.get(scoring)
    fast = None if prepare is None else prepare(ens, np.asarray(y), sample_weight)
    if fast is not None:
        value = fast(margin)
        if value is None or np.float64(value).tobytes() != np.float64(reference).tobytes():
            fast = None
    if fast is None:
        def score(m):
            return slow(m, y, sample_weight)
    else:
        def score(m):
            value = fast(m)
            return slow(m, y, sample_weight) if value is None else value
    score.prepared = fast is not None
    return score, reference


def _prepared_log_loss(ens, y, w):
    from scipy.special import xlogy
    from sklearn.preprocessing import LabelBinarizer


    onehot = LabelBinarizer().fit(model_classes(ens)).transform(y)
    if onehot.shape[1] == 1:
        onehot = np.concatenate([1 - onehot, onehot], axis=1)
    # scikit-learn sums xlogy(onehot, p) over each row: one term, the others 0
    rows = np.arange(len(y))
    true_class = np.argmax(onehot, axis=1)
    n_classes = onehot.shape[1]
    positive = true_class == 1

    def score(margin):
        p1 = np.asarray(link(ens.objective, margin), dtype=np.float64)
        if n_classes == 2 and (p1.ndim == 1 or p1.shape[1] == 1):
            # one output: predict_proba's columns are 1 - p1 and p1, so the true class's
            # column is picked without building them. If p1 is finite and in [0, 1], so
            # is 1 - p1, and their sum is within 2 eps of 1: scikit-learn's checks pass.
            p1 = p1.reshape(-1)
            if not np.isfinite(p1).all() or p1.max() > 1 or p1.min() < 0:
                return None
            p_true = np.where(positive, p1, 1.0 - p1)
            eps = np.finfo(p_true.dtype).eps
            return float(np.average(xlogy(1.0, np.clip(p_true, eps, 1 - eps)), weights=w))
        p = _class_columns(p1)  # class_probabilities(ens, margin), the link applied once
        eps = np.finfo(p.dtype).eps
        if p.shape[1] != n_classes or not np.all(np.isfinite(p)) or p.max() > 1 \
                or p.min() < 0 or np.abs(p.sum(axis=1) - 1.0).max() > np.sqrt(eps):
            return None  # scikit-learn raises or warns: let it
        loss = -xlogy(1.0, np.clip(p[rows, true_class], eps, 1 - eps))
        return -float(np.average(loss, weights=w))
    return score


def _prepared_accuracy(ens, y, w):
    classes = model_classes(ens)
    if y.dtype.kind not in "biuf" or classes.dtype.kind not in "biuf":
        return None

    def score(margin):
        labels = classes[np.argmax(class_probabilities(ens, margin), axis=1)]
        return float(np.average(y == labels, weights=w))
    return score


def _regression_targets(y, w):
    y_true = np.asarray(y, dtype=np.float64)
    y_true = y_true.reshape(len(y_true), -1)  # (n, 1), or (n, n_targets)
    w = None if w is None else np.asarray(w, dtype=np.float64)
    return y_true, w


def _prepared_r2(ens, y, w):
    y_true, w = _regression_targets(y, w)
    weight = 1.0 if w is None else w[:, None]
    denominator = np.sum(weight * (y_true - np.average(y_true, axis=0, weights=w)) ** 2,
                         axis=0)

    def score(margin):
        y_pred = regression_prediction(ens, margin).reshape(len(margin), -1)
        numerator = np.sum(weight * (y_true - y_pred) ** 2, axis=0)
        out = np.ones(y_true.shape[1])
        valid = (denominator != 0) & (numerator != 0)
        out[valid] = 1 - (numerator[valid] / denominator[valid])
        out[(numerator != 0) & (denominator == 0)] = 0.0
        return float(np.average(out))
    return score


def _prepared_mse(ens, y, w):
    y_true, w = _regression_targets(y, w)

    def score(margin):
        y_pred = regression_prediction(ens, margin).reshape(len(margin), -1)
        errors = np.average((y_true - y_pred) ** 2, axis=0, weights=w)
        return -float(np.average(errors))
    return score


_PREPARED = {"neg_log_loss": _prepared_log_loss, "accuracy": _prepared_accuracy,
             "r2": _prepared_r2, "neg_mean_squared_error": _prepared_mse}
