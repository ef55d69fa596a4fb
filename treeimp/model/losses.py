"""Gradients, hessians, links and losses of every supported boosting objective.

A boosted tree t is evaluated on held-out rows against ``z = -g``, the negative gradient
of the model's own objective at the margin the row had before t's boosting round, with
hessian ``h``. Gradients follow each library's own definition, constant factors included;
where libraries sharing a canonical name differ, the difference is a parameter of the
:class:`~treeimp.model.ensemble.Objective` that the parser sets. Sample weights are NOT part of
``g``/``h`` here: the caller multiplies both by the row weight, as every library does.

Objectives (``Objective.name``, ``Objective.params``; params marked * are required), the
parameter vector that :func:`loss_spec` builds from them, and the formulas (m the margin,
y the target, d = m - y, p the probability on the link scale):

=============== ================================= ==========================================
name            params -> vector                  g, h
=============== ================================= ==========================================
squared_error   {} -> []                          d, 1
absolute_error  {tie_gradient=0} -> [tie]         sign(d), 1; g = tie_gradient when d == 0
pseudo_huber    {slope*} -> [slope]               d / sqrt(c), 1 / c^1.5; c = 1 + (d/slope)^2
huber           {delta*, outer_hessian=1}         clip(d, -delta, delta), 1 for |d| <= delta
                -> [delta, outer_hessian]         and outer_hessian beyond
quantile        {alpha*, tie_gradient=1-alpha,    1 - alpha if d > delta, -alpha if
                delta=0} -> [alpha, tie, delta]   d < -delta, tie_gradient if |d| <= delta;
                                                  h = 1
logistic        {sigmoid*, pos_weight*,           p = 1/(1+exp(-s m)); c = pos_weight if
                neg_weight=1} -> [s, pw, nw]      y == 1, neg_weight if y == 0, else 1;
                                                  g = c s (p - y), h = c s^2 p (1 - p)
cross_entropy   {} -> []                          p - y, p (1 - p)  (y in [0, 1])
softmax         {n_classes*, hess_factor*}        p = softmax(m); g_k = p_k - [y == k],
                -> [K, f]                         h_k = f p_k (1 - p_k)
ova_logistic    {sigmoid*, n_classes*,            output k: logistic with label [y == k]
                pos_weight=1, neg_weight=1}
                -> [s, K, pw, nw]
poisson         {max_delta_step*}                 exp(m) - y, exp(m + max_delta_step)
                -> [mds, exp(mds)]
gamma           {} -> []                          1 - y exp(-m), y exp(-m)
tweedie         {variance_power*} -> [rho]        -y e1 + e2, -(1-rho) y e1 + (2-rho) e2;
                                                  e1 = exp((1-rho) m), e2 = exp((2-rho) m)
exponential     {} -> []                          -y e^-m + (1-y) e^m, y e^-m + (1-y) e^m
expectile       {alpha*} -> [alpha]               2 a d, 2 a; a = alpha if d < 0, 1 - alpha
                                                  otherwise (loss a d^2)
log_cosh        {} -> []                          tanh(d), 1 - tanh(d)^2 (loss log cosh d)
quantiles       {alphas*} -> [K, alpha_1..K]      output k: quantile with alpha_k and
                                                  tie_gradient 1 - alpha_k (delta 0)
expectile_stack {alphas*} -> [K, alpha_1..K]      q_1 = m_1, q_k = q_(k-1) + 1e-6 +
                                                  softplus(m_k); d_k = q_k - y, a_k =
                                                  alpha_k if d_k < 0 else 1 - alpha_k;
                                                  g_j = s_j sum_(k>=j) a_k d_k, h_j = s_j^2
                                                  sum_(k>=j) a_k; s_1 = 1, s_j =
                                                  sigmoid(m_j) (loss sum_k a_k d_k^2 / 2)
squared_log_    {} -> []                          q = max(m, -1 + 1e-6), l = log1p(q) -
error                                             log1p(y): l / (q + 1), max((1 - l) /
                                                  (q + 1)^2, 1e-6)  (y > -1)
fair            {c*} -> [c]                       c d / (|d| + c), c^2 / (|d| + c)^2
mape            {} -> []                          sign(d) / max(1, |y|), 1
cross_entropy_  {} -> []                          as cross_entropy; link softplus log(1 +
lambda                                            e^m); sample weights other than 1 rejected
aft             {distribution*, sigma*,           y = (lower, upper) per row; z = (log t -
                fast_log=0, erfc_approx=0,        m) / sigma; exact time: g = f'(z) / (sigma
                minus_one_open=0,                 f(z)), h = (f'^2 - f f'') / (sigma f)^2;
                weights_ignored=0} -> [dist,      censored: g = (f(z_u) - f(z_l)) / (sigma
                sigma, fast_log, erfc_approx,     (F(z_u) - F(z_l))), h = ((f_u - f_l)^2 -
                minus_one_open,                   (F_u - F_l)(f'_u - f'_l)) / (sigma (F_u -
                weights_ignored]                  F_l))^2; f, F of distribution 0 normal,
                                                  1 logistic, 2 extreme; g clipped to
                                                  [-15, 15], h to [1e-16, 15]. fast_log 1:
                                                  log t is CatBoost's FastLogf of the
                                                  float32 time; erfc_approx 1: the normal F
                                                  from a Chebyshev approximation of erfc;
                                                  minus_one_open 1: labels rounded to
                                                  float32, -1 marks an unbounded end;
                                                  weights_ignored 1: sample weights other
                                                  than 1 refused (the derivatives have none)
cox             {float32_times=0,                 y = XGBoost's label (time |y|, censored
                sequential_ties=0,                where y <= 0); over the rows sorted by
                unstable_ties=0,                  |y| (ties in row order): r_i = sum of
                weights_ignored=0} -> []          1 / R_j over the events j up to i, s_i
                (staged pass: [round,             = sum of 1 / R_j^2, R_j = sum of e^m
                n_rounds], stats/cox.py)          over rows with |y| >= |y_j|; g = e^m_i
                                                  r_i - [y_i > 0], h = e^m_i r_i - e^2m_i
                                                  s_i (Breslow ties, as XGBoost);
                                                  sequential_ties 1: R_j = sum over the
                                                  rows at or after j in that order;
                                                  float32_times 1: times rounded to
                                                  float32; unstable_ties 1: an event time
                                                  shared by two rows is refused;
                                                  weights_ignored 1: as aft's
=============== ================================= ==========================================

``aft`` reads two label columns per row, y (n_rows, 2) = [lower, upper] bound of the
time (XGBoost's ``label_lower_bound`` / ``label_upper_bound``): lower == upper an
observed time, upper = inf right-censored, lower = 0 left-censored, else
interval-censored (:func:`check_interval_target` rejects NaN, negative or infinite
lower bounds, upper <= 0, lower > upper). Where XGBoost's fraction is not finite
with a denominator below 1e-12 it uses its limit values (``kernels/gradients.py``,
``_aft_limits``).

``alphas`` is a sequence of K values in (0, 1), one output each; the other parameters
are numbers.

What each library's parser sets (verified against xgboost 3.2.0, lightgbm 4.7.0 and
scikit-learn 1.9.1 in ``tests/test_losses.py``):

* XGBoost: ``multi:softprob/softmax`` hess_factor 2.0; ``count:poisson`` max_delta_step
  from ``poisson_regression_param`` (default 0.7); logistic ``sigmoid`` 1.0 and
  ``pos_weight`` = ``reg_loss_param.scale_pos_weight``; ``reg:pseudohubererror`` slope =
  ``huber_slope``; ``binary:logitraw`` is "logistic" with link "identity". "quantile"
  reproduces the gradient of ``reg:quantileerror`` (``tests/test_losses.py``), but the
  parser gives it only to models saved by XGBoost < 3.4 (one alpha; several alphas:
  "quantiles"). XGBoost >= 3.4 fits ``reg:absoluteerror`` and ``reg:quantileerror``
  with a surrogate whose gradients are scaled, every round, by a statistic of all the
  training residuals, which the model does not store: the parser names them
  "smoothed_absolute_error" / "smoothed_quantile", which have no ``loss_spec``; the
  staged pass computes that scale over the evaluation rows and builds their vector
  with :func:`smoothed_spec` (formulas there and in ``kernels/gradients.py``, checked on
  3.4.1 in ``tests/test_xgb_smoothed.py``). ``reg:expectileerror`` (XGBoost >= 3.3)
  is "expectile_stack": its outputs are non-crossing expectiles (output k > 1 is a
  softplus increment over output k - 1), and its g, h are the Gauss-Newton ones
  XGBoost computes (checked on 3.3.0 and 3.4.1).
  ``reg:squaredlogerror`` is "squared_log_error" (margin floor and hessian floor as
  XGBoost; XGBoost computes it in float32). ``survival:aft`` is "aft" (``aft_loss_param``:
  distribution, scale as the float32 XGBoost keeps; link exp), checked for the three
  distributions, censored and exact labels, in ``tests/test_survival_losses.py``.
  ``survival:cox`` is "cox": a row's g, h sum over the risk sets of all evaluation rows
  of the call, so the staged pass computes them for every row and round first
  (``stats/cox.py``, ``kernels/cox.py``; checked through the leaf values of XGBoost's
  trees in ``tests/test_survival_cox.py``); it has no per-row ``loss``, and only the
  node-statistic measures.
  Not modelled: XGBoost floors the logistic and softmax hessians at 1e-16 (only matters
  for |margin| > 36).
* LightGBM: ``multiclass`` hess_factor K/(K-1); ``binary`` / ``multiclassova``
  ``sigmoid`` = the ``sigmoid`` parameter, pos_weight = ``scale_pos_weight``
  (``is_unbalance`` instead weights the smaller class by the count ratio: the positive
  class via pos_weight, or the negative class via neg_weight); ``poisson``
  max_delta_step = ``poisson_max_delta_step`` (default 0.7); ``huber`` delta = ``alpha``;
  ``quantile`` alpha = ``alpha``; ``fair`` c = ``fair_c``; ``mape`` folds LightGBM's
  label weights 1 / max(1, |y|) into g (its leaves are then refitted to weighted
  medians, which treeimp reads from the model); ``cross_entropy_lambda`` (xentlambda)
  has cross_entropy's g, h without sample weights (LightGBM puts weights inside the
  link: not modelled, rejected) and predicts softplus(m). LightGBM has no survival
  objective.
* scikit-learn (``sklearn._loss``): absolute_error ``tie_gradient`` -1.0, quantile
  ``tie_gradient`` = -alpha (sklearn's gradient at y == m), poisson max_delta_step 0.0,
  logistic sigmoid 1 and pos_weight 1, HistGradientBoosting softmax hess_factor 1.0.
  GradientBoostingClassifier's multinomial line search multiplies its Newton step by
  (K-1)/K, i.e. its leaves are -sum g / sum (K/(K-1) p (1-p)): hess_factor K/(K-1)
  makes ``value / learning_rate`` the Newton step of these g, h.
* CatBoost (its der1 = -g and der2 = -h, checked against catboost 1.2.10 through the
  leaf values of one-tree models, ``tests/test_catboost_losses.py``): RMSE is
  squared_error; MAE is quantile with alpha 0.5 (g = +-0.5) and Quantile quantile, both
  with tie_gradient 0 and CatBoost's delta 1e-6 (rows within 5e-7 of their target get
  der1 0, rows 2e-6 away do not); Huber huber with outer_hessian 0 (der2 is 0 beyond delta);
  Expectile expectile; LogCosh log_cosh; Logloss logistic (class_weights as
  neg_weight / pos_weight); MultiClass softmax with hess_factor 1 (h is the diagonal of
  the K x K hessian that CatBoost's Newton step inverts); MultiClassOneVsAll
  ova_logistic; Poisson poisson with max_delta_step 0; Tweedie tweedie. Cox is "cox"
  with sequential_ties 1 and float32_times 1: CatBoost's TCoxError does not group tied
  times (each event's risk set is the rows at or after it, by |y| then row, labels as
  float32) and takes its exponentials at m - max(m) (``kernels/cox.py``). SurvivalAft
  is "aft" with fast_log 1 and minus_one_open 1 (dist Normal / Logistic / Extreme -> 0
  / 1 / 2, sigma = ``scale``, default Normal and 1): XGBoost's formulas, limits and
  clips with CatBoost's FastLogf of the float32 time in place of log t; its labels are
  [lower, upper] with -1 for an unbounded end (:func:`check_minus_one_interval_target`).
  Up to CatBoost 1.2.3 Cox has unstable_ties 1 and SurvivalAft Normal erfc_approx 1;
  1.2.5's Cox and a model whose release is not known are refused
  (``parsers/catboost.py``, objective_from_params). Both drop the sample weight from
  their derivatives (weights_ignored 1: :func:`check_weights` refuses weights other
  than 1) and predict the raw value (link identity). Checked against the leaves of one-tree models
  (``tests/test_catboost_survival.py``, agreement 1e-9 relative and better).

Cost: one ``exp`` per row and round for every scalar objective except tweedie (two),
and one per output for softmax / ova. The numba gradients live in
``treeimp/kernels/gradients.py``: its ``grad_hess_row`` fills every output of a row
at once; a kernel calls it once per row at the start of every boosting round (all trees
of the round share those gradients) and reads the column each tree feeds.
"""

