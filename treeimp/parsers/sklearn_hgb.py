"""scikit-learn HistGradientBoostingClassifier / Regressor -> TreeEnsemble.

The trees live in private attributes; each is read through ``sklearn_private``, which
fails with the scikit-learn version when one is missing. Facts checked on scikit-learn
1.9:

* ``_predictors[i][k].nodes`` (structured array): ``value`` (leaves already multiplied
  by the learning rate), ``count`` (training rows, early-stopping validation rows
  excluded), ``feature_idx``, ``num_threshold``, ``missing_go_to_left``, ``left``,
  ``right``, ``gain`` (-1 at leaves), ``is_leaf``, ``is_categorical``, ``bitset_idx``;
  raw margin = ``_baseline_prediction`` + sum of leaf values;
* numeric split: float64 ``x <= num_threshold`` goes left (threshold ``inf``: NaN-only
  split); NaN follows ``missing_go_to_left``; +-inf are accepted on numeric columns;
* categorical features (a mask / indices / names, or ``"from_dtype"`` with pandas
  category columns) ALWAYS go through ``_preprocessor``, a ColumnTransformer whose
  OrdinalEncoder puts the categorical columns first, numeric ones after: ``feature_idx``
  indexes that output and is remapped here to the original columns. The encoder maps a
  training category to its position in ``categories_`` and anything else (unseen,
  negative, non-integer) to NaN. Bitsets (``raw_left_cat_bitsets[bitset_idx]``, 8 x
  uint32, code c in the set if ``(bs[c >> 5] >> (c & 31)) & 1``) are over those
  positions; codes in the set go left, other known codes right, NaN/unknown follow
  ``missing_go_to_left``. The encoder rejects +-inf in categorical columns.

Category codes in the normal form (``int(x)`` of the value routed): when a feature's
training categories are integers in [0, 65536) the codes ARE those values, so numpy input
routes as scikit-learn does without any conversion, and ``feature_categories`` is
``[0, 1, ..., max]`` (label k has code k) so pandas category columns are mapped by label
as well. Otherwise (strings; negative, fractional or large numbers, all of which
scikit-learn 1.9 accepts) the codes are the positions in ``categories_``,
``feature_categories`` lists those categories (pandas category columns are mapped by
label) and ``category_values`` holds the exact value -> position table that numeric
input goes through (a value not in it is unknown: NaN, as the encoder makes it). For
text categories the table is empty: numeric input is rejected with a TypeError, as
scikit-learn's encoder rejects it. Fractional values on an integer-coded column are
unknown categories, as in scikit-learn (categorical nodes carry ``NAN_CAT_EXACT``).

Numeric features read a pandas 'category' column by its label VALUES, as scikit-learn
does (``category_as_code`` False); categorical features by label (True).
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from ..model.ensemble import BOOSTING, NAN_CAT_EXACT, NAN_MISSING, Objective, Tree, TreeEnsemble
from . import sklearn_private as private
from .sklearn_tree import check_fitted, required_attr

NODE_FIELDS = ("value", "count", "feature_idx", "num_threshold", "missing_go_to_left",
               "left", "right", "gain", "is_leaf", "is_categorical", "bitset_idx")
SUPPORTED_LOSSES = ("squared_error", "absolute_error", "gamma", "poisson", "quantile",
                    "log_loss")
MAX_DIRECT_CODE = 65536  # integer categories below this are used as codes directly


def parse_sklearn_hgb(model) -> TreeEnsemble:
    """Normal form of a fitted HistGradientBoostingClassifier or Regressor.

    Parameters
    ----------
    model : HistGradientBoostingClassifier or HistGradientBoostingRegressor
        Fitted; numeric, missing and categorical features are supported.

    Returns
    -------
    TreeEnsemble
        kind "boosting", one tree per iteration and class (output k), ``weight`` =
        node ``count``, ``gain`` = split gain (NaN at leaves, gain_kind "gain").
        ``predict_raw`` equals ``_raw_predict`` (``decision_function`` of classifiers,
        ``predict`` before the inverse link for regressors). ``feature_categories``:
        see the module docstring.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        (a ValueError) when the model is not fitted.
    ValueError
        For a loss object or name the normal form does not know, or private attributes
        missing in the installed scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import HistGradientBoostingRegressor
    >>> from treeimp.parsers.sklearn_hgb import parse_sklearn_hgb
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> hgb = HistGradientBoostingRegressor(max_iter=10).fit(X, X[:, 0])
    >>> ens = parse_sklearn_hgb(hgb)
    >>> bool(np.allclose(ens.predict_raw(X)[:, 0], hgb.predict(X)))
    True
    """
    name = type(model).__name__
    check_fitted(model)
    n_features = int(required_attr(model, "n_features_in_"))
    n_outputs = int(required_attr(model, "n_trees_per_iteration_"))
    learning_rate = float(required_attr(model, "learning_rate"))
    baseline = private.hgb_baseline_prediction(model)  # None: read publicly below
    baseline = None if baseline is None else np.asarray(baseline, np.float64).ravel()
    if baseline is not None and baseline.size != n_outputs:
        raise ValueError(f"{name}._baseline_prediction has {baseline.size} values but the "
                         f"model has {n_outputs} trees per iteration")
    to_original, category_codes, feature_categories, category_values = _feature_layout(
        model, n_features)
    known = _known_categories(model, category_codes)

    trees = []
    for i, iteration in enumerate(_predictors(model)):
        if len(iteration) != n_outputs:
            raise ValueError(f"{name} iteration {i} has {len(iteration)} trees, expected "
                             f"{n_outputs}")
        for k, predictor in enumerate(iteration):
            nodes = _nodes(predictor, f"{name} iteration {i} class {k}")
            leaf = nodes["is_leaf"].astype(bool)
            # fields from_trees converts anyway (feature, value, count, missing_left) are
            # passed in their stored dtypes; its leaves have children 0 here, not -1
            trees.append(Tree(
                left=np.where(leaf, -1, nodes["left"].astype(np.int64)),
                right=np.where(leaf, -1, nodes["right"].astype(np.int64)),
                feature=to_original[nodes["feature_idx"]],
                threshold=np.where(leaf, 0.0, nodes["num_threshold"].astype(np.float64)),
                value=nodes["value"].reshape(-1, 1),
                weight=nodes["count"],
                missing_left=nodes["missing_go_to_left"],
                nan_mode=np.where(nodes["is_categorical"].astype(bool), NAN_CAT_EXACT,
                                  NAN_MISSING),
                gain=np.where(leaf, np.nan, nodes["gain"].astype(np.float64)),
                categories=_categorical_splits(predictor, nodes, known, category_codes),
                output=k,
                learning_rate=learning_rate,
                stage=i,
            ))

    names = getattr(model, "feature_names_in_", None)
    classes = getattr(model, "classes_", None)
    ens = TreeEnsemble.from_trees(
        trees,
        kind=BOOSTING,
        n_features=n_features,
        n_outputs=n_outputs,
        comparison="<=",
        round_float32=False,
        base_score=baseline,
        objective=_objective(model, n_outputs),
        feature_names=None if names is None else list(names),
        feature_categories=feature_categories,
        category_as_code=[c is not None for c in feature_categories or [None] * n_features],
        category_values=category_values,
        classes=None if classes is None else np.asarray(classes),
        library="sklearn",
        gain_kind="gain",
    )
    if baseline is None:
        ens = dataclasses.replace(ens, base_score=private.hgb_public_baseline(model, ens))
    return ens


# ---------------------------------------------------------------- objective
def _objective(model, n_outputs) -> Objective:
    loss = getattr(model, "loss", None)
    if loss == "squared_error":
        return Objective("squared_error", {}, "identity", loss)
    if loss == "absolute_error":
        # scikit-learn's gradient at margin == y is -1 (sklearn._loss.AbsoluteError)
        return Objective("absolute_error", {"tie_gradient": -1.0}, "identity", loss)
    if loss == "quantile":
        alpha = float(model.quantile)  # scikit-learn's gradient at margin == y is -alpha
        return Objective("quantile", {"alpha": alpha, "tie_gradient": -alpha}, "identity",
                         loss)
    if loss == "poisson":
        return Objective("poisson", {"max_delta_step": 0.0}, "exp", loss)
    if loss == "gamma":
        return Objective("gamma", {}, "exp", loss)
    if loss == "log_loss" and n_outputs == 1:
        return Objective("logistic", {"sigmoid": 1.0, "pos_weight": 1.0}, "sigmoid", loss)
    if loss == "log_loss":
        return Objective("softmax", {"n_classes": int(n_outputs), "hess_factor": 1.0},
                         "softmax", loss)
    raise ValueError(f"{type(model).__name__} has loss={loss!r}; supported losses: "
                     f"{', '.join(SUPPORTED_LOSSES)}")


# ---------------------------------------------------------------- categories
def _feature_layout(model, n_features):
    """Where each preprocessed column comes from, and how categories become codes.

    Returns ``to_original`` (preprocessed column -> original column), ``category_codes``
    (preprocessed categorical column -> array: encoder position -> normal-form code),
    ``feature_categories`` (per original column, or None without categorical features)
    and ``category_values`` (per original column: None, or the value -> position table
    numeric input goes through; None overall when no feature needs one).
    """
    preprocessor = _preprocessor(model)
    if preprocessor is None:
        return np.arange(n_features), {}, None, None
    name = type(model).__name__
    to_original = np.full(n_features, -1, dtype=np.int64)
    for part, _, columns in _column_transformer_parts(preprocessor, name):
        out = preprocessor.output_indices_[part]
        cols = np.asarray(columns)
        idx = np.arange(n_features)[cols] if cols.size else np.zeros(0, np.int64)
        if out.stop - out.start != idx.size:
            raise ValueError(f"{name}: preprocessor part {part!r} maps {idx.size} columns "
                             f"to {out.stop - out.start} outputs")
        to_original[out] = idx
    if np.any(to_original < 0) or np.unique(to_original).size != n_features:
        raise ValueError(f"{name}: its preprocessor does not map {n_features} columns one "
                         "to one")

    encoder = preprocessor.named_transformers_["encoder"]
    out = preprocessor.output_indices_["encoder"]
    encoder_categories = required_attr(encoder, "categories_")
    category_codes = {}
    feature_categories = [None] * n_features
    category_values = [None] * n_features
    for p, cats in zip(range(out.start, out.stop), encoder_categories, strict=True):
        cats = list(cats)
        if cats and _is_nan(cats[-1]):  # missing values are NaN, not a category
            cats = cats[:-1]
        direct = _integer_categories(cats)
        if direct is not None:
            category_codes[p] = direct
            feature_categories[to_original[p]] = list(range(int(direct.max()) + 1)
                                                      if direct.size else [])
        else:
            category_codes[p] = np.arange(len(cats), dtype=np.int64)
            feature_categories[to_original[p]] = cats
            numeric = all(isinstance(c, numbers.Real | np.bool_) for c in cats)
            category_values[to_original[p]] = (np.asarray(cats, dtype=np.float64) if numeric
                                               else np.zeros(0))
    if all(v is None for v in category_values):
        category_values = None
    return to_original, category_codes, feature_categories, category_values


def _integer_categories(cats):
    """The categories as int64 codes if all are integers in [0, MAX_DIRECT_CODE), else None."""
    if not all(isinstance(c, numbers.Real) and not isinstance(c, bool | np.bool_)
               for c in cats):
        return None
    values = np.asarray(cats, dtype=np.float64)
    if values.size and (np.any(values != np.floor(values)) or values.min() < 0
                        or values.max() >= MAX_DIRECT_CODE):
        return None
    return values.astype(np.int64)


def _known_categories(model, category_codes):
    """Per preprocessed categorical column, the encoder positions sklearn calls known."""
    if not category_codes:
        return {}
    bin_mapper = _bin_mapper(model)
    if not hasattr(bin_mapper, "make_known_categories_bitsets"):
        import sklearn

        raise ValueError(f"{type(model).__name__}._bin_mapper has no "
                         f"make_known_categories_bitsets (scikit-learn {sklearn.__version__})")
    bitsets, f_idx_map = bin_mapper.make_known_categories_bitsets()
    known = {}
    for p, codes in category_codes.items():
        positions = np.flatnonzero(_bitset_members(bitsets[f_idx_map[p]]))
        if positions.size and positions.max() >= codes.size:
            raise ValueError(f"{type(model).__name__}: feature {p} knows category position "
                             f"{positions.max()} but its encoder has {codes.size} categories")
        known[p] = positions
    return known


def _categorical_splits(predictor, nodes, known, category_codes):
    """node -> (codes, goes_left, default_left) for every categorical split of one tree."""
    split = np.flatnonzero(nodes["is_categorical"].astype(bool) & ~nodes["is_leaf"].astype(bool))
    if split.size == 0:
        return {}
    bitsets = np.asarray(required_attr(predictor, "raw_left_cat_bitsets"))
    out = {}
    for node in split:
        p = int(nodes["feature_idx"][node])
        if p not in known:
            raise ValueError(f"categorical split on preprocessed feature {p}, which the "
                             "encoder does not list as categorical")
        positions = known[p]
        in_left = _bitset_members(bitsets[int(nodes["bitset_idx"][node])])[positions]
        default_left = bool(nodes["missing_go_to_left"][node])  # unknown = NaN = missing
        out[int(node)] = (category_codes[p][positions], in_left, default_left)
    return out


def _bitset_members(bitset):
    """Boolean membership of codes 0..255 in one 8 x uint32 sklearn bitset."""
    words = np.asarray(bitset, dtype=np.uint32)
    codes = np.arange(32 * words.size)
    return ((words[codes >> 5] >> (codes & 31).astype(np.uint32)) & 1).astype(bool)


def _is_nan(v):
    return isinstance(v, float | np.floating) and v != v


def _column_transformer_parts(preprocessor, name):
    parts = [(part, tr, cols) for part, tr, cols in preprocessor.transformers_
             if not (isinstance(tr, str) and tr == "drop")]
    if "encoder" not in preprocessor.named_transformers_:
        import sklearn

        raise ValueError(f"{name}._preprocessor has no 'encoder' step (scikit-learn "
                         f"{sklearn.__version__})")
    return parts


# ---------------------------------------------------------------- private state
_predictors = private.hgb_predictors
_preprocessor = private.hgb_preprocessor
_bin_mapper = private.hgb_bin_mapper


def _nodes(predictor, owner):
    """Shim: a TreePredictor's ``nodes`` structured array, with every field read here."""
    nodes = required_attr(predictor, "nodes")
    missing = [f for f in NODE_FIELDS if f not in (nodes.dtype.names or ())]
    if missing:
        import sklearn

        raise ValueError(f"{owner}: tree nodes lack the fields {missing} (scikit-learn "
                         f"{sklearn.__version__})")
    return nodes
