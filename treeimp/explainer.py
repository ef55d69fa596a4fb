"""The Explainer: parse a model once; accumulate node statistics of rows, add them up,
finalize them into importances.

    ex = treeimp.Explainer(model)
    stats = sum(ex.accumulate(X, y, rows=range(a, b), random_state=0) for ... in chunks)
    res = ex.finalize(stats, methods=("mdi_oob", "ufi"))

``ex.explain(X, y, ...)`` is ``ex.finalize(ex.accumulate(X, y, ...), methods=...)`` in
one call (the statistics then live in a buffer the Explainer keeps for its next call).
Every row's statistic block is fixed by its global position (:mod:`treeimp.stats.blocks`),
so chunking, the order of chunks and the process that reads them never change a result.
``ex.contributions(X)`` gives the rows' TreeSHAP or Saabas contributions of the same
parsed model (:mod:`treeimp.attributions.contributions`).
"""

from __future__ import annotations

import collections.abc
import threading

import numpy as np

from .attributions import shap_oob
from .attributions.contributions import (
    METHODS,
    ContributionModel,
    Contributions,
    check_group_shapley,
    check_out_of_bag,
    in_sample,
    out_of_bag,
)
from .attributions.interaction_importance import (
    check_pair_model,
    pair_importances,
    pair_replicates,
)
from .attributions.interactions import Interactions, interactions
from .attributions.shap_oob import per_tree_values
from .dask import is_dask_collection
from .dask.explain import explain_dask
from .dask.permutation import dask_permutation_importance
from .inputs.groups import resolve_groups
from .inputs.pipeline import is_pipeline, unwrap
from .inputs.rows import RowSource, check_unique_columns
from .inputs.targets import (
    as_1d_target,
    as_target,
    check_sample_weight,
    forest_class_targets,
    forest_targets,
    n_target_columns,
    target_classes,
)
from .inputs.threads import numba_threads, resolve_n_jobs
from .measures import formulas as measures
from .measures import registry
from .measures.defaults import DEFAULT_N_BLOCKS, OOB_VARIANCE_FACTOR
from .measures.linear_leaves import leaf_model_values
from .measures.screening import resolve_methods
from .model.ensemble import FOREST
from .model.losses import SMOOTHED
from .model.offsets import check_base_margin
from .model.ranking import check_query_input, is_ranking, query_blocks, query_sample_weight
from .parsers import inbag_bits, parse, training_rows
from .permutation.importance import permutation_importance_parsed
from .permutation.scorers import scikit_learn_estimator
from .results.finalize import assemble
from .spark import is_spark_dataframe
from .spark.explain import explain_spark
from .spark.permutation import spark_permutation_importance
from .stats.blocks import (
    BlockKey,
    block_dtype,
    block_key,
    check_n_blocks,
    check_positions,
    row_blocks,
)
from .stats.buffers import BufferPool
from .stats.drivers import forest_leaf_shape, forest_leaf_sums, staged_leaf_shape, staged_leaf_sums
from .stats.inbag_check import check_training_rows, warn_if_classes_rarely_out_of_bag
from .stats.linear_leaves import leaf_model_shapes
from .stats.node_stats import BOOSTING, ONE_HOT, REGRESSION, NodeStats, runs_of
from .stats.progress import progress_bar
from .stats.vector_leaves import per_output_trees


