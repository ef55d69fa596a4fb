"""The vectorised exp (treeimp/kernels/vexp.py) against numpy's (libm) exp."""

import numpy as np

from treeimp.kernels.vexp import exp_block


def _exp(x):
    out, poly = np.empty_like(x), np.empty_like(x)
    exp_block(x, len(x), out, poly)
    return out


def test_within_one_ulp_of_libm_on_the_normal_range():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-708.0, 709.78, 100_000), rng.normal(0.0, 3.0, 100_000),
                        np.linspace(-1.0, 1.0, 10_001), [0.0, -0.0, 1e-300, -1e-300,
                                                         708.9999, 709.0001, 709.78]])
    got, want = _exp(x), np.exp(x)
    ulps = np.abs(got - want) / np.spacing(want)
    assert ulps.max() <= 2.0
    assert np.mean(got == want) > 0.8  # mostly bitwise equal


def test_special_values():
    x = np.array([710.0, 1e6, np.inf, -708.5, -1e6, -np.inf, np.nan])
    got = _exp(x)
    assert np.all(np.isposinf(got[:3]))
    np.testing.assert_array_equal(got[3:6], 0.0)
    assert np.isnan(got[6])


def test_shorter_n_leaves_the_rest_alone():
    x = np.array([0.0, 1.0, 2.0, 3.0])
    out, poly = np.full(4, -1.0), np.empty(4)
    exp_block(x, 2, out, poly)
    np.testing.assert_allclose(out[:2], np.exp(x[:2]), rtol=2e-16)
    np.testing.assert_array_equal(out[2:], -1.0)
