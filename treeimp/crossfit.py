"""Cross-fitted importances: cross_explain() fits a clone of a model on each training
fold, explains it on its held-out fold, and combines the folds into one Importances in
which every row is evaluated exactly once."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
from sklearn.base import clone, is_classifier
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils import _safe_indexing

from .api import explain
from .inputs.targets import as_1d_target, check_sample_weight
from .inputs.threads import fit_threads
from .measures.defaults import CROSSFIT_VARIANCE_FACTOR, DEFAULT_N_BLOCKS
from .results.finalize import jackknife_stderr
from .results.importances import Importances


def cross_explain(estimator, X, y, *, cv=5, methods=None, sample_weight=None,
                  feature_names=None, n_blocks=DEFAULT_N_BLOCKS, random_state=None,
                  n_jobs=None, alpha=None, lam=None, groups=None) -> Importances:
    """Cross-fitted out-of-sample importances: every row evaluated once, by a model that
    did not see it.

    The rows are split into ``cv`` folds (stratified by class for classifiers). For each
    fold a clone of ``estimator`` is fitted on the other folds and explained with
    :func:`treeimp.explain` on the held-out fold (``n_blocks`` random row blocks within
    the fold). The folds are combined into one estimate:

    - importance: the folds' importances weighted by their share of the evaluation
      weight (rows, or ``sample_weight``): sum_f w_f I_f, for mdi_oob and
      mdi_oob_centered the mean over all n rows of each row's term under its own fold's
      model;
    - standard error: one delete-a-block jackknife over all ``cv * n_blocks`` row
      blocks of that combined estimate, the folds' models held fixed: leaving out block
      b of fold f replaces I_f by the fold's leave-one-block-out value and takes the
      block's weight from every row (for per-row means exactly the mean over the other
      rows of all folds), so differences between the folds' means enter the error, which
      a jackknife within each fold (about the fold's own mean) would not see. Times
      ``CROSSFIT_VARIANCE_FACTOR`` (sqrt(1.25)): every row also trains the other folds'
      models, which fixed-model blocks do not see. Chosen on null designs
      (benchmarks/calibration.py; benchmarks/README.md): the noise z-scores' spread
      about their mean is 0.87-1.10 by design and size;
    - p-values: t with ``cv * n_blocks - 1`` degrees of freedom; q-values by
      Benjamini-Hochberg across features.

    This is the screening to use for boosting models: every row is evaluated (a single
    held-out split evaluates a fraction), at the cost of ``cv`` fits.

    Parameters
    ----------
    estimator : unfitted scikit-learn, XGBoost or LightGBM tree ensemble
        Cloned for every fold, never changed.
    X : array-like or DataFrame (n_rows, n_features)
    y : array-like (n_rows,)
    cv : int >= 2 or a scikit-learn splitter, default 5
        Number of folds (KFold, or StratifiedKFold for classifiers, shuffled with
        ``random_state``), or an object with ``split(X, y)``.
    methods : sequence of str or None
        As for :func:`treeimp.explain` (None: the defaults with the model's screening
        measure).
    sample_weight : array-like (n_rows,), optional
        Passed to every fit (training rows) and explain (held-out rows).
    feature_names : list of str, optional
    n_blocks : int
        Random row blocks within each fold.
    random_state : int or None
        Seeds the folds and the row blocks (not the estimator): an int gives the same
        folds and standard errors on every call, None new ones on every call.
    n_jobs : int or None
        Threads for the kernels.
    alpha, lam : float, optional
        Parameters of "pg_oob".
    groups : dict, optional
        Feature groups, as for :func:`treeimp.explain` (each fold's importances are
        group sums before the folds are combined).

    Returns
    -------
    Importances
        ``per_tree`` holds the fold models' trees one after another; ``block_values``
        the combined estimate with one block of one fold left out (cv * n_blocks rows,
        fold by fold), the replicates of the jackknife; ``stderr_trees`` is
        sqrt(sum_f w_f^2 se_trees_f^2) of the folds' across-trees errors.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> import treeimp
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 4))
    >>> y = X[:, 0] + 0.1 * rng.normal(size=400)
    >>> gb = GradientBoostingRegressor(n_estimators=30, max_depth=2, random_state=0)
    >>> res = treeimp.cross_explain(gb, X, y, cv=3, random_state=0)
    >>> res.select("ufi")
    ['x0']
    """
    if not hasattr(estimator, "fit"):
        raise TypeError(f"estimator must be an unfitted model with a fit method, got "
                        f"{estimator!r}")
    n = _n_rows(X)
    y = as_1d_target(y, n)
    weights = None if sample_weight is None else check_sample_weight(sample_weight, n)
    folds = _folds(estimator, cv, X, y, random_state, n)
    seeds = np.random.default_rng(random_state).integers(np.iinfo(np.int32).max,
                                                          size=len(folds))
    parts, shares = [], []
    for (train, test), seed in zip(folds, seeds):
        if len(test) < n_blocks:
            raise ValueError(f"a fold holds out {len(test)} rows, fewer than "
                             f"n_blocks={n_blocks}; use fewer folds or fewer blocks")
        est = clone(estimator)
        fit_kw = {} if weights is None else {"sample_weight": weights[train]}
        with fit_threads(est):
            est.fit(_safe_indexing(X, train), y[train], **fit_kw)
        res = explain(est, _safe_indexing(X, test), y[test], methods=methods,
                      sample_weight=None if weights is None else weights[test],
                      feature_names=feature_names, n_blocks=n_blocks,
                      random_state=int(seed), n_jobs=n_jobs, alpha=alpha, lam=lam,
                      groups=groups)
        parts.append(res)
        shares.append(len(test) if weights is None else weights[test].sum())
    shares = np.asarray(shares, dtype=np.float64)
    return combine_folds(parts, shares / shares.sum(), n_rows=n)


def combine_folds(parts, shares, *, n_rows, factor=None):
    """One Importances from the folds' results ``parts`` (same features and methods),
    weighted by ``shares`` (the folds' shares of the evaluation weight, summing to 1);
    see :func:`cross_explain`. ``factor``: the variance factor (default
    ``CROSSFIT_VARIANCE_FACTOR``)."""
    factor = CROSSFIT_VARIANCE_FACTOR if factor is None else float(factor)
    first = parts[0]
    index = first.table.index
    methods = first.methods
    w = np.asarray(shares, dtype=np.float64)
    table = sum(wf * r.table for wf, r in zip(w, parts))
    stderr_trees = np.sqrt(sum(wf**2 * r.stderr_trees**2 for wf, r in zip(w, parts)))
    blocks, per_tree, stderr = {}, {}, {}
    for m in methods:
        total = table[m].to_numpy()
        blocks[m] = np.concatenate([pooled_replicates(total, wf, r.table[m].to_numpy(),
                                                      r.block_values[m], r.block_weight)
                                    for wf, r in zip(w, parts)])
        stderr[m] = factor * jackknife_stderr(blocks[m])
        per_tree[m] = np.concatenate([r.per_tree[m] for r in parts])
    by_class = {}
    for m in first.table_by_class:
        by_class[m] = sum(wf * r.table_by_class[m] for wf, r in zip(w, parts))
    n_blocks = sum(r.n_blocks for r in parts)
    return Importances(table=pd.DataFrame(table, index=index),
                       stderr=pd.DataFrame(stderr, index=index),
                       stderr_trees=pd.DataFrame(stderr_trees, index=index),
                       per_tree=per_tree, block_values=blocks, n_blocks=n_blocks,
                       kind=first.kind, n_rows=n_rows, table_by_class=by_class,
                       model_name=f"{first.model_name}, cross-fitted over {len(parts)} folds",
                       dof=n_blocks - 1, groups=first.groups, task=first.task,
                       objective=first.objective)


def pooled_replicates(total, share, fold_value, fold_loo, block_weight=None):
    """The combined estimate with one row block of one fold left out, for each of that
    fold's blocks: the fold's ``fold_loo`` (B, features) leave-one-block-out values in
    place of its ``fold_value``, and the left-out block's weight (its share of the fold's
    ``block_weight`` times ``share``; share / B when the block weights are not known)
    taken from every row's weight, not from its fold's alone. For a per-row mean (mdi_oob,
    mdi_oob_centered) this is exactly the per-row mean over all folds' rows without that
    block, the folds' models held fixed, so the jackknife over all K x B blocks sees the
    differences between the folds' means, which a jackknife within each fold does not."""
    fold_loo = np.asarray(fold_loo, dtype=np.float64)
    if block_weight is None or not np.sum(block_weight) > 0:
        share_block = np.full((fold_loo.shape[0], 1), share / fold_loo.shape[0])
    else:
        bw = np.asarray(block_weight, dtype=np.float64)
        share_block = (share * bw / bw.sum())[:, None]
    return (total - share * fold_value + (share - share_block) * fold_loo) / (1.0 - share_block)


