"""scikit-learn decision trees and forests -> TreeEnsemble.

Covers DecisionTree / ExtraTree (one tree) and RandomForest / ExtraTrees (averaged
trees), classifiers and regressors with one or several targets (y with K columns:
regression, K outputs, the target vector, like the one-hot class columns of a
classifier; classification, one output per target and class, the concatenation of each
target's class probabilities, ``classes`` labelled "y<j>=<class>" and each target's own
classes kept as ``target_classes``). Facts checked on scikit-learn 1.9:

* routing: see :mod:`treeimp.parsers.sklearn_tree` (``float32(x) <= threshold``, NaN
  follows ``missing_go_to_left``, also for models trained without NaN);
* classifiers: ``tree_.value[:, 0, :]`` holds weighted class FRACTIONS and
  ``predict_proba`` returns them as they are (no renormalisation); the forest's
  ``predict_proba`` is their mean over trees. Binary models have two outputs;
* regressors: ``tree_.value[:, 0, 0]`` is the weighted mean, ``predict`` the mean over
  trees;
* ``weighted_n_node_samples`` counts bootstrap draws times sample weights, and
  ``impurity`` is the in-bag impurity: ``feature_importances_`` is built from them;
* a pandas 'category' column is read by its label VALUES (``np.asarray`` of the column),
  not its codes; labels that are not numbers fail in scikit-learn ("could not convert
  string to float") and raise a ValueError here (``category_as_code=False``). The same
  holds for GradientBoosting and HistGradientBoosting's numeric features.
"""

from __future__ import annotations

import numpy as np

from ..model.ensemble import FOREST, Objective, TreeEnsemble
from .sklearn_tree import check_fitted, read_tree_fields, required_attr, tree_from_fields


def parse_sklearn_forest(model) -> TreeEnsemble:
    """Normal form of a fitted scikit-learn decision tree or tree forest.

    Parameters
    ----------
    model : DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeClassifier,
        ExtraTreeRegressor, RandomForestClassifier, RandomForestRegressor,
        ExtraTreesClassifier or ExtraTreesRegressor
        Fitted on one target (``y`` 1-D) or several (``y`` with K columns).

    Returns
    -------
    TreeEnsemble
        kind "forest": every tree scaled by ``1 / n_trees``. ``predict_raw`` equals
        ``predict_proba`` (classifiers, one column per class, objective
        "class_probability"; several targets: ``np.hstack(predict_proba(X))``) or
        ``predict`` (regressors, one column per target, objective "squared_error").
        ``apply`` equals the model's ``apply``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        (a ValueError) when the model is not fitted.
    ValueError
        For a tree without the fields treeimp reads.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from treeimp.parsers.sklearn_forest import parse_sklearn_forest
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, X[:, 0] > 0)
    >>> ens = parse_sklearn_forest(rf)
    >>> bool(np.allclose(ens.predict_raw(X), rf.predict_proba(X)))
    True
    """
    from sklearn.base import is_classifier

    name = type(model).__name__
    check_fitted(model)
    classifier = is_classifier(model)
    n_targets = int(required_attr(model, "n_outputs_"))
    # a single tree carries tree_ itself, a forest a list of fitted trees
    estimators = [model] if hasattr(model, "tree_") else list(required_attr(model, "estimators_"))
    if not estimators:
        raise ValueError(f"{name} has no fitted trees")

    target_classes = None  # multi-output classifiers: each target's classes
    if classifier and n_targets > 1:
        target_classes = [np.asarray(c) for c in required_attr(model, "classes_")]
        sizes = [len(c) for c in target_classes]
        n_outputs = sum(sizes)
        # one output per (target, class): the concatenation of the targets' probabilities
        classes = np.array([f"y{j}={c}" for j, cl in enumerate(target_classes)
                            for c in cl.tolist()])
        objective = Objective("class_probability", {}, link="proba",
                              source=str(getattr(model, "criterion", "")))
    elif classifier:
        classes = np.asarray(required_attr(model, "classes_"))
        n_outputs = int(required_attr(model, "n_classes_"))
        # class_weight reweights the training rows by class: the node values are
        # class-weighted shares (measures/screening.py screens such forests with ufi)
        weighted = getattr(model, "class_weight", None) is not None
        objective = Objective("class_probability", {"class_weighted": True} if weighted else {},
                              link="proba", source=str(getattr(model, "criterion", "")))
    else:
        classes = None
        n_outputs = n_targets  # multi-output regression: the target vector, one column each
        objective = Objective("squared_error", {}, link="identity",
                              source=str(getattr(model, "criterion", "")))

    scale = 1.0 / len(estimators)
    trees = []
    for t, est in enumerate(estimators):
        fields = read_tree_fields(required_attr(est, "tree_"), f"{name} tree {t}")
        raw = fields["value"]
        if target_classes is not None:
            if raw.ndim != 3 or raw.shape[1] != n_targets or raw.shape[2] < max(sizes):
                raise ValueError(f"{name} tree {t} has node values of shape {raw.shape}, "
                                 f"expected (n_nodes, {n_targets}, {max(sizes)})")
            # target j's class fractions are raw[:, j, :n_classes_j] (zero-padded after)
            value = np.hstack([raw[:, j, :k] for j, k in enumerate(sizes)])
        elif classifier:
            if raw.ndim != 3 or raw.shape[1] != 1 or raw.shape[2] < n_outputs:
                raise ValueError(f"{name} tree {t} has node values of shape {raw.shape}, "
                                 f"expected (n_nodes, 1, {n_outputs})")
            value = raw[:, 0, :n_outputs]
        else:
            if raw.ndim != 3 or raw.shape[1] != n_targets or raw.shape[2] != 1:
                raise ValueError(f"{name} tree {t} has node values of shape {raw.shape}, "
                                 f"expected (n_nodes, {n_targets}, 1)")
            value = raw[:, :, 0]
        trees.append(tree_from_fields(fields, value, scale=scale))

    names = getattr(model, "feature_names_in_", None)
    return TreeEnsemble.from_trees(
        trees,
        kind=FOREST,
        n_features=int(required_attr(model, "n_features_in_")),
        n_outputs=n_outputs,
        comparison="<=",
        round_float32=True,
        objective=objective,
        feature_names=None if names is None else list(names),
        classes=classes,
        category_as_code=False,  # a 'category' column is read by its values, as sklearn does
        library="sklearn",
        gain_kind="impurity",
        impurity_kind=_impurity_kind(classifier, str(getattr(model, "criterion", ""))),
        target_classes=target_classes,
    )


def _impurity_kind(classifier, criterion):
    """What ``tree_.impurity`` is: only squared_error / friedman_mse store the node
    variance; "poisson" stores half the Poisson deviance (values are still means),
    "absolute_error" the mean absolute deviation about the node MEDIAN (values are
    medians). Classification criteria are not variances of the regression forms."""
    if classifier:
        return "other"
    if criterion in ("squared_error", "friedman_mse"):
        return "variance"
    return "median" if criterion == "absolute_error" else "other"

