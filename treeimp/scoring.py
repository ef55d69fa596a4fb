"""Scores computed from raw margins of the normal form, as scikit-learn's scorers do.

Permutation importance scores thousands of perturbed margins; going through the model's
own predict each time is what makes scikit-learn's version slow. Here a margin is turned
into the same predictions (probabilities, labels, values) the library would return, and
scored with scikit-learn's metric functions.
"""

from __future__ import annotations

import numpy as np

CLASSIFICATION_OBJECTIVES = {"logistic", "softmax", "ova_logistic", "exponential",
                             "class_probability"}
SCORINGS = ("accuracy", "neg_log_loss", "roc_auc", "r2", "neg_mean_squared_error",
            "objective")


def is_classifier(ens):
    return ens.classes is not None or ens.objective.name in CLASSIFICATION_OBJECTIVES


def model_classes(ens):
    if ens.classes is not None:
        return np.asarray(ens.classes)
    return np.arange(max(2, ens.n_outputs))


def class_probabilities(ens, margin):
    """(n, n_classes) probabilities from a raw margin, as predict_proba returns them."""
    from .losses import link

    pred = np.asarray(link(ens.objective, margin), dtype=np.float64)
    if pred.ndim == 1:
        pred = pred[:, None]
    if pred.shape[1] == 1:
        return np.column_stack([1.0 - pred[:, 0], pred[:, 0]])
    return pred


def regression_prediction(ens, margin):
    from .losses import link

    return np.asarray(link(ens.objective, margin), dtype=np.float64).reshape(len(margin), -1)[:, 0]


def make_scorer(ens, scoring):
    """A function (margin, y, sample_weight) -> score (greater is better)."""
    from sklearn import metrics

    classification = is_classifier(ens)
    if scoring is None:
        scoring = "accuracy" if classification else "r2"
    if not isinstance(scoring, str) or scoring not in SCORINGS:
        raise ValueError(f"scoring must be None or one of {list(SCORINGS)}, got {scoring!r}")
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
        from .losses import check_target, loss

        def score(margin, y, w):
            y_t = check_target(ens.objective, y, ens.classes)
            return -np.average(loss(ens.objective, margin, y_t), weights=w)
    return score