from __future__ import annotations

import math

import numpy as np

from ..inputs.targets import LEVELS, class_indices
from ..kernels.gradients import (  # noqa: F401  (re-exported: the codes, grad_hess)
    ABSOLUTE_ERROR,
    AFT,
    AFT_EPS,
    COX,
    CROSS_ENTROPY,
    EXPECTILE,
    EXPECTILE_GAP,
    EXPECTILE_STACK,
    EXPONENTIAL,
    FAIR,
    GAMMA,
    HUBER,
    LOG_COSH,
    LOGISTIC,
    MAPE,
    OVA_LOGISTIC,
    POISSON,
    PSEUDO_HUBER,
    QUANTILE,
    QUANTILES,
    SMOOTHED_ABSOLUTE_ERROR,
    SMOOTHED_QUANTILE,
    SOFTMAX,
    SQUARED_ERROR,
    SQUARED_LOG_ERROR,
    TWEEDIE,
    grad_hess,
    grad_hess_rows,
    grad_hess_target_rows,
)
from .ranking import CATBOOST_REFUSED

SMOOTHED = ("smoothed_absolute_error", "smoothed_quantile")
MAX_ALPHAS = 4096  # quantile / expectile levels of one model

_REQUIRED = object()
_ALPHAS = object()  # a required sequence of levels in (0, 1)

