"""A null reference learned from the data: p-values of the features' z-scores against
the z-scores of shadow features (row-permuted copies of the features fitted with the
model), for :class:`treeimp.ImportanceSelector` with ``null="shadow"``."""

from __future__ import annotations

import numpy as np
from scipy import stats as _stats

# fewest shadow columns: the null's mean and spread are estimated from them
MIN_SHADOWS = 100


def zscores(value, stderr):
    """value / stderr; +-inf for a non-zero value with stderr 0, NaN for a feature the
    model never used (value and stderr 0: it has no z-score)."""
    value = np.asarray(value, dtype=float)
    stderr = np.asarray(stderr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = value / stderr
    z = np.where(stderr > 0, z, np.where(value > 0, np.inf, np.where(value < 0, -np.inf,
                                                                      np.nan)))
    return np.where(np.isnan(value) | np.isnan(stderr), np.nan, z)


def shadow_null(z_shadow):
    """The null's (mean, standard deviation, count) from the shadows' z-scores: the
    finite ones (a shadow the model never used has none)."""
    z = np.asarray(z_shadow, dtype=float)
    z = z[np.isfinite(z)]
    if z.size < 3:
        raise ValueError(f"only {z.size} of {np.asarray(z_shadow).size} shadow features "
                         "entered the model's trees, too few to estimate the null; use "
                         "more shadows (n_shadows), trees or rows, or null='t'")
    sd = float(np.std(z, ddof=1))
    if not sd > 0:
        raise ValueError(f"the {z.size} used shadow features all have the z-score "
                         f"{z[0]:.3g}, so the null's spread is 0; use null='t'")
    return float(np.mean(z)), sd, int(z.size)


def shadow_pvalues(z, z_shadow):
    """One-sided p-values of the features' z-scores ``z`` against the shadows'
    ``z_shadow``: with the shadows' mean m, standard deviation s and count S (finite
    z-scores only), p = P(T > (z - m) / (s sqrt(1 + 1/S))) for T ~ t(S - 1), the
    prediction p-value of a new draw from a normal null whose mean and spread are
    estimated by the S shadows (exactly uniform when the null z-scores are i.i.d. normal).
    A feature the model never used (no z-score) gets p = 1; +inf gives 0.

    Returns (p-values, (m, s, S))."""
    m, s, count = shadow_null(z_shadow)
    z = np.asarray(z, dtype=float)
    t = (z - m) / (s * np.sqrt(1.0 + 1.0 / count))
    p = _stats.t.sf(t, count - 1)
    return np.where(np.isnan(z), 1.0, p), (m, s, count)
