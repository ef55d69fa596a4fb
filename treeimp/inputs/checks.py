"""Checks made once at the public entry points, before any row is routed: what the
model can be explained with, and input that would otherwise be read wrongly."""

from __future__ import annotations

import numpy as np

from ..model.ensemble import FOREST
from .targets import LEVELS, MULTICLASS

# two-class objectives: one output per label column when a model has several
_TWO_CLASS = ("logistic", "cross_entropy", "exponential")


def check_explainable(ens):
    """Refuse models whose importances treeimp does not define: boosting with several
    outputs of a two-class objective (multi-label classification, e.g. XGBoost
    binary:logistic on several label columns). Several regression targets (one output
    each, or vector leaves), multiclass margins and the levels of one target (quantiles,
    expectiles) are explained."""
    if (ens.kind == FOREST or ens.n_outputs == 1
            or ens.objective.name in MULTICLASS + LEVELS):
        return
    if ens.objective.name in _TWO_CLASS:
        raise ValueError(f"this {ens.library or 'boosting'} model has {ens.n_outputs} "
                         f"{ens.objective.name} outputs (multi-label classification), which "
                         "treeimp does not explain: explain one model per label")


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
    from ..measures.registry import check_targets

    check_targets(methods, ens)
