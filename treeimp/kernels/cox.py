"""Gradients of XGBoost's survival:cox and CatBoost's Cox over the risk sets of all
evaluation rows.

A row's Cox gradient depends on every row at least as long-lived at the same round, so
it cannot be computed row by row in the staged kernel (kernels/staged.py). The caller
(``stats/cox.py``) first finds every row's margin before every round, then
:func:`cox_grad_hess_table` computes the g, h of every row and round with XGBoost's
arithmetic (CoxRegression::GetGradient, Breslow's handling of ties); the staged kernel
reads them back per row (``gradients.grad_hess_targets``, code COX). CatBoost's Cox
differs in its ties (:func:`cox_sequential_grad_hess_table`).
"""

import math

from numba import njit, prange


@njit(cache=True, parallel=True)
def cox_grad_hess_table(labels, order, margins, out):
    """out[i, 2 st], out[i, 2 st + 1] := g, h of row i at round st, as XGBoost computes
    them (CoxRegression::GetGradient).

    ``labels`` (n,): the Cox labels (time |y|, censored where y <= 0); ``order`` (n,):
    the rows by |y|, ties in row order (XGBoost's stable LabelAbsSort); ``margins``
    (n_stages, n): every row's margin before each round. Per round, as XGBoost: the risk
    sum starts at the sum of exp(m) over all rows (in ``order``) and drops the rows of
    earlier times when the time increases; each event adds 1 / risk sum to r and
    1 / risk sum^2 to s as it is reached, so tied events count those met before them in
    ``order``; g = e r - [y > 0], h = e r - e^2 s with e = exp(m)."""
    for st in prange(margins.shape[0]):
        _risk_set_round(labels, order, margins, st, False, out)


@njit(cache=True, parallel=True)
def cox_sequential_grad_hess_table(labels, order, margins, out):
    """out[i, 2 st], out[i, 2 st + 1] := g, h of row i at round st, as CatBoost's Cox
    computes them (TCoxError::CalcDersRange).

    Same inputs as :func:`cox_grad_hess_table` (``order``: by |y|, ties in row order,
    CatBoost's stable sort). Ties are not grouped: each event's risk set is the rows at
    or after it in ``order``, so tied rows before an event are out of its risk set. The
    exponentials are taken at m - max(m) of the round (CatBoost's guard against
    overflow; g and h do not change). Per round: the risk sum starts at the sum over all
    rows; each event first drops the rows met since the last event, then adds 1 / sum to
    r and 1 / sum^2 to s; g = e r - [y > 0], h = e r - e^2 s."""
    for st in prange(margins.shape[0]):
        _risk_set_round(labels, order, margins, st, True, out)


@njit(cache=True)
def _risk_set_round(labels, order, margins, st, sequential, out):
    """Both Cox forms in one pass over round ``st``: the rows met since the last drop
    leave the risk sum when the time increases (XGBoost, ``sequential`` False) or at each
    event (CatBoost, True, which also shifts the exponents by the round's largest margin).
    The callers run the rounds in parallel: a cached non-parallel kernel calling a
    parallel one can run before numba has started its threads."""
    n = margins.shape[1]
    if n == 0:
        return
    top = 0.0
    if sequential:
        top = margins[st, 0]
        for i in range(1, n):
            if margins[st, i] > top:
                top = margins[st, i]
    exp_sum = 0.0
    for i in range(n):
        exp_sum += math.exp(margins[st, order[i]] - top)
    r_k = 0.0
    s_k = 0.0
    last_exp = 0.0
    last_abs = 0.0
    pending = 0.0
    for i in range(n):
        ind = order[i]
        e = math.exp(margins[st, ind] - top)
        y = labels[ind]
        ay = abs(y)
        pending += last_exp
        if (y > 0.0) if sequential else (last_abs < ay):
            exp_sum -= pending
            pending = 0.0
        if y > 0.0:
            r_k += 1.0 / exp_sum
            s_k += 1.0 / (exp_sum * exp_sum)
        out[ind, 2 * st] = e * r_k - (1.0 if y > 0.0 else 0.0)
        out[ind, 2 * st + 1] = e * r_k - e * e * s_k
        last_abs = ay
        last_exp = e
