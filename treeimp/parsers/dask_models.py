"""Models trained with Dask, read as they are.

``xgboost.dask.DaskXGBClassifier`` / ``DaskXGBRegressor`` are ``xgboost.XGBModel``
subclasses and LightGBM's ``DaskLGBMClassifier`` / ``DaskLGBMRegressor`` are
``lightgbm.LGBMModel`` subclasses: :func:`treeimp.parse` reads them through those
parsers (their booster, with the wrapper's early-stopping iteration). What
``xgboost.dask.train`` returns is neither: a dict ``{"booster": Booster, "history":
...}``, read here as its booster.
"""

from __future__ import annotations

import sys

TRAIN_OUTPUT_KEYS = ("booster", "history")


def booster_of_train_output(output):
    """The ``xgboost.Booster`` of the dict returned by ``xgboost.dask.train``.

    Like ``xgboost.dask.predict(client, output["booster"], X)``, treeimp then uses every
    tree of the booster (a Booster keeps the rounds past ``best_iteration`` of early
    stopping; pass ``iteration_range=(0, best_iteration + 1)`` for fewer).

    Raises
    ------
    TypeError
        ``output`` is another dict: its keys are named.
    """
    keys = sorted(map(str, output))
    xgboost = sys.modules.get("xgboost")
    booster = output.get("booster")
    if (set(keys) != set(TRAIN_OUTPUT_KEYS) or xgboost is None
            or not isinstance(booster, xgboost.Booster)):
        raise TypeError(f"a dict is explained only as the output of xgboost.dask.train, "
                        f"{{'booster': xgboost.Booster, 'history': ...}}; got a dict with "
                        f"the keys {keys[:10]}"
                        + ("" if booster is None else
                           f" and a {type(booster).__name__} under 'booster'"))
    return booster
