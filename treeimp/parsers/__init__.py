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

from ..inputs.pipeline import is_pipeline
from ..model.ensemble import TreeEnsemble
from .dask_models import booster_of_train_output
from .files import load
from .rounds import select_trees
from .sklearn_inbag import sklearn_inbag_bits
from .sklearn_private import n_training_rows
from .spark_models import is_spark_xgboost_model, spark_xgboost_parts

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
    ("sklearn", "ensemble.BaggingClassifier", "sklearn_bagging:parse_sklearn_bagging"),
    ("sklearn", "ensemble.BaggingRegressor", "sklearn_bagging:parse_sklearn_bagging"),
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


def parse(model, *, iteration_range=None, missing=None) -> TreeEnsemble:
    """Normal form of a fitted model, a TreeEnsemble, or a file path.

    The trees are those the model's own default ``predict`` uses: an XGBoost
    scikit-learn wrapper trained with early stopping its ``best_iteration + 1`` rounds,
    an XGBoost ``Booster`` all its trees, LightGBM its ``best_iteration`` when set,
    scikit-learn its fitted iterations. Models trained with Dask are read as they are:
    ``xgboost.dask.DaskXGBClassifier`` / ``DaskXGBRegressor`` and LightGBM's
    ``DaskLGBMClassifier`` / ``DaskLGBMRegressor`` as their local wrappers, the dict
    ``xgboost.dask.train`` returns as its Booster. Models trained on Spark:
    ``xgboost.spark``'s ``SparkXGBClassifierModel`` / ``SparkXGBRegressorModel`` as
    their booster with their ``missing`` parameter (see ``parsers/spark_models.py``).
    ``iteration_range=(start, stop)`` (XGBoost's
    meaning, in boosting rounds; stop 0: the last) chooses them explicitly, see
    :meth:`TreeEnsemble.rounds`. ``missing``: XGBoost's ``missing``, a number routed as
    missing (default: the wrapper's ``missing`` parameter; NaN for a Booster or file).
    """
    if isinstance(model, (str, os.PathLike)):
        return load(model, iteration_range=iteration_range, missing=missing)
    if isinstance(model, dict) and "booster" in model:  # what xgboost.dask.train returns
        model = booster_of_train_output(model)
    if isinstance(model, TreeEnsemble):
        ens, default_stop = model, None
    elif is_spark_xgboost_model(model):  # xgboost.spark: its booster, as transform uses it
        booster, spark_missing, default_stop = spark_xgboost_parts(model)
        ens = _resolve("xgb:parse_xgboost")(booster)
        if missing is None:
            missing = spark_missing
    else:
        for lib, path, spec in _TABLE:
            cls = _lookup_class(lib, path)
            if cls is not None and isinstance(model, cls):
                ens = _resolve(spec)(model)
                break
        else:
            if is_pipeline(model):
                raise TypeError("parse() reads one tree model, not a Pipeline: pass the "
                                "Pipeline to treeimp.explain / contributions / "
                                "permutation_importance or treeimp.Explainer (which "
                                "transform X through its steps), or parse(pipeline[-1])")
            raise TypeError(
                f"cannot explain a {type(model).__module__}.{type(model).__name__}; "
                f"supported models: {', '.join(SUPPORTED)}, a TreeEnsemble, or a saved "
                "XGBoost .json/.ubj, LightGBM .txt or CatBoost .json model file")
        default_stop = _default_stop(model)
        if missing is None and getattr(model, "missing", None) is not None \
                and ens.library == "xgboost":
            missing = model.missing  # the XGBoost wrapper's own sentinel
    return select_trees(ens, iteration_range, default_stop, missing)


def _default_stop(model):
    """Rounds the model's default predict uses when fewer than all (best iteration + 1
    of an early-stopped XGBoost wrapper, LightGBM's best iteration), else None. An
    XGBoost Booster predicts with all its trees, whatever best_iteration it stores."""
    wrapper = _lookup_class("xgboost", "XGBModel")
    if wrapper is not None and isinstance(model, wrapper):
        best = model.get_booster().attr("best_iteration")
        return None if best is None else int(best) + 1
    lgb_wrapper = _lookup_class("lightgbm", "LGBMModel")
    lgb_booster = _lookup_class("lightgbm", "Booster")
    if lgb_booster is not None and isinstance(model, (lgb_wrapper, lgb_booster)):
        booster = model.booster_ if isinstance(model, lgb_wrapper) else model
        best = int(booster.best_iteration or 0)
        return best if best > 0 else None
    return None


def training_rows(model):
    """The number of rows a bagged forest was trained on (what chunked out-of-bag
    statistics index), or None when the model does not record it."""
    if type(model).__module__.split(".")[0] == "sklearn":
        n = n_training_rows(model)
        return None if n is None else int(n)
    return None


def inbag_bits(model, n_rows):
    """Packed in-bag indicator per tree of a bagged forest (for ``oob=True``)."""
    if isinstance(model, TreeEnsemble) or isinstance(model, (str, os.PathLike)):
        raise ValueError("oob=True needs the fitted forest object (its in-bag rows are not "
                         "part of a TreeEnsemble or a model file); pass held-out rows instead")
    if type(model).__module__.split(".")[0] == "sklearn":
        return sklearn_inbag_bits(model, n_rows)
    raise ValueError(f"oob=True is for bagged forests (scikit-learn RandomForest / ExtraTrees "
                     f"with bootstrap=True); a {type(model).__name__} has no out-of-bag rows. "
                     "Boosting models need a held-out set: explain(model, X_val, y_val)")