# name -> (code, link, ((param, default or _REQUIRED), ...)) in parameter-vector order
_SPECS = {
    "squared_error": (SQUARED_ERROR, "identity", ()),
    "absolute_error": (ABSOLUTE_ERROR, "identity", (("tie_gradient", 0.0),)),
    "pseudo_huber": (PSEUDO_HUBER, "identity", (("slope", _REQUIRED),)),
    "huber": (HUBER, "identity", (("delta", _REQUIRED), ("outer_hessian", 1.0))),
    "quantile": (QUANTILE, "identity", (("alpha", _REQUIRED), ("tie_gradient", None),
                                        ("delta", 0.0))),
    "logistic": (LOGISTIC, "sigmoid", (("sigmoid", _REQUIRED), ("pos_weight", _REQUIRED),
                                       ("neg_weight", 1.0))),
    "cross_entropy": (CROSS_ENTROPY, "sigmoid", ()),
    "softmax": (SOFTMAX, "softmax", (("n_classes", _REQUIRED), ("hess_factor", _REQUIRED))),
    "ova_logistic": (OVA_LOGISTIC, "sigmoid", (("sigmoid", _REQUIRED), ("n_classes", _REQUIRED),
                                               ("pos_weight", 1.0), ("neg_weight", 1.0))),
    "poisson": (POISSON, "exp", (("max_delta_step", _REQUIRED),)),
    "gamma": (GAMMA, "exp", ()),
    "tweedie": (TWEEDIE, "exp", (("variance_power", _REQUIRED),)),
    "exponential": (EXPONENTIAL, "sigmoid2", ()),
    "expectile": (EXPECTILE, "identity", (("alpha", _REQUIRED),)),
    "log_cosh": (LOG_COSH, "identity", ()),
    "quantiles": (QUANTILES, "identity", (("alphas", _ALPHAS),)),
    "expectile_stack": (EXPECTILE_STACK, "expectile_stack", (("alphas", _ALPHAS),)),
    "squared_log_error": (SQUARED_LOG_ERROR, "identity", ()),
    "fair": (FAIR, "identity", (("c", _REQUIRED),)),
    "mape": (MAPE, "identity", ()),
    "cross_entropy_lambda": (CROSS_ENTROPY, "softplus", ()),
    # the flags (0 or 1) describe arithmetic that differs from XGBoost's (the table
    # above); CatBoost's SurvivalAft sets fast_log, minus_one_open and weights_ignored,
    # up to 1.2.3 also erfc_approx. fast_log and erfc_approx are read by the kernel
    # (params[2], params[3]), so they stay in these places
    "aft": (AFT, "exp", (("distribution", _REQUIRED), ("sigma", _REQUIRED),
                         ("fast_log", 0.0), ("erfc_approx", 0.0), ("minus_one_open", 0.0),
                         ("weights_ignored", 0.0))),
    # the staged pass computes its g, h over all rows first (stats/cox.py); CatBoost's
    # Cox sets float32_times, sequential_ties and weights_ignored; unstable_ties 1:
    # CatBoost <= 1.2.3, whose order of tied times is not reproducible (refused where
    # it matters)
    "cox": (COX, "exp", (("float32_times", 0.0), ("sequential_ties", 0.0),
                         ("unstable_ties", 0.0), ("weights_ignored", 0.0))),
}
# survival:aft's noise distributions, by their number in the parameter vector
AFT_DISTRIBUTIONS = ("normal", "logistic", "extreme")
SUPPORTED = tuple(_SPECS)
LINKS = ("identity", "sigmoid", "softmax", "exp", "sigmoid2", "proba", "expectile_stack",
         "sorted", "softplus")
_CLASS_OBJECTIVES = ("logistic", "softmax", "ova_logistic", "exponential", "cross_entropy")
_SMOOTHED_WHY = ("XGBoost >= 3.4 scales every row's gradient, at every round, by a statistic "
                 "of all its training residuals, which the model does not store; the "
                 "node-statistic measures (mdi_oob, ufi, ...) of one explain call on "
                 "in-memory rows compute it over those rows, the per-row measures "
                 "(shap_oob, saabas_oob) do not")
