"""XGBoost -> TreeEnsemble, from a live model or from the model's JSON document.

:func:`parse_xgboost` takes an ``xgboost.Booster`` or a fitted scikit-learn wrapper
(``XGBClassifier``, ``XGBRegressor``, ...), asks it for the bytes of
``save_raw("ubj")`` (on a worker thread of XGBoost's ``nthread=1``, which reads them in
place in XGBoost's buffer, see ``xgb_save.py``) and hands the document to
:func:`parse_xgboost_json`, which never imports xgboost: saved ``.json`` and
``.ubj`` model files (see ``files.py``) go through the same function. For a live
model the trees' node arrays are gathered for all trees at once from the UBJSON bytes
(``xgb_flat.py``) and the trees are built together (:func:`_flat_ensemble`); models
that reader does not take (pruned nodes, vector leaves) are read tree by tree
(:func:`_read_tree`, :func:`_to_tree`), with the same result.

What the document holds (checked on xgboost 3.2.0; see also
``/work/shared/design/model-formats.md``):

* ``learner.gradient_booster``: ``name`` "gbtree" (``model`` inside) or "dart"
  (``gbtree.model`` plus ``weight_drop``, one weight per tree, applied at prediction);
  "gblinear" has no trees. XGBoost 3.3 saves ``booster="dart"`` as "gbtree" with
  ``weight_drop`` next to ``model``, 3.4 (dropout is a gbtree option there) as "gbtree"
  with ``weight_drop`` inside ``model``: the same weights, applied the same way.
* per tree: ``left_children``/``right_children`` (-1 at leaves; a vector-leaf tree's
  leaf keeps its row of ``leaf_weights`` in ``right_children``), ``split_indices``,
  ``split_conditions`` (float32; ``x < t`` goes left after x is rounded to float32; at
  leaves the leaf value, already multiplied by eta), ``default_left`` (where NaN goes),
  ``split_type`` (1 = categorical), ``categories_nodes/segments/sizes`` + ``categories``
  (the codes that go RIGHT; every other non-negative code goes left, unseen and huge
  codes too, a non-integer code is truncated; NaN follows ``default_left``; NEGATIVE
  codes go left like an unlisted code, whatever ``default_left`` says: the nodes carry
  ``NAN_CAT_NEGATIVE_UNLISTED``), ``sum_hessian``
  (cover), ``loss_changes`` (split gain, 0 at leaves), ``base_weights`` (internal
  nodes: the UNshrunk Newton step). Nodes removed
  by pruning (``tree_param.num_deleted``) stay in the arrays but are unreachable; they
  are dropped here, so node indices shift where a tree has deleted nodes.
* ``tree_info[i]``: the output (class / target) tree ``i`` adds to;
  ``iteration_indptr``: trees per boosting round (``n_groups x num_parallel_tree``).
* ``learner_model_param.base_score``: ``'[4.05E-1]'`` (3.x, one value per output) or
  ``'4.05E-1'`` (2.x): on the scale of the prediction for logistic objectives
  (margin = logit) and count:poisson / reg:gamma / reg:tweedie (margin = log); as a
  margin for the others (including binary:logitraw and multi:softprob).

The learning rate is not in the document: :func:`parse_xgboost` reads it from the
booster's ``save_config()`` (divided by ``num_parallel_tree``, as XGBoost applies it);
for a file it is derived from the stored node weights
(``xgb_shrinkage.derive_learning_rate``), with a warning and XGBoost's default 0.3 when
the model does not identify it (e.g. every tree a single leaf). A learning-rate
schedule is recognised from the node weights in both cases. Both happen only when a
measure first reads ``tree_learning_rate`` (``xgb_eta``): parsing does not pay for them.
"""

from __future__ import annotations

import numpy as np

from ..kernels.structure import children_partition
from ..model.ensemble import (
    BOOSTING,
    MAX_FEATURES,
    NAN_CAT_NEGATIVE_UNLISTED,
    NAN_MISSING,
    Objective,
    Tree,
    TreeEnsemble,
)
from ..model.losses import AFT_DISTRIBUTIONS, EXPECTILE_GAP
from ..model.ranking import xgboost_ranking_params
from .ubjson import read_ubjson
from .xgb_arrays import numeric_array
from .xgb_categories import category_sets, stored_categories
from .xgb_eta import XGBoostEta, shrinkage_input
from .xgb_eta import shrinkage_input as _shrinkage_input  # noqa: F401  (tests)
from .xgb_flat import read_model
from .xgb_save import read_saved_model

_TREE_KEYS = (
    "left_children", "right_children", "split_indices", "split_conditions", "default_left",
    "split_type", "sum_hessian", "loss_changes", "base_weights", "categories",
    "categories_nodes", "categories_segments", "categories_sizes", "tree_param",
)


def _identity(b):
    return b


