"""Gradients and hessians of the boosting objectives, per row, for the numba kernels.

The formulas, and which library each parameter reproduces, are documented in
``treeimp/model/losses.py``, which builds the integer loss code and the float64
parameter vector (``loss_spec``, ``smoothed_spec``) that these functions take from the
codes below (``losses`` re-exports them). The staged kernels (``staged.py``,
``staged_scale.py``) call :func:`grad_hess_row` once per row at the start of every boosting round.
"""

import math

import numpy as np
from numba import njit

SQUARED_ERROR = 0
ABSOLUTE_ERROR = 1
PSEUDO_HUBER = 2
HUBER = 3
QUANTILE = 4
LOGISTIC = 5
CROSS_ENTROPY = 6
SOFTMAX = 7
OVA_LOGISTIC = 8
POISSON = 9
GAMMA = 10
TWEEDIE = 11
EXPONENTIAL = 12
EXPECTILE = 13
LOG_COSH = 14
QUANTILES = 15
EXPECTILE_STACK = 16
# XGBoost >= 3.4's reg:absoluteerror / reg:quantileerror (kernels/staged_scale.py)
SMOOTHED_ABSOLUTE_ERROR = 17
SMOOTHED_QUANTILE = 18
SQUARED_LOG_ERROR = 19  # XGBoost reg:squaredlogerror
FAIR = 20  # LightGBM fair
MAPE = 21  # LightGBM mape
AFT = 22  # XGBoost survival:aft, CatBoost SurvivalAft; two targets per row (lower, upper)
# XGBoost survival:cox / CatBoost Cox: every row's g, h of every round computed beforehand
# over all rows (kernels/cox.py), read as the row's targets; params [current round, n_rounds]
COX = 23
# the same reading for any objective whose g, h are computed before the staged pass
# (linear leaf models: margins the constant-leaf kernel cannot form, stats/linear_leaves.py);
# K outputs: 2 K values per row and round
PRECOMPUTED = COX
# XGBoost's constants of reg:squaredlogerror (margin floor, hessian floor)
SQUARED_LOG_MIN_MARGIN = -1.0 + float(np.float32(1e-6))
SQUARED_LOG_MIN_HESSIAN = float(np.float32(1e-6))
# XGBoost's AFT constants (survival_util.h): gradient and hessian clips, denominator eps
AFT_MIN_GRADIENT, AFT_MAX_GRADIENT = -15.0, 15.0
AFT_MIN_HESSIAN, AFT_MAX_HESSIAN = 1e-16, 15.0
AFT_EPS = 1e-12
AFT_NORMAL, AFT_LOGISTIC, AFT_EXTREME = 0, 1, 2  # aft_loss_distribution
# XGBoost's float32 constants of the smoothed quantile (kSmoothingScale, kMinSurrogateRatio)
SMOOTHING_SCALE = float(np.float32(0.04))
MIN_SURROGATE_RATIO = float(np.float32(3.0e-4))
# XGBoost's gap between consecutive non-crossing expectiles (kRtEps)
EXPECTILE_GAP = 1e-6


@njit(cache=True, inline="always")
def is_smoothed(code):
    """Whether the objective's gradients read a scale per round (``smoothed_spec``)."""
    return code == SMOOTHED_ABSOLUTE_ERROR or code == SMOOTHED_QUANTILE


@njit(cache=True)
def set_stage_params(code, params, source, stage):
    """Smoothed objectives: params' current scales := round ``stage``'s from ``source``
    (the ``losses.smoothed_spec`` vector); survival:cox: params[0] := stage; other
    objectives: nothing."""
    if code == COX:
        params[0] = stage
        return
    if not is_smoothed(code):
        return
    K = int(source[0])
    first = 1 + 2 * K + stage * K
    for k in range(K):
        params[1 + K + k] = source[first + k]


