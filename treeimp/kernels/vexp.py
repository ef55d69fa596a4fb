"""exp of a block of values in loops that the compiler vectorises.

``math.exp`` in a numba loop is a scalar libm call per value: the staged kernel's
logistic gradients (one exp per held-out row and boosting round) spent most of their
time there. ``exp_block`` computes the same function with plain arithmetic that LLVM
turns into SIMD code:

* range reduction x = k ln2 + r, |r| <= ln2 / 2, with k = round(x / ln2) found by adding
  1.5 * 2^52 (the rounded integer lands in the low bits of the sum) and ln2 split in a
  high part with trailing zero bits (k * LN2_HI is exact) and a low part (Cody-Waite);
* exp(r) by its Taylor series to degree 13 (truncation error below 5e-18 relative),
  evaluated by Horner's rule;
* 2^k built from its bits: the sum's bits minus the shifter's bits are k, and
  (k + 1023) << 52 are the bits of 2^k.

Accuracy: within 2 ulp of libm's exp for x >= -708 (tests/test_vexp.py), +inf above
log(DBL_MAX); NaN gives NaN. Below -708 (where exp(x) < 3.4e-308 is subnormal or 0
in libm) the result is 0.
"""

import numpy as np
from numba import njit

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # 32 significant bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_SHIFTER = 6755399441055744.0  # 1.5 * 2**52
_SHIFTER_BITS = np.float64(_SHIFTER).view(np.int64).item()
_HI = 709.0  # 2^k stays a normal number: k <= 1023 after one step down, see below
_LO = -708.0
_OVERFLOW = 709.782712893384  # log(DBL_MAX)
_E = 2.718281828459045
# 1 / k! for k = 13 down to 2
_C13 = 1.0 / 6227020800.0
_C12 = 1.0 / 479001600.0
_C11 = 1.0 / 39916800.0
_C10 = 1.0 / 3628800.0
_C9 = 1.0 / 362880.0
_C8 = 1.0 / 40320.0
_C7 = 1.0 / 5040.0
_C6 = 1.0 / 720.0
_C5 = 1.0 / 120.0
_C4 = 1.0 / 24.0
_C3 = 1.0 / 6.0
_C2 = 0.5


@njit(cache=True)
def exp_block(x, n, out, poly):
    """out[i] := exp(x[i]) for i < n. ``out`` and ``poly``: float64 buffers of length
    >= n, distinct from ``x`` and from each other (if they overlap, the compiler's
    run-time alias check falls back to scalar code: 2-3x slower, same values)."""
    bits = out.view(np.int64)
    for i in range(n):
        v = x[i]
        # (709, log(DBL_MAX)]: exp(x - 1) * e, so that 2^k is still a normal number
        v = v - 1.0 if v > _HI else v
        v = v if v < _HI else _HI
        v = v if v > _LO else _LO
        t = v * _LOG2E + _SHIFTER
        k = t - _SHIFTER
        r = (v - k * _LN2_HI) - k * _LN2_LO
        p = _C13
        p = p * r + _C12
        p = p * r + _C11
        p = p * r + _C10
        p = p * r + _C9
        p = p * r + _C8
        p = p * r + _C7
        p = p * r + _C6
        p = p * r + _C5
        p = p * r + _C4
        p = p * r + _C3
        p = p * r + _C2
        p = p * r + 1.0
        p = p * r + 1.0
        # x itself decides the special cases
        xi = x[i]
        p = p * _E if xi > _HI else p
        p = p if xi <= _OVERFLOW else np.inf
        p = p if xi >= _LO else 0.0
        poly[i] = p if xi == xi else xi
        out[i] = t
    for i in range(n):
        bits[i] = (bits[i] - _SHIFTER_BITS + 1023) << 52
    for i in range(n):
        out[i] = poly[i] * out[i]