_PROB_EPS = np.float32(1e-6)  # XGBoost's kRtEps: base_score is clipped to [eps, 1 - eps]


def _logit(p):
    """XGBoost's ProbToMargin: in float32, after clipping the probability to
    [1e-6, 1 - 1e-6] (xgboost 3.2: base_score 1e-300 and 0 give the margin of 1e-6;
    float64 arithmetic does not give XGBoost's margin near 0 and 1)."""
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"XGBoost base_score {p} must be a probability in [0, 1] for a "
                         "logistic objective")
    p32 = np.clip(np.asarray(p, np.float32), _PROB_EPS, np.float32(1) - _PROB_EPS)
    return (-np.log(np.float32(1) / p32 - np.float32(1))).astype(np.float64)


def _log(mean):
    if np.any(mean <= 0):
        raise ValueError(f"XGBoost base_score {mean} must be > 0 for a log-link objective")
    return np.log(mean)


def _param(obj, group, key, version):
    return float(_get(obj, (group, key), version, where="learner.objective"))


def _logistic(obj, version):
    return {"sigmoid": 1.0, "pos_weight": _param(obj, "reg_loss_param", "scale_pos_weight",
                                                 version)}


def _softmax(obj, version):
    k = int(_param(obj, "softmax_multiclass_param", "num_class", version))
    return {"n_classes": k, "hess_factor": 2.0}


def _aft(obj, version):
    group = "aft_loss_param"
    dist = _get(obj, (group, "aft_loss_distribution"), version, where="learner.objective")
    if dist not in AFT_DISTRIBUTIONS:
        raise ValueError(f"XGBoost survival:aft aft_loss_distribution {dist!r} is not one of "
                         f"{list(AFT_DISTRIBUTIONS)}")
    return {"distribution": AFT_DISTRIBUTIONS.index(dist),
            # a float32 in XGBoost, saved as decimal text ('6.00000024E-1')
            "sigma": float(np.float32(_param(obj, group, "aft_loss_distribution_scale",
                                             version)))}


# XGBoost objective -> (canonical name, params from the objective JSON, link, base->margin)
_OBJECTIVES = {
    "reg:squarederror": ("squared_error", None, "identity", _identity),
    "reg:pseudohubererror": (
        "pseudo_huber",
        lambda o, v: {"slope": _param(o, "pseudo_huber_param", "huber_slope", v)},
        "identity", _identity),
    "reg:logistic": ("logistic", _logistic, "sigmoid", _logit),
    "binary:logistic": ("logistic", _logistic, "sigmoid", _logit),
    "binary:logitraw": ("logistic", _logistic, "sigmoid", _identity),
    "multi:softprob": ("softmax", _softmax, "softmax", _identity),
    "multi:softmax": ("softmax", _softmax, "softmax", _identity),
    "count:poisson": (
        "poisson",
        lambda o, v: {"max_delta_step": _param(o, "poisson_regression_param",
                                               "max_delta_step", v)},
        "exp", _log),
    "reg:gamma": ("gamma", None, "exp", _log),
    "reg:tweedie": (
        "tweedie",
        lambda o, v: {"variance_power": _param(o, "tweedie_regression_param",
                                               "tweedie_variance_power", v)},
        "exp", _log),
    "reg:squaredlogerror": ("squared_log_error", None, "identity", _identity),
    "survival:aft": ("aft", _aft, "exp", _log),
    "survival:cox": ("cox", None, "exp", _log),
}

# objectives whose form depends on the XGBoost version (:func:`_versioned_objective`)
_VERSIONED = ("reg:absoluteerror", "reg:quantileerror", "reg:expectileerror")
# learning-to-rank objectives (treeimp/model/ranking.py): XGBoost -> canonical name
_RANKING = {"rank:ndcg": "rank_ndcg", "rank:pairwise": "rank_pairwise", "rank:map": "rank_map"}
SUPPORTED_OBJECTIVES = tuple(sorted((*_OBJECTIVES, *_VERSIONED, *_RANKING)))
# canonical objectives whose leaf values XGBoost (< 3.4) refits after growing a tree
# (residual quantiles)
_ADAPTIVE_LEAVES = ("absolute_error", "quantile", "quantiles")
# XGBoost 3.4 replaced the refitted sign gradients of absolute error and quantile loss by
# a smoothed surrogate scaled by all training residuals (treeimp/model/losses.py)
_SMOOTHED_SINCE = (3, 4)


