"""Checks made once at the public entry points, before any row is routed: what the
model can be explained with, and input that would otherwise be read wrongly."""

from __future__ import annotations

import numpy as np

from .ensemble import FOREST

# boosting objectives with one margin per class (every other boosting model has one)
_MULTICLASS = ("softmax", "ova_logistic")


def check_explainable(ens):
    """Refuse models whose importances treeimp does not define: vector-leaf boosting
    (one tree predicting every output, XGBoost ``multi_strategy="multi_output_tree"``)
    and boosting on several regression targets."""
    if ens.kind == FOREST:
        return
    if ens.value.ndim == 2 and ens.value.shape[1] > 1:
        raise ValueError(f"this {ens.library or 'boosting'} model has vector leaves (one tree "
                         f"predicts all {ens.value.shape[1]} outputs: XGBoost "
                         "multi_strategy='multi_output_tree'), which treeimp does not "
                         "support; train it with multi_strategy='one_output_per_tree' (the "
                         "default) or one model per target")
    if ens.n_outputs > 1 and ens.objective.name not in _MULTICLASS:
        raise ValueError(f"this {ens.library or 'boosting'} model has {ens.n_outputs} "
                         f"regression targets ({ens.objective.name}); treeimp explains "
                         "boosting models with one target or one margin per class: explain "
                         "one model per target")


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


# measures defined on a vector target: sums over the outputs of the single-output forms
# (mdi: scikit-learn's, impurity averaged over outputs; the held-out forms with
# z = y_i the target vector, |.|^2 and products summed over outputs)
VECTOR_TARGET_METHODS = ("mdi", "mdi_oob", "mdi_oob_centered", "ufi", "naive_oob", "pg1",
                         "pg2", "pg3", "pg_oob")


# multi-output classification forests: the measures that are sums over targets of the
# single-target forms on each target's one-hot vector
MULTI_CLASS_TARGET_METHODS = ("mdi", "mdi_oob", "mdi_oob_centered", "ufi", "naive_oob")


def check_methods_for_targets(methods, ens):
    """A multi-output regression forest is explained with the measures that are sums
    over its targets (:data:`VECTOR_TARGET_METHODS`); the per-row contribution measures
    (shap_oob, saabas_oob) are defined for one output."""
    if ens.target_classes is not None:
        n = len(ens.target_classes)
        bad = [m for m in methods if m not in MULTI_CLASS_TARGET_METHODS]
        if bad:
            raise ValueError(f"{bad} not defined for a classification forest with {n} "
                             f"targets; use methods from {list(MULTI_CLASS_TARGET_METHODS)} "
                             "(or one forest per target)")
        return
    if ens.kind != FOREST or ens.objective.name == "class_probability" or ens.n_outputs == 1:
        return
    bad = [m for m in methods if m not in VECTOR_TARGET_METHODS]
    if bad:
        raise ValueError(f"{bad} not defined for a regression forest with {ens.n_outputs} "
                         f"targets; use methods from {list(VECTOR_TARGET_METHODS)} (or one "
                         "forest per target)")