_NOT_SUPPORTED_WHY = {
    "huber_quantile": "scikit-learn's GradientBoosting re-estimates the Huber delta as a "
                      "quantile of the training residuals at every stage and does not store it",
    "class_probability": "forest classifiers have no gradient; they are evaluated on one-hot "
                         "targets",
    "smoothed_absolute_error": _SMOOTHED_WHY,
    "smoothed_quantile": _SMOOTHED_WHY,
    # CatBoost releases whose survival derivatives treeimp does not reproduce
    # (parsers/catboost.py, objective_from_params)
    "catboost:Cox@1.2.5": "the model was saved by CatBoost 1.2.5, whose Cox derivatives "
                          "are wrong: the first has the opposite sign (catboost issue "
                          "2701)",
    "catboost:Cox@unknown": "the model's catboost_version_info names no CatBoost release "
                            "treeimp knows, and the releases differ in Cox's derivatives "
                            "(<= 1.2.3, 1.2.5 and >= 1.2.6)",
    "catboost:SurvivalAft@unknown": "the model's catboost_version_info names no CatBoost "
                                    "release treeimp knows, and the releases differ in "
                                    "SurvivalAft Normal's distribution function (<= 1.2.3 "
                                    "an approximation of erfc, >= 1.2.5 erf)",
}


def _unsupported(name):
    why = _NOT_SUPPORTED_WHY.get(name, CATBOOST_REFUSED.get(name))
    return ValueError(
        f"objective {name!r} has no gradient in treeimp"
        + (f" ({why})" if why else "")
        + f"; supported objectives: {', '.join(SUPPORTED)}"
    )


def _name_params(objective):
    if isinstance(objective, str):
        return objective, {}
    name = getattr(objective, "name", None)
    params = getattr(objective, "params", None)
    if not isinstance(name, str) or not isinstance(params, dict):
        raise TypeError(f"objective must be an Objective or a name, got {type(objective).__name__}")
    return name, params


def _param_values(name, params):
    """Validated parameter dict (defaults filled) of a supported objective."""
    if name not in _SPECS:
        raise _unsupported(name)
    _, _, spec = _SPECS[name]
    known = [p for p, _ in spec]
    extra = sorted(set(params) - set(known))
    if extra:
        raise ValueError(f"objective {name!r} got unknown parameters {extra}; it takes "
                         f"{known if known else 'none'}")
    out = {}
    for p, default in spec:
        if default is _ALPHAS:
            out[p] = _alphas(name, p, params.get(p))
            continue
        if p in params:
            try:
                out[p] = float(params[p])
            except (TypeError, ValueError):
                raise TypeError(f"objective {name!r} parameter {p!r} must be a number, got "
                                f"{params[p]!r}") from None
            if not math.isfinite(out[p]):
                raise ValueError(f"objective {name!r} parameter {p!r} must be finite, got "
                                 f"{out[p]}")
        elif default is _REQUIRED:
            raise ValueError(f"objective {name!r} needs parameter {p!r} (got {sorted(params)})")
        else:
            out[p] = default
    _check_ranges(name, out)
    return out


def _alphas(name, p, values):
    """A non-empty tuple of at most MAX_ALPHAS finite levels in (0, 1)."""
    if values is None:
        raise ValueError(f"objective {name!r} needs parameter {p!r} (levels in (0, 1))")
    try:
        a = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"objective {name!r} parameter {p!r} must be numbers, got "
                        f"{values!r}") from None
    if not 1 <= a.size <= MAX_ALPHAS:
        raise ValueError(f"objective {name!r} parameter {p!r} needs 1..{MAX_ALPHAS} levels, "
                         f"got {a.size}")
    if not np.all((a > 0.0) & (a < 1.0)):
        raise ValueError(f"objective {name!r} parameter {p!r} must lie in (0, 1), got "
                         f"{a.tolist()[:10]}")
    return tuple(a.tolist())


def _check_ranges(name, v):
    def need(ok, what):
        if not ok:
            raise ValueError(f"objective {name!r}: {what}, got {v}")

    if name == "pseudo_huber":
        need(v["slope"] != 0.0, "slope must be nonzero")
    elif name == "huber":
        need(v["delta"] > 0.0, "delta must be > 0")
        need(v["outer_hessian"] >= 0.0, "outer_hessian must be >= 0")
    elif name in ("quantile", "expectile"):
        need(0.0 < v["alpha"] < 1.0, "alpha must be in (0, 1)")
    if name == "quantile":
        need(v["delta"] >= 0.0, "delta must be >= 0")
        if v["tie_gradient"] is None:
            v["tie_gradient"] = 1.0 - v["alpha"]
    elif name in ("logistic", "ova_logistic"):
        need(v["sigmoid"] > 0.0, "sigmoid must be > 0")
        need(v["pos_weight"] > 0.0 and v["neg_weight"] > 0.0, "pos_weight and neg_weight "
             "must be > 0")
    elif name == "tweedie":
        need(1.0 <= v["variance_power"] < 2.0, "variance_power must be in [1, 2)")
    elif name == "fair":
        need(v["c"] > 0.0, "c must be > 0")
    elif name == "aft":
        need(v["distribution"] in range(len(AFT_DISTRIBUTIONS)), "distribution must be "
             f"0, 1 or 2 ({', '.join(AFT_DISTRIBUTIONS)})")
        need(v["sigma"] > 0.0, "sigma must be > 0")
    if name in ("aft", "cox"):
        flags = (("fast_log", "erfc_approx", "minus_one_open") if name == "aft" else
                 ("float32_times", "sequential_ties", "unstable_ties")) + ("weights_ignored",)
        for flag in flags:
            need(v[flag] in (0.0, 1.0), f"{flag} must be 0 or 1")
    if name in ("softmax", "ova_logistic"):
        k = v["n_classes"]
        need(k == int(k) and k >= 2, "n_classes must be an integer >= 2")
    if name == "softmax":
        need(v["hess_factor"] > 0.0, "hess_factor must be > 0")