def parse_xgboost(model) -> TreeEnsemble:
    """Normal form of a fitted XGBoost model.

    Parameters
    ----------
    model : xgboost.Booster or xgboost.XGBModel
        A trained booster, or a fitted scikit-learn wrapper (``XGBClassifier``,
        ``XGBRegressor``, ...; its ``classes_`` are kept).

    Returns
    -------
    TreeEnsemble
        Every tree: ``predict_raw`` equals ``booster.predict(DMatrix(X),
        output_margin=True)`` up to XGBoost's float32 summation. :func:`treeimp.parse`
        keeps a wrapper's ``best_iteration + 1`` rounds and its ``missing``, as the
        wrapper's predict does.

    Examples
    --------
    >>> import numpy as np, xgboost as xgb
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X[:, 0] > 0
    >>> ens = parse_xgboost(xgb.XGBClassifier(n_estimators=5, max_depth=2).fit(X, y))
    >>> ens.n_trees, ens.objective.name
    (5, 'logistic')
    """
    import xgboost

    classes = None
    if isinstance(model, xgboost.XGBModel):
        from sklearn.exceptions import NotFittedError

        try:
            booster = model.get_booster()
        except NotFittedError:
            raise NotFittedError(f"this {type(model).__name__} is not fitted yet; call fit() "
                                 "before explaining it") from None
        classes = getattr(model, "classes_", None)
    elif isinstance(model, xgboost.Booster):
        booster = model
    else:
        raise TypeError(f"expected an xgboost.Booster or XGBModel, got {type(model).__name__}")
    # UBJSON, not JSON: its typed arrays are gathered for all trees at once

    try:
        # on a worker thread, all trees at once (see xgb_save.py); got None: a layout the
        # per-tree path reads, from raw
        got, raw, config = read_saved_model(booster, read_model)
    except xgboost.core.XGBoostError as exc:
        # XGBoost's first line without its "[time] file:line: " prefix and stack trace
        reason = str(exc).split("\n", 1)[0].split(": ", 1)[-1].strip()
        if "0 feature is supplied" in reason:  # xgboost.Booster() never trained or loaded
            raise ValueError(f"this xgboost.Booster is empty (unfitted): XGBoost cannot save "
                             f"it ({reason}). Train it with xgboost.train or load a saved "
                             "model into it before explaining it") from None
        raise ValueError(f"XGBoost cannot save this booster: {reason}") from None
    eta, regularization = _config_shrinkage(config, xgboost.__version__)
    if got is None:
        return parse_xgboost_json(read_ubjson(raw), learning_rate=eta, classes=classes,
                                  regularization=regularization)
    doc, flat = got
    return parse_xgboost_json(doc, learning_rate=eta, classes=classes,
                              regularization=regularization, flat_trees=flat)


def _config_shrinkage(config, version):
    """(eta, (lambda, alpha)) of a live booster's configuration; (None, None) for
    gblinear."""
    gb = _get(config, ("learner", "gradient_booster"), version, where="config")
    name = _get(gb, ("name",), version, where="config.learner.gradient_booster")
    if name == "dart":
        gb = _get(gb, ("gbtree",), version, where="config.learner.gradient_booster")
    if name == "gblinear":
        return None, None
    param = _get(gb, ("tree_train_param",), version, where="config.learner.gradient_booster")
    eta = float(_get(param, ("eta",), version, where="tree_train_param"))
    try:
        regularization = (float(param["lambda"]), float(param["alpha"]))
    except (KeyError, TypeError, ValueError):
        regularization = None  # then the node weights decide whether eta was constant
    return eta, regularization


