"""scikit-learn GradientBoostingClassifier / GradientBoostingRegressor -> TreeEnsemble.

Facts checked on scikit-learn 1.9:

* ``estimators_`` is (n_estimators_, K) regression trees, K = 1 for regression and
  binary classification, K = n_classes otherwise; an early-stopped model
  (``n_iter_no_change``) is already trimmed to ``n_estimators_`` rows;
* raw margin (``decision_function`` / regressor ``predict``) =
  ``_raw_predict_init(X) + sum(learning_rate * leaf value)``: the learning rate is NOT
  folded into ``tree_.value``. Leaves hold the loss-specific line-search step, internal
  nodes the plain residual mean (a different scale; the normal form recomputes them);
* routing as every sklearn tree (float32 ``x <= threshold``); GradientBoosting rejects
  NaN, so ``missing_go_to_left`` is never used;
* ``init_`` is "zero", a DummyRegressor (mean, median or alpha-quantile) or a
  DummyClassifier (prior): a margin that is the same for every row. Any other init
  estimator gives a per-row starting margin the normal form cannot hold.
"""

from __future__ import annotations

import numpy as np

from ..model.ensemble import BOOSTING, Objective, TreeEnsemble
from .sklearn_private import gb_init_margin
from .sklearn_tree import check_fitted, read_tree_fields, required_attr, tree_from_fields

SUPPORTED_LOSSES = ("squared_error", "absolute_error", "huber", "quantile", "log_loss",
                    "exponential")


def parse_sklearn_gb(model) -> TreeEnsemble:
    """Normal form of a fitted GradientBoostingClassifier or GradientBoostingRegressor.

    Parameters
    ----------
    model : GradientBoostingClassifier or GradientBoostingRegressor
        Fitted, with ``init`` None, "zero" or a constant Dummy estimator.

    Returns
    -------
    TreeEnsemble
        kind "boosting"; tree (stage i, class k) feeds output k, its leaf values are
        ``learning_rate * tree_.value``. ``predict_raw`` equals ``decision_function``
        (classifiers; one column for binary) or ``predict`` (regressors); ``apply``
        reshaped to (n_rows, n_estimators_, K) equals the model's ``apply``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        (a ValueError) when the model is not fitted.
    ValueError
        For an ``init`` estimator whose prediction depends on the row, an unknown loss,
        or a tree without the fields treeimp reads.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from treeimp.parsers.sklearn_gb import parse_sklearn_gb
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> gb = GradientBoostingRegressor(n_estimators=10).fit(X, X[:, 0])
    >>> ens = parse_sklearn_gb(gb)
    >>> bool(np.allclose(ens.predict_raw(X)[:, 0], gb.predict(X)))
    True
    """
    name = type(model).__name__
    check_fitted(model)
    estimators = np.asarray(required_attr(model, "estimators_"), dtype=object)
    n_stages = int(required_attr(model, "n_estimators_"))
    if estimators.ndim != 2 or estimators.shape[0] != n_stages or estimators.shape[1] < 1:
        raise ValueError(f"{name} has estimators_ of shape {estimators.shape} but "
                         f"n_estimators_ = {n_stages}; expected ({n_stages}, K)")
    n_outputs = estimators.shape[1]
    learning_rate = float(required_attr(model, "learning_rate"))
    classes = getattr(model, "classes_", None)

    trees = []
    for i in range(n_stages):
        for k in range(n_outputs):
            owner = f"{name} stage {i} class {k}"
            fields = read_tree_fields(required_attr(estimators[i, k], "tree_"), owner)
            raw = fields["value"]
            if raw.ndim != 3 or raw.shape[1:] != (1, 1):
                raise ValueError(f"{owner} has node values of shape {raw.shape}, expected "
                                 "(n_nodes, 1, 1)")
            # sklearn adds learning_rate * value; the same float64 product here
            value = learning_rate * raw[:, 0, :].astype(np.float64, copy=False)
            trees.append(tree_from_fields(fields, value, output=k,
                                          learning_rate=learning_rate, stage=i))

    names = getattr(model, "feature_names_in_", None)
    return TreeEnsemble.from_trees(
        trees,
        kind=BOOSTING,
        n_features=int(required_attr(model, "n_features_in_")),
        n_outputs=n_outputs,
        comparison="<=",
        round_float32=True,
        base_score=_init_margin(model, n_outputs),
        objective=_objective(model, n_outputs),
        feature_names=None if names is None else list(names),
        classes=None if classes is None else np.asarray(classes),
        category_as_code=False,  # a 'category' column is read by its values, as sklearn does
        library="sklearn",
        gain_kind="impurity",
    )


def _objective(model, n_outputs) -> Objective:
    """Canonical objective of the model's ``loss``."""
    loss = getattr(model, "loss", None)
    name = type(model).__name__
    if loss == "squared_error":
        return Objective("squared_error", {}, "identity", loss)
    if loss == "absolute_error":
        # scikit-learn's gradient at margin == y is -1 (sklearn._loss.AbsoluteError)
        return Objective("absolute_error", {"tie_gradient": -1.0}, "identity", loss)
    if loss == "huber":  # delta = the alpha-quantile of |residual|, re-estimated per stage
        return Objective("huber_quantile", {"alpha": float(model.alpha)}, "identity", loss)
    if loss == "quantile":
        alpha = float(model.alpha)  # scikit-learn's gradient at margin == y is -alpha
        return Objective("quantile", {"alpha": alpha, "tie_gradient": -alpha}, "identity",
                         loss)
    if loss == "log_loss" and n_outputs == 1:
        return Objective("logistic", {"sigmoid": 1.0, "pos_weight": 1.0}, "sigmoid", loss)
    if loss == "log_loss":
        # the multinomial line search scales its Newton step by (K-1)/K: leaves are
        # -sum g / sum (K/(K-1) p (1-p)), so value / learning_rate is the Newton step of
        # a softmax whose hessian factor is K/(K-1)
        K = int(n_outputs)
        return Objective("softmax", {"n_classes": K, "hess_factor": K / (K - 1)},
                         "softmax", loss)
    if loss == "exponential":
        return Objective("exponential", {}, "sigmoid2", loss)
    raise ValueError(f"{name} has loss={loss!r}; supported losses: "
                     f"{', '.join(SUPPORTED_LOSSES)}")


def _init_margin(model, n_outputs) -> np.ndarray:
    """The starting margin every row gets from ``init_`` (n_outputs values)."""
    from sklearn.dummy import DummyClassifier, DummyRegressor

    name = type(model).__name__
    init = required_attr(model, "init_")
    if isinstance(init, str) and init == "zero":
        return np.zeros(n_outputs)
    constant = (isinstance(init, DummyRegressor)
                or (isinstance(init, DummyClassifier) and init.strategy != "stratified"))
    if not constant:
        raise ValueError(f"{name} was fit with init={init!r}, whose starting prediction "
                         "depends on the row; treeimp supports init=None, 'zero' or a "
                         "DummyRegressor / non-stratified DummyClassifier")
    row = np.zeros((1, int(model.n_features_in_)), dtype=np.float32)
    margin = gb_init_margin(model, row)
    if margin.shape != (1, n_outputs):
        raise ValueError(f"{name}'s starting margin has shape {margin.shape}, expected "
                         f"(1, {n_outputs})")
    return margin[0]
