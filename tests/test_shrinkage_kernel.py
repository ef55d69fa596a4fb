"""kernels/shrinkage.constant_rate_counts (the one-pass check of a configured XGBoost
learning rate) against the numpy form it replaces: the coefficient table of
xgb_shrinkage._rows and its residuals, node by node, on real models."""

import numpy as np
import pytest
import xgboost as xgb

import treeimp
from treeimp.kernels.shrinkage import constant_rate_counts
from treeimp.parsers import xgb_shrinkage
from treeimp.parsers.xgb_shrinkage import ConcatenatedTrees


def _numpy_counts(trees, eta, lam, alpha):
    R = xgb_shrinkage._rows(trees)
    fits = np.abs(xgb_shrinkage._residual(R, eta, lam, alpha)) <= xgb_shrinkage._FIT_TOL
    t = R[:, 6].astype(np.int64)
    has_rows = np.bincount(t, minlength=len(trees.sizes)) > 0
    has_fit = np.bincount(t, fits.astype(np.float64), minlength=len(trees.sizes)) > 0
    return R.shape[0], int(fits.sum()), bool(np.all(has_fit[has_rows]))


def _kernel_arrays(trees):
    """The arrays as constant_rate_fits passes them (float32 node weights in float64, as
    the numpy form reads them)."""
    return (np.ascontiguousarray(a, dtype=d) for a, d in zip(
        trees, (np.int64, np.int64, np.int64, np.float64, np.float64)))


def _trees(params, rounds=12):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 6))
    y = X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(0, 0.5, 600)
    if params.get("objective") == "binary:logistic":
        y = (y > 0).astype(float)
    if params.get("objective") == "count:poisson":
        y = rng.poisson(np.exp(0.5 * X[:, 0])).astype(float)
    booster = xgb.train({"max_depth": 4, "nthread": 1, **params}, xgb.DMatrix(X, y), rounds)
    source = treeimp.parse(booster).tree_learning_rate_source
    assert isinstance(source.trees, ConcatenatedTrees)
    return source.trees


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "eta": 0.15, "lambda": 2.0},
    {"objective": "reg:squarederror", "eta": 0.3, "lambda": 0.0, "alpha": 0.5},
    {"objective": "count:poisson", "eta": 0.2},  # leaves clipped by max_delta_step 0.7
])
def test_counts_equal_the_coefficient_table(params):
    trees = _trees({k: v for k, v in params.items()})
    eta, lam = params["eta"], params.get("lambda", 1.0)
    alpha = params.get("alpha", 0.0)
    # the training rate, others that fit nowhere, and one on a node's fit boundary
    R = xgb_shrinkage._rows(trees)
    C, D, B, A, S, scale = (R[:, i] for i in range(6))
    edge = float(np.median((A + lam * B) / (C + lam * D + alpha * S)))
    for e in (eta, eta * 1.5, 0.05, edge, edge * (1 + 2e-5)):
        for la, al in ((lam, alpha), (lam + 1.0, alpha), (0.0, 0.0)):
            got = constant_rate_counts(*_kernel_arrays(trees), e, la, al,
                                       xgb_shrinkage._FIT_TOL)
            assert got == _numpy_counts(trees, e, la, al), (params, e, la, al)
    assert xgb_shrinkage.constant_rate_fits(trees, eta, lam, alpha)
    assert not xgb_shrinkage.constant_rate_fits(trees, eta * 1.5, lam, alpha)


def test_too_few_usable_nodes_do_not_fit():
    """Trees that are single leaves have no usable node: no configured rate is accepted
    (the recovery then decides), as the numpy form decides."""
    sizes = np.array([1, 1, 1], np.int64)
    left = right = np.full(3, -1, np.int64)
    trees = ConcatenatedTrees(sizes, left, right, np.ones(3), np.ones(3))
    assert constant_rate_counts(sizes, left, right, np.ones(3), np.ones(3), 0.3, 1.0, 0.0,
                                xgb_shrinkage._FIT_TOL) == (0, 0, True)
    assert not xgb_shrinkage.constant_rate_fits(trees, 0.3, 1.0, 0.0)