def parse_xgboost_json(doc: dict, *, learning_rate=None, classes=None,
                       regularization=None, flat_trees=None) -> TreeEnsemble:
    """Normal form from XGBoost's model document (``json.loads(save_raw("json"))``).

    Parameters
    ----------
    doc : dict
        The decoded model (JSON or UBJSON; typed UBJSON arrays may be numpy arrays).
    learning_rate : float, optional
        The booster's configured eta (each tree is shrunk by ``eta / num_parallel_tree``,
        as XGBoost does). When None the per-tree shrinkage is derived from the stored
        node weights (see ``xgb_shrinkage``); if that is impossible a warning is issued
        and XGBoost's default 0.3 is used. When the node weights show a learning-rate
        schedule (``LearningRateScheduler``: the config keeps only the last eta), the
        derived per-tree values are used either way.
    classes : array-like, optional
        Class labels to attach (the scikit-learn wrapper's ``classes_``).
    regularization : (lambda, alpha), optional
        The booster's configured L2 and L1 terms. With ``learning_rate``, when this
        constant eta fits the stored node weights (see ``xgb_shrinkage``) the costly
        search for a learning-rate schedule is skipped.
    flat_trees : xgb_flat.FlatTrees, optional
        The document's trees already gathered (``xgb_flat.read_model``, whose document
        has no ``trees`` list); the result is the same as from the per-tree path.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        Unsupported objective or booster, missing keys, inconsistent arrays.
    """
    if not isinstance(doc, dict):
        raise ValueError(f"an XGBoost model document is a JSON object, got {type(doc).__name__}")
    version = _version(doc)
    learner = _get(doc, ("learner",), version)
    gb = _get(learner, ("gradient_booster",), version, where="learner")
    booster_name = _get(gb, ("name",), version, where="learner.gradient_booster")
    weight_drop = None
    if booster_name == "gbtree":
        model = _get(gb, ("model",), version, where="learner.gradient_booster")
        # XGBoost 3.3 stores booster="dart" as a gbtree with the weights next to its
        # model, 3.4 (dropout is a gbtree option) inside it
        if "weight_drop" in gb:
            weight_drop = _weight_drop(gb["weight_drop"], "weight_drop")
        elif isinstance(model, dict) and "weight_drop" in model:
            weight_drop = _weight_drop(model["weight_drop"], "model.weight_drop")
    elif booster_name == "dart":
        model = _get(gb, ("gbtree", "model"), version, where="learner.gradient_booster")
        weight_drop = _weight_drop(_get(gb, ("weight_drop",), version,
                                        where="learner.gradient_booster"), "weight_drop")
    elif booster_name == "gblinear":
        raise ValueError("XGBoost booster='gblinear' is a linear model, not a tree ensemble; "
                         "treeimp explains tree boosters ('gbtree', 'dart')")
    else:
        raise ValueError(f"unknown XGBoost booster {booster_name!r} (XGBoost {version}); "
                         "supported: 'gbtree', 'dart'")

    objective, to_margin = _objective(learner, version)
    mparam = _get(learner, ("learner_model_param",), version, where="learner")
    n_features = _size(mparam, "num_feature", version, MAX_FEATURES)
    num_class = _size(mparam, "num_class", version, MAX_FEATURES, low=0)
    num_target = _size(mparam, "num_target", version, MAX_FEATURES, default=1)
    n_outputs = max(num_class, num_target, 1)
    base_margin = np.float32(to_margin(_base_score(
        _get(mparam, ("base_score",), version, where="learner_model_param"))))
    if objective.name == "softmax" and objective.params["n_classes"] != n_outputs:
        raise ValueError(f"XGBoost objective has num_class={objective.params['n_classes']} "
                         f"but the model has {n_outputs} outputs")
    levels = objective.params.get("alphas", objective.params.get("alpha"))
    if levels is not None and np.size(levels) != n_outputs:
        raise ValueError(f"XGBoost {objective.source} has {np.size(levels)} levels "
                         f"{list(np.atleast_1d(levels))[:10]} but the model has {n_outputs} "
                         "outputs (one per level)")
    if base_margin.size not in (1, n_outputs):
        raise ValueError(f"XGBoost base_score has {base_margin.size} values for "
                         f"{n_outputs} outputs (version {version})")

    jtrees = _get(model, ("trees",), version, where="gradient_booster.model")
    if flat_trees is None and not isinstance(jtrees, list):
        raise ValueError(f"XGBoost gradient_booster.model.trees must be a list of trees, got "
                         f"{type(jtrees).__name__} (version {version})")
    n_trees = len(jtrees) if flat_trees is None else flat_trees.n_trees
    tree_info = numeric_array(
        _get(model, ("tree_info",), version, where="gradient_booster.model"), "tree_info",
        np.int64)
    if tree_info.shape != (n_trees,):
        raise ValueError(f"XGBoost model has {n_trees} trees but tree_info has "
                         f"{tree_info.size} entries")
    if n_trees == 0:
        raise ValueError("the XGBoost model has no trees (was it trained for 0 rounds?)")
    num_trees = model.get("gbtree_model_param", {}).get("num_trees") if isinstance(
        model.get("gbtree_model_param"), dict) else None
    if num_trees is not None and str(num_trees).strip() != str(n_trees):
        # XGBoost refuses the file (gbtree_model.cc: trees_json.size() == num_trees)
        raise ValueError(f"XGBoost gbtree_model_param.num_trees is {num_trees} but the model "
                         f"has {n_trees} trees (version {version})")
    stages = _stages(model, n_trees, n_outputs, version)
    if weight_drop is not None and weight_drop.shape != (n_trees,):
        raise ValueError(f"XGBoost DART model has {n_trees} trees but {weight_drop.size} "
                         "weight_drop entries")

    if flat_trees is None:
        raw = [_read_tree(jt, i, version) for i, jt in enumerate(jtrees)]
        widest = max(r["base_weights"].shape[1] for r in raw)
    else:
        raw, widest = flat_trees, 1
    if n_outputs > n_trees * widest:  # also keeps a corrupt num_class from allocating
        raise ValueError(f"XGBoost model has {n_outputs} outputs but only {n_trees} trees "
                         f"of width {widest} (version {version})")
    if np.any(tree_info < 0) or np.any(tree_info >= n_outputs):
        raise ValueError(f"XGBoost tree_info has outputs outside 0..{n_outputs - 1}")
    adaptive = objective.name in _ADAPTIVE_LEAVES
    npt = _num_parallel_tree(model, version)
    # resolved when a measure first reads tree_learning_rate (xgb_eta)
    eta = XGBoostEta(shrinkage_input(raw, adaptive), n_trees=n_trees, num_parallel_tree=npt,
                     learning_rate=learning_rate, regularization=regularization)

    names, categorical = _features(learner, n_features, version)
    meta = dict(
        kind=BOOSTING,
        n_features=n_features,
        n_outputs=n_outputs,
        comparison="<",
        round_float32=True,
        base_score=base_margin,
        objective=objective,
        feature_names=names,
        feature_categories=stored_categories(model, categorical, n_features, version),
        classes=classes,
        library="xgboost",
        sparse_absent=np.nan,  # XGBoost reads an absent sparse entry as missing
        offset_replaces_base=True,  # predict(base_margin=b) is b + trees
        gain_kind="gain",
    )
    if flat_trees is not None:
        return _flat_ensemble(flat_trees, tree_info, eta, stages, weight_drop, meta)
    trees = []
    for i, r in enumerate(raw):
        k = r["base_weights"].shape[1]
        output = 0 if k > 1 else int(tree_info[i])
        if k > 1 and k != n_outputs:
            raise ValueError(f"XGBoost tree {i} has leaf vectors of size {k} but the model "
                             f"has {n_outputs} outputs")
        trees.append(_to_tree(r, output=output, stage=int(stages[i]),
                              scale=1.0 if weight_drop is None else float(weight_drop[i])))
    return TreeEnsemble.from_trees(trees, tree_learning_rate=eta, **meta)


