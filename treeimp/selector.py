"""ImportanceSelector: a scikit-learn feature selector that keeps the features whose
out-of-sample importance is significantly positive (Benjamini-Hochberg q < alpha)."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.feature_selection import SelectorMixin
from sklearn.model_selection import train_test_split
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils.validation import check_is_fitted

from .crossfit import cross_explain
from .explainer import Explainer
from .inputs.threads import fit_threads
from .measures import registry
from .measures.defaults import DEFAULT_N_BLOCKS
from .measures.screening import screening_method_of
from .measures.shadow_null import (
    MIN_SHADOWS,
    MIN_USED_SHADOWS,
    shadow_pvalues,
    used_shadows,
    zscores,
)
from .model.ensemble import BOOSTING
from .results.importances import Importances, bh_qvalues

try:  # scikit-learn >= 1.6
    from sklearn.utils import get_tags
    from sklearn.utils.validation import validate_data
except ImportError:  # pragma: no cover - scikit-learn 1.4, 1.5
    def validate_data(estimator, *args, **kwargs):
        if "ensure_all_finite" in kwargs:
            kwargs["force_all_finite"] = kwargs.pop("ensure_all_finite")
        return estimator._validate_data(*args, **kwargs)

    get_tags = None

NULLS = (None, "t", "shadow")

# forest classifiers out of bag whose smallest class holds less than this share of the
# rows are screened class-balanced with balance_classes=None (see _balanced)
RARE_CLASS_SHARE = 0.1
# the class weight of that screening fit: each tree's bootstrap sample weighted to equal
# class totals (with "balanced", weights from the whole y, the rare-positive design of
# benchmarks/screening.py kept none of its true features)
BALANCED_CLASS_WEIGHT = "balanced_subsample"

# row blocks out of bag with n_blocks=None: t(49) instead of t(19) lowers the z a first
# Benjamini-Hochberg discovery needs (among 30 features 3.1 instead of 3.4); in
# benchmarks/screening.py --selector the screening forest's power rose on Li et al.'s
# design (0.04 -> 0.16) and the wide one (0.80 -> 0.86) with FDR <= 0.05 on every design
OOB_N_BLOCKS = 50

BAGGED_FORESTS = (RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier,
                  ExtraTreesRegressor, BaggingClassifier, BaggingRegressor)


def selection_methods():
    """The measures a selection can test (the registry's, in its order): measured on
    evaluation rows (p-values) and taking no parameters from the caller."""
    return registry.names(needs_rows=True, passed_params=False)


class ImportanceSelector(SelectorMixin, BaseEstimator):
    """Keep the features whose out-of-sample importance is significantly positive.

    ``fit`` clones and fits ``estimator``, measures every feature's importance with
    :func:`treeimp.explain` on rows the trees did not see, and keeps the features whose
    one-sided test of "importance > 0" passes at false discovery rate ``alpha``
    (Benjamini-Hochberg q-value < alpha, i.e. ``importances_.select(method, alpha)``).
    The decision rests on the importance relative to its standard error, never on its
    absolute size: a feature with a small but clearly positive importance is kept, a
    large but noisy one (a row ID, a high-cardinality code) is not.

    Where the importances are measured:

    - bagged forests (RandomForest / ExtraTrees with ``bootstrap=True``) with
      ``oob=None`` or ``oob=True``: the estimator is fitted on all rows and every tree is
      evaluated on its own out-of-bag rows;
    - otherwise (boosting, forests without bootstrap, ``oob=False``) with ``cv`` folds
      (default 5): cross-fitting (:func:`treeimp.cross_explain`), a clone fitted on each
      training fold and explained on its held-out fold, so that every row is evaluated
      once; ``estimator_`` is then a further clone fitted on all rows;
    - with ``cv=None`` instead: the estimator is fitted on a training part and evaluated
      on a held-out part of ``validation_fraction`` of the rows (stratified by class for
      classifiers); the fitted estimator has then seen only the training part.

    For screening with a random forest, grow it with larger leaves than for prediction:
    in benchmarks/screening.py ``min_samples_leaf=10`` instead of 3 raised the power on
    Li et al.'s hard design from 0.10 to 0.14 with no false selection in 10 runs (see
    benchmarks/README.md for what larger leaves do with correlated features). With a
    rare class (the smallest below :data:`RARE_CLASS_SHARE`, 10%, of the rows) a forest
    classifier out of bag is screened class-balanced (``balance_classes``): the
    selector's own fit with ``class_weight="balanced_subsample"``, tested with ``ufi``;
    ``estimator_`` stays the caller's forest.

    If no feature passes, a UserWarning is issued and no feature is kept: ``transform``
    returns zero columns (and warns again), as every scikit-learn selector does.

    Parameters
    ----------
    estimator : scikit-learn, XGBoost or LightGBM tree ensemble (unfitted)
        Any model :func:`treeimp.explain` supports; it is cloned, never changed.
    method : str or None, default None
        Out-of-sample importance used for the test (:func:`selection_methods`):
        "mdi_oob", "mdi_oob_centered", "ufi", "naive_oob", "shap_oob", "saabas_oob", or
        (forests only) "pg1", "pg2", "pg3". Not "mdi", which has no p-values, nor
        "pg_oob", whose parameters the selector does not pass. None: the measure that
        held the false discovery rate with the most power in benchmarks/screening.py for
        the model's kind and task (:func:`treeimp.measures.screening.default_screening_method`):
        "ufi" for boosting regression (objectives with a hessian bounded away from 0,
        e.g. squared error), "mdi_oob_centered" otherwise.
    alpha : float in (0, 1), default 0.05
        False discovery rate of the Benjamini-Hochberg procedure across features.
    validation_fraction : float in (0, 1), default 0.25
        Share of the rows held out for the importances when neither out-of-bag rows nor
        cross-fitting (``cv=None``) are used.
    cv : int >= 2, a scikit-learn splitter, or None; default 5
        Folds of the cross-fitting used when out-of-bag rows are not (see above); None
        holds out one ``validation_fraction`` part instead.
    oob : bool or None, default None
        None: out-of-bag rows for bagged forests, a held-out part otherwise. True: require
        out-of-bag rows (a ValueError for other models). False: always hold out rows.
    n_blocks : int or None, default None
        Random row blocks for the standard errors (at most the number of evaluation
        rows; with cross-fitting, per fold); the p-values use t with ``n_blocks - 1``
        degrees of freedom (``cv * n_blocks - 1`` cross-fitted). None: 50 out of bag
        (20 with fewer than 50 rows), ``treeimp.api.DEFAULT_N_BLOCKS`` (20) otherwise.
        With 20 blocks a forest's first Benjamini-Hochberg discovery among 30 features
        needs z > 3.4 (t(19)), with 50 z > 3.1 (t(49)): in benchmarks/screening.py
        (10 runs per design) the screening forest out of bag kept 0.16 instead of 0.04
        of Li et al.'s true features and 0.86 instead of 0.80 of the wide design's, with
        FDR <= 0.05 on every design and its noise z-scores as calibrated; cross-fitted
        XGBoost (already t(99)) gained little from 50 blocks per fold.
    random_state : int, RandomState or None
        Seeds the train/validation split and the row blocks (not the estimator: set its
        own ``random_state`` for reproducible fits); None: a new split and new blocks on
        every fit.
    groups : dict or None, default None
        {group name: [column names or positions]}: test each group's summed importance
        (see :func:`treeimp.explain`) and keep or drop its columns together; columns in
        no group are tested alone. With ``null="t"`` or None (the t null is then used).
    null : {None, "t", "shadow"}, default None
        The reference distribution of the test. None: "shadow" for boosting models
        cross-fitted (``cv`` not None) without ``groups``, "t" otherwise (forests out of
        bag, held-out parts, groups): in benchmarks/screening.py the shadow null held the
        false discovery rate on every design with cross-fitted XGBoost and kept more true
        features where the t reference's offset cost power (rare positives 0.16 -> 0.70,
        10 runs), while for forests it kept false features on two designs (see
        benchmarks/README.md). "t": each feature's z = importance /
        standard error against t with the result's degrees of freedom
        (``importances_.pvalues``). "shadow": the null's centre learned from the
        data. Shadow features, copies of all columns with their rows permuted (one random
        permutation of the rows per copy, so the shadows keep the features' values, types
        and dependence among themselves but lose any link to ``y`` and to the real
        columns), are appended to X; the estimator is fitted and explained on the widened
        X exactly as above, and each real feature's z-score is shifted by the mean m of
        the shadows' z-scores: p = P(T > (z - m) / sqrt(1 + s^2 / S)) with the t
        reference's degrees of freedom, s and S the shadows' z-scores' standard
        deviation and count (the centre's own error)
        (:func:`treeimp.measures.shadow_null.shadow_pvalues`), then Benjamini-Hochberg
        at ``alpha``. Out-of-sample measures put noise features' z-scores below 0 (most
        for cross-fitted boosting and rare classes), which the t reference alone takes
        as 0 and so loses power; a real feature independent of ``y`` and of the other
        features is exchangeable with its shadows, so m estimates its centre. One
        correlated with a relevant feature is not (it can stand in for it in the trees)
        and may be kept, as by Boruta. ``estimator_`` is then a further clone fitted on
        the real columns only. If the model used fewer than 3 shadows (tiny data sets,
        few or shallow trees), the centre cannot be estimated: a UserWarning says so and
        the t null is used, the result being exactly that of ``null="t"`` (``null_``
        tells which null was used).
    n_shadows : int or None, default None
        With the shadow null: at least this many shadow columns, in whole copies of X
        (ceil(n_shadows / n_features) copies). None: 100
        (:data:`treeimp.measures.shadow_null.MIN_SHADOWS`), at least one copy.
    balance_classes : {None, True, False}, default None
        Whether a forest classifier screened out of bag is fitted class-balanced for the
        screening, i.e. with ``class_weight="balanced_subsample"`` (each tree's bootstrap
        sample weighted to equal class totals), and then screened with that forest's
        default measure, "ufi" (``method=None``; class-weighted ``mdi_oob`` is biased out
        of bag). None: where the smallest class holds less than
        :data:`RARE_CLASS_SHARE` of the rows (of their weight with ``sample_weight``).
        True: for every class distribution. False: never. Only for estimators with a
        ``class_weight`` parameter left at None (RandomForest and ExtraTrees
        classifiers); one the caller set is used as it is. The fitted ``estimator_`` is
        always the caller's estimator, fitted on all rows without the class weights
        (one more fit); ``screening_class_weight_`` tells whether the screening was
        balanced. In benchmarks/screening.py (rare positives, 4%, 10 runs) the
        screening forest (100 trees, ``min_samples_leaf=10``) kept 0.62 of the true
        features instead of 0.18, with no false one (0.52 before ufi's replicates were
        expanded about the total); with 2% positives 0.08 instead of 0.00. With 10%
        positives there was nothing left to gain: the unweighted forest kept all true
        features of that design (the balanced one too, with one false feature in 10
        runs), and on Li et al.'s design with 10% positives both kept almost none (0.04
        and 0.02); hence the threshold 0.1. The study's other designs
        (30-50% positives) are unchanged.

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone of ``estimator``.
    importances_ : Importances
        The importances, standard errors, p- and q-values the selection used.
    method_ : str
        The measure the selection tested (``method``, or the default it stands for).
    n_blocks_ : int
        The row blocks used (``n_blocks``, or the default it stands for).
    screening_class_weight_ : str or None
        ``"balanced_subsample"`` if the screening forest was fitted class-balanced
        (``balance_classes``), None otherwise.
    null_ : str
        The null the selection used, "t" or "shadow" (``null``, the default it stands
        for, or "t" where too few shadows were used).
    shadow_null_ : tuple (mean, sd, count) or None
        With the shadow null: the mean (the centre subtracted) and standard deviation
        of the shadows' z-scores and the number of shadows the model used;
        None with the t null. With the shadow null the p- and q-values of
        ``importances_`` (for ``method_``) are the shadow-referenced ones.
    shadow_zscores_ : ndarray or None
        With the shadow null: the shadows' z-scores (NaN for a shadow the model never
        used), copy after copy in the order of the columns; None with the t null.
    support_ : ndarray of bool
        Mask of the kept features, one entry per input feature.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Column names seen during fit, when X was a DataFrame with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from treeimp import ImportanceSelector
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 5))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=50, min_samples_leaf=3, random_state=0)
    >>> sel = ImportanceSelector(rf, random_state=0).fit(X, y)
    >>> sel.get_support(indices=True)
    array([0, 1])
    >>> sel.transform(X).shape
    (600, 2)
    """

    def __init__(self, estimator, *, method=None, alpha=0.05, validation_fraction=0.25,
                 oob=None, cv=5, n_blocks=None, random_state=None, groups=None,
                 null=None, n_shadows=None, balance_classes=None):
        self.estimator = estimator
        self.method = method
        self.alpha = alpha
        self.validation_fraction = validation_fraction
        self.oob = oob
        self.cv = cv
        self.n_blocks = n_blocks
        self.random_state = random_state
        self.groups = groups
        self.null = null
        self.n_shadows = n_shadows
        self.balance_classes = balance_classes

    def fit(self, X, y, sample_weight=None):
        """Fit the estimator, measure out-of-sample importances, select features.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            Training rows. DataFrames are passed to the estimator as they are (so
            'category' columns reach models that handle them).
        y : array-like (n_samples,)
            Targets.
        sample_weight : array-like (n_samples,), optional
            Row weights, used both to fit the estimator and to weight the evaluation rows.

        Returns
        -------
        self
        """
        self._check_params()
        use_oob = self._use_oob()
        frame = hasattr(X, "iloc") and hasattr(X, "columns")
        allow_nan = _allows_nan(self.estimator)
        # sparse X stays sparse (CSR or CSC, other formats converted to CSR): the
        # estimator fits on it and treeimp routes it chunk by chunk, reading absent
        # entries as the estimator's library does
        X_checked, y = validate_data(self, X, y, dtype=None if frame else "numeric",
                                     accept_sparse=("csr", "csc"),
                                     ensure_all_finite="allow-nan" if allow_nan else True,
                                     ensure_min_samples=2)
        data = X if frame else X_checked
        n = X_checked.shape[0]
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (n,):
                raise ValueError(f"sample_weight has shape {sample_weight.shape} but X has "
                                 f"{n} rows; expected shape ({n},)")
        names = (list(map(str, self.feature_names_in_)) if hasattr(self, "feature_names_in_")
                 else [f"x{j}" for j in range(self.n_features_in_)])
        rng = check_random_state(self.random_state)
        split_seed, block_seed, shadow_seed = (
            int(s) for s in rng.randint(np.iinfo(np.int32).max, size=3))
        n_blocks = self._n_blocks(use_oob, n)
        # null=None: the shadow null where cross-fitted boosting is decided below, after
        # the first fit tells the model's kind; the t null everywhere else
        shadow = self.null == "shadow"
        work, work_names = data, names
        if shadow:
            work, work_names = _with_shadows(data, names, self._n_copies(len(names)),
                                             shadow_seed)

        est = clone(self.estimator)
        balanced = self._balanced(use_oob, y, sample_weight)
        if use_oob:
            if n < n_blocks:
                raise ValueError(f"n_blocks={n_blocks} is more than the {n} rows; "
                                 "lower n_blocks")
            screen = self._screening_clone(balanced)
            _fit(screen, work, y, sample_weight)
            ex = Explainer(screen, feature_names=work_names)
            method = self._screening_method(ex.ensemble)
            res = ex.explain(work, y, oob=True, methods=(method,),
                             sample_weight=sample_weight, n_blocks=n_blocks,
                             random_state=block_seed, groups=self.groups)
            if shadow or balanced:
                # the returned estimator is the caller's, on the real columns only
                _fit(est, data, y, sample_weight)
            else:
                est = screen

            def t_result():
                real = est
                if balanced:  # the class-balanced screening forest on the real columns
                    real = self._screening_clone(balanced)
                    _fit(real, data, y, sample_weight)
                return Explainer(real, feature_names=names).explain(
                    data, y, oob=True, methods=(method,), sample_weight=sample_weight,
                    n_blocks=n_blocks, random_state=block_seed, groups=self.groups)
        elif self.cv is not None:
            # the fit on all rows first: the estimator's own errors on bad X or y come
            # before any fold is split
            _fit(est, data, y, sample_weight)
            ens = Explainer(est).ensemble
            method = self._screening_method(ens)
            if self.null is None and ens.kind == BOOSTING and self.groups is None:
                shadow = True
                work, work_names = _with_shadows(data, names, self._n_copies(len(names)),
                                                 shadow_seed)

            def t_result(X_=data, names_=names):
                return cross_explain(self.estimator, X_, y, cv=self.cv, methods=(method,),
                                     sample_weight=sample_weight, feature_names=names_,
                                     n_blocks=n_blocks, random_state=block_seed,
                                     groups=self.groups)
            res = t_result(work, work_names)
        else:
            train, val = self._split(n, y, split_seed, n_blocks)
            sw = (None, None) if sample_weight is None else (sample_weight[train],
                                                            sample_weight[val])
            _fit(est, _safe_indexing(work, train), y[train], sw[0])
            ex = Explainer(est, feature_names=work_names)
            method = self._screening_method(ex.ensemble)
            res = ex.explain(_safe_indexing(work, val), y[val], methods=(method,),
                             sample_weight=sw[1], n_blocks=n_blocks,
                             random_state=block_seed, groups=self.groups)
            if shadow:
                est = clone(self.estimator)
                _fit(est, _safe_indexing(data, train), y[train], sw[0])

            def t_result():
                return Explainer(est, feature_names=names).explain(
                    _safe_indexing(data, val), y[val], methods=(method,),
                    sample_weight=sw[1], n_blocks=n_blocks, random_state=block_seed,
                    groups=self.groups)
        self.shadow_null_ = self.shadow_zscores_ = None
        self.null_ = "shadow" if shadow else "t"
        if shadow:
            referenced = _shadow_referenced(res, method, len(names))
            if referenced is None:
                # tiny data: the model used too few shadows to estimate the centre; the
                # t null on the real columns alone (what null="t" gives)
                used = used_shadows(_zscores_of(res, method)[len(names):])
                warnings.warn(
                    f"ImportanceSelector: only {used} of {len(work_names) - len(names)} "
                    f"shadow features entered the model's trees, fewer than "
                    f"{MIN_USED_SHADOWS} to estimate the shadow null's centre; the t null "
                    "(null='t') was used instead. More rows or trees let the model use "
                    "the shadows.", UserWarning, stacklevel=2)
                self.null_ = "t"
                res = t_result()
            else:
                res, self.shadow_null_, self.shadow_zscores_ = referenced
        self.estimator_ = est
        self.screening_class_weight_ = BALANCED_CLASS_WEIGHT if balanced else None
        self.n_blocks_ = n_blocks
        self.importances_ = res
        self.method_ = method
        kept = res.select(method, self.alpha)
        if res.groups is not None:  # whole groups: their member columns
            kept = [f for g in kept for f in res.groups[g]]
        self.support_ = np.isin(np.asarray(names, dtype=object), kept)
        if not self.support_.any():
            q = res.qvalues[method]
            warnings.warn(f"ImportanceSelector kept no feature: no {method!r} importance "
                          f"is significantly positive at alpha={self.alpha} (smallest "
                          f"q-value {np.nanmin(q.to_numpy(), initial=np.inf):.3g}); "
                          "transform will return zero columns", UserWarning, stacklevel=2)
        return self

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = _allows_nan(self.estimator)
        return tags

    # ------------------------------------------------------------------ helpers
    def _check_params(self):
        if not hasattr(self.estimator, "fit"):
            raise TypeError(f"estimator must be an unfitted tree ensemble with a fit method, "
                            f"got {self.estimator!r}")
        valid = selection_methods()
        if self.method is not None and (not isinstance(self.method, str)
                                        or self.method not in valid):
            why = (f" ({self.method!r} is measured on the training rows and has no p-values)"
                   if not registry.needs_rows(self.method) else "")
            raise ValueError(f"method must be one of {list(valid)}, got "
                             f"{self.method!r}{why}")
        for name, value in (("alpha", self.alpha),
                            ("validation_fraction", self.validation_fraction)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or not 0.0 < value < 1.0:
                raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
        if self.oob is not None and not isinstance(self.oob, (bool, np.bool_)):
            raise ValueError(f"oob must be None, True or False, got {self.oob!r}")
        if self.groups is not None and not isinstance(self.groups, dict):
            raise TypeError(f"groups must be None or a dict {{name: columns}}, got "
                            f"{type(self.groups).__name__}")
        splitter = hasattr(self.cv, "split") and not isinstance(self.cv, (str, bytes))
        if self.cv is not None and not splitter and (
                isinstance(self.cv, bool) or not isinstance(self.cv, numbers.Integral)
                or self.cv < 2):
            raise ValueError(f"cv must be None, an integer >= 2 or a splitter with "
                             f"split(X, y), got {self.cv!r}")
        if self.n_blocks is not None and (
                isinstance(self.n_blocks, bool)
                or not isinstance(self.n_blocks, numbers.Integral) or self.n_blocks < 2):
            raise ValueError(f"n_blocks must be None or an integer >= 2, got "
                             f"{self.n_blocks!r}")
        if self.null is not None and (not isinstance(self.null, str)
                                      or self.null not in NULLS):
            raise ValueError(f"null must be one of {list(NULLS)}, got {self.null!r}")
        if self.n_shadows is not None and (
                isinstance(self.n_shadows, bool)
                or not isinstance(self.n_shadows, numbers.Integral) or self.n_shadows < 3):
            raise ValueError(f"n_shadows must be None or an integer >= 3, got "
                             f"{self.n_shadows!r}")
        if self.balance_classes is not None and not isinstance(self.balance_classes,
                                                               (bool, np.bool_)):
            raise ValueError(f"balance_classes must be None, True or False, got "
                             f"{self.balance_classes!r}")
        if self.null == "shadow" and self.groups is not None:
            raise ValueError("groups are tested with null='t' only: a group's shadow "
                             "would be a group of shadows; use null='t' with groups")

    def _n_blocks(self, use_oob, n):
        """``n_blocks``, or for None: OOB_N_BLOCKS out of bag (when the rows allow it),
        DEFAULT_N_BLOCKS otherwise (per fold when cross-fitted)."""
        if self.n_blocks is not None:
            return int(self.n_blocks)
        return OOB_N_BLOCKS if use_oob and n >= OOB_N_BLOCKS else DEFAULT_N_BLOCKS

    def _balanced(self, use_oob, y, sample_weight):
        """Whether the screening forest is fitted class-balanced: a classifier out of bag
        with a ``class_weight`` parameter left at None, and ``balance_classes`` True, or
        None with the smallest class's share of the rows (of their weight, with
        ``sample_weight``) below :data:`RARE_CLASS_SHARE`."""
        if not use_oob or not is_classifier(self.estimator):
            return False
        params = self.estimator.get_params(deep=False)
        if "class_weight" not in params or params["class_weight"] is not None:
            return False
        if self.balance_classes is not None:
            return bool(self.balance_classes)
        _, codes = np.unique(y, return_inverse=True)
        weight = np.bincount(codes, weights=sample_weight)
        return bool(weight.min() < RARE_CLASS_SHARE * weight.sum())

    def _screening_clone(self, balanced):
        """An unfitted clone of ``estimator``, class-balanced (BALANCED_CLASS_WEIGHT)
        when ``balanced``."""
        screen = clone(self.estimator)
        if balanced:
            screen.set_params(class_weight=BALANCED_CLASS_WEIGHT)
        return screen

    def _n_copies(self, n_features):
        """Whole copies of X that give at least ``n_shadows`` shadow columns."""
        wanted = MIN_SHADOWS if self.n_shadows is None else int(self.n_shadows)
        return max(1, -(-wanted // n_features))

    def _screening_method(self, ens):
        """``method``, or the default screening measure of the fitted estimator's parsed
        ensemble ``ens`` (its kind, task and objective). Only that one is computed:
        another candidate may not be defined for the model (ufi for an absolute-error
        forest)."""
        if self.method is not None:
            return self.method
        return screening_method_of(ens)

    def _use_oob(self):
        bagged = (isinstance(self.estimator, BAGGED_FORESTS)
                  and bool(getattr(self.estimator, "bootstrap", False)))
        if self.oob is None:
            return bagged
        if self.oob and not bagged:
            raise ValueError(f"oob=True needs a bagged forest (RandomForest or ExtraTrees "
                             f"with bootstrap=True), got {type(self.estimator).__name__}"
                             + (" with bootstrap=False" if isinstance(
                                 self.estimator, BAGGED_FORESTS) else "")
                             + "; use oob=None or oob=False to hold out "
                             f"validation_fraction={self.validation_fraction} of the rows")
        return bool(self.oob)

    def _split(self, n, y, seed, n_blocks):
        n_val = int(np.ceil(self.validation_fraction * n))
        if n_val < n_blocks or n - n_val < 1:
            raise ValueError(f"validation_fraction={self.validation_fraction} of {n} rows "
                             f"holds out {n_val} rows, fewer than n_blocks={n_blocks} "
                             "(or leaves no training row); use more rows, a larger "
                             "validation_fraction or a smaller n_blocks")
        stratify = y if is_classifier(self.estimator) else None
        try:
            return train_test_split(np.arange(n), test_size=n_val, stratify=stratify,
                                    random_state=seed)
        except ValueError as exc:
            if stratify is None:
                raise
            raise ValueError(f"cannot split off validation_fraction={self.validation_fraction}"
                             f" of {n} rows stratified by class: {exc}") from None


def _with_shadows(data, names, copies, seed):
    """X with ``copies`` shadow copies appended, and the widened column names: each copy
    is all of X's columns with the rows in one random order (values, dtypes and the
    dependence among the columns kept; the link to y and to the real columns broken).
    DataFrames stay DataFrames (shadow columns named ``"shadow{k}_{name}"``), sparse
    matrices stay sparse (CSR)."""
    rng = np.random.default_rng(seed)
    n = data.shape[0]
    perms = [rng.permutation(n) for _ in range(copies)]
    shadow_names = [f"shadow{k}_{name}" for k in range(copies) for name in names]
    taken = set(names)
    if taken.intersection(shadow_names):
        clash = sorted(taken.intersection(shadow_names))[0]
        raise ValueError(f"a feature is named {clash!r}, the name of a shadow feature; "
                         "rename it or use null='t'")
    if hasattr(data, "iloc") and hasattr(data, "columns"):
        cols = list(map(str, data.columns))
        real = data.set_axis(cols, axis=1)
        parts = [real] + [real.iloc[perm].set_axis(data.index, axis=0).set_axis(
            [f"shadow{k}_{c}" for c in cols], axis=1) for k, perm in enumerate(perms)]
        work = pd.concat(parts, axis=1)
    elif sp.issparse(data):
        csr = sp.csr_matrix(data)
        work = sp.hstack([csr] + [csr[perm] for perm in perms], format="csr")
    else:
        work = np.hstack([data] + [data[perm] for perm in perms])
    return work, list(names) + shadow_names


def _zscores_of(res, method):
    return zscores(res.table[method].to_numpy(), res.stderr[method].to_numpy())


def _shadow_referenced(res, method, n_real):
    """The result of the first ``n_real`` (real) features, with ``method``'s p- and
    q-values from :func:`treeimp.measures.shadow_null.shadow_pvalues` (z less the
    shadows' mean z-score, t reference); the null's (mean, sd, count); the shadows'
    z-scores. None if the model used fewer than ``MIN_USED_SHADOWS`` shadows."""
    z = _zscores_of(res, method)
    if used_shadows(z[n_real:]) < MIN_USED_SHADOWS:
        return None
    p, null = shadow_pvalues(z[:n_real], z[n_real:], res.dof)
    real = _first_features(res, n_real)
    real.pvalues[method] = p
    real.qvalues[method] = bh_qvalues(p)
    return real, null, z[n_real:]


def _first_features(res, n):
    """An Importances holding only the first ``n`` features of ``res``."""
    rows = res.table.index[:n]
    return Importances(
        table=res.table.loc[rows], stderr=res.stderr.loc[rows],
        stderr_trees=res.stderr_trees.loc[rows],
        per_tree={m: v[:, :n] for m, v in res.per_tree.items()},
        block_values={m: v[:, :n] for m, v in res.block_values.items()},
        n_blocks=res.n_blocks, kind=res.kind, n_rows=res.n_rows, model_name=res.model_name,
        table_by_class={m: t.loc[rows] for m, t in res.table_by_class.items()},
        groups=res.groups, dof=res.dof, block_weight=res.block_weight, task=res.task,
        objective=res.objective, screening=res.screening)


def _fit(est, X, y, sample_weight):
    with fit_threads(est):
        if sample_weight is None:
            est.fit(X, y)
        else:
            est.fit(X, y, sample_weight=sample_weight)


def _allows_nan(estimator):
    """Whether the estimator takes NaN in X (its scikit-learn tag; False if unknown)."""
    if get_tags is None or not hasattr(estimator, "fit"):
        return False
    return bool(get_tags(estimator).input_tags.allow_nan)