def loss_spec(objective, n_outputs=None):
    """Integer loss code and float64 parameter vector for the numba kernels.

    Parameters
    ----------
    objective : Objective or str
        A canonical objective (a bare name only for objectives without required
        parameters). The parameter-vector layout is in the module docstring.
    n_outputs : int, optional
        The model's number of outputs; when given it must be ``n_classes`` for softmax /
        ova_logistic and 1 for the other classification objectives; a regression
        objective may have several (one target per output).

    Returns
    -------
    code : int
    params : ndarray of float64

    Examples
    --------
    >>> from treeimp import Objective
    >>> loss_spec(Objective("poisson", {"max_delta_step": 0.0}))
    (9, array([0., 1.]))
    """
    name, params = _name_params(objective)
    v = _param_values(name, params)
    code = _SPECS[name][0]
    if name == "cox":
        raise ValueError("objective 'cox' has no per-row gradient: a row's g, h sum over "
                         "the risk set of all the evaluation rows; the node-statistic "
                         "measures (mdi_oob, ufi, ...) compute them over the rows of the "
                         "call (stats/cox.py)")
    if name == "poisson":
        vec = [v["max_delta_step"], math.exp(v["max_delta_step"])]
    elif "alphas" in v:
        vec = [len(v["alphas"]), *v["alphas"]]
    else:
        vec = list(v.values())
    if n_outputs is not None and name in ("aft", "cox") and int(n_outputs) != 1:
        raise ValueError(f"objective {name!r} has one output, the model has {int(n_outputs)}")
    if n_outputs is not None:
        want = int(v["n_classes"]) if "n_classes" in v else len(v.get("alphas", (0,)))
        # a regression objective on several targets: one output per target (levels of
        # one target have one output per level)
        several = (name not in _CLASS_OBJECTIVES and name not in LEVELS
                   and int(n_outputs) > 1)
        if int(n_outputs) != want and not several:
            raise ValueError(f"objective {name!r} needs {want} model outputs, the model has "
                             f"{int(n_outputs)}")
    return code, np.asarray(vec, dtype=np.float64)


def smoothed_spec(objective, n_outputs, scales):
    """Loss code and parameter vector of XGBoost >= 3.4's smoothed absolute error /
    quantile, whose gradients need a scale per boosting round and output.

    Parameters
    ----------
    objective : Objective
        "smoothed_absolute_error" or "smoothed_quantile" (params ``alphas``).
    n_outputs : int
        The model's outputs K (one per alpha, or one per target for absolute error).
    scales : ndarray of shape (n_stages, K)
        S of every round and output: (sum w sqrt|m - y| / sum w)^2 over the rows at their
        margins before the round, 0 when sum w is 0 (``drivers.smoothed_scales``).

    Returns
    -------
    code : int
    params : ndarray of float64
        [K, alpha_1..K (0 for absolute error), S_1..K of the current round (filled by
        ``set_stage_params``), then ``scales`` row by row].
    """
    name, params = _name_params(objective)
    if name not in SMOOTHED:
        raise ValueError(f"objective {name!r} is not one of {SMOOTHED}")
    K = int(n_outputs)
    if name == "smoothed_quantile":
        alphas = _alphas(name, "alphas", params.get("alphas"))
        if len(alphas) != K:
            raise ValueError(f"objective {name!r} needs {len(alphas)} model outputs, the "
                             f"model has {K}")
    else:
        alphas = (0.0,) * K
    scales = np.asarray(scales, dtype=np.float64)
    if scales.ndim != 2 or scales.shape[1] != K:
        raise ValueError(f"scales must have shape (n_stages, {K}), got {scales.shape}")
    code = SMOOTHED_QUANTILE if name == "smoothed_quantile" else SMOOTHED_ABSOLUTE_ERROR
    vec = np.concatenate([[K], alphas, np.zeros(K), scales.ravel()])
    return code, vec


def _as_margin(margin):
    m = np.asarray(margin, dtype=np.float64)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2:
        raise ValueError(f"margin must be 1-D or 2-D (n_rows, n_outputs), got shape {m.shape}")
    return np.ascontiguousarray(m)


def grad_hess_array(objective, margin, y, col=None):
    """Gradients and hessians of many rows (tests, the formula layer).

    Parameters
    ----------
    objective : Objective or str
    margin : array of shape (n_rows, n_outputs) or (n_rows,)
    y : array of shape (n_rows,)
        Targets as :func:`check_target` returns them.
    col : int, optional
        Return only this output's column.

    Returns
    -------
    g, h : ndarrays of shape (n_rows, n_outputs), or (n_rows,) with ``col``

    Examples
    --------
    >>> g, h = grad_hess_array("squared_error", [1.0, 2.0], [0.5, 2.5], col=0)
    >>> g.tolist(), h.tolist()
    ([0.5, -0.5], [1.0, 1.0])
    """
    m = _as_margin(margin)
    code, params = loss_spec(objective, n_outputs=m.shape[1])
    g = np.empty_like(m)
    h = np.empty_like(m)
    if code == AFT:  # y (n_rows, 2): each row's lower and upper bound
        yv = np.ascontiguousarray(y, dtype=np.float64)
        if yv.shape != (m.shape[0], 2):
            raise ValueError(f"y must have shape ({m.shape[0]}, 2) for objective 'aft', got "
                             f"{yv.shape}")
        grad_hess_target_rows(code, params, m, yv.ravel(), g, h)
        return (g, h) if col is None else (g[:, col].copy(), h[:, col].copy())
    yv = np.ascontiguousarray(y, dtype=np.float64).reshape(-1)
    if yv.shape[0] != m.shape[0]:
        raise ValueError(f"margin has {m.shape[0]} rows but y has {yv.shape[0]}")
    grad_hess_rows(code, params, m, yv, g, h)
    if col is None:
        return g, h
    return g[:, col].copy(), h[:, col].copy()


# --------------------------------------------------------------------------- targets
def _count_msg(name, bad, what, y):
    n_bad = int(bad.sum())
    first = int(np.flatnonzero(bad)[0])
    return (f"y has {n_bad} of {len(y)} values {what} for objective {name!r} "
            f"(first at row {first}: {float(y[first])})")