def _flat_ensemble(flat, tree_info, eta, stages, weight_drop, meta):
    """The normal form of trees gathered by ``xgb_flat`` (one output each): the arrays
    :func:`_to_tree` would give every tree, built for all trees at once; ``eta``: the
    per-tree learning rates or their lazy source."""
    internal = flat.left >= 0
    split = internal
    nan_mode = np.zeros(internal.size, np.uint8)
    if any(flat.categories):
        cat_nodes = np.zeros(internal.size, dtype=bool)
        for t, table in enumerate(flat.categories):
            cat_nodes[flat.offsets[t] + np.array(list(table), dtype=np.int64)] = True
        split = internal & ~cat_nodes
        # XGBoost: NaN follows default_left, a negative code is an unlisted category
        nan_mode[cat_nodes] = NAN_CAT_NEGATIVE_UNLISTED
    fields = {
        "left": flat.left,
        # as read: negative at leaves (the reader checked it), which from_arrays reads
        # as a leaf; it takes the normal form from flat.ordered
        "right": flat.right,
        "feature": flat.feature,
        # float64 arrays filled in place (no float64 copy of all nodes first)
        "threshold": _where_into(np.zeros(internal.size), split, flat.cond),
        "missing_left": flat.default_left & internal,
        "nan_mode": nan_mode,
        "weight": flat.weight,
        "impurity": np.full(internal.size, np.nan),
        "gain": _where_into(np.full(internal.size, np.nan), internal, flat.gain),
        "value": flat.filled,  # internal nodes' values filled with the post-order
        "cover": np.full(internal.size, np.nan),  # TreeSHAP weighs by weight, as XGBoost
    }
    return TreeEnsemble.from_arrays(
        flat.offsets, fields, flat.categories, ordered=flat.ordered,
        ordered_values=flat.ordered_values,
        tree_output=tree_info.astype(np.int32),
        tree_scale=(np.ones(flat.n_trees) if weight_drop is None
                    else weight_drop.astype(np.float64)),
        tree_learning_rate=eta,
        tree_stage=np.asarray(stages, np.int64), **meta)


def _where_into(out, mask, values):
    """``out`` with ``values`` (converted exactly, float32 -> float64) where ``mask``:
    ``np.where(mask, values.astype(out.dtype), out)`` without the converted copy."""
    np.copyto(out, values, where=mask)
    return out


# ---------------------------------------------------------------------- document parts
def _weight_drop(values, where):
    """DART's per-tree weights (XGBoost multiplies each tree's leaf values by its
    weight when it predicts) as float64, checked to be finite numbers."""
    try:
        w = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"XGBoost gradient_booster.{where} must be a list of numbers") \
            from None
    if w.ndim != 1 or not np.all(np.isfinite(w)):
        raise ValueError(f"XGBoost gradient_booster.{where} must be a list of finite "
                         f"numbers, got shape {w.shape}")
    return w


def stored_best_iteration(doc):
    """``learner.attributes.best_iteration`` of a model document (early stopping), or
    None."""
    attrs = doc.get("learner", {}).get("attributes", {}) if isinstance(doc, dict) else {}
    best = attrs.get("best_iteration") if isinstance(attrs, dict) else None
    try:
        return None if best is None else int(best)
    except (TypeError, ValueError):
        return None


