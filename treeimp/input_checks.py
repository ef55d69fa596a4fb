"""Checks made once at the public entry points, before any row is routed: what the
model can be explained with, and input that would otherwise be read wrongly."""

from __future__ import annotations

import numpy as np

from .ensemble import FOREST

# boosting objectives with one margin per class (every other boosting model has one)
_MULTICLASS = ("softmax", "ova_logistic")
# one target, one output per quantile / expectile level (losses.py)
_LEVELS = ("quantiles", "expectile_stack", "smoothed_quantile")


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
    if ens.n_outputs > 1 and ens.objective.name not in _MULTICLASS + _LEVELS:
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


def check_methods_for_targets(methods, ens):
    """A multi-output forest is explained with the measures that are sums over its
    targets (the registry's ``vector_targets`` / ``class_targets``); the per-row
    contribution measures (shap_oob, saabas_oob) are defined for one output."""
    from .registry import check_targets

    check_targets(methods, ens)
