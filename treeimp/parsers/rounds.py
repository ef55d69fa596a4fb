"""The trees a parsed model is explained with: an ``iteration_range``, the rounds the
library's default predict uses, and XGBoost's missing-value sentinel."""

from __future__ import annotations

from ..model.ensemble import check_iteration_range


def select_trees(ens, iteration_range, default_stop, missing):
    """``ens`` restricted to ``iteration_range`` (else to the first ``default_stop``
    rounds, when not None), with ``missing`` as its missing-value sentinel."""
    if iteration_range is not None:
        ens = ens.rounds(*check_iteration_range(iteration_range, ens.n_rounds))
    elif default_stop is not None and default_stop < ens.n_rounds:
        ens = ens.rounds(0, default_stop)
    if missing is not None:
        if ens.library not in ("xgboost", ""):
            raise ValueError(f"missing={missing!r} is XGBoost's missing-value sentinel; a "
                             f"{ens.library} model routes only NaN as missing (replace the "
                             "sentinel by NaN in X instead)")
        if not _same_value(missing, ens.missing_value):
            ens = ens.with_missing_value(missing)
    return ens


def _same_value(a, b):
    try:
        a = float(a)
    except (TypeError, ValueError):
        return False
    return a == b or (a != a and b != b)
