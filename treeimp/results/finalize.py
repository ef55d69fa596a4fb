"""Finalisation: per-tree values of every measure -> :class:`~treeimp.Importances`, with
the delete-a-block jackknife standard errors, the across-trees error and the per-class
tables."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..measures import registry
from ..measures.screening import class_weighted, model_task, objective_name, screening_method_of
from ..model.ensemble import FOREST
from .importances import Importances


def assemble(ens, stats, methods, names, classification, n_rows, n_blocks, alpha, lam,
             inflation=1.0, extra=None, groups=None, block_weight=None, parts=None):
    """The :class:`~treeimp.Importances` of ``methods`` from accumulated statistics
    ``stats`` (None: only measures that read the model alone). Each formula runs once on
    n_blocks + 1 blocks (the leave-one-block-out replicates, then all rows): the last
    gives the per-tree values and the table, the others the jackknife standard errors
    (times ``inflation``). ``extra``: the per-row measures' block sums; ``groups``: sums
    over feature groups; ``parts``: the split sums when already computed."""
    forest = ens.kind == FOREST
    agg = _nanmean_trees if forest else _nansum_trees
    # feature groups: per-tree values (and their leave-one-block-out replicates) summed
    # over each group's members before averaging over trees, so that the jackknife runs
    # on the group sums
    to_groups = (lambda v: v) if groups is None else groups.sum_members  # noqa: E731
    index_name = "feature" if groups is None else "group"
    member_names = None if groups is None else groups.member_names(names)
    if groups is not None:
        names = groups.names
    width = len(names)
    table, se, se_trees, per_tree, blocks = {}, {}, {}, {}, {}
    # ``stats``: NodeStats over n_blocks + 1 blocks, the leave-one-block-out replicates
    # and last all rows, so that one pass of each formula gives both; None: no measure
    # from node statistics was asked for, no rows were routed for them
    # ``parts``: (per-class parts, the split sums each formula takes), computed here when
    # not given (registry.split_parts)
    class_parts, parts = (registry.split_parts(methods, ens, stats, forest=forest,
                                               classification=classification)
                          if parts is None else parts)
    given = {"alpha": alpha, "lam": lam}
    for m in methods:
        entry = registry.get(m)
        if entry.source in registry.ROW_SUMS:
            # (n_blocks + 1, n_trees, n_features) as the formulas', from attributions/shap_oob.py
            values = to_groups(extra[m])
        else:
            values = to_groups(entry.formula(ens, stats, classification,
                                             entry.params_for(given), parts.get(m)))
        pt = values[-1:]
        if entry.needs_rows:
            # every block's sums over trees in one pass (each block's sums are its own):
            # the replicates', then all rows' (the table)
            sums = agg(values)
            bv, table[m] = sums[:-1], sums[-1]
        else:  # read from the model alone: no evaluation rows, no row blocks
            bv, table[m] = np.full((n_blocks, width), np.nan), agg(pt)[0]
        # its own copy: a view would keep every block's values (or the formula's
        # buffer of split sums) alive with the result
        per_tree[m] = pt[0].copy()
        blocks[m] = bv
        se[m] = inflation * jackknife_stderr(bv)
        if entry.needs_rows:
            table[m], se[m] = _rounding_zeros(table[m], se[m])
        se_trees[m] = _tree_stderr(pt[0], forest)
    by_class = {}
    for m, parts in class_parts.items():
        pc = registry.get(m).per_class.values(ens, stats.blocks(slice(-1, None)), parts[-1:])
        pc = to_groups(pc.transpose(0, 2, 1)).transpose(0, 2, 1)  # (trees, width, classes)
        by_class[m] = pd.DataFrame(
            _nanmean_trees(pc.reshape(1, ens.n_trees, -1))[0].reshape(width, -1),
            index=pd.Index(names, name=index_name),
            columns=pd.Index(ens.classes, name="class"))
    # one index and one column index for every table (the dicts share their keys)
    index, columns = _label_index(names, index_name), _label_index(list(table), None)
    return Importances(table=_frame(table, index, columns),
                       stderr=_frame(se, index, columns),
                       stderr_trees=_frame(se_trees, index, columns),
                       per_tree=per_tree, block_values=blocks, n_blocks=n_blocks,
                       kind=ens.kind, n_rows=n_rows, table_by_class=by_class,
                       model_name=ens.model_name, groups=member_names,
                       block_weight=block_weight, task=model_task(ens),
                       objective=objective_name(ens),
                       # class-weighted forest classifiers screen with their own measure
                       screening=screening_method_of(ens) if class_weighted(ens) else None)


def _label_index(labels, name):
    """``pd.Index(labels, name=name)``. Labels that are all str (feature, group and method
    names; at most ``_KEPT_LABELS``) share the values of one kept Index per tuple of
    labels: building an Index of
    strings fills a new pyarrow array, whose allocator is slow to hand out memory after
    an idle spell, every call. The Index returned is a new object (its name is its own,
    setting it leaves every other result's alone) over the kept values, which no Index
    can modify."""
    labels = list(labels)
    if len(labels) > _KEPT_LABELS or not all(type(label) is str for label in labels):
        return pd.Index(labels, name=name)
    return _kept_index(tuple(labels)).rename(name)


# at most this many labels per kept Index, and 32 kept: a long-running process that
# explains many different wide models keeps a few MB of names, not a copy of each
_KEPT_LABELS = 4096


@functools.lru_cache(maxsize=32)
def _kept_index(labels):
    """The kept ``pd.Index`` (no name) of a tuple of str labels."""
    return pd.Index(list(labels))


def _frame(values, index, columns):
    """DataFrame of ``values`` {method: float64 values per feature} (its keys are
    ``columns``), built from one 2-D block: a dict of columns costs pandas a pass per
    column."""
    if not values or any(np.asarray(v).dtype != np.float64 for v in values.values()):
        return pd.DataFrame(values, index=index)
    return pd.DataFrame(np.column_stack(list(values.values())), index=index,
                        columns=columns)


def _rounding_zeros(value, stderr):
    """``value`` and ``stderr`` with the features whose value and standard error are both
    below 1e-12 of the largest of either (over the features) set to exactly 0: an
    importance that is 0 in exact arithmetic (e.g. ufi of a feature whose every split
    saw evaluation rows of one class only, where w_l v_l + w_r v_r = w_m v_m) otherwise
    has a z-score of rounding over rounding. A value 0 with error 0 gets p = 1."""
    scale = np.nanmax(np.abs(np.concatenate([value, stderr]))) if value.size else 0.0
    if not np.isfinite(scale) or scale <= 0:
        return value, stderr
    zero = (np.abs(value) <= 1e-12 * scale) & (stderr <= 1e-12 * scale)
    if not zero.any():
        return value, stderr
    return np.where(zero, 0.0, value), np.where(zero, 0.0, stderr)


def jackknife_stderr(loo_values):
    """Delete-a-group jackknife: sqrt((B - 1) / B * sum_b (theta_(-b) - mean)^2)."""
    B = loo_values.shape[0]
    dev = loo_values - loo_values.mean(axis=0)
    return np.sqrt((B - 1) / B * np.sum(dev**2, axis=0))


def _nanmean_trees(v):
    """(B, n_trees, F) -> (B, F): mean over trees that saw evaluation rows."""
    seen = ~np.isnan(v)
    count = seen.sum(axis=1)
    total = np.where(seen, v, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _nansum_trees(v):
    """(B, n_trees, F) -> (B, F): sum over trees that saw evaluation rows (NaN: none)."""
    # the sums from 0.0 tree by tree first: a NaN in v makes its sum NaN, so only a NaN
    # sum (a tree without rows, or inf - inf) needs the masked sum, which adds the same
    # values in the same order where v has none (and warns of an inf - inf, once)
    with np.errstate(invalid="ignore"):
        total = np.add.reduce(v, axis=1, initial=0.0)
    if not np.isnan(total).any():
        return total
    return np.sum(v, axis=1, where=~np.isnan(v))


def _tree_stderr(pt, forest):
    """Li et al.'s across-trees error sqrt((mean v^2 - mean(v)^2) / T); for a boosting
    sum, T times the error of the mean."""
    nan = np.isnan(pt)
    if pt.shape[0] and not nan.any():  # every tree saw rows: no mask to apply
        T = np.full(pt.shape[1], pt.shape[0])
        var = np.sum(pt**2, axis=0) / T - (np.sum(pt, axis=0) / T) ** 2
        se = np.sqrt(np.maximum(var, 0.0) / np.maximum(T, 1))
        return se if forest else se * T
    T = np.sum(~nan, axis=0)
    if np.all(T > 0):  # np.nanmean's sums and division, on one mask
        filled = np.where(nan, 0.0, pt)
        var = np.sum(filled**2, axis=0) / T - (np.sum(filled, axis=0) / T) ** 2
    else:  # np.nanmean warns of the features no tree saw
        var = np.nanmean(pt**2, axis=0) - np.nanmean(pt, axis=0) ** 2
    se = np.sqrt(np.maximum(var, 0.0) / np.maximum(T, 1))
    return se if forest else se * T