def check_target(objective, y, classes=None, n_targets=1):
    """Validate y for the objective; return it as float64 (class indices for classifiers).

    Parameters
    ----------
    objective : Objective or str
    y : array-like of shape (n_rows,), or (n_rows, n_targets)
    classes : array-like, optional
        The model's classes; for classification objectives labels are mapped to their
        positions in it (unknown labels are an error). Ignored for regression objectives.
    n_targets : int, default 1
        Targets per row: several for a regression objective fit on several targets
        (XGBoost ``num_target``), whose y then has one column per target.

    Returns
    -------
    ndarray of float64, shape (n_rows,), or (n_rows, n_targets) for several targets

    Raises
    ------
    ValueError
        NaN / inf values; labels outside the model's classes; negative targets (poisson,
        tweedie), non-positive targets (gamma), targets outside [0, 1] (logistic,
        cross_entropy, exponential without classes), non-integer or out-of-range class
        indices (softmax, ova_logistic without classes). Messages give counts.
    """
    name, params = _name_params(objective)
    # smoothed objectives (no loss_spec; ``smoothed_spec``): any finite target
    v = {} if name in SMOOTHED else _param_values(name, params)
    arr = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if name == "aft" and v["minus_one_open"] == 1.0:
        return check_minus_one_interval_target(arr)
    if name == "aft":
        return check_interval_target(name, arr)
    if n_targets > 1:
        if name in _CLASS_OBJECTIVES:
            raise ValueError(f"objective {name!r} has one target per row, not {n_targets}")
        if arr.ndim != 2 or arr.shape[1] != n_targets:
            raise ValueError(f"the model was fit on {n_targets} targets: y must have shape "
                             f"(n_rows, {n_targets}), got {arr.shape}")
        return check_target(objective, arr.reshape(-1)).reshape(arr.shape)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {arr.shape}")
    n_classes = int(v["n_classes"]) if "n_classes" in v else 2
    if classes is not None and name in _CLASS_OBJECTIVES:
        classes = np.asarray(classes)
        if len(classes) != n_classes:
            raise ValueError(f"objective {name!r} needs {n_classes} classes, the model lists "
                             f"{len(classes)}")
        return class_indices(arr, classes, dtype=np.float64)
    try:
        yf = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"y must be numeric for objective {name!r} without the model's "
                        f"classes, got dtype {arr.dtype}") from None
    bad = ~np.isfinite(yf)
    if bad.any():
        raise ValueError(_count_msg(name, bad, "NaN or inf", yf))
    if name in ("softmax", "ova_logistic"):
        bad = yf != np.floor(yf)
        if bad.any():
            raise ValueError(_count_msg(name, bad, "not integer class indices", yf))
        bad = (yf < 0) | (yf >= n_classes)
        if bad.any():
            raise ValueError(_count_msg(name, bad, f"outside the class indices 0..{n_classes - 1}",
                                        yf))
    elif name in ("logistic", "cross_entropy", "exponential"):
        bad = (yf < 0) | (yf > 1)
        if bad.any():
            raise ValueError(_count_msg(name, bad, "outside [0, 1]", yf))
    elif name in ("poisson", "tweedie"):
        bad = yf < 0
        if bad.any():
            raise ValueError(_count_msg(name, bad, "negative", yf))
    elif name == "gamma":
        bad = yf <= 0
        if bad.any():
            raise ValueError(_count_msg(name, bad, "<= 0", yf))
    elif name == "squared_log_error":
        bad = yf <= -1
        if bad.any():
            raise ValueError(_count_msg(name, bad, "<= -1", yf))
    elif name == "cross_entropy_lambda":
        bad = (yf < 0) | (yf > 1)
        if bad.any():
            raise ValueError(_count_msg(name, bad, "outside [0, 1]", yf))
    return yf


def check_interval_target(name, arr):
    """Survival labels as an (n_rows, 2) float64 array of [lower, upper] bounds of each
    row's time, as XGBoost's ``label_lower_bound`` / ``label_upper_bound``: lower ==
    upper an observed time (> 0), upper = inf right-censored at lower, lower = 0
    left-censored at upper, 0 < lower < upper < inf interval-censored."""
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"objective {name!r} needs y of shape (n_rows, 2): each row's "
                         "[lower, upper] bound of its time (upper = inf: right-censored; "
                         f"lower = upper: observed), got shape {arr.shape}")
    try:
        yf = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"y must be numeric for objective {name!r}, got dtype "
                        f"{arr.dtype}") from None
    lo, up = yf[:, 0], yf[:, 1]
    for bad, what in ((np.isnan(lo) | np.isnan(up), "NaN"),
                      (~np.isfinite(lo), "with an infinite lower bound"),
                      (lo < 0, "with a negative lower bound"),
                      (up <= 0, "with an upper bound <= 0"),
                      (lo > up, "with lower bound > upper bound"),
                      ((lo == up) & (lo <= 0), "with an observed time <= 0")):
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise ValueError(f"y has {int(bad.sum())} of {len(yf)} rows {what} for objective "
                             f"{name!r} (first at row {first}: lower {float(lo[first])}, "
                             f"upper {float(up[first])})")
    return yf


def check_minus_one_interval_target(arr):
    """Interval labels of objective aft with minus_one_open 1 (CatBoost's SurvivalAft
    labels): (n_rows, 2) [lower, upper] with -1 for an unbounded end (lower == upper an
    observed time, upper -1 right-censored, lower -1 left-censored), rounded to float32
    as CatBoost keeps them, as the (n_rows, 2) float64
    bounds that :func:`check_interval_target` returns (-1 becomes 0 below, inf above).
    Rejected: NaN or infinite values, also beyond the float32 range (CatBoost
    reads inf as a time near e^88.7), bounds that are neither -1 nor > 0 (CatBoost takes
    the fast log of 0 or of a negative number as a finite time), both ends -1, lower >
    upper."""
    name = "aft"
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError("a CatBoost SurvivalAft model needs y of shape (n_rows, 2): each "
                         "row's [lower, upper] bound of its time, -1 for an unbounded end "
                         f"(CatBoost's labels), got shape {arr.shape}")
    try:
        with np.errstate(over="ignore"):  # beyond float32: inf, rejected below
            # CatBoost keeps its labels as float32: bounds that round alike are equal
            yf = arr.astype(np.float64).astype(np.float32).astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"y must be numeric for objective {name!r}, got dtype "
                        f"{arr.dtype}") from None
    lo, up = yf[:, 0], yf[:, 1]
    open_lo, open_up = lo == -1.0, up == -1.0
    for bad, what in ((~np.isfinite(lo) | ~np.isfinite(up), "NaN or infinite (CatBoost "
                       "marks an unbounded end with -1)"),
                      (~open_lo & (lo <= 0), "with a lower bound <= 0 that is not -1"),
                      (~open_up & (up <= 0), "with an upper bound <= 0 that is not -1"),
                      (open_lo & open_up, "with both bounds -1"),
                      (~open_lo & ~open_up & (lo > up), "with lower bound > upper bound")):
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise ValueError(f"y has {int(bad.sum())} of {len(yf)} rows {what} for a CatBoost "
                             f"SurvivalAft model (first at row {first}: lower "
                             f"{float(lo[first])}, upper {float(up[first])})")
    return np.column_stack([np.where(open_lo, 0.0, lo), np.where(open_up, np.inf, up)])