def _version(doc):
    v = doc.get("version")
    try:
        return ".".join(str(int(x)) for x in v)
    except (TypeError, ValueError):
        return "unknown"


def _size(mparam, key, version, high, *, low=1, default=None):
    """A count from learner_model_param (stored as a string), checked to lie in
    [low, high] before anything is sized by it."""
    text = mparam.get(key, default) if default is not None else _get(
        mparam, (key,), version, where="learner_model_param")
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"XGBoost learner_model_param.{key} is {text!r}, not an integer "
                         f"(version {version})") from None
    if not low <= value <= high:
        raise ValueError(f"XGBoost learner_model_param.{key} is {value}; expected "
                         f"{low}..{high} (corrupt model file? version {version})")
    return value


def _num_parallel_tree(model, version):
    """``gbtree_model_param.num_parallel_tree`` (XGBoost writes it as a string) as an
    int."""
    value = _get(model, ("gbtree_model_param", "num_parallel_tree"), version,
                 where="gradient_booster.model")
    try:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"XGBoost gbtree_model_param.num_parallel_tree is "
                         f"{str(value)[:40]!r}, not an integer (version {version})") from None


def _get(d, path, version, *, where="model"):
    cur = d
    for i, key in enumerate(path):
        if not isinstance(cur, dict) or key not in cur:
            full = ".".join((where,) + tuple(path[: i + 1]))
            raise ValueError(f"XGBoost model (version {version}) has no key {full!r}; "
                             "is this an XGBoost >= 2.0 model saved as JSON/UBJSON?")
        cur = cur[key]
    return cur


def _objective(learner, version):
    obj = _get(learner, ("objective",), version, where="learner")
    name = _get(obj, ("name",), version, where="learner.objective")
    if not isinstance(name, str):
        raise ValueError(f"XGBoost objective {name!r} is not supported; supported objectives: "
                         f"{', '.join(SUPPORTED_OBJECTIVES)}")
    if name in _VERSIONED:
        return _versioned_objective(name, obj, version)
    if name in _RANKING:
        lp = _get(obj, ("lambdarank_param",), version, where="learner.objective")
        if not isinstance(lp, dict):
            raise ValueError(f"XGBoost {name} lambdarank_param must be an object, got "
                             f"{type(lp).__name__} (version {version})")
        return (Objective(_RANKING[name], xgboost_ranking_params(lp, name), "identity",
                          source=name), _identity)
    if name not in _OBJECTIVES:
        raise ValueError(f"XGBoost objective {name!r} is not supported; supported objectives: "
                         f"{', '.join(SUPPORTED_OBJECTIVES)}")
    canonical, params, link, to_margin = _OBJECTIVES[name]
    return (Objective(canonical, {} if params is None else params(obj, version), link,
                      source=name), to_margin)


def _version_tuple(version):
    try:
        return tuple(int(x) for x in version.split("."))
    except ValueError:
        return None


def _levels(obj, group, key, version):
    """The quantile / expectile levels of the objective ('[3E-1]', '[2E-1,8E-1]' or
    '0.3'), each checked to lie in (0, 1)."""
    text = _get(obj, (group, key), version, where="learner.objective")
    s = str(text).strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    try:
        levels = [float(x) for x in s.split(",")]
    except ValueError:
        raise ValueError(f"cannot read XGBoost {group}.{key} {text!r} (version {version})") \
            from None
    if not levels or not all(0.0 < a < 1.0 for a in levels):
        raise ValueError(f"XGBoost {group}.{key} {text!r} must hold levels in (0, 1) "
                         f"(version {version})")
    return levels


def _softplus_inverse(x):
    if np.any(x <= 0):
        raise ValueError(f"XGBoost expectile base_score steps {x} must be > 1e-6 (the "
                         "levels must increase)")
    return x + np.log(-np.expm1(-x))


def _expectile_margin(base):
    """XGBoost's expectile base_score (the levels, increasing) -> margins: the first
    level, then the softplus inverse of each step minus the 1e-6 gap."""
    b = np.asarray(base, dtype=np.float32)
    out = b.astype(np.float64)
    if b.size > 1:
        steps = (b[1:] - b[:-1] - np.float32(EXPECTILE_GAP)).astype(np.float64)
        out[1:] = _softplus_inverse(steps)
    return out


