"""Rows that probe routing edge cases for a parsed model (shared by parser tests)."""

import numpy as np


def threshold_rows(ens, X_base, *, rng, n_rows=200, ulps=True, nonfinite=True, huge=True):
    """Rows of X_base with cells replaced by split thresholds, +-1 float32 ulp, NaN,
    exact zeros, +-inf and huge values: everything a parser can get wrong.

    Where the model compares in float64 (``not ens.round_float32``: LightGBM,
    HistGradientBoosting) a threshold cell is also the exact float64 threshold or one
    float64 ulp either side of it, besides the float32 rounding and its neighbours."""
    X = np.array(X_base[rng.integers(0, len(X_base), n_rows)], dtype=np.float64)
    split = (ens.left >= 0) & ~ens.is_categorical
    feats, thr = ens.feature[split], ens.threshold[split]
    specials = [0.0, -0.0]
    if nonfinite:
        specials += [np.nan, np.inf, -np.inf]
    if huge:
        specials += [3e38, -3e38]
    for i in range(n_rows):
        for j in rng.choice(X.shape[1], size=max(1, X.shape[1] // 2), replace=False):
            u = rng.random()
            cand = thr[feats == j]
            if u < 0.5 and cand.size:
                exact = float(cand[rng.integers(cand.size)])
                t = np.float32(exact)
                if ulps:
                    options = [float(t), float(np.nextafter(t, np.float32(np.inf))),
                               float(np.nextafter(t, np.float32(-np.inf)))]
                    if not ens.round_float32:  # compared in float64: probe it exactly
                        options += [exact, np.nextafter(exact, np.inf),
                                    np.nextafter(exact, -np.inf)]
                    t = options[rng.integers(len(options))]
                X[i, j] = float(t)
            elif u < 0.7:
                X[i, j] = specials[rng.integers(len(specials))]
    return X
