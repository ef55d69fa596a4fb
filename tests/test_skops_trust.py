"""treeimp's vetted skops types (``treeimp/cli/skops_trust.py``) against the installed skops:
every kind of model treeimp explains, saved with skops, holds no untrusted type outside
the list and loads with ``trusted=`` the list to the same predictions; a function
reference outside it stays refused."""

import functools
import importlib
import os

import numpy as np
import pandas as pd
import pytest
from sklearn.base import is_classifier
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    KBinsDiscretizer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    RobustScaler,
    StandardScaler,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from treeimp.cli.skops_trust import TREE_MODEL_TYPES, untrusted_outside

sio = pytest.importorskip("skops.io")
UntrustedTypesFoundException = pytest.importorskip(
    "skops.io.exceptions").UntrustedTypesFoundException


def _data():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 3)), columns=["a", "b", "c"])
    X["k"] = rng.choice(["u", "v", "w"], 120)
    y = X["a"] + (X["k"] == "u") + 0.1 * rng.normal(size=120)
    return X, y


def _pre(kind):
    """A ColumnTransformer encoding 'k' and passing the numbers through ``kind``."""
    enc = OneHotEncoder() if kind == "onehot" else OrdinalEncoder()
    return ColumnTransformer([("k", enc, ["k"])], remainder="passthrough")


NUMERIC = ["a", "b", "c"]
MODELS = {
    "DecisionTreeRegressor": (lambda: DecisionTreeRegressor(max_depth=3), NUMERIC),
    "DecisionTreeClassifier": (lambda: DecisionTreeClassifier(max_depth=3), NUMERIC),
    "RandomForestRegressor": (lambda: RandomForestRegressor(3, random_state=0), NUMERIC),
    "RandomForestClassifier": (lambda: RandomForestClassifier(3, random_state=0), NUMERIC),
    "ExtraTreesRegressor": (lambda: ExtraTreesRegressor(3, random_state=0), NUMERIC),
    "ExtraTreesClassifier": (lambda: ExtraTreesClassifier(3, random_state=0), NUMERIC),
    "BaggingRegressor": (lambda: BaggingRegressor(DecisionTreeRegressor(), n_estimators=3,
                                                  random_state=0), NUMERIC),
    "BaggingClassifier": (lambda: BaggingClassifier(DecisionTreeClassifier(), n_estimators=3,
                                                    random_state=0), NUMERIC),
    "GradientBoostingRegressor": (lambda: GradientBoostingRegressor(n_estimators=3), NUMERIC),
    "GradientBoostingClassifier": (lambda: GradientBoostingClassifier(n_estimators=3),
                                   NUMERIC),
    "HistGradientBoostingRegressor": (lambda: HistGradientBoostingRegressor(max_iter=3),
                                      NUMERIC),
    # text categories: HistGradientBoosting's own preprocessing (partial(check_array))
    "HistGradientBoostingClassifier": (lambda: HistGradientBoostingClassifier(
        max_iter=3, categorical_features=["k"]), None),
    "Pipeline one-hot, forest": (lambda: make_pipeline(
        _pre("onehot"), RandomForestRegressor(3, random_state=0)), None),
    "Pipeline ordinal, imputer, scalers, boosting": (lambda: make_pipeline(
        _pre("ordinal"), SimpleImputer(), StandardScaler(), MinMaxScaler(), RobustScaler(),
        MaxAbsScaler(), GradientBoostingRegressor(n_estimators=3)), None),
    "Pipeline bins, polynomial, tree": (lambda: make_pipeline(
        KBinsDiscretizer(3, quantile_method="averaged_inverted_cdf"), PolynomialFeatures(),
        DecisionTreeClassifier(max_depth=3)), NUMERIC),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_supported_model_needs_only_the_vetted_types(tmp_path, name):
    make, columns = MODELS[name]
    X, y = _data()
    X = X if columns is None else X[columns]
    model = make()
    if is_classifier(model):
        y = (y > y.median()).astype(int)
    model.fit(X, y)
    path = tmp_path / "m.skops"
    sio.dump(model, path)
    untrusted = sio.get_untrusted_types(file=path)
    assert untrusted and untrusted_outside(untrusted) == [], untrusted
    with pytest.raises(UntrustedTypesFoundException):  # skops alone refuses them
        sio.load(path)
    loaded = sio.load(path, trusted=list(TREE_MODEL_TYPES))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_every_vetted_type_is_used_and_importable(tmp_path):
    """Each vetted name is one some supported model needs, and names an existing class
    or function (a renamed one would stop matching and be refused)."""
    needed = set()
    X, y = _data()
    for make, columns in MODELS.values():
        Xm = X if columns is None else X[columns]
        model = make()
        ym = (y > y.median()).astype(int) if is_classifier(model) else y
        sio.dump(model.fit(Xm, ym), tmp_path / "m.skops")
        needed |= set(sio.get_untrusted_types(file=tmp_path / "m.skops"))
    assert needed == set(TREE_MODEL_TYPES)
    for name in TREE_MODEL_TYPES:
        module, _, attr = name.rpartition(".")
        assert callable(getattr(importlib.import_module(module), attr)), name


def test_a_function_reference_outside_the_list_stays_untrusted(tmp_path):
    """A partial (trusted) of os.system: skops lists the function on its own, and it is
    outside the list."""
    X, y = _data()
    pipe = make_pipeline(FunctionTransformer(functools.partial(os.system, "true")),
                         RandomForestRegressor(3, random_state=0))
    pipe.steps[0][1].fit(X[NUMERIC])  # fitted without calling the function
    path = tmp_path / "p.skops"
    sio.dump(pipe, path)
    outside = untrusted_outside(sio.get_untrusted_types(file=path))
    assert outside == [f"{os.system.__module__}.system"]
    with pytest.raises(UntrustedTypesFoundException, match="system"):
        sio.load(path, trusted=list(TREE_MODEL_TYPES))
