"""scikit-learn BaggingClassifier / BaggingRegressor of decision trees -> TreeEnsemble.

Facts checked on scikit-learn 1.9 (``sklearn.ensemble._bagging``):

* tree ``t`` was fit on the columns ``estimators_features_[t]`` of X, in that order (not
  sorted; with ``bootstrap_features`` a column may repeat): its local feature ``k`` is
  the original column ``estimators_features_[t][k]``, remapped here so the normal form
  reads X itself;
* ``predict_proba`` sums each tree's ``predict_proba`` into the columns of the tree's own
  ``classes_`` (class indices: a tree whose rows missed a class has fewer) and divides
  by the number of trees; ``predict`` (regressor) is the mean of the trees' predictions;
* the rows of tree ``t`` are ``estimators_samples_[t]`` (out-of-bag: the others).
"""

from __future__ import annotations

import numpy as np

from ..model.ensemble import FOREST, Objective, TreeEnsemble
from .sklearn_forest import _impurity_kind
from .sklearn_tree import check_fitted, read_tree_fields, required_attr, tree_from_fields


def parse_sklearn_bagging(model) -> TreeEnsemble:
    """Normal form of a fitted BaggingClassifier / BaggingRegressor whose estimators are
    scikit-learn decision trees (DecisionTree* or ExtraTree*).

    ``predict_raw`` equals ``predict_proba`` (classifier) or ``predict`` (regressor).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import BaggingRegressor
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from treeimp.parsers.sklearn_bagging import parse_sklearn_bagging
    >>> X = np.random.default_rng(0).normal(size=(100, 4))
    >>> bag = BaggingRegressor(DecisionTreeRegressor(), n_estimators=5, max_features=2,
    ...                        random_state=0).fit(X, X[:, 0])
    >>> bool(np.allclose(parse_sklearn_bagging(bag).predict_raw(X)[:, 0], bag.predict(X)))
    True
    """
    from sklearn.base import is_classifier
    from sklearn.tree import BaseDecisionTree

    name = type(model).__name__
    check_fitted(model)
    estimators = list(required_attr(model, "estimators_"))
    features = list(required_attr(model, "estimators_features_"))
    if not estimators:
        raise ValueError(f"{name} has no fitted estimators")
    if len(features) != len(estimators):
        raise ValueError(f"{name} has {len(estimators)} estimators but feature subsets for "
                         f"{len(features)}")
    for t, est in enumerate(estimators):
        if not isinstance(est, BaseDecisionTree):
            raise TypeError(f"{name} estimator {t} is a {type(est).__name__}; treeimp "
                            "explains Bagging of scikit-learn decision trees only")
        if int(getattr(est, "n_outputs_", 1)) != 1:
            raise ValueError(f"{name} was fit on several targets; treeimp explains "
                             "single-target Bagging models")
    n_features = int(required_attr(model, "n_features_in_"))
    classifier = is_classifier(model)
    if classifier:
        classes = np.asarray(required_attr(model, "classes_"))
        n_outputs = int(required_attr(model, "n_classes_"))
        objective = Objective("class_probability", {}, link="proba", source="bagging")
    else:
        classes, n_outputs = None, 1
        objective = Objective("squared_error", {}, link="identity", source="bagging")

    scale = 1.0 / len(estimators)
    trees = []
    criteria = set()
    for t, (est, cols) in enumerate(zip(estimators, features)):
        cols = np.asarray(cols, dtype=np.int64)
        fields = read_tree_fields(required_attr(est, "tree_"), f"{name} tree {t}")
        local = np.asarray(fields["feature"], dtype=np.int64)
        internal = np.asarray(fields["children_left"]) >= 0
        if np.any(local[internal] >= cols.size) or np.any(cols < 0) \
                or np.any(cols >= n_features):
            raise ValueError(f"{name} tree {t} splits on columns outside its feature subset "
                             f"{cols[:10].tolist()} of {n_features} features")
        fields["feature"] = np.where(internal, cols[np.where(internal, local, 0)], local)
        raw = fields["value"]
        if classifier:
            own = np.asarray(est.classes_, dtype=np.int64)  # class indices of this tree
            if raw.ndim != 3 or raw.shape[1] != 1 or raw.shape[2] != own.size:
                raise ValueError(f"{name} tree {t} has node values of shape {raw.shape}, "
                                 f"expected (n_nodes, 1, {own.size})")
            value = np.zeros((raw.shape[0], n_outputs))
            value[:, own] = raw[:, 0, :]
        else:
            value = raw[:, 0, :1]
        criteria.add(str(getattr(est, "criterion", "")))
        trees.append(tree_from_fields(fields, value, scale=scale))

    names = getattr(model, "feature_names_in_", None)
    # trees of different criteria store impurities of different kinds: none usable
    impurity = _impurity_kind(classifier, criteria.pop() if len(criteria) == 1 else "mixed")
    return TreeEnsemble.from_trees(
        trees,
        kind=FOREST,
        n_features=n_features,
        n_outputs=n_outputs,
        comparison="<=",
        round_float32=True,
        objective=objective,
        feature_names=None if names is None else list(names),
        classes=classes,
        category_as_code=False,
        library="sklearn",
        gain_kind="impurity",
        impurity_kind=impurity,
    )