def check_weights(objective, w):
    """Reject sample weights the objective's gradients cannot take as a factor:
    LightGBM's cross_entropy_lambda puts them inside its link (not modelled); CatBoost's
    Cox and SurvivalAft drop them from their derivatives."""
    name, params = _name_params(objective)
    if name in ("aft", "cox") and params.get("weights_ignored", 0.0) == 1.0 and w is not None:
        wv = np.asarray(w, dtype=np.float64)
        if np.any(wv != 1.0):
            raise ValueError(f"objective {name!r} of a CatBoost model (Cox / SurvivalAft) with "
                             "sample weights other than 1 is not supported: CatBoost's "
                             "derivatives of these losses ignore the sample weight, so a "
                             "weighted held-out gradient would not be CatBoost's")
    if name == "cross_entropy_lambda" and w is not None:
        wv = np.asarray(w, dtype=np.float64)
        if np.any(wv != 1.0):
            raise ValueError("objective 'cross_entropy_lambda' (LightGBM xentlambda) with "
                             "sample weights other than 1 is not supported: LightGBM puts "
                             "the weights inside its gradients, not as a factor")


# --------------------------------------------------------------------------- link, loss
def _sigmoid(z):
    """1 / (1 + e^-z) for z >= 0 and e^z / (1 + e^z) below: never exp of a positive
    number. Both branches use e = exp(-|z|), computed once for all rows (no masks)."""
    e = np.exp(-np.abs(z))
    d = 1.0 + e
    return np.where(z >= 0, 1.0 / d, e / d)


def _softplus(z):
    """log(1 + exp(z)) without overflow."""
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def default_link(name):
    """The link of a canonical objective name ("sigmoid" for logistic, ...)."""
    if name not in _SPECS:
        raise _unsupported(name)
    return _SPECS[name][1]


