"""XGBoost >= 3.4's smoothed ``reg:absoluteerror`` / ``reg:quantileerror``: held-out
gradients scaled per round by S = (weighted mean of sqrt|m - y|)^2 over the evaluation rows.

Truths: (1) trees grown by XGBoost's built-in objective equal trees grown from a custom
objective returning this file's numpy g, h (written from XGBoost 3.4.1's
``regression_obj.cu`` / ``quantile_obj.cu``), and (2) treeimp's staged statistics over
the training rows equal, node by node, the hessian sums and Newton weights -G / (H + lambda)
that XGBoost stored in every tree of every round.
"""

import json

import numpy as np
import pytest

import treeimp

xgb = pytest.importorskip("xgboost")
VERSION = tuple(int(x) for x in xgb.__version__.split(".")[:2])
pytestmark = pytest.mark.skipif(VERSION < (3, 4), reason="XGBoost < 3.4 fits sign gradients "
                                f"(installed {xgb.__version__})")

N = 240
RNG = np.random.default_rng(3)
X = RNG.normal(size=(N, 4))
W = RNG.uniform(0.5, 2.0, N)
Y = (3 * X[:, 0] + RNG.normal(size=N)).astype(np.float32).astype(np.float64)
CASES = [
    ("reg:absoluteerror", {}),
    ("reg:quantileerror", {"quantile_alpha": 0.3}),
    ("reg:quantileerror", {"quantile_alpha": [0.2, 0.7]}),
]
IDS = ["absolute", "quantile", "quantiles"]


def _params(obj, extra):
    return {"objective": obj, "tree_method": "exact", "max_depth": 3, "eta": 0.5,
            "nthread": 1, "seed": 0, **extra}


def _trees(booster):
    return json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]


def _numpy_grad_hess(obj, extra, margin, y, w):
    """XGBoost 3.4.1's g, h (weights included) at margins (n, K), from its source."""
    r = margin - y[:, None]
    scale = (np.sum(w[:, None] * np.sqrt(np.abs(r)), axis=0) / np.sum(w)) ** 2
    if obj == "reg:absoluteerror":
        norm = np.hypot(scale, r)
        c = np.where(norm > 0, scale / np.where(norm > 0, norm, 1.0), 1.0)
        return w[:, None] * r * c, w[:, None] * c
    alpha = np.atleast_1d(extra["quantile_alpha"])
    c = float(np.float32(0.04))
    x = r / (c * scale)
    t = np.tanh(x)
    ratio = np.where(x == 0, 1.0, t / np.where(x == 0, 1.0, x))
    ratio = np.maximum(ratio, float(np.float32(3e-4)))
    return (w[:, None] * 0.5 * scale * (t + 1.0 - 2.0 * alpha),
            w[:, None] * 0.5 / c * ratio)