def _versioned_objective(name, obj, version):
    """(Objective, base->margin) of reg:absoluteerror / reg:quantileerror (sign
    gradients and refitted leaves before XGBoost 3.4, a smoothed surrogate since: see
    treeimp/model/losses.py; an unknown version counts as new) and reg:expectileerror."""
    v = _version_tuple(version)
    smoothed = v is None or v >= _SMOOTHED_SINCE
    if name == "reg:expectileerror":
        alphas = _levels(obj, "expectile_loss_param", "expectile_alpha", version)
        return (Objective("expectile_stack", {"alphas": tuple(alphas)}, "expectile_stack",
                          source=name), _expectile_margin)
    if name == "reg:absoluteerror":
        canonical = "smoothed_absolute_error" if smoothed else "absolute_error"
        return Objective(canonical, {}, "identity", source=name), _identity
    alphas = _levels(obj, "quantile_loss_param", "quantile_alpha", version)
    if smoothed:  # 3.4 also sorts each row's predicted quantiles
        return (Objective("smoothed_quantile", {"alphas": tuple(alphas)}, "sorted",
                          source=name), _identity)
    if len(alphas) == 1:
        canonical, params = "quantile", {"alpha": alphas[0]}
    else:
        canonical, params = "quantiles", {"alphas": tuple(alphas)}
    return Objective(canonical, params, "identity", source=name), _identity


def _base_score(text):
    """'[4.05E-1]' (3.x, maybe several values) or '4.05E-1' (2.x) -> float64 array."""
    if isinstance(text, (int, float)):
        return np.array([float(text)])
    s = str(text).strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    try:
        values = np.array([float(x) for x in s.split(",")], dtype=np.float64)
    except ValueError:
        raise ValueError(f"cannot read XGBoost base_score {text!r}") from None
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError(f"XGBoost base_score {text!r} is not a finite number")
    return values


def _stages(model, n_trees, n_outputs, version):
    indptr = model.get("iteration_indptr")
    if indptr is None:  # older documents: every round adds n_groups x num_parallel_tree
        npt = _num_parallel_tree(model, version)
        per_round = max(1, npt * n_outputs)
        return np.arange(n_trees) // per_round
    indptr = numeric_array(indptr, "iteration_indptr", np.int64)
    if indptr.size < 1 or indptr[0] != 0 or indptr[-1] != n_trees \
            or np.any(np.diff(indptr) < 0):
        raise ValueError(f"XGBoost iteration_indptr {indptr[:10].tolist()} does not cover "
                         f"the model's {n_trees} trees")
    return np.repeat(np.arange(indptr.size - 1), np.diff(indptr))


def _features(learner, n_features, version):
    names = learner.get("feature_names", []) or []
    types = learner.get("feature_types", []) or []
    if not isinstance(names, list) or not isinstance(types, list):
        raise ValueError(f"XGBoost learner.feature_names / feature_types must be lists, got "
                         f"{type(names).__name__} / {type(types).__name__} (version {version})")
    if names and len(names) != n_features:
        raise ValueError(f"XGBoost model has {len(names)} feature names for {n_features} "
                         f"features (version {version})")
    if types and len(types) != n_features:
        raise ValueError(f"XGBoost model has {len(types)} feature types for {n_features} "
                         f"features (version {version})")
    # no per-feature list without feature types: num_feature alone sizes nothing
    categorical = [t == "c" for t in types] if types else None
    return (names or None), categorical


