"""LightGBM objective -> canonical :class:`treeimp.model.ensemble.Objective`.

The header's ``objective=`` line holds the name and the constants LightGBM stores with
it (``binary sigmoid:1``, ``multiclass num_class:3``, ``multiclassova num_class:3
sigmoid:1``, ``regression sqrt`` for reg_sqrt); the other loss constants (huber /
quantile ``alpha``, ``tweedie_variance_power``, ``fair_c``, ``poisson_max_delta_step``,
``scale_pos_weight``, ``is_unbalance``) come from the parameters section.
"""

from __future__ import annotations

from ..model.ensemble import Objective
from ..model.ranking import lightgbm_ranking_params
from .lgbm_text import read_param

SUPPORTED_OBJECTIVES = ("regression", "regression_l1", "huber", "quantile", "binary",
                        "multiclass", "multiclassova", "poisson", "gamma", "tweedie",
                        "cross_entropy", "lambdarank", "rank_xendcg",
                        "cross_entropy_lambda", "fair", "mape")


def objective_from_text(header, params, num_class):
    """Canonical Objective from the header's objective line and the parameters block."""
    if "objective" not in header:
        spelled = (params or {}).get("objective", "none")
        raise ValueError(f"LightGBM model has no built-in objective (objective={spelled!r}, "
                         "a custom objective function); treeimp needs the loss. Supported: "
                         f"{', '.join(SUPPORTED_OBJECTIVES)}")
    line = header["objective"]
    tokens = line.split()
    if not tokens:
        raise ValueError("LightGBM header line 'objective=' is empty")
    name, opts = tokens[0], {}
    for tok in tokens[1:]:
        key, _, value = tok.partition(":")
        opts[key] = value
    if name not in SUPPORTED_OBJECTIVES:
        raise ValueError(f"LightGBM objective {name!r} is not supported; supported: "
                         f"{', '.join(SUPPORTED_OBJECTIVES)}")
    if "sqrt" in opts:
        raise ValueError(f"LightGBM objective {line!r} (reg_sqrt=True) is not supported: "
                         "the model is fit to sqrt-transformed labels")

    def opt(key):
        if key not in opts:
            raise ValueError(f"LightGBM objective line {line!r} has no {key!r}")
        try:
            return float(opts[key])
        except ValueError:
            raise ValueError(f"LightGBM objective line {line!r}: {key} is not a number") \
                from None

    def unbalanced():
        return read_param(params, "is_unbalance", "0", str) not in ("0", "false")

    if name == "regression":
        return Objective("squared_error", {}, "identity", line)
    if name == "regression_l1":
        return Objective("absolute_error", {}, "identity", line)
    if name == "huber":
        return Objective("huber", {"delta": read_param(params, "alpha", None)}, "identity", line)
    if name == "quantile":
        return Objective("quantile", {"alpha": read_param(params, "alpha", None)}, "identity",
                         line)
    if name == "binary":
        if unbalanced():
            raise ValueError("LightGBM binary models trained with is_unbalance=True are not "
                             "supported: the class weights come from training label counts "
                             "the model does not store (train with scale_pos_weight = "
                             "n_negative / n_positive instead)")
        return Objective("logistic", {"sigmoid": opt("sigmoid"),
                                      "pos_weight": read_param(params, "scale_pos_weight", 1.0)},
                         "sigmoid", line)
    if name == "cross_entropy":
        return Objective("cross_entropy", {}, "sigmoid", line)
    if name == "lambdarank":
        return Objective("lambdarank", _lambdarank_params(params), "identity", line)
    if name == "rank_xendcg":  # its random targets: their expectation (model/ranking.py)
        return Objective("rank_xendcg", {}, "identity", line)
    if name == "cross_entropy_lambda":  # predicts log(1 + e^m)
        return Objective("cross_entropy_lambda", {}, "softplus", line)
    if name == "fair":
        return Objective("fair", {"c": read_param(params, "fair_c", 1.0)}, "identity", line)
    if name == "mape":
        return Objective("mape", {}, "identity", line)
    k = int(opt("num_class")) if name.startswith("multiclass") else 1
    if name.startswith("multiclass") and (k != num_class or k < 2):
        raise ValueError(f"LightGBM objective line {line!r} disagrees with num_class="
                         f"{num_class}")
    if name == "multiclass":
        return Objective("softmax", {"n_classes": k, "hess_factor": k / (k - 1.0)},
                         "softmax", line)
    if name == "multiclassova":
        if unbalanced() or read_param(params, "scale_pos_weight", 1.0) != 1.0:
            raise ValueError("LightGBM multiclassova with is_unbalance or scale_pos_weight "
                             "is not supported (per-class weights are not stored)")
        return Objective("ova_logistic", {"sigmoid": opt("sigmoid"), "n_classes": k},
                         "sigmoid", line)
    if name == "poisson":
        return Objective("poisson", {"max_delta_step": read_param(
            params, "poisson_max_delta_step", 0.7)}, "exp", line)
    if name == "gamma":
        return Objective("gamma", {}, "exp", line)
    # tweedie
    return Objective("tweedie", {"variance_power": read_param(params, "tweedie_variance_power",
                                                          None)}, "exp", line)


def _lambdarank_params(params):
    """lambdarank's constants from the parameters section (LightGBM's defaults without
    one): sigmoid, lambdarank_norm, lambdarank_truncation_level, label_gain (empty: the
    default gains)."""
    # the key exists from LightGBM 4.1 (position-bias factors); 4.0 writes none
    if (params is not None and "lambdarank_position_bias_regularization" in params
            and read_param(params, "lambdarank_position_bias_regularization", 0.0) != 0.0):
        raise ValueError("LightGBM lambdarank trained with position-bias regularisation is "
                         "not supported (the position-bias factors are not stored)")
    gains = read_param(params, "label_gain", "", str).strip()
    try:
        label_gain = [float(g) for g in gains.split(",")] if gains else []
    except ValueError:
        raise ValueError(f"LightGBM label_gain {gains[:60]!r} is not a list of numbers") \
            from None
    return lightgbm_ranking_params(read_param(params, "sigmoid", 1.0),
                                   read_param(params, "lambdarank_norm", "1", str).strip()
                                   not in ("0", "false"),
                                   read_param(params, "lambdarank_truncation_level", 30.0),
                                   label_gain)
