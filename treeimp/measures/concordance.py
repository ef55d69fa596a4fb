"""Harrell's concordance index of survival models (scoring "concordance_index").

The share of comparable pairs that the model orders right: a row with an observed event
and a shorter time than another (or the same time, the other censored) should have the
higher risk; equal risks count one half (``kernels/concordance.py``). Risk is the
model's prediction for survival:cox (exp(margin), a hazard ratio) and minus the
prediction for survival:aft (exp(margin), a predicted time).
"""

from __future__ import annotations

import numpy as np

from ..kernels.concordance import concordance_counts
from ..model.losses import check_target, link

SURVIVAL_OBJECTIVES = ("cox", "aft")


def concordance_index(time, event, risk):
    """Harrell's C of ``risk`` (higher: shorter expected time) for observed ``time`` and
    ``event`` (True: observed, False: censored at ``time``).

    Parameters
    ----------
    time, risk : array-like of shape (n_rows,), finite
    event : array-like of bool, shape (n_rows,)

    Returns
    -------
    float
        In [0, 1]; NaN when no pair is comparable (no event before another time).

    Examples
    --------
    >>> concordance_index([1.0, 2.0, 3.0], [True, True, False], [3.0, 2.0, 1.0])
    1.0
    """
    t = np.ascontiguousarray(time, dtype=np.float64)
    r = np.ascontiguousarray(risk, dtype=np.float64)
    e = np.ascontiguousarray(event, dtype=np.bool_)
    if not (t.ndim == r.ndim == e.ndim == 1 and t.shape == r.shape == e.shape):
        raise ValueError(f"time, event and risk must be 1-D of one length, got shapes "
                         f"{t.shape}, {e.shape}, {r.shape}")
    for name, v in (("time", t), ("risk", r)):
        if not np.isfinite(v).all():
            raise ValueError(f"{name} has {int((~np.isfinite(v)).sum())} NaN or inf values")
    order = np.argsort(-t, kind="stable").astype(np.int64)
    values, rank = np.unique(r, return_inverse=True)
    conc, tied, comparable = concordance_counts(order, t, e, rank.astype(np.int64).ravel(),
                                                len(values))
    return float((conc + 0.5 * tied) / comparable) if comparable > 0 else float("nan")


def survival_times(objective, y):
    """(time, event) of survival labels: survival:cox's signed times (negative:
    censored), survival:aft's [lower, upper] bounds (lower == upper observed, upper inf
    right-censored at lower; interval- and left-censored rows are refused)."""
    yt = check_target(objective, y, n_targets=2 if objective.name == "aft" else 1)
    if objective.name == "cox":
        return np.abs(yt), yt > 0
    lo, up = yt[:, 0], yt[:, 1]
    other = (lo != up) & ~np.isinf(up)
    if other.any():
        first = int(np.flatnonzero(other)[0])
        raise ValueError(f"scoring='concordance_index' needs observed or right-censored "
                         f"times; y has {int(other.sum())} interval- or left-censored rows "
                         f"(first at row {first}: [{lo[first]}, {up[first]}])")
    return lo, lo == up


def concordance_scorer(ens):
    """score(margin, y, sample_weight) -> Harrell's C of the model's predictions."""
    name = ens.objective.name
    if name not in SURVIVAL_OBJECTIVES:
        raise ValueError(f"scoring='concordance_index' needs a survival model (objective "
                         f"{' or '.join(SURVIVAL_OBJECTIVES)}); this model's objective is "
                         f"{name!r}")
    sign = 1.0 if name == "cox" else -1.0

    def score(margin, y, w):
        if w is not None:
            raise ValueError("scoring='concordance_index' takes no sample_weight")
        time, event = survival_times(ens.objective, y)
        pred = np.asarray(link(ens.objective, margin), dtype=np.float64).reshape(-1)
        return concordance_index(time, event, sign * pred)
    return score