# ---------------------------------------------------------------------- trees
def _read_tree(jt, i, version):
    if not isinstance(jt, dict):
        raise ValueError(f"XGBoost tree {i} is not a JSON object")
    for key in _TREE_KEYS:
        if key not in jt:
            raise ValueError(f"XGBoost tree {i} has no key {key!r} (version {version}); "
                             f"expected keys: {', '.join(_TREE_KEYS)}")
    left = numeric_array(jt["left_children"], f"tree {i}: 'left_children'", np.int64)
    n = left.size
    _check_tree_counts(jt, i, n)
    k = int(jt["tree_param"].get("size_leaf_vector", 1) or 1)
    k = max(k, 1)
    r = {"left": left}
    for key, name, dtype in (("right_children", "right", np.int64),
                             ("split_indices", "feature", np.int64),
                             ("split_conditions", "cond", np.float32),
                             ("default_left", "default_left", np.bool_),
                             ("split_type", "split_type", np.int64),
                             ("sum_hessian", "hess", np.float32),
                             ("loss_changes", "gain", np.float32)):
        a = numeric_array(jt[key], f"tree {i}: {key!r}")
        if key in _FLAG_KEYS:
            _check_flags(a, key, i)
        a = numeric_array(a, f"tree {i}: {key!r}", dtype)  # UBJSON arrays: often no copy
        if a.shape != (n,):
            raise ValueError(f"XGBoost tree {i}: {key!r} has {a.size} entries for {n} nodes")
        r[name] = a
    bw = numeric_array(jt["base_weights"], f"tree {i}: 'base_weights'", np.float32)
    if bw.size != n * k:
        raise ValueError(f"XGBoost tree {i}: base_weights has {bw.size} entries, expected "
                         f"{n} nodes x {k}")
    leaf = left < 0
    if k > 1:
        lw = np.asarray(_get(jt, ("leaf_weights",), version, where=f"tree {i}"),
                        dtype=np.float32)
        rows = r["right"][leaf]
        if lw.size % k or np.any(rows < 0) or np.any(rows >= lw.size // k):
            raise ValueError(f"XGBoost tree {i}: leaf rows {rows[:5].tolist()} do not index "
                             f"its {lw.size // k} leaf vectors")
        value = np.zeros((n, k), dtype=np.float32)
        value[leaf] = lw.reshape(-1, k)[rows]
        r["right"] = np.where(leaf, -1, r["right"])
    else:
        value = np.where(leaf, r["cond"], np.float32(0.0))[:, None]
    r["value"] = value
    r["base_weights"] = bw.reshape(n, k)
    r["categories"] = category_sets(jt, r, i)
    return _drop_unreachable(r, i)


def _check_tree_counts(jt, i, n):
    """A tree's ``id`` and ``tree_param.num_nodes`` agree with its position and its
    arrays: XGBoost places a tree by its id (a repeated id crashes it, one past the trees
    is refused) and refuses arrays whose length is not num_nodes."""
    tid = jt.get("id", i)
    if isinstance(tid, bool) or not isinstance(tid, (int, np.integer)) or tid != i:
        raise ValueError(f"XGBoost tree {i} has id {tid!r}; XGBoost places each tree by its "
                         f"id, which must be its position {i}")
    param = jt["tree_param"]
    if not isinstance(param, dict):
        raise ValueError(f"XGBoost tree {i}: tree_param must be an object, got "
                         f"{type(param).__name__}")
    num_nodes = param.get("num_nodes")
    if num_nodes is not None and str(num_nodes).strip() != str(n):
        raise ValueError(f"XGBoost tree {i}: tree_param.num_nodes is {num_nodes} but "
                         f"left_children has {n} entries")


def _check_flags(a, key, i):
    """A 0/1 field holds only 0 and 1 (or booleans): any other value is a damaged file,
    not something to guess the meaning of."""
    if a.dtype == np.bool_:
        return
    if a.dtype == object or a.dtype.kind not in "iuf":
        raise ValueError(f"XGBoost tree {i}: {key!r} must hold 0/1 flags, got "
                         f"{a.dtype} values")
    bad = (a != 0) & (a != 1)
    if bad.any():
        k = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"XGBoost tree {i}: {key!r} must be 0 or 1, but node {k} has "
                         f"{a.ravel()[k].item()!r}")


# per-node fields XGBoost writes as 0/1: where NaN goes, numeric (0) or categorical (1)
_FLAG_KEYS = ("default_left", "split_type")


def _drop_unreachable(r, i):
    """Remove nodes deleted by pruning (kept in the arrays, unreachable from the root)."""
    left, right = r["left"], r["right"]
    n = left.size
    if children_partition(left, right):
        # every node but the root has exactly one parent: nothing was pruned (a cycle
        # would also pass here; TreeEnsemble.from_trees rejects those)
        return r
    seen = np.zeros(n, dtype=bool)
    stack = [0]
    while stack:
        node = stack.pop()
        if not 0 <= node < n or seen[node]:
            raise ValueError(f"XGBoost tree {i}: node {node} is out of range or reached "
                             "twice (corrupt tree)")
        seen[node] = True
        if left[node] >= 0:
            stack.extend((int(left[node]), int(right[node])))
    if seen.all():
        return r
    keep = np.flatnonzero(seen)
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[keep] = np.arange(keep.size)
    out = {}
    for key, a in r.items():
        out[key] = a if key == "categories" else a[keep]
    for key in ("left", "right"):
        out[key] = np.where(out[key] >= 0, new_id[np.maximum(out[key], 0)], -1)
    out["categories"] = {int(new_id[node]): v for node, v in r["categories"].items()}
    return out


def _to_tree(r, *, output, stage, scale):
    """A normal-form :class:`Tree` of one tree read by :func:`_read_tree`; arrays that
    from_trees converts anyway (left, feature, value, cover) are passed as read."""
    internal = r["left"] >= 0
    split = internal
    if r["categories"]:
        cat_nodes = np.zeros(internal.size, dtype=bool)
        cat_nodes[list(r["categories"])] = True
        split = internal & ~cat_nodes
    return Tree(
        left=r["left"],
        right=np.where(internal, r["right"], -1),
        feature=r["feature"],
        threshold=np.where(split, r["cond"].astype(np.float64), 0.0),
        value=r["value"],
        weight=r["hess"],
        missing_left=r["default_left"] & internal,
        # XGBoost: NaN follows default_left, a negative code is an unlisted category
        nan_mode=(np.where(cat_nodes, NAN_CAT_NEGATIVE_UNLISTED, NAN_MISSING)
                  if r["categories"] else None),
        gain=np.where(internal, r["gain"].astype(np.float64), np.nan),
        categories=r["categories"],
        output=output,
        scale=scale,
        stage=stage,
    )
