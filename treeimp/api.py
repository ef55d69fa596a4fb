"""Public entry points: explain() (and parse/load, re-exported from parsers)."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from .measures import registry
from .measures.defaults import DEFAULT_METHODS, DEFAULT_N_BLOCKS, OOB_VARIANCE_FACTOR  # noqa: F401
from .measures.screening import default_methods, model_task, objective_name
from .model.ensemble import FOREST
from .results.importances import Importances


def explain(model, X, y=None, *, oob=False, methods=None, sample_weight=None,
            feature_names=None, n_blocks=DEFAULT_N_BLOCKS, random_state=None, n_jobs=None,
            alpha=None, lam=None, progress=None, groups=None, iteration_range=None,
            missing=None, base_margin=None) -> Importances:
    """Out-of-sample feature importances of a fitted tree ensemble.

    Every tree's splits are re-measured on rows it did not see: its own out-of-bag rows
    (``oob=True``, bagged forests, X and y the training rows) or the held-out rows X, y
    given (any model). Forests use y (one-hot for classes) as the per-tree target;
    boosting models use the negative gradient of their own loss at the held-out margin
    before each tree.

    Parameters
    ----------
    model : fitted scikit-learn / XGBoost / LightGBM / CatBoost model, TreeEnsemble or file
        Explained with the trees its own default predict uses (see
        :func:`treeimp.parse`; ``iteration_range`` to choose).
        A fitted scikit-learn Pipeline whose last step is one of these is explained on
        the columns its last step sees: the steps before transform X (in chunks of
        rows), the columns are named by their ``get_feature_names_out``.
    X : array-like, scipy.sparse matrix, DataFrame (n_rows, n_features), or chunks
        A DataFrame of pandas, polars, pyarrow (anything narwhals reads) is matched to
        the model's feature names by name. An iterator (or list) of ``(X, y)`` or
        ``(X, y, sample_weight)`` chunks streams held-out data larger than memory: each
        chunk's statistics are accumulated and added (y, sample_weight, base_margin are
        then given inside the chunks), and the result equals the one-call result on
        the concatenated rows (see :class:`treeimp.Explainer`). Absent entries of a
        sparse matrix are what the model's library reads them as (XGBoost: missing;
        LightGBM, scikit-learn: 0). A dask array or DataFrame is explained where its
        partitions lie (``pip install "treeimp[dask]"``; y, sample_weight and
        base_margin with X's partitions): see :func:`treeimp.dask.explain.explain_dask`.
    y : array-like (n_rows,), optional
        Labels (classification, mapped to the model's classes) or values. Needed by
        every method except "mdi": ``methods=("mdi",)`` reads the model alone, routes
        no rows and needs no y (X is still checked against the model's features, and
        gives the feature names).
    oob : bool, default False
        Evaluate each tree on its out-of-bag rows (RandomForest / ExtraTrees with
        bootstrap=True; X, y must be the training rows in training order).
    methods : sequence of str or None
        None (default): "mdi", "mdi_oob", "ufi" and the model's default screening
        measure (:func:`treeimp.measures.screening.default_screening_method`: "mdi_oob_centered"
        for forests and classifiers), the one ``select()`` tests. Any of "mdi"
        (in-sample, what the library reports), "mdi_oob" (Li et al. 2019),
        "mdi_oob_centered" (MDI-oob with the target centred per tree at the tree's
        in-bag root value: invariant to adding a constant to y), "ufi" (Zhou & Hooker
        2020), "naive_oob", "pg1", "pg2", "pg3" (Loecher's penalized Gini presets,
        forests), "pg_oob" with ``alpha`` and ``lam``, "shap_oob" (per tree, the mean
        over evaluation rows of the target times the row's TreeSHAP values; see
        ``treeimp/shap_oob.py``) and "saabas_oob" (the same with Saabas contributions:
        equal to "mdi_oob", computed row by row).
    sample_weight : array-like (n_rows,), optional
        Weights of the evaluation rows.
    feature_names : list of str, optional
        Names for the result's index (default: the DataFrame's columns, the model's
        names, or x0, x1, ...).
    n_blocks : int, default 20
        Random blocks of evaluation rows for standard errors and p-values (at most the
        number of evaluation rows; 20 was calibrated on null designs, see
        benchmarks/README.md).
    random_state : int, Generator or None
        Seeds the assignment of rows to blocks.
    n_jobs : int or None
        Threads for the kernels (None: all).
    alpha, lam : float, optional
        Parameters of "pg_oob" (Loecher's penalized Gini).
    progress : None, True or False
        A tqdm progress bar over the evaluation rows. None: shown only when stderr is a
        terminal, tqdm is installed and the run is long (rows x trees > 5e7).
    groups : dict or "input", optional
        Importances of sets of columns: {group name: [feature names or positions]}
        (columns in no group are a group of their own), or "input" for a Pipeline (each
        transformed column grouped with the input column it came from, e.g. the one-hot
        columns of a categorical). A group's value is the sum of its members' per-tree
        values; its standard error and p-value come from the same row blocks (the
        jackknife of the group sums). The result's index holds the group names and
        ``res.groups`` their members.
    iteration_range : (start, stop), optional
        Boosting rounds to explain (XGBoost's meaning; stop 0: the last). The held-out
        margin is what the library predicts for that range (XGBoost: base score, or
        ``base_margin``, + the selected trees; LightGBM leaves out its base score when
        start > 0, see :meth:`TreeEnsemble.rounds`).
    missing : float, optional
        XGBoost's missing-value sentinel for a Booster or model file (a wrapper's own
        ``missing`` parameter is used by default): values equal to it route as NaN.
    base_margin : array-like (n_rows,) or (n_rows, n_outputs), optional
        Per-row offsets of a boosting model (XGBoost's ``base_margin``, LightGBM's
        ``init_score``, e.g. log exposure): held-out margins start at base score +
        offset (XGBoost: at the offset, which replaces its base score), so the staged
        gradients are those of the deployed model.

    Returns
    -------
    Importances
        "mdi" uses no evaluation rows: its ``stderr``, ``pvalues`` and ``qvalues`` are
        NaN (its ``stderr_trees`` is the across-trees spread).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> import treeimp
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> rf = RandomForestClassifier(n_estimators=20, random_state=0).fit(X, y)
    >>> res = treeimp.explain(rf, X, y, oob=True, random_state=0)
    >>> list(res.table.columns)
    ['mdi', 'mdi_oob', 'mdi_oob_centered', 'ufi']
    """
    from .explainer import Explainer

    ex = Explainer(model, iteration_range=iteration_range, missing=missing,
                   feature_names=feature_names, n_jobs=n_jobs)
    return ex.explain(X, y, oob=oob, methods=methods, sample_weight=sample_weight,
                      base_margin=base_margin, groups=groups, n_blocks=n_blocks,
                      random_state=random_state, alpha=alpha, lam=lam, progress=progress)


def _assemble(ens, stats, methods, names, classification, n_rows, n_blocks, alpha, lam,
              inflation=1.0, extra=None, groups=None, block_weight=None, parts=None):
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
        if entry.source == registry.CONTRIBUTIONS:
            # (n_blocks + 1, n_trees, n_features) as the formulas', from shap_oob.py
            values = to_groups(extra[m])
        else:
            values = to_groups(entry.formula(ens, stats, classification,
                                             entry.params_for(given), parts.get(m)))
        pt = values[-1:]
        # read from the model alone: no evaluation rows, no row blocks
        bv = agg(values[:-1]) if entry.needs_rows else np.full((n_blocks, width), np.nan)
        per_tree[m] = pt[0]
        table[m] = agg(pt)[0]
        blocks[m] = bv
        se[m] = inflation * jackknife_stderr(bv)
        se_trees[m] = _tree_stderr(pt[0], forest)
    by_class = {}
    for m, parts in class_parts.items():
        pc = registry.get(m).per_class.values(ens, stats.blocks(slice(-1, None)), parts[-1:])
        pc = to_groups(pc.transpose(0, 2, 1)).transpose(0, 2, 1)  # (trees, width, classes)
        by_class[m] = pd.DataFrame(
            _nanmean_trees(pc.reshape(1, ens.n_trees, -1))[0].reshape(width, -1),
            index=pd.Index(names, name=index_name),
            columns=pd.Index(ens.classes, name="class"))
    frame = lambda d: pd.DataFrame(d, index=pd.Index(names, name=index_name))  # noqa: E731
    return Importances(table=frame(table), stderr=frame(se), stderr_trees=frame(se_trees),
                       per_tree=per_tree, block_values=blocks, n_blocks=n_blocks,
                       kind=ens.kind, n_rows=n_rows, table_by_class=by_class,
                       model_name=ens.model_name, groups=member_names,
                       block_weight=block_weight, task=model_task(ens),
                       objective=objective_name(ens))


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
    return np.sum(v, axis=1, where=~np.isnan(v))


def _tree_stderr(pt, forest):
    """Li et al.'s across-trees error sqrt((mean v^2 - mean(v)^2) / T); for a boosting
    sum, T times the error of the mean."""
    T = np.sum(~np.isnan(pt), axis=0)
    var = np.nanmean(pt**2, axis=0) - np.nanmean(pt, axis=0) ** 2
    se = np.sqrt(np.maximum(var, 0.0) / np.maximum(T, 1))
    return se if forest else se * T


def _check_methods(methods, ens, alpha, lam):
    if methods is None:  # the defaults, with the model's screening measure
        return registry.check_methods(default_methods(ens), ens, {"alpha": alpha, "lam": lam})
    if isinstance(methods, str):
        methods = (methods,)
    if not hasattr(methods, "__iter__"):
        raise TypeError(f"methods must be a method name or a sequence of them (e.g. "
                        f"{list(DEFAULT_METHODS)}), got {methods!r}")
    methods = list(dict.fromkeys(methods))
    bad = [m for m in methods if not isinstance(m, str)]
    if bad:
        raise TypeError(f"methods must be strings, got {bad[0]!r}")
    # registered, defined for this model (kind, node values, targets), parameters
    return registry.check_methods(methods, ens, {"alpha": alpha, "lam": lam})


def _check_n_blocks(n_blocks, n_rows):
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, numbers.Integral):
        raise TypeError(f"n_blocks must be an integer, got {n_blocks!r}")
    if n_blocks < 2:
        raise ValueError(f"n_blocks must be >= 2 (standard errors need 2 blocks), got {n_blocks}")
    if n_blocks > n_rows:
        raise ValueError(f"n_blocks={n_blocks} is more than the {n_rows} evaluation rows")
    return int(n_blocks)


def _feature_names(feature_names, rows, ens):
    if feature_names is not None:
        names = [str(f) for f in feature_names]
        if len(names) != ens.n_features:
            raise ValueError(f"{len(names)} feature_names for {ens.n_features} features")
        return names
    if rows.feature_names is not None:
        return rows.feature_names
    if ens.feature_names is not None:
        return list(ens.feature_names)
    return [f"x{j}" for j in range(ens.n_features)]
