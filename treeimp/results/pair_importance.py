"""Summaries of per-row SHAP interaction values that the interaction plots draw: the mean
|phi_jk| of every pair of features with its standard error over random row blocks, and
the partner a feature interacts with most.

The standard error is the delete-a-block jackknife over random row blocks, the scheme of
every standard error of :func:`treeimp.explain` (``stats/blocks.py``: a row's block is a
hash of its position and ``random_state``): for a mean over rows it is close to
sd / sqrt(n) when rows are independent, and stays honest when neighbouring rows are not.
It is the error of the rows' sampling with the model held fixed (the trees are not
resampled).
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from ..measures.defaults import DEFAULT_N_BLOCKS
from ..stats.blocks import block_key, check_n_blocks, row_blocks
from .finalize import jackknife_stderr

PAIR_SEPARATOR = " x "


def pair_label(a, b) -> str:
    """The label of the pair of features named ``a`` and ``b``: ``"a x b"``."""
    return f"{a}{PAIR_SEPARATOR}{b}"


def block_means(values, n_blocks, random_state):
    """(mean over rows, jackknife standard error) of ``values`` (n_rows, ...), NaN rows
    skipped per entry: rows are split into ``n_blocks`` random blocks (``row_blocks``
    of their positions 0 .. n_rows - 1), each block left out in turn; None: 20 blocks,
    or one per row when there are fewer rows."""
    n = values.shape[0]
    n_blocks = check_n_blocks(min(DEFAULT_N_BLOCKS, n) if n_blocks is None else n_blocks, n)
    blocks = row_blocks(range(n), block_key(random_state), n_blocks)
    flat = values.reshape(n, -1)
    seen = ~np.isnan(flat)
    onehot = np.zeros((n_blocks, n))
    onehot[blocks, np.arange(n)] = 1.0
    sums = onehot @ np.where(seen, flat, 0.0)           # (B, entries)
    counts = onehot @ seen.astype(np.float64)
    total, count = sums.sum(axis=0), counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / count, np.nan)
        left_out = (total - sums) / (count - counts)      # (B, entries): block b left out
    se = jackknife_stderr(left_out)
    shape = values.shape[1:]
    return mean.reshape(shape), se.reshape(shape)


def pair_table(values, names, *, n_blocks, random_state):
    """Mean |phi_jk| over rows of every pair j < k of features, with its standard error
    (``block_means``), most important first (ties in feature order).

    Parameters
    ----------
    values : ndarray (n_rows, n_features, n_features)
        One output's interaction values (NaN rows, e.g. rows in-bag for every tree, are
        skipped).
    names : list of str
    n_blocks, random_state
        The row blocks of the standard errors.

    Returns
    -------
    DataFrame indexed by ``"a x b"`` (index name "pair") with columns ``feature_1``,
    ``feature_2`` (a before b in feature order), ``importance`` and ``stderr``.
    """
    mean, se = block_means(np.abs(values), n_blocks, random_state)
    j, k = np.triu_indices(len(names), 1)
    table = pd.DataFrame({"feature_1": [names[a] for a in j],
                          "feature_2": [names[b] for b in k],
                          "importance": mean[j, k], "stderr": se[j, k]},
                         index=pd.Index([pair_label(names[a], names[b]) for a, b in zip(j, k)],
                                        name="pair"))
    return table.sort_values("importance", ascending=False, kind="stable")


def strongest_partner(values, j):
    """The feature k != j with the largest mean |phi_jk| over rows (NaN rows skipped;
    ties: the first in feature order), or None with a single feature."""
    F = values.shape[1]
    if F < 2:
        return None
    with np.errstate(invalid="ignore"):
        strength = np.nanmean(np.abs(values[:, j, :]), axis=0)
    strength[j] = -np.inf
    strength = np.where(np.isnan(strength), -np.inf, strength)
    return int(np.argmax(strength))


def binned_partner(phi, x, others, rows_per_bin=50):
    """An approximate strongest partner of a feature from its contributions alone, for
    when no interaction values are at hand: rows are sorted by the feature's values ``x``
    and cut into bins of ``rows_per_bin`` consecutive rows (a tenth of the rows when that
    is fewer; rows where x is missing form a bin of their own); within a bin the
    feature's own effect is about constant, so what spreads ``phi`` there comes from
    its interactions. Each other feature's score is the share of phi's within-bin
    variance that a straight line in its values explains in every bin (its own slope per
    bin, so an interaction whose sign changes along x is not cancelled). Returns the
    position in ``others`` (columns (n_rows, n_others) of float values, NaN missing) of
    the highest score, None when no column explains anything.
    """
    ok = ~np.isnan(phi)
    phi, x, others = phi[ok], x[ok], others[ok]
    n = phi.shape[0]
    size = max(2, min(rows_per_bin, n // 10))
    present = np.flatnonzero(~np.isnan(x))
    order = present[np.argsort(x[present], kind="stable")]
    bins = [order[a:a + size] for a in range(0, len(order), size)]
    bins.append(np.flatnonzero(np.isnan(x)))
    explained = np.zeros(others.shape[1])
    total = 0.0
    for rows in bins:
        if len(rows) < 3:
            continue
        p = phi[rows] - phi[rows].mean()
        total += float(p @ p)
        z = others[rows]
        seen = ~np.isnan(z)
        zc = np.where(seen, z - np.nanmean(np.where(seen.any(axis=0), z, 0.0), axis=0), 0.0)
        ss = np.sum(zc * zc, axis=0)
        cross = p @ zc
        explained += np.where(ss > 0, cross**2 / np.where(ss > 0, ss, 1.0), 0.0)
    if total <= 0 or not np.any(explained > 0):
        return None
    return int(np.argmax(explained))


def check_top(top):
    """``top`` as a positive int, else a ValueError naming it."""
    if isinstance(top, bool) or not isinstance(top, numbers.Integral) or top < 1:
        raise ValueError(f"top must be a positive integer (1, 2, ...), got {top!r}")
    return int(top)