@njit(cache=True, inline="always")
def _smoothed_grad_hess(code, alpha, scale, m, y):
    """(g, h) of XGBoost >= 3.4's surrogate at margin m, target y, round scale S (its
    arithmetic, in float64): absolute error g = r S / hypot(S, r), h = S / hypot(S, r)
    (1 when both are 0); quantile, x = r / (c S): g = S (tanh x + 1 - 2 alpha) / 2,
    h = max(tanh(x) / x, eps) / (2 c) (tanh(x) / x = 1 at x = 0), both 0 when S <= 0."""
    r = m - y
    if code == SMOOTHED_ABSOLUTE_ERROR:
        norm = math.hypot(scale, r)
        c = scale / norm if norm > 0.0 else 1.0
        return r * c, c
    if not scale > 0.0:
        return 0.0, 0.0
    x = r / (SMOOTHING_SCALE * scale)
    t = math.tanh(x)
    ratio = 1.0 if x == 0.0 else t / x
    ratio = max(ratio, MIN_SURROGATE_RATIO)
    return 0.5 * scale * (t + 1.0 - 2.0 * alpha), 0.5 / SMOOTHING_SCALE * ratio


@njit(cache=True)
def _scalar_grad_hess(code, params, m, y):
    """(g, h) of a single-output objective at margin m, target y."""
    if code == SQUARED_ERROR:
        return m - y, 1.0
    if code == ABSOLUTE_ERROR:
        d = m - y
        if d > 0.0:
            return 1.0, 1.0
        if d < 0.0:
            return -1.0, 1.0
        return params[0], 1.0
    if code == PSEUDO_HUBER:
        d = m - y
        c = 1.0 + (d / params[0]) ** 2
        sc = math.sqrt(c)
        return d / sc, 1.0 / (c * sc)
    if code == HUBER:
        d = m - y
        delta = params[0]
        if d > delta:
            return delta, params[1]
        if d < -delta:
            return -delta, params[1]
        return d, 1.0
    if code == QUANTILE:
        d = m - y
        if d > params[2]:
            return 1.0 - params[0], 1.0
        if d < -params[2]:
            return -params[0], 1.0
        return params[1], 1.0
    if code == LOGISTIC:
        s = params[0]
        p = 1.0 / (1.0 + math.exp(-s * m))
        c = params[1] if y == 1.0 else (params[2] if y == 0.0 else 1.0)
        return c * s * (p - y), c * s * s * p * (1.0 - p)
    if code == CROSS_ENTROPY:
        p = 1.0 / (1.0 + math.exp(-m))
        return p - y, p * (1.0 - p)
    if code == POISSON:
        e = math.exp(m)
        return e - y, e * params[1]
    if code == GAMMA:
        q = y * math.exp(-m)
        return 1.0 - q, q
    if code == TWEEDIE:
        rho = params[0]
        e1 = math.exp((1.0 - rho) * m)
        e2 = math.exp((2.0 - rho) * m)
        return -y * e1 + e2, -y * (1.0 - rho) * e1 + (2.0 - rho) * e2
    if code == EXPONENTIAL:
        e = math.exp(m)
        return -y / e + (1.0 - y) * e, y / e + (1.0 - y) * e
    if code == EXPECTILE:
        d = m - y
        a = params[0] if d < 0.0 else 1.0 - params[0]
        return 2.0 * a * d, 2.0 * a
    if code == LOG_COSH:
        t = math.tanh(m - y)
        return t, 1.0 - t * t
    if code == SQUARED_LOG_ERROR:
        p = max(m, SQUARED_LOG_MIN_MARGIN)
        lp, ly = math.log1p(p), math.log1p(y)
        return (lp - ly) / (p + 1.0), max((ly - lp + 1.0) / ((p + 1.0) * (p + 1.0)),
                                          SQUARED_LOG_MIN_HESSIAN)
    if code == FAIR:
        d = m - y
        c = params[0]
        a = abs(d) + c
        return c * d / a, c * c / (a * a)
    if code == MAPE:
        d = m - y
        s = 1.0 if d > 0.0 else (-1.0 if d < 0.0 else 0.0)
        return s / max(1.0, abs(y)), 1.0
    return math.nan, math.nan