class Explainer:
    """A fitted tree ensemble, parsed once, ready to explain rows: importances
    (:meth:`explain`, or :meth:`accumulate` and :meth:`finalize`), permutation importance
    and per-row contributions (:meth:`contributions`).

    Parameters
    ----------
    model : fitted scikit-learn / XGBoost / LightGBM / CatBoost model, Pipeline,
        TreeEnsemble or model file
        As in :func:`treeimp.explain`. A Pipeline's last step is parsed; X is
        transformed by the steps before it at every call.
    iteration_range : (start, stop), optional
        Boosting rounds to explain (see :func:`treeimp.parse`).
    missing : float, optional
        XGBoost's missing-value sentinel for a Booster or model file.
    feature_names : list of str, optional
        Names for the results' index (default: the DataFrame's columns, the model's
        names, or x0, x1, ...).
    n_jobs : int or None
        Threads for the kernels (None: all).

    An Explainer may be used from several threads at once: every call has its own
    buffers, and what is shared (the parsed model, its derived structures, the in-bag
    rows of a forest) is read-only once built. It pickles without its buffers.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> import treeimp
    >>> X, y = make_regression(n_samples=400, n_features=4, random_state=0)
    >>> rf = RandomForestRegressor(n_estimators=20, random_state=0).fit(X[:200], y[:200])
    >>> ex = treeimp.Explainer(rf)
    >>> a = ex.accumulate(X[200:300], y[200:300], rows=range(0, 100), random_state=0)
    >>> b = ex.accumulate(X[300:], y[300:], rows=range(100, 200), random_state=0)
    >>> res = ex.finalize(a + b, methods=("mdi_oob", "ufi"))
    >>> same = ex.explain(X[200:], y[200:], methods=("mdi_oob", "ufi"), random_state=0)
    >>> bool(np.allclose(res.table, same.table))
    True
    """

    def __init__(self, model, *, iteration_range=None, missing=None, feature_names=None,
                 n_jobs=None):
        resolve_n_jobs(n_jobs)  # a bad n_jobs fails here, not at the first call
        self.model = model
        self._final = _last_step(model)
        # the model's own methods predict what is explained (for scorers that call them)
        self._own_predict = iteration_range is None and missing is None
        ens = parse(self._final, iteration_range=iteration_range, missing=missing)
        # the library's own trees (vector leaves whole): what contributions explain
        self._parsed = ens
        # vector-leaf boosting: one tree per output, so that each output's gradient
        # meets its own leaf values (stats/vector_leaves.py)
        self.ensemble = per_output_trees(ens)
        if feature_names is not None:
            feature_names = [str(f) for f in feature_names]
            if len(feature_names) != self.ensemble.n_features:
                raise ValueError(f"{len(feature_names)} feature_names for "
                                 f"{self.ensemble.n_features} features")
        self.feature_names = feature_names
        self.n_jobs = n_jobs
        # random_state=None: one key per Explainer, so that its chunks agree; drawn when
        # first needed (an explain with an int random_state draws none)
        self._default_key = None
        self._lock = threading.Lock()
        self._inbag = {}
        self._contribution_models = {}
        self._pool = BufferPool()

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint (``TreeEnsemble.fingerprint``), which the statistics of
        ``accumulate`` carry so that those of another model refuse to combine."""
        return self.ensemble.fingerprint

    def __getstate__(self):
        self._own_key()  # a copy keys its row blocks as this Explainer does
        state = dict(self.__dict__)
        del state["_lock"]
        state["_inbag"] = {}
        state["_contribution_models"] = {}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Explainer({self.ensemble!r})"

    # ------------------------------------------------------------------ public API
    def explain(self, X, y=None, *, oob=False, methods=None, sample_weight=None,
                base_margin=None, groups=None, n_blocks=DEFAULT_N_BLOCKS, random_state=None,
                alpha=None, lam=None, progress=None, qid=None, group=None, label_col=None,
                features_col=None, feature_cols=None, id_col=None, weight_col=None,
                base_margin_col=None):
        """Importances of the rows X, y (see :func:`treeimp.explain` for every argument;
        ``random_state``: an int gives the same row blocks on every call, None this
        Explainer's own key, the same for all of its calls).

        X may also be an iterable of ``(X, y)`` or ``(X, y, sample_weight)`` chunks
        (then y, sample_weight and base_margin are not given separately): their
        statistics are accumulated one chunk at a time and added, so the rows never
        need to be in memory at once; the result equals the one-call result.
        """

        self._check_explainable()
        columns = _spark_columns(X, label_col=label_col, features_col=features_col,
                                 feature_cols=feature_cols, id_col=id_col,
                                 weight_col=weight_col, base_margin_col=base_margin_col)
        if is_spark_dataframe(X):  # rows in a Spark DataFrame: statistics where they lie
            _refuse_smoothed_chunks(self.ensemble, "a Spark DataFrame")
            _refuse_ranking_chunks(self.ensemble, "a Spark DataFrame", qid, group)
            _refuse_arrays_with_columns(y=y, sample_weight=sample_weight,
                                        base_margin=base_margin)
            return explain_spark(self, X, oob=oob, methods=methods, groups=groups,
                                 n_blocks=n_blocks, random_state=random_state, alpha=alpha,
                                 lam=lam, **columns)
        if is_dask_collection(X):  # rows on a Dask cluster: statistics where they lie
            _refuse_smoothed_chunks(self.ensemble, "a Dask collection")
            _refuse_ranking_chunks(self.ensemble, "a Dask collection", qid, group)

            return explain_dask(self, X, y, oob=oob, methods=methods,
                                sample_weight=sample_weight, base_margin=base_margin,
                                groups=groups, n_blocks=n_blocks, random_state=random_state,
                                alpha=alpha, lam=lam)
        if _is_chunk_stream(X):
            _refuse_smoothed_chunks(self.ensemble, "an iterable of (X, y) chunks")
            _refuse_ranking_chunks(self.ensemble, "an iterable of (X, y) chunks", qid, group)
            return self._explain_stream(X, y, oob=oob, methods=methods,
                                        sample_weight=sample_weight, base_margin=base_margin,
                                        groups=groups, n_blocks=n_blocks,
                                        random_state=random_state, alpha=alpha, lam=lam,
                                        progress=progress)
        oob = _check_oob(oob)
        methods = resolve_methods(methods, self.ensemble, alpha, lam)
        registry.check_targets(methods, self.ensemble)
        X, names, input_groups = self._unwrap(X, groups)
        check_unique_columns(X)
        rows = RowSource(X, self.ensemble)
        # the queries of a ranker's rows; "mdi" alone routes no rows and needs none
        query = (check_query_input(self.ensemble.objective, rows.n_rows, qid, group)
                 if qid is not None or group is not None
                 or any(registry.needs_rows(m) for m in methods) else None)
        # XGBoost rankers: one weight per query, repeated over its rows
        sample_weight = query_sample_weight(self.ensemble.objective, sample_weight, query)
        names = self._names(rows.feature_names if names is None else names)
        grp = resolve_groups(groups, names, input_groups)
        if not any(registry.needs_rows(m) for m in methods):
            return self._mdi_only(rows, y, sample_weight, base_margin, methods, names,
                                  n_blocks, grp)
        check_n_blocks(n_blocks, rows.n_rows)
        y = as_target(y, rows.n_rows, n_target_columns(self.ensemble))  # before any routing
        key = self._key(random_state)
        extra = _extra_methods(methods)
        with self._pool.zeroed(self._stats_shape(n_blocks)) as out:
            stats = self._accumulate(rows, y, names, input_groups, positions=None, oob=oob,
                                     sample_weight=sample_weight, base_margin=base_margin,
                                     n_blocks=n_blocks, key=key, extra=extra,
                                     progress=progress, out=out, private=True, query=query)
            return self._finalize(stats, methods, alpha, lam, grp, names)

    def accumulate(self, X, y, *, rows=None, oob=False, sample_weight=None, base_margin=None,
                   n_blocks=DEFAULT_N_BLOCKS, random_state=None, methods=None,
                   progress=None) -> NodeStats:
        """Node statistics of one chunk of evaluation rows; they add up (``a + b``,
        ``sum(...)``) and :meth:`finalize` turns them into importances.

        Parameters
        ----------
        X, y, oob, sample_weight, base_margin, n_blocks
            As in :meth:`explain`, for this chunk's rows (``oob=True``: X, y are training
            rows of the forest, ``rows`` their positions in the training set).
        rows : None, range or array of int
            The chunk's global row positions (default 0 .. len(X) - 1). They fix each
            row's statistic block and, out of bag, which trees had the row in bag; give
            every chunk its own positions (e.g. ``range(start, start + len(X))``).
        random_state : int, Generator or None
            Keys the row blocks. Chunks can only be added when their keys agree: pass
            the same int to every chunk (None: this Explainer's own key, the same for
            all of its calls).
        methods : sequence of str, optional
            Only needed for the per-row measures ("shap_oob", "saabas_oob"): they are
            accumulated only when named here (None: ``leaf_models`` of a model with
            linear leaf models, which the default measures include).
        progress : None, True or False
            A progress bar over the chunk's rows.

        Returns
        -------
        NodeStats
            A chunk without rows gives zero statistics.
        """
        self._check_explainable()
        _refuse_smoothed_chunks(self.ensemble, "Explainer.accumulate on a chunk of rows")
        _refuse_ranking_chunks(self.ensemble, "Explainer.accumulate on a chunk of rows")
        oob = _check_oob(oob)
        check_n_blocks(n_blocks, None)
        # None: the default measures' sums that come with the staged pass (leaf_models
        # of a linear-leaf model), so that finalize() with the defaults works
        extra = (_extra_methods(resolve_methods(methods, self.ensemble, None, None))
                 if methods is not None else
                 tuple(m for m in _extra_methods(resolve_methods(None, self.ensemble, None,
                                                                 None))
                       if registry.get(m).source == registry.LINEAR_LEAVES))
        X, names, input_groups = self._unwrap(X, None)
        check_unique_columns(X)
        key = self._key(random_state)
        if _n_rows(X) == 0:
            if names is None and hasattr(X, "columns"):
                names = [str(c) for c in X.columns]
            return self._empty(X, y, rows, oob, n_blocks, key, extra, names, input_groups)
        source = RowSource(X, self.ensemble)
        names = source.feature_names if names is None else names
        positions = check_positions(rows, source.n_rows)
        y = as_target(y, source.n_rows, n_target_columns(self.ensemble))
        return self._accumulate(source, y, names, input_groups, positions=positions, oob=oob,
                                sample_weight=sample_weight, base_margin=base_margin,
                                n_blocks=n_blocks, key=key, extra=extra, progress=progress,
                                out=None)

    def finalize(self, stats, methods=None, *, alpha=None, lam=None,
                 groups=None):
        """Importances (an :class:`treeimp.Importances`) from accumulated statistics.

        ``methods``, ``alpha``, ``lam``, ``groups`` as in :func:`treeimp.explain`
        (None: the defaults with the model's screening measure).
        ``stats`` is not modified (it can be finalised again, or added to). Their shape
        (leaf slots, blocks, terms, per-row measures) is checked against this model and
        their settings."""

        self._check_explainable()
        if not isinstance(stats, NodeStats):
            raise TypeError(f"finalize needs the NodeStats of accumulate, got "
                            f"{type(stats).__name__}")
        self._check_shape(stats)
        methods = resolve_methods(methods, self.ensemble, alpha, lam)
        registry.check_targets(methods, self.ensemble)
        names = self._names(stats.names)
        grp = resolve_groups(groups, names, stats.input_groups)
        return self._finalize(stats, methods, alpha, lam, grp, names)

    def permutation_importance(self, X, y=None, *, scoring=None, n_repeats=5,
                               random_state=None, sample_weight=None, progress=None,
                               groups=None, base_margin=None, qid=None, group=None,
                               within_queries=True, max_samples=1.0, label_col=None,
                               features_col=None, feature_cols=None, id_col=None,
                               weight_col=None, base_margin_col=None):
        """Permutation importance of this model (see :func:`treeimp.permutation_importance`),
        without parsing it again (``random_state``: an int gives the same permutations on
        every call, None new ones)."""
        self._check_explainable()
        columns = _spark_columns(X, label_col=label_col, features_col=features_col,
                                 feature_cols=feature_cols, id_col=id_col,
                                 weight_col=weight_col, base_margin_col=base_margin_col)
        if is_spark_dataframe(X):  # each partition permutes its own rows
            _refuse_ranking_chunks(self.ensemble, "a Spark DataFrame", qid, group)
            _refuse_arrays_with_columns(y=y, sample_weight=sample_weight,
                                        base_margin=base_margin)
            model = self.model if is_pipeline(self.model) else self._parsed
            return spark_permutation_importance(
                model, X, scoring=scoring, n_repeats=n_repeats, random_state=random_state,
                n_jobs=self.n_jobs, groups=groups, spark_model=self.model, **columns)
        if y is None:
            raise ValueError("y is required: permutation importance scores the model's "
                             "predictions against the targets")
        # the plain parsed trees (not the per-output split of vector leaves): the margins
        # the library predicts, summed as it sums them
        if any(is_dask_collection(v) for v in (X, y, sample_weight, base_margin)):
            _refuse_ranking_chunks(self.ensemble, "a Dask collection", qid, group)
            if not (isinstance(max_samples, float) and max_samples == 1.0):
                raise ValueError("max_samples is not supported for dask input (every "
                                 "partition permutes its own rows); leave it at 1.0")
            model = self.model if is_pipeline(self.model) else self._parsed
            return dask_permutation_importance(
                model, X, y, scoring=scoring, n_repeats=n_repeats, random_state=random_state,
                n_jobs=self.n_jobs, sample_weight=sample_weight, groups=groups,
                base_margin=base_margin)
        u = unwrap(self.model, X,
                   need_input_groups=isinstance(groups, str) and groups == "input")
        names = u.feature_names if self.feature_names is None else self.feature_names
        return permutation_importance_parsed(
            self._parsed, u.X, y, names, u.input_groups, scoring=scoring,
            n_repeats=n_repeats, random_state=random_state, n_jobs=self.n_jobs,
            sample_weight=sample_weight, progress=progress, groups=groups,
            base_margin=base_margin, qid=qid, group=group, within_queries=within_queries,
            max_samples=max_samples,
            estimator=scikit_learn_estimator(self._final) if self._own_predict else None)

    def contributions(self, X, y=None, *, oob=False, method="shap", groups=None,
                      group_shapley=False, base_margin=None) -> Contributions:
        """Per-row TreeSHAP or Saabas contributions of the rows X (see
        :func:`treeimp.contributions` for every argument), without parsing the model
        again. A Pipeline's X goes through its steps, and the contributions are those of
        its last step to the columns it sees, named by ``get_feature_names_out``
        (``groups="input"``: summed per input column, or with ``group_shapley`` one
        player per input column). Out of bag, the forest's in-bag rows are read once per
        Explainer."""

        gs = check_group_shapley(group_shapley, groups, method)
        cm = self._contribution_model(method)
        oob = _check_oob(oob)
        X, names, input_groups = self._unwrap(X, groups)
        rows = RowSource(X, cm.ens)
        if y is not None:
            y = as_1d_target(y, rows.n_rows)
        names = self._names(rows.feature_names if names is None else names)
        grp = resolve_groups(groups, names, input_groups)
        if not oob:
            return in_sample(cm, rows, X, y, names, grp, n_jobs=self.n_jobs,
                             base_margin=base_margin, group_shapley=gs)
        check_out_of_bag(cm.ens, rows.n_rows, base_margin)
        bits = self._inbag_bits(rows.n_rows, None)
        check_training_rows(cm.ens, self._final, rows, bits, n_jobs=self.n_jobs)
        return out_of_bag(cm, rows, bits, X, y, names, grp, n_jobs=self.n_jobs,
                          group_shapley=gs)

    def interactions(self, X, *, oob=False, groups=None, group_shapley=False,
                     base_margin=None) -> Interactions:
        """Per-row SHAP interaction values of the rows X (see :func:`treeimp.interactions`
        for every argument), without parsing the model again; a Pipeline's X goes
        through its steps, as in :meth:`contributions`."""

        gs = check_group_shapley(group_shapley, groups)
        cm = self._contribution_model("shap")
        oob = _check_oob(oob)
        X, names, input_groups = self._unwrap(X, groups)
        rows = RowSource(X, cm.ens)
        names = self._names(rows.feature_names if names is None else names)
        grp = resolve_groups(groups, names, input_groups)
        if not oob:
            return interactions(cm, rows, X, names, grp, n_jobs=self.n_jobs,
                                base_margin=base_margin, group_shapley=gs)
        check_out_of_bag(cm.ens, rows.n_rows, base_margin)
        bits = self._inbag_bits(rows.n_rows, None)
        check_training_rows(cm.ens, self._final, rows, bits, n_jobs=self.n_jobs)
        return interactions(cm, rows, X, names, grp, bits=bits, n_jobs=self.n_jobs,
                            group_shapley=gs)

    def interaction_importance(self, X, y, *, oob=False, centered=True, sample_weight=None,
                               base_margin=None, n_blocks=DEFAULT_N_BLOCKS,
                               random_state=None):
        """Held-out importance of every pair of features (see
        :func:`treeimp.interaction_importance` for the definition and every argument),
        without parsing the model again (``random_state``: an int gives the same row
        blocks on every call, None this Explainer's own key)."""

        self._check_explainable()
        oob = _check_oob(oob)
        if not isinstance(centered, (bool, np.bool_)):
            raise TypeError(f"centered must be True or False, got {centered!r}")
        ens = self.ensemble
        check_pair_model(ens, self._parsed)
        if oob and ens.kind != FOREST:
            raise ValueError("oob=True is for bagged forests; boosting models have no "
                             "out-of-bag rows and need a held-out set: "
                             "interaction_importance(model, X_val, y_val)")
        X, names, _ = self._unwrap(X, None)
        check_unique_columns(X)
        rows = RowSource(X, ens)
        names = self._names(rows.feature_names if names is None else names)
        n = rows.n_rows
        check_n_blocks(n_blocks, n)
        y = as_target(y, n, n_target_columns(ens))  # before any routing
        offset = check_base_margin(base_margin, n, ens)
        w = np.ones(1) if sample_weight is None else check_sample_weight(sample_weight, n)
        block = row_blocks(range(n), self._key(random_state), n_blocks)
        block_weight = np.bincount(block, weights=None if w.size == 1 else w,
                                   minlength=n_blocks).astype(np.float64)
        bits = None
        if oob:
            bits = self._inbag_bits(n, None)
            check_training_rows(ens, self._final, rows, bits, n_jobs=self.n_jobs)
        replicates, n_eval = pair_replicates(ens, rows, y, w, block, n_blocks,
                                             centered=bool(centered), inbag_bits=bits,
                                             n_jobs=self.n_jobs, base_margin=offset)
        if not np.any(n_eval.sum(axis=0) > 0):
            if oob:
                raise ValueError("no tree has out-of-bag rows among these rows (every row "
                                 "is in-bag for every tree)")
            raise ValueError("no evaluation row has a positive weight")
        return pair_importances(ens, replicates, names, centered=bool(centered), oob=oob,
                                n_rows=n, n_blocks=n_blocks, block_weight=block_weight)

    def predict_raw(self, X, *, base_margin=None):
        """The model's raw margin on X (see :meth:`TreeEnsemble.predict_raw`)."""
        X, _, _ = self._unwrap(X, None)
        return self.ensemble.predict_raw(X, n_jobs=self.n_jobs, base_margin=base_margin)

    def apply(self, X):
        """The leaf every row reaches in every tree (see :meth:`TreeEnsemble.apply`)."""
        X, _, _ = self._unwrap(X, None)
        return self.ensemble.apply(X, n_jobs=self.n_jobs)

    # ------------------------------------------------------------------ internals
    def _check_explainable(self):
        """Importances are not defined for every model that has contributions
        (multi-label boosting): refused by the importance methods, not at construction."""
        registry.check_explainable(self._parsed)

    def _contribution_model(self, method):
        """The contribution kernels' view of the model for ``method``, built once (an
        unknown method, or TreeSHAP of a model that tells only the row's leaf, is refused
        here)."""
        with self._lock:
            cm = self._contribution_models.get(method) if method in METHODS else None
        if cm is None:
            cm = ContributionModel(self._parsed, method)
            with self._lock:
                self._contribution_models[method] = cm
        return cm

    def _unwrap(self, X, groups):
        """(X through a Pipeline's steps, their feature names or None, input groups)."""
        if not is_pipeline(self.model):
            return X, None, None
        u = unwrap(self.model, X,
                   need_input_groups=isinstance(groups, str) and groups == "input")
        return u.X, u.feature_names, u.input_groups

    def _names(self, from_data):
        if self.feature_names is not None:
            return self.feature_names
        if from_data is not None:
            return list(from_data)
        if self.ensemble.feature_names is not None:
            return list(self.ensemble.feature_names)
        return [f"x{j}" for j in range(self.ensemble.n_features)]

    def _key(self, random_state):
        return self._own_key() if random_state is None else block_key(random_state)

    def _own_key(self):
        """This Explainer's key of the row blocks for random_state=None (drawn once)."""
        with self._lock:
            if self._default_key is None:
                self._default_key = block_key(None)
            return self._default_key

    def _classification(self):
        return forest_class_targets(self.ensemble)

    def _layout(self):
        if self.ensemble.kind != FOREST:
            return BOOSTING
        # one-hot statistics (n' the sum of the class sums) need ONE class per row: not
        # so for the concatenated one-hot vectors of several targets
        if self._classification() and target_classes(self.ensemble) is None:
            return ONE_HOT
        return REGRESSION

    def _stats_shape(self, n_blocks):
        """(n_blocks, leaves, terms): the leaf sums of every row block."""
        if self.ensemble.kind != FOREST:
            return staged_leaf_shape(self.ensemble, n_blocks)
        return forest_leaf_shape(self.ensemble, n_blocks, self._layout() == ONE_HOT)

    def _settings(self, oob, n_blocks, key, extra, private=False):
        # private: statistics that never leave explain(), which need no fingerprint (it
        # hashes every node array)
        return {"model": None if private else self.fingerprint, "oob": oob,
                "n_blocks": int(n_blocks), "block_key": int(key), "layout": self._layout(),
                "extra": tuple(sorted(extra))}

    def _empty(self, X, y, rows, oob, n_blocks, key, extra, names, input_groups):
        """Zero statistics of a chunk without rows (its width is still checked)."""
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] != self.ensemble.n_features:
            raise ValueError(f"X has {shape[1]} columns but the model has "
                             f"{self.ensemble.n_features} features")
        check_positions(rows, 0)
        if y is not None and len(np.asarray(y)) != 0:
            raise ValueError(f"X has 0 rows but y has {len(np.asarray(y))}")
        extras = {m: self._extra_zeros(m, n_blocks) for m in extra}
        return NodeStats(np.zeros(self._stats_shape(n_blocks)), layout=self._layout(),
                         n_rows=0, rows=runs_of(range(0)), block_weight=np.zeros(n_blocks),
                         settings=self._settings(oob, n_blocks, key, extra), extra=extras,
                         names=names, input_groups=input_groups)

    def _extra_shapes(self, method, n_blocks):
        """Shapes of the per-block sums of a row-sum measure (``registry.ROW_SUMS``):
        the leaf models' (``leaf_model_shapes``), or per-row contributions' (block,
        tree, feature) sums and (block, tree) weights."""
        ens = self.ensemble
        if registry.get(method).source == registry.LINEAR_LEAVES:
            return leaf_model_shapes(ens, n_blocks)
        return (n_blocks, ens.n_trees, ens.n_features), (n_blocks, ens.n_trees)

    def _extra_zeros(self, method, n_blocks):
        return tuple(np.zeros(shape) for shape in self._extra_shapes(method, n_blocks))

    def _inbag_bits(self, n_rows, positions):
        """Packed in-bag rows of the forest's trees for rows at ``positions`` (None: the
        whole training set 0 .. n_rows - 1, whose size is checked), built once per
        Explainer."""
        model = self._final
        if positions is None:
            n = n_rows
        else:
            n_train = training_rows(model)
            if n_train is None:
                raise ValueError("chunked out-of-bag statistics (oob=True with rows=) need "
                                 "the forest's number of training rows, which this "
                                 f"{type(model).__name__} does not record; pass all training "
                                 "rows in one call")
            n = int(n_train)
            top = int(max(positions))
            if top >= n:
                raise ValueError(f"oob=True: row position {top} is beyond the forest's "
                                 f"{n} training rows")
        with self._lock:
            bits = self._inbag.get(n)
        if bits is None:
            bits = inbag_bits(model, n)
            if bits.shape[0] != self.ensemble.n_trees:
                raise ValueError(f"the forest has {self.ensemble.n_trees} trees but in-bag "
                                 f"rows for {bits.shape[0]}")
            with self._lock:
                self._inbag[n] = bits
        return bits

    def _accumulate(self, rows, y, names, input_groups, *, positions, oob, sample_weight,
                    base_margin, n_blocks, key, extra, progress, out, private=False,
                    query=None):
        """Statistics of ``rows``; ``y`` already checked by the caller (``as_target``)."""
        ens = self.ensemble
        n = rows.n_rows
        # the runs of positions seen (a position given twice is refused here, before any
        # work)
        runs = runs_of(range(n) if positions is None else positions)
        offset = check_base_margin(base_margin, n, ens)
        # no sample_weight: one weight for every row (the kernels read w[min(row, len - 1)])
        w = np.ones(1) if sample_weight is None else check_sample_weight(sample_weight, n)
        # a forest kernel reads int32 block ids; the staged pass only sorts them by block
        block = row_blocks(range(n) if positions is None else positions, key, n_blocks,
                           np.int32 if ens.kind == FOREST else block_dtype(n_blocks))
        if query is not None:  # a query's rows, which share gradients, in one block
            if extra:
                raise ValueError(f"{list(extra)} are not defined for a learning-to-rank model "
                                 "(a row's gradient depends on its whole query)")
            block = query_blocks(block, query)
        block_weight = np.bincount(block, weights=None if w.size == 1 else w,
                                   minlength=n_blocks).astype(np.float64)
        layout = self._layout()
        shape = self._stats_shape(n_blocks)
        array = np.zeros(shape) if out is None else out
        bits = None
        if oob:
            if ens.kind != FOREST:
                raise ValueError("oob=True is for bagged forests; boosting models have no "
                                 "out-of-bag rows and need a held-out set: "
                                 "explain(model, X_val, y_val)")
            bits = self._inbag_bits(n, positions)
            if positions is None:  # all training rows: they must be in the training order
                check_training_rows(ens, self._final, rows, bits, n_jobs=self.n_jobs)
        # the rows' positions index the in-bag bits; not needed (not made) otherwise
        pos = None if bits is None else np.asarray(range(n) if positions is None
                                                   else positions, dtype=np.int64)
        bar = progress_bar(progress, total=n, work=n * ens.n_trees, desc="treeimp.explain")
        leaf_sums = {}  # {leaf-model measure: its block sums}
        try:
            with numba_threads(self.n_jobs):
                if ens.kind == FOREST:
                    Z, _ = forest_targets(ens, y)
                    if bits is not None:
                        warn_if_classes_rarely_out_of_bag(ens, bits, pos, Z)
                    forest_leaf_sums(ens, rows, Z, w, block, n_blocks, inbag_bits=bits,
                                     positions=pos, one_hot=layout == ONE_HOT,
                                     n_jobs=self.n_jobs, bar=bar, out=array)
                else:
                    # the leaf models' block sums come from the same staged pass
                    leaf_sums.update((m, self._extra_zeros(m, n_blocks)) for m in extra
                                     if registry.get(m).source == registry.LINEAR_LEAVES)
                    staged_leaf_sums(ens, rows, y, w, block, n_blocks,
                                     n_jobs=self.n_jobs, bar=bar, keep_margin=False,
                                     out=array, base_margin=offset, query=query,
                                     leaf_models=next(iter(leaf_sums.values()), None))
        finally:
            bar.close()
        extras = {m: (leaf_sums[m] if m in leaf_sums
                      else shap_oob.block_sums(m, ens, rows, y, w, block, n_blocks,
                                               inbag_bits=bits, positions=pos,
                                               n_jobs=self.n_jobs, base_margin=offset))
                  for m in extra}
        return NodeStats(array, layout=layout, n_rows=n, rows=runs,
                         block_weight=block_weight,
                         settings=self._settings(oob, n_blocks, key, extra, private),
                         extra=extras,
                         names=names, input_groups=input_groups)

    def _check_shape(self, stats):
        """Statistics whose arrays do not fit this model or their own settings (their
        settings changed by hand, a pickle edited) are refused, naming both numbers."""
        settings = stats.settings
        layout = self._layout()
        if stats.layout != layout or settings.get("layout") != layout:
            raise ValueError(f"these node statistics have the target layout "
                             f"{stats.layout!r} but the model's is {layout!r}")
        L, B, D = stats.leaf_sums.shape
        if settings.get("n_blocks") != B:
            raise ValueError(f"these node statistics have {B} blocks but their settings "
                             f"say {settings.get('n_blocks')}")
        want_L, _, want_D = self._stats_shape(B)
        if L != want_L:
            raise ValueError(f"these node statistics have {L} leaf slots but the model has "
                             f"{want_L}: they were accumulated for another model")
        if D != want_D:
            raise ValueError(f"these node statistics have {D} terms per leaf but the "
                             f"model's layout {layout!r} has {want_D}")
        if np.shape(stats.block_weight) != (B,):
            raise ValueError(f"these node statistics have {B} blocks but block weights of "
                             f"shape {np.shape(stats.block_weight)}")
        covered = int((stats.rows[:, 1] - stats.rows[:, 0]).sum())
        if stats.n_rows != covered:
            raise ValueError(f"these node statistics count {stats.n_rows} rows but their "
                             f"positions cover {covered}")
        if tuple(sorted(stats.extra)) != tuple(settings.get("extra", ())):
            raise ValueError(f"these node statistics hold the per-row measures "
                             f"{sorted(stats.extra)} but their settings say "
                             f"{list(settings.get('extra', ()))}")
        for m, (sums, weight) in stats.extra.items():
            want = self._extra_shapes(m, B)
            if (np.shape(sums), np.shape(weight)) != want:
                raise ValueError(f"these node statistics' {m} sums have shapes "
                                 f"{np.shape(sums)} and {np.shape(weight)} but the model "
                                 f"needs {want[0]} and {want[1]}")

    def _finalize(self, stats, methods, alpha, lam, grp, names):
        """Importances from accumulated statistics (read, never written: the measures
        take them through ``measures.LeafStats``)."""

        ens = self.ensemble
        settings = stats.settings
        if settings["model"] is not None and settings["model"] != self.fingerprint:
            raise ValueError("these node statistics were accumulated for another model (or "
                             "another iteration_range / missing value); finalize them with "
                             "the Explainer that accumulated them")
        n_blocks = stats.n_blocks
        per_row = _extra_methods(methods)
        missing = [m for m in per_row if m not in stats.extra]
        if missing:
            raise ValueError(f"{missing} are per-row measures: name them in accumulate's "
                             f"methods= so that they are accumulated")
        if stats.n_rows < n_blocks:
            raise ValueError(f"n_blocks={n_blocks} is more than the {stats.n_rows} "
                             "evaluation rows")
        array = stats.leaf_sums
        # small statistics on one thread: waking the thread pool costs more than the work
        threads = 1 if array.size < SERIAL_CELLS else self.n_jobs
        st = measures.LeafStats(array, ens, settings["layout"])
        classification = self._classification()
        with numba_threads(threads):
            # the fused measures' sums first: their pass also gives the root counts
            parts = registry.split_parts(methods, ens, st, forest=ens.kind == FOREST,
                                         classification=classification)
            seen = st.root_counts()[:, -1] > 0
        if not np.any(seen):
            if settings["oob"]:
                raise ValueError("no tree has out-of-bag rows among these rows (every row "
                                 "is in-bag for every tree)")
            raise ValueError("no evaluation row has a positive weight")
        extra = {m: (leaf_model_values(ens, *stats.extra[m], stats.block_weight)
                     if registry.get(m).source == registry.LINEAR_LEAVES
                     else per_tree_values(*stats.extra[m])) for m in per_row}
        # Out of bag, every row trains some trees and evaluates others: under the null a
        # pair of rows can enter an importance twice (z_i against the fit to z_j in the
        # trees where i is out of bag, the other way round in others), which resampling
        # rows with the trees held fixed does not see. The two terms come from different
        # trees, so they are far from perfectly correlated: the factor is measured, not
        # the sqrt(2) of perfect correlation. Held-out rows never trained a tree: 1.
        inflation = OOB_VARIANCE_FACTOR if settings["oob"] else 1.0
        with numba_threads(threads):
            return assemble(ens, st, methods, names, classification, stats.n_rows,
                            n_blocks, alpha, lam, inflation, extra, groups=grp,
                            block_weight=stats.block_weight.copy(), parts=parts)

    def _mdi_only(self, rows, y, sample_weight, base_margin, methods, names, n_blocks, grp):
        """Measures that read the model alone (in-sample MDI): y optional, nothing routed
        (X, y and the weights are still checked)."""

        n = rows.n_rows
        check_base_margin(base_margin, n, self.ensemble)
        if y is not None:
            as_target(y, n, n_target_columns(self.ensemble))
        check_sample_weight(sample_weight, n)
        return assemble(self.ensemble, None, methods, names, False, n,
                        check_n_blocks(n_blocks, None), None, None, groups=grp)

    def _explain_stream(self, chunks, y, *, oob, methods, sample_weight, base_margin, groups,
                        n_blocks, random_state, alpha, lam, progress):
        for name, value in (("y", y), ("sample_weight", sample_weight),
                            ("base_margin", base_margin)):
            if value is not None:
                raise ValueError(f"X is an iterable of (X, y) chunks: give {name} inside "
                                 "the chunks ((X, y) or (X, y, sample_weight)), not "
                                 "separately")
        methods = resolve_methods(methods, self.ensemble, alpha, lam)
        registry.check_targets(methods, self.ensemble)
        key = self._key(random_state)
        total, start = None, 0
        bar = progress_bar(progress, total=None, work=np.inf if progress else 0,
                           desc="treeimp.explain")
        try:
            for i, chunk in enumerate(chunks):
                Xc, yc, wc = _unpack_chunk(chunk, i)
                n = _n_rows(Xc)
                stats = self.accumulate(Xc, yc, rows=range(start, start + n), oob=oob,
                                        sample_weight=wc, n_blocks=n_blocks,
                                        random_state=BlockKey(key), methods=methods,
                                        progress=False)
                total = stats if total is None else total + stats
                start += n
                bar.update(n)
        finally:
            bar.close()
        if total is None:
            raise ValueError("X is an empty iterable of chunks: no evaluation rows")
        return self.finalize(total, methods, alpha=alpha, lam=lam, groups=groups)


# statistics cells (leaves x blocks x terms) below which finalising runs on one thread
# (waking the thread pool costs more than the work)
SERIAL_CELLS = 1 << 20


def _refuse_smoothed_chunks(ens, where):
    """XGBoost >= 3.4's smoothed absolute error / quantile: every round's gradient scale
    is a statistic of all the evaluation rows (``losses.smoothed_spec``), which no chunk
    of them knows."""

    if ens.kind != FOREST and ens.objective.name in SMOOTHED:
        raise ValueError(f"objective {ens.objective.name!r} (XGBoost >= 3.4) cannot be "
                         f"explained from {where}: its gradients are scaled, every round, by "
                         "a statistic of all the evaluation rows at once (S = (weighted mean "
                         "of sqrt|margin - y|)^2), which one chunk does not know; pass all "
                         "the rows in one call, explain(model, X, y) with in-memory X "
                         "(permutation_importance and contributions work on chunks)")
    if ens.kind != FOREST and ens.objective.name == "cox":
        raise ValueError(f"objective 'cox' (XGBoost survival:cox, CatBoost Cox) cannot be "
                         f"explained from {where}: a row's gradient sums over the risk set "
                         "of all the evaluation rows at once (stats/cox.py), which one chunk "
                         "does not know; pass all the rows in one call, explain(model, X, y) "
                         "with in-memory X")


def _refuse_ranking_chunks(ens, where, qid=None, group=None):
    """A learning-to-rank model is explained from all its rows in one call (its queries
    given by qid or group), not from ``where`` (chunks, a Dask collection,
    Explainer.accumulate); qid / group are read only there."""
    if qid is not None or group is not None:
        raise ValueError(f"qid / group are read with in-memory rows in one call, not with "
                         f"{where}")
    if is_ranking(ens.objective):
        raise ValueError(f"objective {ens.objective.source or ens.objective.name!r} ranks the "
                         "rows of each query: explain it from in-memory rows in one call, "
                         f"explain(model, X, y, qid=...), not from {where}")


def _last_step(model):
    return model.steps[-1][1] if is_pipeline(model) else model


def _is_chunk_stream(X):
    """An iterator of chunks, or a list/tuple of (X, y[, w]) tuples (not a 2-D array)."""
    if isinstance(X, (str, bytes)) or hasattr(X, "shape") or hasattr(X, "__array__"):
        return False
    if isinstance(X, collections.abc.Iterator):
        return True
    if isinstance(X, (list, tuple)) and X and all(isinstance(c, tuple) for c in X):
        return all(len(c) in (2, 3) and hasattr(c[0], "shape") for c in X)
    return False


def _unpack_chunk(chunk, i):
    if not isinstance(chunk, tuple) or len(chunk) not in (2, 3):
        raise TypeError(f"chunk {i} must be a tuple (X, y) or (X, y, sample_weight), got "
                        f"{type(chunk).__name__}"
                        + (f" of length {len(chunk)}" if isinstance(chunk, tuple) else ""))
    return chunk[0], chunk[1], (chunk[2] if len(chunk) == 3 else None)


def _n_rows(X):
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None else len(X)


def _spark_columns(X, **columns):
    """The column names of a Spark DataFrame X; TypeError when they are given for
    another X."""
    given = sorted(k for k, v in columns.items() if v is not None)
    if given and not is_spark_dataframe(X):
        raise TypeError(f"{', '.join(given)} name columns of a Spark DataFrame, but X is a "
                        f"{type(X).__module__}.{type(X).__name__}")
    return columns


def _refuse_arrays_with_columns(**values):
    """A Spark DataFrame carries its y, weights and offsets as columns."""
    given = [k for k, v in values.items() if v is not None]
    if given:
        hint = {"y": "label_col", "sample_weight": "weight_col",
                "base_margin": "base_margin_col"}
        raise TypeError(f"X is a Spark DataFrame: give {', '.join(given)} as its columns "
                        f"({', '.join(f'{hint[k]}=' for k in given)}), not separately")


def _check_oob(oob):
    if not isinstance(oob, (bool, np.bool_)):
        raise TypeError(f"oob must be True or False, got {oob!r}")
    return bool(oob)


def _extra_methods(methods):
    """The per-row measures among ``methods`` (accumulated from contributions)."""
    return tuple(registry.row_sum_methods(methods))