def _n_rows(X):
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (rows, features), got shape {X.shape}")
        shape = X.shape
    return int(shape[0])


def _folds(estimator, cv, X, y, random_state, n):
    """[(train, test), ...] index arrays; each row in exactly one test fold."""
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise ValueError(f"cv must be >= 2 folds, got {cv}")
        if cv > n:
            raise ValueError(f"cv={cv} folds is more than the {n} rows")
        splitter_cls = StratifiedKFold if is_classifier(estimator) else KFold
        splitter = splitter_cls(n_splits=int(cv), shuffle=True, random_state=random_state)
        try:
            folds = list(splitter.split(np.zeros((n, 1)), y))
        except ValueError as exc:
            raise ValueError(f"cannot split {n} rows into cv={cv} folds stratified by "
                             f"class: {exc}") from None
    elif hasattr(cv, "split") and not isinstance(cv, (str, bytes)):
        folds = [(np.asarray(a), np.asarray(b)) for a, b in cv.split(X, y)]
    else:
        raise TypeError(f"cv must be an integer >= 2 or a splitter with split(X, y), "
                        f"got {cv!r}")
    seen = np.zeros(n, dtype=np.int64)
    for _, test in folds:
        np.add.at(seen, test, 1)
    if len(folds) < 2 or not np.all(seen == 1):
        raise ValueError(f"cv must put every row in exactly one test fold ({len(folds)} "
                         f"folds; {int(np.sum(seen == 0))} rows never held out, "
                         f"{int(np.sum(seen > 1))} held out more than once)")
    return folds