@njit(cache=True, inline="always")
def _aft_pdf(dist, z):
    """Density of the AFT noise distribution at z and its first two derivatives, as
    XGBoost's probability_distribution.h computes them (0 where exp(z) overflows)."""
    if dist == AFT_NORMAL:
        pdf = math.exp(-z * z / 2.0) / math.sqrt(2.0 * math.pi)
        return pdf, -z * pdf, (z * z - 1.0) * pdf
    w = math.exp(z)
    if dist == AFT_LOGISTIC:
        if math.isinf(w) or math.isinf(w * w):
            return 0.0, 0.0, 0.0
        pdf = w / ((1.0 + w) * (1.0 + w))
        return pdf, pdf * (1.0 - w) / (1.0 + w), pdf * (w * w - 4.0 * w + 1.0) / (
            (1.0 + w) * (1.0 + w))
    if math.isinf(w):
        return 0.0, 0.0, 0.0
    pdf = w * math.exp(-w)
    hess = 0.0 if math.isinf(w * w) else (w * w - 3.0 * w + 1.0) * pdf
    return pdf, (1.0 - w) * pdf, hess


@njit(cache=True, inline="always")
def erfc_approx(x):
    """erfc(x) by the Chebyshev fit of Numerical Recipes (erfcc, fractional error below
    1.2e-7), which CatBoost up to 1.2.3 takes for the normal distribution function:
    t exp(-x^2 + P(t)) with t = 1 / (1 + |x| / 2) and P of degree 9; 2 - erfc(|x|) for
    x < 0."""
    z = abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    p = -0.82215223 + t * 0.17087277
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    ans = t * math.exp(-z * z - 1.26551223 + t * p)
    return ans if x >= 0.0 else 2.0 - ans


@njit(cache=True, inline="always")
def _aft_cdf(dist, z, erfc=False):
    """Distribution function of the AFT noise at z (XGBoost's arithmetic; ``erfc``: the
    normal one as CatBoost <= 1.2.3 computes it, 0.5 erfc(-z / sqrt 2))."""
    if dist == AFT_NORMAL:
        if erfc:
            return 0.5 * erfc_approx(-z / math.sqrt(2.0))
        return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    w = math.exp(z)
    if dist == AFT_LOGISTIC:
        return 1.0 if math.isinf(w) else w / (1.0 + w)
    return 1.0 - math.exp(-w)


@njit(cache=True)
def _aft_limits(dist, kind, sign, sigma):
    """XGBoost's (gradient, hessian) where its fraction is NaN / inf with a denominator
    below 1e-12 (GetLimitGradAtInfPred, GetLimitHessAtInfPred); kind 0 uncensored,
    1 right-, 2 left-, 3 interval-censored; sign: the z-score is > 0."""
    s2 = 1.0 / (sigma * sigma)
    if dist == AFT_NORMAL:
        if kind == 1:
            return (AFT_MIN_GRADIENT, s2) if sign else (0.0, AFT_MIN_HESSIAN)
        if kind == 2:
            return (0.0, AFT_MIN_HESSIAN) if sign else (AFT_MAX_GRADIENT, s2)
        return (AFT_MIN_GRADIENT if sign else AFT_MAX_GRADIENT), s2
    if dist == AFT_LOGISTIC:
        if kind == 1:
            return (-1.0 / sigma if sign else 0.0), AFT_MIN_HESSIAN
        if kind == 2:
            return (0.0 if sign else 1.0 / sigma), AFT_MIN_HESSIAN
        return (-1.0 / sigma if sign else 1.0 / sigma), AFT_MIN_HESSIAN
    hess = AFT_MAX_HESSIAN if sign else AFT_MIN_HESSIAN
    if kind == 1:
        return (AFT_MIN_GRADIENT if sign else 0.0), hess
    if kind == 2:
        return (0.0 if sign else 1.0 / sigma), AFT_MIN_HESSIAN
    return (AFT_MIN_GRADIENT if sign else 1.0 / sigma), hess


