"""Parsers: one module per library, each a pure function ``model -> TreeEnsemble``.

The library is imported inside the parser, never here: ``parse`` only asks
``isinstance`` for libraries that are already imported (a model object of a library
cannot exist unless that library was imported), so a saved model file parses without
xgboost, lightgbm or catboost installed.
"""

from __future__ import annotations

import importlib
import os
import sys

from ..ensemble import TreeEnsemble

# (library module, class path inside it, "treeimp parser module:function").
# Order matters only where classes inherit from each other (none of these do).
_TABLE = [
    ("sklearn", "tree.DecisionTreeClassifier", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "tree.DecisionTreeRegressor", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "tree.ExtraTreeClassifier", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "tree.ExtraTreeRegressor", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "ensemble.RandomForestClassifier", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "ensemble.RandomForestRegressor", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "ensemble.ExtraTreesClassifier", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "ensemble.ExtraTreesRegressor", "sklearn_forest:parse_sklearn_forest"),
    ("sklearn", "ensemble.GradientBoostingClassifier", "sklearn_gb:parse_sklearn_gb"),
    ("sklearn", "ensemble.GradientBoostingRegressor", "sklearn_gb:parse_sklearn_gb"),
    ("sklearn", "ensemble.HistGradientBoostingClassifier", "sklearn_hgb:parse_sklearn_hgb"),
    ("sklearn", "ensemble.HistGradientBoostingRegressor", "sklearn_hgb:parse_sklearn_hgb"),
    ("xgboost", "Booster", "xgb:parse_xgboost"),
    ("xgboost", "XGBModel", "xgb:parse_xgboost"),
    ("lightgbm", "Booster", "lgbm:parse_lightgbm"),
    ("lightgbm", "LGBMModel", "lgbm:parse_lightgbm"),
    ("catboost", "CatBoost", "catboost:parse_catboost"),  # Classifier / Regressor inherit
]

SUPPORTED = sorted({f"{lib}.{path.rsplit('.', 1)[-1]}" for lib, path, _ in _TABLE}
                   | {"catboost.CatBoostClassifier", "catboost.CatBoostRegressor"})


def _resolve(spec):
    module, func = spec.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), func)


def _lookup_class(lib, path):
    obj = sys.modules.get(lib)
    if obj is None:
        return None
    try:
        for part in path.split("."):
            obj = getattr(obj, part, None) or importlib.import_module(f"{obj.__name__}.{part}")
    except ImportError:
        return None
    return obj


def parse(model) -> TreeEnsemble:
    """Normal form of a fitted model, a TreeEnsemble (returned as is), or a file path."""
    if isinstance(model, TreeEnsemble):
        return model
    if isinstance(model, (str, os.PathLike)):
        from .files import load

        return load(model)
    for lib, path, spec in _TABLE:
        cls = _lookup_class(lib, path)
        if cls is not None and isinstance(model, cls):
            return _resolve(spec)(model)
    raise TypeError(
        f"cannot explain a {type(model).__module__}.{type(model).__name__}; supported "
        f"models: {', '.join(SUPPORTED)}, a TreeEnsemble, or a saved XGBoost .json/.ubj, "
        "LightGBM .txt or CatBoost .json model file"
    )


def inbag_bits(model, n_rows):
    """Packed in-bag indicator per tree of a bagged forest (for ``oob=True``)."""
    if isinstance(model, TreeEnsemble) or isinstance(model, (str, os.PathLike)):
        raise ValueError("oob=True needs the fitted forest object (its in-bag rows are not "
                         "part of a TreeEnsemble or a model file); pass held-out rows instead")
    if type(model).__module__.split(".")[0] == "sklearn":
        from .sklearn_inbag import sklearn_inbag_bits

        return sklearn_inbag_bits(model, n_rows)
    raise ValueError(f"oob=True is for bagged forests (scikit-learn RandomForest / ExtraTrees "
                     f"with bootstrap=True); a {type(model).__name__} has no out-of-bag rows. "
                     "Boosting models need a held-out set: explain(model, X_val, y_val)")
