"""Public entry points: explain(), contributions() and permutation_importance(), thin
wrappers of the :class:`~treeimp.Explainer` (one parse per call)."""

from __future__ import annotations

from .attributions.contributions import Contributions
from .attributions.interactions import Interactions
from .explainer import Explainer
from .measures.defaults import DEFAULT_N_BLOCKS
from .measures.linear_leaves import linear_leaf_importance_parsed
from .parsers import parse
from .results.importances import Importances


def explain(model, X, y=None, *, oob=False, methods=None, sample_weight=None,
            feature_names=None, n_blocks=DEFAULT_N_BLOCKS, random_state=None, n_jobs=None,
            alpha=None, lam=None, progress=None, groups=None, iteration_range=None,
            missing=None, base_margin=None, qid=None, group=None, label_col=None,
            features_col=None, feature_cols=None, id_col=None, weight_col=None,
            base_margin_col=None) -> Importances:
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
        A ``pyspark.sql.DataFrame`` is explained on its executors (``pip install
        "treeimp[spark]"``; y, weights and offsets are its columns, named by the
        ``*_col`` arguments): see :func:`treeimp.spark.explain.explain_spark`.
    y : array-like (n_rows,), optional
        Labels (classification, mapped to the model's classes) or values. Needed by
        every method except "mdi": ``methods=("mdi",)`` reads the model alone, routes
        no rows and needs no y (X is still checked against the model's features, and
        gives the feature names). XGBoost survival:cox: its labels (time, negative
        where censored); survival:aft: an (n_rows, 2) array of each row's [lower,
        upper] bound of its time (XGBoost's ``label_lower_bound`` /
        ``label_upper_bound``: lower == upper observed, upper = inf right-censored,
        lower = 0 left-censored). CatBoost Cox: its signed times as for survival:cox;
        SurvivalAft: CatBoost's (n_rows, 2) [lower, upper] with -1 for an unbounded end.
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
        ``treeimp/attributions/shap_oob.py``) and "saabas_oob" (the same with Saabas contributions:
        equal to "mdi_oob", computed row by row).
    sample_weight : array-like (n_rows,), optional
        Weights of the evaluation rows (XGBoost rankers: one per query, see ``qid``).
    feature_names : list of str, optional
        Names for the result's index (default: the DataFrame's columns, the model's
        names, or x0, x1, ...).
    n_blocks : int, default 20
        Random blocks of evaluation rows for standard errors and p-values (at most the
        number of evaluation rows; 20 was calibrated on null designs, see
        benchmarks/README.md).
    random_state : int, Generator or None, default None
        Seeds the random assignment of rows to the ``n_blocks`` blocks, which sets the
        standard errors, p-values and q-values (the importances do not depend on it).
        An int gives the same numbers on every call; None draws new blocks on every
        call, so standard errors and q-values vary a little from call to call (the
        command line uses 0 unless ``--seed`` is given).
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
    qid, group : array-like, optional
        The queries of a learning-to-rank model's rows (XGBRanker, LGBMRanker; exactly
        one of the two, refused for other models): ``qid`` one query id per row
        (XGBoost's; each query's rows together), ``group`` the query sizes in row order
        (LightGBM's). y then holds the relevance labels; the staged gradients are the
        ranking objective's on each held-out query (``treeimp/model/ranking.py``), a
        query's rows fall into one statistic block. ``sample_weight``: for XGBoost's
        rankers (rank:ndcg, rank:pairwise, rank:map) one weight per query, in the order
        of the queries, as ``XGBRanker.fit`` takes them (one per row is also taken if it
        is the same on every row of its query; otherwise a ValueError names the query);
        for LightGBM's and CatBoost's rankers one weight per row, as they take them.
    label_col, features_col, feature_cols, id_col, weight_col, base_margin_col : str
        Only for a Spark DataFrame X: the columns of y, of the features (one vector
        column, or plain columns), of the rows' identities (their jackknife blocks),
        of sample_weight and of base_margin (see
        :func:`treeimp.spark.explain.explain_spark`).

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
    ex = Explainer(model, iteration_range=iteration_range, missing=missing,
                   feature_names=feature_names, n_jobs=n_jobs)
    return ex.explain(X, y, oob=oob, methods=methods, sample_weight=sample_weight,
                      base_margin=base_margin, groups=groups, n_blocks=n_blocks,
                      random_state=random_state, alpha=alpha, lam=lam, progress=progress,
                      qid=qid, group=group, label_col=label_col, features_col=features_col,
                      feature_cols=feature_cols, id_col=id_col, weight_col=weight_col,
                      base_margin_col=base_margin_col)


def contributions(model, X, y=None, *, oob=False, method="shap", groups=None,
                  group_shapley=False, n_jobs=None, iteration_range=None, missing=None,
                  base_margin=None) -> Contributions:
    """Per-row feature contributions of a tree ensemble's raw output.

    Parameters
    ----------
    model : fitted scikit-learn / XGBoost / LightGBM / CatBoost model, TreeEnsemble or file
        Explained with the trees its own default predict uses (see
        :func:`treeimp.parse`; ``iteration_range`` to choose). A fitted scikit-learn
        Pipeline whose last step is one of these: X is transformed by the steps before
        it, and the contributions are those of the last step to the columns it sees,
        named by the steps' ``get_feature_names_out``.
    X : array-like or DataFrame (n_rows, n_features)
        The rows to explain (``oob=True``: the forest's training rows, in training order).
    y : array-like (n_rows,), optional
        Kept with the result (``Contributions.y``) for plots; not used to compute values.
    oob : bool, default False
        Bagged forests only: ``values`` is phi^oob, each row's mean contribution over the
        trees for which it is out of bag, and ``values_in`` phi^in, the mean over the trees
        it was grown on. ``base_values + values.sum(features)`` is then the row's
        out-of-bag prediction (rows in-bag for every tree get NaN).
    method : "shap" or "saabas"
        Path-dependent TreeSHAP (exact; equals shap's TreeExplainer with
        ``feature_perturbation="tree_path_dependent"``, XGBoost ``pred_contribs`` and
        LightGBM ``pred_contrib``) or Saabas contributions (the sum of ``v_child -
        v_node`` over the row's path; XGBoost's ``approx_contribs``).
    groups : dict or "input", optional
        {group name: [feature names or positions]} (columns in no group stay alone), or
        "input" for a Pipeline (each transformed column grouped with the input column it
        came from, as in :func:`treeimp.explain`): each group's contribution is the sum
        of its members' (contributions add up, so base + row sum is unchanged). ``data``
        is then None: a group has no one value.
    group_shapley : bool, default False
        With ``groups`` and ``method="shap"``: each group (and each column in no group)
        is ONE player, and its value is its exact Shapley value in the game of the
        groups, whose value of a set S of groups is TreeSHAP's path-dependent
        expectation of the tree's output given the columns of the groups in S (a split
        on a column outside them sends a row down both sides, weighted by the training
        cover). This is not the sum of the members' values when members of a group
        interact with other columns (e.g. the group {x0, x1} and a three-way
        interaction of x0, x1, x2: its members' values give the group 2/3 of the
        interaction term, the group's Shapley value 1/2); the two agree when no
        root-to-leaf path splits on columns of two groups. Efficiency still holds:
        ``base_values + values.sum(axis=1)`` is the raw prediction. ``method="saabas"``
        is refused (Saabas contributions add up per split: the group sums of ``groups=``
        are its group values). For CatBoost splits on combinations of categorical
        columns, the combination's columns must lie in one group.
    n_jobs : int or None
        Threads (None: all).
    iteration_range, missing, base_margin
        As in :func:`treeimp.explain`: the boosting rounds explained (default: those the
        model's own predict uses), XGBoost's missing-value sentinel, and per-row margin
        offsets, which go into ``base_values`` (as XGBoost's ``pred_contribs`` puts
        ``base_margin`` into its bias column).

    Returns
    -------
    Contributions
        ``data`` is the X the last step saw (a Pipeline's transformed X).
        ``values`` (n_rows, n_features), or (n_rows, n_features, n_outputs) for models
        with several outputs (multiclass margins, forest class probabilities), on the raw
        scale (margin for boosting, probability for forest classifiers), and
        ``base_values`` (n_rows,) or (n_rows, n_outputs), with
        ``base_values + values.sum(axis=1) == raw prediction`` for every row.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> import treeimp
    >>> X, y = make_regression(n_samples=200, n_features=4, random_state=0)
    >>> rf = RandomForestRegressor(n_estimators=50, oob_score=True, random_state=0).fit(X, y)
    >>> c = treeimp.contributions(rf, X, oob=True)
    >>> c.values.shape
    (200, 4)
    >>> bool(abs(c.base_values + c.values.sum(axis=1) - rf.oob_prediction_).max() < 1e-9)
    True
    """
    ex = Explainer(model, iteration_range=iteration_range, missing=missing, n_jobs=n_jobs)
    return ex.contributions(X, y, oob=oob, method=method, groups=groups,
                            group_shapley=group_shapley, base_margin=base_margin)


def interactions(model, X, *, oob=False, groups=None, group_shapley=False, n_jobs=None,
                 iteration_range=None, missing=None, base_margin=None) -> Interactions:
    """Per-row SHAP interaction values of a tree ensemble's raw output.

    The exact path-dependent SHAP interaction values of Lundberg et al. (2020), which
    shap's ``TreeExplainer.shap_interaction_values`` and XGBoost's
    ``predict(pred_interactions=True)`` compute: for features i != j, half the change in
    i's TreeSHAP value between the game where j is always present and the one where it
    is always absent; each row's main effects on the diagonal, so that every row of the
    matrix sums to the row's contributions (:func:`treeimp.contributions`).

    Parameters
    ----------
    model : fitted scikit-learn / XGBoost / LightGBM / CatBoost model, TreeEnsemble or file
        As in :func:`treeimp.contributions` (a Pipeline's X goes through its steps).
    X : array-like or DataFrame (n_rows, n_features)
        The rows to explain (``oob=True``: the forest's training rows, in training order).
        The result holds n_rows x n_features^2 numbers per output.
    oob : bool, default False
        Bagged forests only: each row's mean over the trees for which it is out of bag
        (``values``) and over the others (``values_in``), as in
        :func:`treeimp.contributions`.
    groups : dict or "input", optional
        As in :func:`treeimp.contributions`: {group name: [feature names or positions]}
        (columns in no group stay alone), or "input" for a Pipeline. A pair of groups
        gets the sum of its members' pairs (a group's diagonal: its members' main effects
        and their pairs among themselves), so rows still sum to the grouped
        contributions; these are sums, not the Shapley values of a game whose players
        are the groups (``group_shapley``). ``data`` is then None.
    group_shapley : bool, default False
        With ``groups``: the SHAP interaction values (Lundberg et al. 2020) of the game
        whose players are the groups, as in :func:`treeimp.contributions` with
        ``group_shapley=True``: for groups a != b, half the change in a's Shapley value
        between the game where b is always present and the one where it is always
        absent, and each group's main effect on the diagonal, so that every row of the
        matrix sums to the row's group Shapley values.
    n_jobs, iteration_range, missing, base_margin
        As in :func:`treeimp.contributions`.

    Returns
    -------
    Interactions
        ``values`` (n_rows, n_features, n_features), or with an outputs axis last for
        models with several outputs, and ``base_values``: ``base_values +
        values.sum(axis=(1, 2))`` is the raw prediction of every row.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> import treeimp
    >>> X, y = make_regression(n_samples=200, n_features=4, random_state=0)
    >>> rf = RandomForestRegressor(n_estimators=20, max_depth=5, random_state=0).fit(X, y)
    >>> phi = treeimp.interactions(rf, X[:10])
    >>> phi.values.shape
    (10, 4, 4)
    >>> c = treeimp.contributions(rf, X[:10])
    >>> bool(abs(phi.values.sum(axis=2) - c.values).max() < 1e-9)
    True
    """
    ex = Explainer(model, iteration_range=iteration_range, missing=missing, n_jobs=n_jobs)
    return ex.interactions(X, oob=oob, groups=groups, group_shapley=group_shapley,
                           base_margin=base_margin)


def interaction_importance(model, X, y, *, oob=False, centered=True, sample_weight=None,
                           base_margin=None, n_blocks=DEFAULT_N_BLOCKS, random_state=None,
                           n_jobs=None, iteration_range=None, missing=None) -> Importances:
    """Held-out importance of every pair of features: SHAP-oob of interaction values.

    For a pair j < k and a tree t, the weighted mean over the tree's evaluation rows E_t
    (the out-of-bag rows of a bagged forest with ``oob=True``, else the rows given) of
    ``w_i (z_i - c_t) . 2 Phi_{t,jk}(x_i)``: Phi_{t,jk} the tree's path-dependent SHAP
    interaction value (:func:`treeimp.interactions`, whose matrix holds it at (j, k) and
    at (k, j)) as the tree enters the margin; z the target of "shap_oob" (forests: y, or
    the one-hot y of a classifier; boosting: the negative gradient -g of the model's loss
    at the margin before the tree's stage); c_t the tree's in-bag root value (forests:
    the in-bag mean of y or class proportions; boosting: mu_t h_i, mu_t the tree's
    unshrunk root estimate and h the hessian), or 0 with ``centered=False``. A forest's
    value is the mean over its trees, a boosted model's the sum. It estimates how much
    the model's use of the pair lowers held-out loss (first order, as mdi_oob); on rows
    the trees did not see, a pair that does not predict the target has expectation ~0,
    in-bag ones are biased upwards (``treeimp/attributions/interaction_importance.py``
    and docs/methods.rst explain why; ``benchmarks/interaction_screening.py`` measures it).

    Parameters
    ----------
    model : fitted scikit-learn / XGBoost / LightGBM / CatBoost model, TreeEnsemble or file
        As in :func:`treeimp.explain`; one target, one value per leaf.
    X : array-like or DataFrame (n_rows, n_features)
        Held-out rows, or with ``oob=True`` the forest's training rows in training order.
    y : array-like (n_rows,)
    oob : bool, default False
        Bagged forests: evaluate each tree on its out-of-bag rows.
    centered : bool, default True
        Centre the target per tree at its in-bag root value (a constant added to y then
        leaves the value unchanged); False: the uncentred form.
    sample_weight, base_margin, n_blocks, random_state, n_jobs, iteration_range, missing
        As in :func:`treeimp.explain`: row weights, boosting margin offsets, the row
        blocks of the standard errors and their seed (an int: the same numbers on every
        call; None: new blocks on every call).

    Returns
    -------
    Importances
        Indexed by pair labels ``"<feature j> x <feature k>"`` (``PAIR_SEPARATOR`` of
        :mod:`treeimp.attributions.interaction_importance`), one row per pair j < k (in
        the order of the model's features), most important first; one column,
        "interaction_oob_centered" (or "interaction_oob" uncentred), with standard
        errors, p-values and q-values from the row blocks; ``select()`` keeps the pairs
        whose q-value is below alpha. Per-tree values and the across-trees error are not
        kept (n_trees x pairs numbers).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> import treeimp
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 4))
    >>> y = X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=400)
    >>> rf = RandomForestRegressor(n_estimators=30, max_depth=6, random_state=0).fit(X, y)
    >>> res = treeimp.interaction_importance(rf, X, y, oob=True, random_state=0)
    >>> res.ranking()[0]
    'x0 x x1'
    """
    ex = Explainer(model, iteration_range=iteration_range, missing=missing, n_jobs=n_jobs)
    return ex.interaction_importance(X, y, oob=oob, centered=centered,
                                     sample_weight=sample_weight, base_margin=base_margin,
                                     n_blocks=n_blocks, random_state=random_state)


def permutation_importance(model, X, y=None, *, scoring=None, n_repeats=5,
                           random_state=None, n_jobs=None, sample_weight=None, progress=None,
                           groups=None, iteration_range=None, missing=None, base_margin=None,
                           qid=None, group=None, within_queries=True, max_samples=1.0,
                           label_col=None, features_col=None, feature_cols=None, id_col=None,
                           weight_col=None, base_margin_col=None):
    """Permutation importance (mean decrease in score), scikit-learn compatible.

    Parameters
    ----------
    model : fitted scikit-learn / XGBoost / LightGBM / CatBoost model, TreeEnsemble or file
        With the trees its default predict uses (see :func:`treeimp.parse`); or a fitted
        scikit-learn Pipeline ending in one: its columns are then those the last step
        sees (X transformed by the steps before it).
    X : array-like, scipy.sparse matrix or DataFrame (n_rows, n_features)
        As in :func:`treeimp.explain`. Permuting needs one dense float copy of X (as
        scikit-learn's ``X.copy()``); a sparse X is made dense for it, its absent
        entries read as the model's library reads them (XGBoost: missing; LightGBM,
        scikit-learn: 0).
        A dask array or DataFrame (``pip install "treeimp[dask]"``; y, sample_weight
        and base_margin then dask collections partitioned as X, or in-memory arrays):
        each partition permutes its own rows with a seeded generator and returns score
        sums, added up on the cluster (``treeimp/dask/permutation.py`` explains and
        measures the scheme; roc_auc is refused). A ``pyspark.sql.DataFrame``
        (``pip install "treeimp[spark]"``): the same scheme on its partitions, each
        permuted in the order of its rows' identities (``treeimp/spark/permutation.py``).
    y : array-like (n_rows,)
        Required, except for a Spark DataFrame X (whose ``label_col`` holds it).
        (n_rows, 2) [lower, upper] bounds for XGBoost survival:aft and CatBoost
        SurvivalAft (see :func:`treeimp.explain`).
    scoring : None, str, callable, list, tuple or dict
        What ``sklearn.inspection.permutation_importance`` takes, with its values: None
        (accuracy for classifiers, r2 for regressors, as ``model.score``;
        "concordance_index" for survival models), a name of
        ``sklearn.metrics.get_scorer_names()`` or "objective" (negative mean of the
        model's own training loss), a callable ``scorer(estimator, X, y)`` (e.g. from
        ``sklearn.metrics.make_scorer``), a list or tuple of names, or a dict {name:
        scorer}. "accuracy", "neg_log_loss", "roc_auc", "r2", "neg_mean_squared_error"
        and "objective" are computed from the permuted margins; every other scikit-learn
        scorer gets a stand-in estimator answering ``predict`` / ``predict_proba`` /
        ``decision_function`` from the margins when that equals the model's own methods
        on X bit for bit, else (and for other callables) it is called on the fitted model
        (a Pipeline's last step) with the permuted X, as scikit-learn does. A
        TreeEnsemble, a model file, an XGBoost / LightGBM Booster, or a model explained
        with ``iteration_range`` / ``missing`` has no methods that predict what is
        explained: its scorers get the stand-in (``predict``, classifiers also
        ``predict_proba``). See ``treeimp/permutation/scorers.py``.
        "concordance_index": Harrell's C of XGBoost survival:cox / survival:aft and
        CatBoost Cox / SurvivalAft predictions (y as those models take it, observed
        or right-censored times; no sample_weight). Rankers: see ``qid``.
    n_repeats : int, default 5
    random_state : int, RandomState or None, default None
        As in scikit-learn: with the same int, the same permutations and the same
        numbers on every call; None draws new permutations on every call.
    n_jobs : int or None
        Threads for routing (on dask: per partition task, None meaning 1).
    sample_weight : array-like (n_rows,), optional
        Weights for the score (XGBoost rankers: one per query, see ``qid``).
    progress : None, True or False
        A tqdm bar over the features (None: only on a terminal, for long runs); not
        shown for dask input (watch dask's dashboard).
    groups : dict or "input", optional
        As in :func:`treeimp.explain`: each group's columns are permuted jointly (the
        same permutation of rows for every member column); one row per group.
    iteration_range, missing, base_margin
        As in :func:`treeimp.explain`: the boosting rounds used, XGBoost's missing-value
        sentinel, per-row margin offsets (scores are those of the model predicting with
        that offset).
    qid, group : array-like, optional
        The queries of a learning-to-rank model's rows, as in :func:`treeimp.explain`
        (required for rankers, refused for other models). A ranker is scored per query
        and averaged over queries: ``scoring`` None or "ndcg" (scikit-learn's
        ``ndcg_score`` of each query: linear gain, tied scores averaged, 0 for a query
        without relevant rows), "ndcg@k", or "map" (scikit-learn's
        ``average_precision_score`` of each query, relevant: label > 0, over the queries
        with a relevant row); a query weighs its first row's ``sample_weight``
        (XGBoost rankers: one weight per query, or per row as in :func:`treeimp.explain`).
    within_queries : bool, default True
        For rankers: permute a column among the rows of each query (the features a
        ranker compares within a query), or (False) among all rows as for other models.
    max_samples : int or float, default 1.0
        As in scikit-learn: the rows scored for each feature, drawn without replacement
        (the same draws as scikit-learn's; a float: that share of the rows); the baseline
        score uses all rows. Not for dask input.
    label_col, features_col, feature_cols, id_col, weight_col, base_margin_col : str
        Only for a Spark DataFrame X, as in :func:`treeimp.explain`.

    Returns
    -------
    Bunch with ``importances_mean``, ``importances_std`` (n_features,) and
    ``importances`` (n_features, n_repeats); with ``groups``, one row per group and
    ``group_names`` and ``groups`` ({name: member features}). With several scorers (a
    list, tuple or dict, or a callable returning a dict), as scikit-learn: a dict
    {scorer name: such a Bunch}.

    Notes
    -----
    Unlike :func:`treeimp.explain`, whose memory does not grow with the number of trees,
    this keeps every row's leaf in every tree, sorted by leaf: 5 to 8 bytes per (row,
    tree) pair (5 for trees of up to 256 leaves: 125 MB for 50,000 rows and 500 trees).
    Pass a subset of rows for very large inputs. Models routed by their library's leaf
    indices (CatBoost with target-statistic splits) are re-predicted through the library
    for every permuted copy of X, as scikit-learn does (``treeimp/permutation/routed.py``).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> import treeimp
    >>> X, y = make_regression(n_samples=200, n_features=4, random_state=0)
    >>> rf = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    >>> r = treeimp.permutation_importance(rf, X, y, n_repeats=3, random_state=0)
    >>> r.importances.shape
    (4, 3)
    """
    ex = Explainer(model, iteration_range=iteration_range, missing=missing, n_jobs=n_jobs)
    return ex.permutation_importance(X, y, scoring=scoring, n_repeats=n_repeats,
                                     random_state=random_state, sample_weight=sample_weight,
                                     progress=progress, groups=groups, base_margin=base_margin,
                                     qid=qid, group=group, within_queries=within_queries,
                                     max_samples=max_samples, label_col=label_col,
                                     features_col=features_col, feature_cols=feature_cols,
                                     id_col=id_col, weight_col=weight_col,
                                     base_margin_col=base_margin_col)


def linear_leaf_importance(model, X, y, *, sample_weight=None, feature_names=None,
                           iteration_range=None, n_jobs=None):
    """Held-out importance of a boosted model with linear leaf models (LightGBM
    ``linear_tree=True``): each feature's first-order decrease of the held-out loss
    through the trees' splits and through the leaves' linear models.

    Definitions in :mod:`treeimp.measures.linear_leaves` and docs/methods.md: ``splits``
    is mdi_oob on the model's true margins (linear terms included), ``leaf_models`` each
    feature's share of the leaf models' held-out decrease (its coefficient times its
    held-out covariance with the negative gradient within each leaf); the two parts
    that are no feature's (the leaf models' level shift, the roots) are in ``attrs``.
    A model without linear leaves gets ``leaf_models`` 0. ``splits`` and
    ``leaf_models`` are the numbers :func:`treeimp.explain` reports as ``mdi_oob`` and
    ``leaf_models`` (an independent computation over all rows at once), which adds
    standard errors and p-values.

    Parameters
    ----------
    model : fitted boosted model (LightGBM Booster / LGBMModel), TreeEnsemble or file
    X : array-like or DataFrame (n_rows, n_features)
        Held-out rows.
    y : array-like (n_rows,)
        Their labels or values.
    sample_weight : array-like (n_rows,), optional
    feature_names : list of str, optional
    iteration_range : (start, stop), optional
        Boosting rounds, as in :func:`treeimp.parse`.
    n_jobs : int, optional

    Returns
    -------
    pandas.DataFrame
        Indexed by feature: ``splits``, ``leaf_models``, ``total``; ``attrs``:
        ``leaf_level``, ``root``, ``n_rows``.

    Examples
    --------
    >>> import numpy as np, lightgbm as lgb, treeimp
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 3)); y = 3 * X[:, 0] + (X[:, 1] > 0)
    >>> m = lgb.LGBMRegressor(n_estimators=20, num_leaves=4, linear_tree=True,
    ...                       verbose=-1).fit(X[:400], y[:400])
    >>> t = treeimp.linear_leaf_importance(m, X[400:], y[400:])
    >>> list(t.columns)
    ['splits', 'leaf_models', 'total']
    """
    ens = parse(model, iteration_range=iteration_range)
    return linear_leaf_importance_parsed(ens, X, y, sample_weight=sample_weight,
                                         feature_names=feature_names, n_jobs=n_jobs)