@njit(cache=True, inline="always")
def fast_logf(t):
    """CatBoost's FastLogf of float32(t) (library/cpp/fast_log, the fastapprox
    approximation, absolute error up to 1e-4), in float32 arithmetic: the integer bits
    of t read as a float, times 2^-23, minus a rational correction in the mantissa m in
    [0.5, 1), times ln 2. ``frexp`` gives m and the exponent without reinterpreting
    bits. t > 0."""
    x = np.float32(t)
    if x < 1.1754943508222875e-38:  # subnormal: exponent bits 0, the bits are x / 2^-149
        bits = int(float(x) * 2.0 ** 149)
        mx = np.float32(0.5 + bits * 2.0 ** -24)
    else:
        f, e = math.frexp(x)  # x = f 2^e, f in [0.5, 1): the mantissa bits, exponent -1
        mx = np.float32(f)
        # the bits of x as an integer: biased exponent (e - 1 + 127), 23 mantissa bits
        bits = (e + 126) * 8388608 + int((f * 2.0 - 1.0) * 8388608.0)
    y = np.float32(bits) * np.float32(1.1920928955078125e-7)
    log2 = (y - np.float32(124.22551499) - np.float32(1.498030302) * mx
            - np.float32(1.72587999) / (np.float32(0.3520887068) + mx))
    return float(np.float32(0.69314718) * log2)


@njit(cache=True, inline="always")
def _aft_log(t, fast):
    """log of a survival time: CatBoost's FastLogf (``fast``) or the exact log."""
    return fast_logf(t) if fast else math.log(t)


@njit(cache=True)
def aft_grad_hess(dist, sigma, m, lower, upper, fast=False, erfc=False):
    """(g, h) of XGBoost's survival:aft at margin m (the log time) for a label in
    [lower, upper] (lower == upper: an exact time; upper inf: right-censored; lower 0:
    left-censored), as survival_util.h computes them: the derivatives of the negative
    log-likelihood of log T = m + sigma Z, g = (pdf_u - pdf_l) / (sigma (cdf_u - cdf_l))
    and h = -(dcdf dgrad - dpdf^2) / (sigma dcdf)^2 for censored labels, g = pdf' /
    (sigma pdf), h = -(pdf pdf'' - pdf'^2) / (sigma pdf)^2 for exact ones; XGBoost's
    limits where the fraction is not finite with a denominator < 1e-12; g clipped to
    [-15, 15], h to [1e-16, 15]. CatBoost's SurvivalAft (``fast``) has the same
    formulas, limits and clips with its FastLogf of the float32 time in place of log;
    ``erfc``: the normal distribution function of CatBoost <= 1.2.3 (:func:`erfc_approx`)."""
    if lower == upper:
        kind = 0
        z = (_aft_log(lower, fast) - m) / sigma
        pdf, dpdf, ddpdf = _aft_pdf(dist, z)
        num_g, den_g = dpdf, sigma * pdf
        num_h, den_h = -(pdf * ddpdf - dpdf * dpdf), sigma * sigma * pdf * pdf
        sign = z > 0.0
    else:
        kind = 3
        z_u = 0.0
        z_l = 0.0
        if math.isinf(upper):
            pdf_u, cdf_u, dpdf_u = 0.0, 1.0, 0.0
            kind = 1
        else:
            z_u = (_aft_log(upper, fast) - m) / sigma
            pdf_u, dpdf_u, _ = _aft_pdf(dist, z_u)
            cdf_u = _aft_cdf(dist, z_u, erfc)
        if lower <= 0.0:
            pdf_l, cdf_l, dpdf_l = 0.0, 0.0, 0.0
            kind = 2
        else:
            z_l = (_aft_log(lower, fast) - m) / sigma
            pdf_l, dpdf_l, _ = _aft_pdf(dist, z_l)
            cdf_l = _aft_cdf(dist, z_l, erfc)
        dcdf = cdf_u - cdf_l
        dpdf = pdf_u - pdf_l
        num_g, den_g = dpdf, sigma * dcdf
        num_h, den_h = -(dcdf * (dpdf_u - dpdf_l) - dpdf * dpdf), (sigma * dcdf) ** 2
        sign = z_u > 0.0 or z_l > 0.0
    g = num_g / den_g if den_g != 0.0 else (math.nan if num_g == 0.0 else math.inf)
    h = num_h / den_h if den_h != 0.0 else (math.nan if num_h == 0.0 else math.inf)
    if den_g < AFT_EPS and not math.isfinite(g):
        g = _aft_limits(dist, kind, sign, sigma)[0]
    if den_h < AFT_EPS and not math.isfinite(h):
        h = _aft_limits(dist, kind, sign, sigma)[1]
    return (min(max(g, AFT_MIN_GRADIENT), AFT_MAX_GRADIENT),
            min(max(h, AFT_MIN_HESSIAN), AFT_MAX_HESSIAN))


