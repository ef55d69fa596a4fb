"""Models trained on Spark, read as they are.

``xgboost.spark``'s ``SparkXGBClassifierModel`` / ``SparkXGBRegressorModel`` (and
``SparkXGBRankerModel``) predict, in their ``transform``, with the XGBoost
scikit-learn wrapper they hold: its booster, every tree up to the wrapper's
``best_iteration`` when early stopping set one, and the Spark model's ``missing``
parameter (the wrapper is built with it). They are recognised here only when
``xgboost.spark`` is already imported (a Spark model cannot exist otherwise), so
parsing never imports pyspark.

A SynapseML LightGBM model is not a Python object treeimp reads: its
``getNativeModel()`` / ``saveNativeModel(path)`` give LightGBM's own text model, which
treeimp reads as a file (or ``lightgbm.Booster(model_str=...)``).
"""

from __future__ import annotations

import math
import sys


def is_spark_xgboost_model(model) -> bool:
    """True for a fitted ``xgboost.spark`` model (without importing xgboost.spark)."""
    core = sys.modules.get("xgboost.spark.core")
    cls = getattr(core, "_SparkXGBModel", None)
    return cls is not None and isinstance(model, cls)


def spark_xgboost_parts(model):
    """(Booster, missing, default stop) of an ``xgboost.spark`` model: what its
    ``transform`` predicts with.

    ``missing`` is the model's ``missing`` parameter (NaN by default; 0.0 when trained
    with ``enable_sparse_data_optim``). The default stop is ``best_iteration + 1`` of
    early stopping (as the scikit-learn wrapper inside predicts), else None (all trees).
    """
    booster = model.get_booster()
    missing = float(model.getOrDefault("missing"))
    if math.isnan(missing):
        missing = None  # XGBoost's own default: NaN is missing
    best = booster.attr("best_iteration")
    return booster, missing, None if best is None else int(best) + 1
