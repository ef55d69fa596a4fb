"""A null centre learned from the data: p-values of the features' z-scores shifted by
the mean z-score of shadow features (row-permuted copies of the features fitted with
the model), for :class:`treeimp.ImportanceSelector` with ``null="shadow"``."""

from __future__ import annotations

import numpy as np
from scipy import stats as _stats

# fewest shadow columns: the null's centre is estimated from them
MIN_SHADOWS = 100
# fewest shadows the model must have used (a finite z-score) for the centre to be estimated
MIN_USED_SHADOWS = 3


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
    if z.size < MIN_USED_SHADOWS:
        raise ValueError(f"only {z.size} of {np.asarray(z_shadow).size} shadow features "
                         "entered the model's trees, too few to estimate the null; use "
                         "more shadows (n_shadows), trees or rows, or null='t'")
    return float(np.mean(z)), float(np.std(z, ddof=1)), int(z.size)


def used_shadows(z_shadow):
    """How many shadows the model used (those with a finite z-score)."""
    return int(np.isfinite(np.asarray(z_shadow, dtype=float)).sum())


def shadow_pvalues(z, z_shadow, dof):
    """One-sided p-values of the features' z-scores ``z`` with the null centre learned
    from the shadows: p = P(T > (z - m) / sqrt(1 + s^2 / S)), T ~ t(``dof``), m, s and S
    the mean, standard deviation and count of the shadows' finite z-scores. The spread
    and tails stay those of the t reference (each feature's own standard error); only
    the centre, which sits below 0 for out-of-sample measures of noise features, is
    taken from the shadows, and the variance of z - m counts that of the estimated
    centre, s^2 / S (with few shadows the centre's own error would otherwise widen the
    noise features' p < 0.05 beyond 5%). A feature the model never used (no z-score)
    gets p = 1; +inf gives 0.

    Returns (p-values, (m, sd of the shadows' z-scores, their count))."""
    null = shadow_null(z_shadow)
    z = np.asarray(z, dtype=float)
    mean, sd, count = null
    p = _stats.t.sf((z - mean) / np.sqrt(1.0 + sd**2 / count), dof)
    return np.where(np.isnan(z), 1.0, p), null