@njit(cache=True, inline="always")
def grad_hess_row(code, params, margin, r, y, g, h):
    """Fill ``g[r, k]``, ``h[r, k]`` for every output k of row ``r``.

    ``margin`` (rows, K) holds the running margins of all outputs (2-D arrays and a row
    index, because a row view per call costs ten times the arithmetic); ``y`` is the
    row's target as ``losses.check_target`` returns it (a class index for softmax /
    ova_logistic). Call it
    once per row at the start of every boosting round: softmax normalises over all K
    outputs here, once. Scalar objectives apply the same y to every output (K is 1 for
    them; see ``losses.loss_spec(..., n_outputs)``). Unknown codes give NaN.
    """
    K = margin.shape[1]
    if code == SOFTMAX:
        mx = margin[r, 0]
        for k in range(1, K):
            if margin[r, k] > mx:
                mx = margin[r, k]
        tot = 0.0
        for k in range(K):
            e = math.exp(margin[r, k] - mx)
            g[r, k] = e
            tot += e
        f = params[1]
        for k in range(K):
            p = g[r, k] / tot
            g[r, k] = p - 1.0 if y == k else p
            h[r, k] = f * p * (1.0 - p)
    elif code == OVA_LOGISTIC:
        s = params[0]
        for k in range(K):
            p = 1.0 / (1.0 + math.exp(-s * margin[r, k]))
            if y == k:
                c = params[2]
                g[r, k] = c * s * (p - 1.0)
            else:
                c = params[3]
                g[r, k] = c * s * p
            h[r, k] = c * s * s * p * (1.0 - p)
    elif code == QUANTILES:
        for k in range(K):
            a = params[1 + k]
            g[r, k] = 1.0 - a if margin[r, k] - y >= 0.0 else -a
            h[r, k] = 1.0
    elif code == EXPECTILE_STACK:
        _expectile_stack_row(params, margin, r, y, g, h)
    elif is_smoothed(code):
        for k in range(K):
            g[r, k], h[r, k] = _smoothed_grad_hess(code, params[1 + k], params[1 + K + k],
                                                   margin[r, k], y)
    else:
        for k in range(K):
            g[r, k], h[r, k] = _scalar_grad_hess(code, params, margin[r, k], y)