def link(objective, margin):
    """Prediction from the raw margin, as the library's predict returns it.

    ``Objective.link`` decides ("identity", "sigmoid" with the objective's ``sigmoid``
    scale, "softmax" over the outputs, "exp", "sigmoid2" = sigmoid(2 m), "proba" =
    identity, "expectile_stack" = XGBoost's non-crossing levels, "sorted" = each row's
    outputs in increasing order); a bare name uses the objective's default link. Same
    shape as ``margin``.
    """
    name, params = _name_params(objective)
    how = getattr(objective, "link", None) or (_SPECS[name][1] if name in _SPECS else None)
    if how not in LINKS:
        raise ValueError(f"unknown link {how!r} for objective {name!r}; known links: "
                         f"{', '.join(LINKS)}")
    m = np.asarray(margin, dtype=np.float64)
    if how in ("identity", "proba"):
        return m.copy()
    if how == "exp":
        return np.exp(m)
    if how == "sigmoid2":
        return _sigmoid(2.0 * m)
    if how == "softplus":  # LightGBM xentlambda's log(1 + e^m)
        return _softplus(m)
    if how == "sigmoid":
        return _sigmoid(float(params.get("sigmoid", 1.0)) * m)
    if how == "expectile_stack":
        return _expectile_levels(_as_margin(m)).reshape(m.shape)
    if how == "sorted":  # XGBoost >= 3.4 sorts a row's quantiles
        return np.sort(_as_margin(m), axis=1).reshape(m.shape)
    m2 = _as_margin(m)
    e = np.exp(m2 - m2.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(m.shape)


def _expectile_levels(M):
    """XGBoost's non-crossing expectiles from their margins (n, K): the first margin,
    then each next level 1e-6 + softplus(margin) above the one before."""
    out = M.copy()
    if M.shape[1] > 1:
        out[:, 1:] = EXPECTILE_GAP + _softplus(M[:, 1:])
    return np.cumsum(out, axis=1)


def _class_weights(v, t):
    return np.where(t == 1.0, v["pos_weight"], np.where(t == 0.0, v["neg_weight"], 1.0))


def loss(objective, margin, y):
    """Per-row training loss whose derivative in the margin is :func:`grad_hess`'s g.

    It equals the library's evaluation metric up to a term that depends on y only:
    half squared error, absolute error, pinball, Huber, pseudo-Huber
    (slope^2 (sqrt(1 + (d/slope)^2) - 1)), log loss (times pos_weight / neg_weight, with
    the ``sigmoid`` scale), cross-entropy, multiclass log loss, the sum of the per-class
    log losses (ova_logistic), the half deviances of poisson, gamma and tweedie (zero at a
    perfect fit: scikit-learn's ``loss + constant_to_optimal_zero``; XGBoost's and
    LightGBM's negative log-likelihoods differ from them by a function of y), and the
    exponential loss y e^-m + (1 - y) e^m, the expectile loss a d^2 and log cosh d.

    Parameters
    ----------
    objective : Objective or str
    margin : array of shape (n_rows, n_outputs) or (n_rows,)
    y : array of shape (n_rows,), as :func:`check_target` returns it; (n_rows,
        n_outputs) for a regression objective on several targets, whose loss is the sum
        of the per-target losses

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    name, params = _name_params(objective)
    v = _param_values(name, params)
    M = _as_margin(margin)
    if M.shape[1] > 1 and name not in ("softmax", "ova_logistic") and "alphas" not in v:
        Y = np.asarray(y, dtype=np.float64)
        if name in _CLASS_OBJECTIVES or Y.shape != M.shape:
            raise ValueError(f"objective {name!r} has one output per target; margin has "
                             f"{M.shape[1]} columns and y shape {Y.shape}")
        # several targets: the sum of the per-target losses, whose derivative in
        # margin k is output k's g
        return sum(loss(objective, M[:, k], Y[:, k]) for k in range(M.shape[1]))
    if name == "aft":
        return _aft_loss(v, M, y)
    if name == "cox":
        raise ValueError("objective 'cox' has no per-row loss (its partial likelihood sums "
                         "over risk sets); score survival models with "
                         "scoring='concordance_index'")
    yv = np.asarray(y, dtype=np.float64).reshape(-1)
    if yv.shape[0] != M.shape[0]:
        raise ValueError(f"margin has {M.shape[0]} rows but y has {yv.shape[0]}")
    if name in ("softmax", "ova_logistic"):
        K = int(v["n_classes"])
        if M.shape[1] != K:
            raise ValueError(f"objective {name!r} needs {K} margin columns, got {M.shape[1]}")
        idx = yv.astype(np.int64)
        if name == "softmax":
            mx = M.max(axis=1)
            lse = mx + np.log(np.exp(M - mx[:, None]).sum(axis=1))
            return lse - M[np.arange(len(idx)), idx]
        T = (idx[:, None] == np.arange(K)[None, :]).astype(np.float64)
        Z = v["sigmoid"] * M
        return (_class_weights(v, T) * (_softplus(Z) - T * Z)).sum(axis=1)
    if "alphas" in v:
        al = np.asarray(v["alphas"])
        if M.shape[1] != al.size:
            raise ValueError(f"objective {name!r} needs {al.size} margin columns, got "
                             f"{M.shape[1]}")
        if name == "quantiles":
            D = M - yv[:, None]
            return np.where(D >= 0, (1.0 - al) * D, -al * D).sum(axis=1)
        D = _expectile_levels(M) - yv[:, None]
        return 0.5 * (np.where(D >= 0, 1.0 - al, al) * D * D).sum(axis=1)
    if M.shape[1] != 1:
        raise ValueError(f"objective {name!r} has one output, margin has {M.shape[1]} columns")
    m = M[:, 0]
    d = m - yv
    if name == "squared_error":
        return 0.5 * d * d
    if name == "absolute_error":
        return np.abs(d)
    if name == "pseudo_huber":
        s = v["slope"]
        return s * s * (np.sqrt(1.0 + (d / s) ** 2) - 1.0)
    if name == "huber":
        a, delta = np.abs(d), v["delta"]
        return np.where(a <= delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    if name == "expectile":
        return np.where(d < 0, v["alpha"], 1.0 - v["alpha"]) * d * d
    if name == "log_cosh":
        a = np.abs(d)  # log cosh d = |d| + log1p(e^-2|d|) - log 2, without overflow
        return a + np.log1p(np.exp(-2.0 * a)) - np.log(2.0)
    if name == "quantile":
        return np.where(d >= 0, (1.0 - v["alpha"]) * d, -v["alpha"] * d)
    if name == "logistic":
        z = v["sigmoid"] * m
        return _class_weights(v, yv) * (_softplus(z) - yv * z)
    if name in ("cross_entropy", "cross_entropy_lambda"):
        return _softplus(m) - yv * m
    if name == "squared_log_error":
        return 0.5 * (np.log1p(np.maximum(m, -1.0 + 1e-6)) - np.log1p(yv)) ** 2
    if name == "fair":
        a = np.abs(d) / v["c"]
        return v["c"] ** 2 * (a - np.log1p(a))
    if name == "mape":
        return np.abs(d) / np.maximum(1.0, np.abs(yv))
    if name == "exponential":
        return yv * np.exp(-m) + (1.0 - yv) * np.exp(m)
    ylogy = np.where(yv > 0, yv * np.log(np.where(yv > 0, yv, 1.0)), 0.0)
    if name == "poisson":
        return ylogy - yv * m - yv + np.exp(m)
    if name == "gamma":
        return m - np.log(yv) + yv * np.exp(-m) - 1.0
    # tweedie
    rho = v["variance_power"]
    if rho == 1.0:
        return ylogy - yv * m - yv + np.exp(m)
    a, b = 1.0 - rho, 2.0 - rho
    return (np.power(yv, b) / (a * b) - yv * np.exp(a * m) / a + np.exp(b * m) / b)


def _aft_pdf_cdf(dist, z):
    """Density and distribution function of survival:aft's noise at z."""
    from scipy import special

    if dist == 0:
        return np.exp(-z * z / 2.0) / math.sqrt(2.0 * math.pi), special.ndtr(z)
    if dist == 1:
        cdf = special.expit(z)
        return cdf * special.expit(-z), cdf
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.exp(z)
        return np.where(np.isinf(w), 0.0, w * np.exp(-w)), -np.expm1(-w)


def _aft_loss(v, M, y):
    """XGBoost's AFTLoss: -log(max(pdf(z) / (sigma lower), 1e-12)) for an observed time,
    -log(max(cdf(z_u) - cdf(z_l), 1e-12)) for a censored one (z = (log t - m) / sigma)."""
    Y = np.asarray(y, dtype=np.float64)
    if M.shape[1] != 1 or Y.shape != (M.shape[0], 2):
        raise ValueError(f"objective 'aft' needs one margin column and y of shape (n_rows, 2); "
                         f"got {M.shape[1]} columns and y {Y.shape}")
    m, lo, up = M[:, 0], Y[:, 0], Y[:, 1]
    dist, sigma = int(v["distribution"]), v["sigma"]
    log = fast_logf if v["fast_log"] == 1.0 else np.log
    with np.errstate(divide="ignore"):
        z_l = (log(lo) - m) / sigma
        z_u = (log(up) - m) / sigma
    pdf_l, cdf_l = _aft_pdf_cdf(dist, z_l)
    _, cdf_u = _aft_pdf_cdf(dist, z_u)
    cdf_l = np.where(lo <= 0, 0.0, cdf_l)
    cdf_u = np.where(np.isinf(up), 1.0, cdf_u)
    exact = lo == up
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = np.where(exact, pdf_l / (sigma * np.where(exact, lo, 1.0)), cdf_u - cdf_l)
    return -np.log(np.maximum(dens, AFT_EPS))


def fast_logf(t):
    """CatBoost's FastLogf (``kernels/gradients.fast_logf``) of every float32(t) > 0
    (finite); -inf at t <= 0 and inf at t = inf, as the loss reads the bounds."""
    x = np.atleast_1d(np.asarray(t, dtype=np.float64))
    ok = np.isfinite(x) & (x > 0)
    f = np.asarray(x[ok], dtype=np.float32)
    bits = f.view(np.uint32)
    mx = ((bits & np.uint32(0x007FFFFF)) | np.uint32(0x3F000000)).view(np.float32)
    y = bits.astype(np.float32) * np.float32(1.1920928955078125e-7)
    log2 = (y - np.float32(124.22551499) - np.float32(1.498030302) * mx
            - np.float32(1.72587999) / (np.float32(0.3520887068) + mx))
    out = np.where(x > 0, np.inf, -np.inf)
    out[ok] = (np.float32(0.69314718) * log2).astype(np.float64)
    return out.reshape(np.shape(t))