def _same_trees(a, b, rtol=2e-5):
    for ta, tb in zip(a, b):
        assert ta["left_children"] == tb["left_children"]
        assert ta["split_indices"] == tb["split_indices"]
        for key in ("split_conditions", "base_weights", "sum_hessian"):
            np.testing.assert_allclose(ta[key], tb[key], rtol=rtol, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("obj,extra", CASES, ids=IDS)
def test_numpy_formulas_grow_xgboosts_trees(obj, extra):
    """The formulas (with sample weights) grow XGBoost's own trees, 3 rounds; the sign
    gradients of XGBoost < 3.4 do not (the comparison can fail)."""
    p = _params(obj, extra)
    d = xgb.DMatrix(X, Y, weight=W)
    builtin = xgb.train(p, d, 3)
    first = xgb.train(p, d, 1)  # the base score XGBoost estimated
    k = len(np.atleast_1d(extra.get("quantile_alpha", [0])))

    def custom(predt, _):
        g, h = _numpy_grad_hess(obj, extra, predt.astype(np.float64).reshape(N, k), Y, W)
        return g.reshape(predt.shape), h.reshape(predt.shape)

    def sign(predt, _):
        g, h = _numpy_grad_hess(obj, extra, predt.astype(np.float64).reshape(N, k), Y, W)
        return (np.sign(g) * W[:, None]).reshape(predt.shape), (W[:, None] + 0 * h).reshape(
            predt.shape)

    base = json.loads(first.save_config())["learner"]["learner_model_param"]["base_score"]
    pc = {key: v for key, v in p.items() if key != "quantile_alpha"}
    pc.update(objective="reg:squarederror", base_score=base)
    yk = np.repeat(Y[:, None], k, axis=1)
    dk = xgb.DMatrix(X, yk, weight=W)
    ours = xgb.train(pc, dk, 3, obj=custom)
    _same_trees(_trees(builtin), _trees(ours))
    other = xgb.train(pc, dk, 3, obj=sign)
    with pytest.raises(AssertionError):
        _same_trees(_trees(builtin), _trees(other))


def _staged(booster, Xs, ys, ws):
    """treeimp's staged statistics (4, n_nodes) over the rows Xs, ys, ws (one block)."""
    from treeimp.inputs.rows import RowSource
    from treeimp.stats.drivers import staged_pass

    ens = treeimp.parse(booster)
    stats, _ = staged_pass(ens, RowSource(Xs, ens), ys, ws, np.zeros(len(Xs), np.int32), 1)
    return ens, stats[:, :, 0]


@pytest.mark.parametrize("obj,extra", CASES, ids=IDS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_staged_statistics_are_xgboosts(obj, extra, weighted):
    """Over the training rows, every node's sum of w h is XGBoost's sum_hessian and
    sum w (-g) / (sum w h + lambda) its Newton weight, in every tree of 4 rounds (each
    round's S from the staged margins of all rows)."""
    w = W if weighted else np.ones(N)
    p = {**_params(obj, extra), "lambda": 1.0}
    booster = xgb.train(p, xgb.DMatrix(X, Y, weight=w if weighted else None), 4)
    ens, st = _staged(booster, X, Y, w)
    for t, tree in enumerate(_trees(booster)):
        nodes = ens.tree_offsets[t] + np.arange(len(tree["base_weights"]))
        np.testing.assert_allclose(st[2, nodes], tree["sum_hessian"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(st[1, nodes] / (st[2, nodes] + 1.0), tree["base_weights"],
                                   rtol=1e-4, atol=1e-5)
    # held-out rows (a subset, other weights): each round's S is theirs; the roots of
    # every round hold the sums of the numpy g, h at XGBoost's own margins before it
    rows = np.arange(0, N, 3)
    wv = RNG.uniform(0.2, 3.0, rows.size)
    ens, st = _staged(booster, X[rows], Y[rows], wv)
    K = ens.n_outputs
    for rnd in range(4):
        # (iteration_range (0, 0) is the whole model: round 0 starts at the base score)
        m = (np.tile(ens.base_score, (rows.size, 1)) if rnd == 0 else
             booster.predict(xgb.DMatrix(X[rows]), output_margin=True,
                             iteration_range=(0, rnd)).reshape(rows.size, K))
        g, h = _numpy_grad_hess(obj, extra, m.astype(np.float64), Y[rows], wv)
        roots = ens.tree_offsets[rnd * K:(rnd + 1) * K]
        np.testing.assert_allclose(st[1, roots], -g.sum(axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(st[2, roots], h.sum(axis=0), rtol=1e-5, atol=1e-6)


def test_absolute_error_on_two_targets():
    """Absolute error on two targets: a scale per target, each from its own residuals."""
    y2 = np.c_[Y, (X[:, 1] - X[:, 2] ** 2).astype(np.float32)]
    booster = xgb.train({**_params("reg:absoluteerror", {}), "lambda": 1.0},
                        xgb.DMatrix(X, y2, weight=W), 3)
    ens, st = _staged(booster, X, y2, W)
    assert ens.n_outputs == 2
    for t, tree in enumerate(_trees(booster)):
        nodes = ens.tree_offsets[t] + np.arange(len(tree["base_weights"]))
        np.testing.assert_allclose(st[2, nodes], tree["sum_hessian"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(st[1, nodes] / (st[2, nodes] + 1.0), tree["base_weights"],
                                   rtol=1e-4, atol=1e-5)


def test_per_row_measures_refuse_smoothed():
    """The per-row contribution measures have no smoothed gradients: refused, saying why."""
    booster = xgb.train(_params("reg:absoluteerror", {}), xgb.DMatrix(X, Y), 2)
    with pytest.raises(ValueError, match="XGBoost >= 3.4 scales every row's gradient"):
        treeimp.explain(booster, X, Y, methods=("shap_oob",))