@njit(cache=True, inline="always")
def _softplus1(x):
    """log(1 + e^x) without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


@njit(cache=True)
def _expectile_stack_row(params, margin, r, y, g, h):
    """g, h of every output of XGBoost's non-crossing expectiles (module docstring):
    g[r, k], h[r, k] first hold a_k d_k and a_k, then their suffix sums, then the chain
    factors."""
    K = margin.shape[1]
    q = margin[r, 0]
    for k in range(K):
        if k > 0:
            q += EXPECTILE_GAP + _softplus1(margin[r, k])
        d = q - y
        a = 1.0 - params[1 + k] if d >= 0.0 else params[1 + k]
        g[r, k] = a * d
        h[r, k] = a
    for k in range(K - 2, -1, -1):
        g[r, k] += g[r, k + 1]
        h[r, k] += h[r, k + 1]
    for k in range(1, K):
        s = 1.0 / (1.0 + math.exp(-margin[r, k]))
        g[r, k] *= s
        h[r, k] *= s * s


@njit(cache=True, inline="always")
def target_columns(code, K):
    """Targets per row that the kernels read for a model of K outputs: 1 for softmax /
    ova_logistic (the class index), for quantile / expectile levels of one target and
    for one output, else K (a regression objective on K targets, output k against
    target k)."""
    if (code == SOFTMAX or code == OVA_LOGISTIC or code == QUANTILES or code == EXPECTILE_STACK
            or code == SMOOTHED_QUANTILE):
        return 1
    if code == AFT or code == COX:  # the label's bounds; cox: see label_columns
        return 2
    return K


@njit(cache=True, inline="always")
def label_columns(code, params, K):
    """Values per row in the targets the staged kernel reads: ``target_columns``, but
    for precomputed gradients (survival:cox) the g, h of every output and round (2 K per
    round, params[1] rounds)."""
    if code == COX:
        return 2 * K * int(params[1])
    return target_columns(code, K)


@njit(cache=True, inline="always")
def grad_hess_targets(code, params, margin, r, y, g, h):
    """Fill ``g[r, k]``, ``h[r, k]`` of a regression objective on K targets: output k of
    row r at ``margin[r, k]`` against target ``y[r * K + k]`` (``y`` the rows' targets
    side by side, row-major); survival:aft (one output): the bounds ``y[2 r]``,
    ``y[2 r + 1]``; precomputed gradients (survival:cox, linear leaves): the g, h of
    every output k of the current round, ``y[2 (K (r n_rounds + round) + k)]`` and the
    value after it."""
    K = margin.shape[1]
    if code == COX:  # the precomputed g, h of round params[0] (``label_columns``)
        at = 2 * K * (r * int(params[1]) + int(params[0]))
        for k in range(K):
            g[r, k], h[r, k] = y[at + 2 * k], y[at + 2 * k + 1]
        return
    if code == AFT:
        # params[2] == 1 (fast_log): CatBoost's FastLogf of the times; params[3] == 1
        # (erfc_approx): CatBoost <= 1.2.3's normal distribution function
        g[r, 0], h[r, 0] = aft_grad_hess(int(params[0]), params[1], margin[r, 0], y[2 * r],
                                         y[2 * r + 1], params[2] == 1.0, params[3] == 1.0)
        return
    if is_smoothed(code):
        for k in range(K):
            g[r, k], h[r, k] = _smoothed_grad_hess(code, params[1 + k], params[1 + K + k],
                                                   margin[r, k], y[r * K + k])
        return
    for k in range(K):
        g[r, k], h[r, k] = _scalar_grad_hess(code, params, margin[r, k], y[r * K + k])


@njit(cache=True)
def grad_hess(code, params, margin, col, y):
    """(g, h) of output ``col`` only; softmax still normalises over all of ``margin``.

    Prefer :func:`grad_hess_row` when several outputs of a row are needed.
    """
    if code == SOFTMAX:
        mx = margin[0]
        for k in range(1, margin.shape[0]):
            if margin[k] > mx:
                mx = margin[k]
        tot = 0.0
        for k in range(margin.shape[0]):
            tot += math.exp(margin[k] - mx)
        p = math.exp(margin[col] - mx) / tot
        return (p - 1.0 if y == col else p), params[1] * p * (1.0 - p)
    if code == OVA_LOGISTIC:
        s = params[0]
        p = 1.0 / (1.0 + math.exp(-s * margin[col]))
        c = params[2] if y == col else params[3]
        return c * s * (p - (1.0 if y == col else 0.0)), c * s * s * p * (1.0 - p)
    if code == QUANTILES or code == EXPECTILE_STACK:
        m = margin.reshape(1, margin.shape[0])
        g = np.empty_like(m)
        h = np.empty_like(m)
        grad_hess_row(code, params, m, 0, y, g, h)
        return g[0, col], h[0, col]
    return _scalar_grad_hess(code, params, margin[col], y)


@njit(cache=True)
def grad_hess_rows(code, params, margin, y, g, h):
    """Fill ``g``, ``h`` (rows, K) of every row with :func:`grad_hess_row`."""
    for i in range(margin.shape[0]):
        grad_hess_row(code, params, margin, i, y[i], g, h)


@njit(cache=True)
def grad_hess_target_rows(code, params, margin, y, g, h):
    """Fill ``g``, ``h`` (rows, K) of every row with :func:`grad_hess_targets` (``y``
    row-major, ``target_columns`` values per row)."""
    for i in range(margin.shape[0]):
        grad_hess_targets(code, params, margin, i, y, g, h)
