"""Every optimised (numba) kernel against a straightforward pure-Python/numpy reference.

The reference walks each row down each tree in plain Python, following the routing
rules documented at the top of ``treeimp/model/ensemble.py`` (not the routing kernel's code),
and records the whole root-to-leaf path. A node statistic is then the sum over the rows
whose path passes through the node, accumulated directly (no bottom-up propagation),
and the staged boosting reference carries every row's margin stage by stage in numpy
with the gradients written out by hand. Kernel results must agree to 1e-12 (relative,
with an absolute floor of 1e-12 times the plane's largest value).

Kernels covered: ``forest_leaf_stats`` + ``propagate_up`` (through
``forest_node_stats``, with and without in-bag bits), ``staged_leaf_stats`` (through
``boosting.staged_pass``), ``add_trees_chunk`` (through ``predict_raw``, directly on
random subsets of trees and through ``permutation_importance``) and ``apply_chunk``
(through ``apply``).

Models: sklearn random forests (multiclass and regression, with NaN), LightGBM
multiclass with pandas categories and NaN, LightGBM l2 with a numeric categorical column
and zero_as_missing, XGBoost binary with categories, scale_pos_weight and
num_parallel_tree=2, XGBoost softprob, XGBoost squared error with a numeric categorical
column, HistGradientBoosting with a categorical column: every categorical mode of the
normal form. Rows include split thresholds +-1 float32 ulp, NaN, +-inf, huge values and
odd category codes (negative, in (-1, 0), non-integer, unseen). Each kernel also runs on
row chunks (row offsets) on one thread, and on the rows repeated enough times to cross
the kernels' internal row blocks. The reference walk itself is checked against each
library's own predictions, so it cannot share a routing mistake with the kernels.
"""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.metrics import mean_squared_error

import treeimp
from tests.edge_rows import threshold_rows
from treeimp.inputs.rows import RowSource
from treeimp.kernels.route import add_trees_chunk
from treeimp.model.ensemble import (
    NAN_AS_ZERO,
    NAN_CAT_EXACT,
    NAN_CAT_NEGATIVE_UNLISTED,
    NAN_ZERO_MISSING,
)
from treeimp.model.losses import check_target, grad_hess_array
from treeimp.model.routing import routing_flags
from treeimp.parsers import inbag_bits
from treeimp.stats.drivers import forest_node_stats, staged_pass

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

N_BLOCKS = 5
ZERO_THRESHOLD = float(np.float32(1e-35))  # LightGBM's kZeroThreshold (a float)


# ============================================================== the reference walk
class Walker:
    """Pure-Python routing over the normal form arrays, one row and tree at a time
    (values already rounded to float32 where the model says so)."""

    def __init__(self, ens):
        self.strict = ens.comparison == "<"
        self.left = ens.left.tolist()
        self.right = ens.right.tolist()
        self.feature = ens.feature.tolist()
        self.threshold = ens.threshold.tolist()
        self.missing_left = ens.missing_left.tolist()
        self.nan_mode = ens.nan_mode.tolist()
        self.cats = {}
        for node in np.flatnonzero(ens.is_categorical).tolist():
            o, c = int(ens.category_offset[node]), int(ens.category_count[node])
            listed = dict(zip(ens.category_codes[o:o + c].tolist(),
                              ens.category_left[o:o + c].tolist()))
            self.cats[node] = (listed, bool(ens.category_default_left[node]))

    def goes_left(self, node, v):
        ml = self.missing_left[node]
        mode = self.nan_mode[node]
        if node in self.cats:
            listed, default = self.cats[node]
            if math.isnan(v):
                return ml
            negative = v <= -1.0 if mode == NAN_AS_ZERO else v < 0.0
            if negative:
                return default if mode == NAN_CAT_NEGATIVE_UNLISTED else ml
            if math.isinf(v) or (mode == NAN_CAT_EXACT and v != math.floor(v)):
                return default
            return listed.get(int(v), default)  # int() truncates: (-1, 0) is code 0
        if math.isnan(v):
            if mode != NAN_AS_ZERO:
                return ml
            v = 0.0
        elif mode == NAN_ZERO_MISSING and abs(v) <= ZERO_THRESHOLD:
            return ml
        return v < self.threshold[node] if self.strict else v <= self.threshold[node]

    def path(self, x, root):
        """Global node indices from ``root`` down to the leaf row ``x`` reaches."""
        node, out = root, [root]
        while self.left[node] >= 0:
            node = self.left[node] if self.goes_left(node, x[self.feature[node]]) \
                else self.right[node]
            out.append(node)
        return out


class Reference:
    """Paths of every evaluation row through every tree, flattened per tree."""

    def __init__(self, ens, X):
        X = np.asarray(X, dtype=np.float64)
        if ens.round_float32:
            with np.errstate(over="ignore"):
                X = X.astype(np.float32).astype(np.float64)
        walker = Walker(ens)
        rows = X.tolist()
        self.n = len(rows)
        self.path_rows, self.path_nodes = [], []
        self.leaf = np.empty((self.n, ens.n_trees), np.int64)
        for t in range(ens.n_trees):
            root = int(ens.tree_offsets[t])
            pr, pn = [], []
            for i, x in enumerate(rows):
                p = walker.path(x, root)
                pr.extend([i] * len(p))
                pn.extend(p)
                self.leaf[i, t] = p[-1]
            self.path_rows.append(np.array(pr, np.int64))
            self.path_nodes.append(np.array(pn, np.int64))

    def tiled(self, k):
        """The reference of the rows repeated k times (np.tile(X, (k, 1)))."""
        new = Reference.__new__(Reference)
        new.n = self.n * k
        new.leaf = np.tile(self.leaf, (k, 1))
        new.path_rows = [np.concatenate([pr + j * self.n for j in range(k)])
                         for pr in self.path_rows]
        new.path_nodes = [np.tile(pn, k) for pn in self.path_nodes]
        return new

    def tree_values(self, ens, t):
        """scale * leaf value of tree t for every row, (n, value_dim)."""
        return ens.tree_scale[t] * ens.value[self.leaf[:, t]]

    def predict(self, ens, trees=None):
        out = np.tile(ens.base_score, (self.n, 1))
        for t in range(ens.n_trees) if trees is None else trees:
            col = ens.tree_output[t]
            out[:, col:col + ens.value_dim] += self.tree_values(ens, t)
        return out

    def add(self, stats, t, block, *per_row):
        """stats[d, node, block[row]] += per_row[d][row] for every (row, node) on a path
        of tree t: every node gets the sum over the rows that pass through it."""
        r, nodes = self.path_rows[t], self.path_nodes[t]
        for d, v in enumerate(per_row):
            np.add.at(stats[d], (nodes, block[r]), v[r])


def reference_forest_stats(ens, ref, Z, w, block, n_blocks, inbag=None):
    C = ens.value_dim
    stats = np.zeros((2 + C, ens.n_nodes, n_blocks))
    for t in range(ens.n_trees):
        wt = w if inbag is None else np.where(inbag[t], 0.0, w)
        z = Z[:, ens.tree_output[t]:ens.tree_output[t] + C]
        ref.add(stats, t, block, wt, wt * (z ** 2).sum(1), *(wt * z[:, j] for j in range(C)))
    return stats


def reference_grad_hess(objective, margin, y):
    """g, h (n, K) written out from the formulas of the canonical objectives."""
    name, p = objective.name, objective.params
    if name == "squared_error":
        return margin - y[:, None], np.ones_like(margin)
    if name == "logistic":
        s = p["sigmoid"]
        prob = 1.0 / (1.0 + np.exp(-s * margin))
        yy = y[:, None]
        c = np.where(yy == 1, p["pos_weight"], np.where(yy == 0, p.get("neg_weight", 1.0), 1.0))
        return c * s * (prob - yy), c * s * s * prob * (1.0 - prob)
    if name == "softmax":
        e = np.exp(margin - margin.max(1, keepdims=True))
        prob = e / e.sum(1, keepdims=True)
        onehot = (np.arange(margin.shape[1]) == y[:, None]).astype(float)
        return prob - onehot, p["hess_factor"] * prob * (1.0 - prob)
    raise ValueError(f"the test models use squared_error, logistic and softmax only; "
                     f"add a reference gradient for {objective!r}")


def reference_staged(ens, ref, y, w, block, n_blocks):
    """Stats (4, n_nodes, n_blocks): n', S', H', R', and final margin, stage by stage."""
    stats = np.zeros((4, ens.n_nodes, n_blocks))
    margin = np.tile(ens.base_score, (ref.n, 1))
    for t in range(ens.n_trees):
        if t == 0 or ens.tree_stage[t] != ens.tree_stage[t - 1]:
            g, h = reference_grad_hess(ens.objective, margin, y)  # at the stage's start
        col = ens.tree_output[t]
        gc, hc = g[:, col], h[:, col]
        ratio = np.divide(gc * gc, hc, out=np.zeros_like(gc), where=hc > 0)
        ref.add(stats, t, block, w, -w * gc, w * hc, w * ratio)
        margin[:, col] += ref.tree_values(ens, t)[:, 0]
    return stats, margin


def assert_stats_equal(actual, expected, what=""):
    """Equal to 1e-12 plane by plane; nodes no row reaches are exactly empty in both."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    for d in range(expected.shape[0]):
        floor = 1e-12 * max(np.abs(expected[d]).max(), 1e-300)
        np.testing.assert_allclose(actual[d], expected[d], rtol=1e-12, atol=floor,
                                   err_msg=f"{what} plane {d}")
    np.testing.assert_array_equal(actual[0] == 0.0, expected[0] == 0.0,
                                  err_msg=f"{what} empty nodes")


# ============================================================== models
def _numeric_data(rng, n, F=4):
    X = rng.normal(size=(n, F))
    X[rng.random(n) < 0.1, 0] = np.nan
    f = np.nan_to_num(X[:, 0], nan=1.0) + 0.8 * X[:, 1] ** 2 - X[:, 2] * (X[:, 3] > 0)
    return X, f


def _edge_rows(ens, X, rng, n=301):
    return threshold_rows(ens, X, rng=rng, n_rows=n)


def _finite_rows(X):
    return ~np.isinf(X).any(1)


def rf_multiclass(rng):
    X, f = _numeric_data(rng, 400)
    y = np.digitize(f + rng.normal(scale=0.5, size=len(f)), [-0.3, 0.9])
    model = RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    Xe = _edge_rows(ens, X, rng)
    return dict(model=model, ens=ens, X=Xe, y=None, train=(X, y),
                lib=(_finite_rows(Xe), model.predict_proba))


def rf_regression(rng):
    X, f = _numeric_data(rng, 400)
    y = f + rng.normal(scale=0.3, size=len(f))
    model = RandomForestRegressor(n_estimators=5, max_depth=6, max_samples=0.7,
                                  random_state=1).fit(X, y)
    ens = treeimp.parse(model)
    Xe = _edge_rows(ens, X, rng)
    return dict(model=model, ens=ens, X=Xe, y=None, train=(X, y),
                lib=(_finite_rows(Xe), model.predict))


COLORS = ["red", "green", "blue", "cyan", "magenta", "yellow"]
SHAPES = [f"s{k}" for k in range(15)]


def _cat_frame(rng, n, colors=COLORS, shapes=SHAPES):
    df = pd.DataFrame({
        "a": rng.normal(size=n),
        "color": pd.Categorical(rng.choice(COLORS, n), categories=colors),
        "b": rng.normal(size=n),
        "shape": pd.Categorical(rng.choice(SHAPES, n), categories=shapes),
    })
    df.loc[rng.random(n) < 0.1, "a"] = np.nan
    df.loc[rng.random(n) < 0.1, "color"] = np.nan
    df.loc[rng.random(n) < 0.05, "shape"] = np.nan
    f = (np.nan_to_num(df["a"].to_numpy()) + 1.5 * df["color"].isin(["red", "blue"])
         - 1.2 * df["shape"].isin(SHAPES[::3]) + 0.8 * df["color"].isna() + 0.5 * df["b"])
    return df, f.to_numpy(dtype=float)


def lgb_multiclass_cat(rng):
    df, f = _cat_frame(rng, 500)
    labels = np.array(["lo", "mid", "hi"])
    y = labels[np.digitize(f + rng.normal(scale=0.4, size=len(f)), [-0.2, 1.0])]
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=8, min_child_samples=5,
                               min_data_per_group=5, cat_smooth=1.0, max_cat_to_onehot=4,
                               verbose=-1, random_state=0).fit(df, y)
    # evaluation frame: NaN in "b" (no NaN in training: compared as 0), missing categories,
    # a label the model never saw and the categories in another order
    ev, fe = _cat_frame(rng, 301, colors=COLORS[::-1] + ["purple"], shapes=SHAPES)
    ev.loc[rng.random(301) < 0.1, "b"] = np.nan
    ev.loc[rng.random(301) < 0.05, "color"] = "purple"
    ye = labels[np.digitize(fe + rng.normal(scale=0.4, size=len(fe)), [-0.2, 1.0])]
    return dict(model=model, ens=treeimp.parse(model), X=ev, y=ye,
                lib=(np.ones(301, bool),
                     lambda X: model.booster_.predict(X, raw_score=True)))


def lgb_l2_numeric_cat(rng):
    n = 400
    X, f = _numeric_data(rng, n)
    X[:, 3] = rng.integers(0, 12, n)
    X[rng.random(n) < 0.2, 1] = 0.0
    y = f + 2.0 * np.isin(X[:, 3], [0, 4, 7, 9]) + rng.normal(scale=0.3, size=n)
    model = lgb.LGBMRegressor(n_estimators=6, num_leaves=8, min_child_samples=5,
                              zero_as_missing=True, min_data_per_group=5, cat_smooth=1.0,
                              verbose=-1, random_state=0).fit(X, y, categorical_feature=[3])
    ens = treeimp.parse(model)
    Xe = _edge_rows(ens, X, rng)
    Xe[:, 3] = rng.choice([-3.0, -1.0, -0.5, -0.9, 0.0, 0.7, 2.7, 4.5, 5.0, 11.0, 12.0, 1e12,
                           np.nan, np.inf, 3.0, 4.0, 7.0, 9.0], len(Xe))
    Xe[rng.random(len(Xe)) < 0.1, 1] = rng.choice([0.0, -0.0, 1e-36, -1e-36, 1e-30])
    ye = rng.normal(size=len(Xe)) * 2
    return dict(model=model, ens=ens, X=Xe, y=ye,
                lib=(np.ones(len(Xe), bool),
                     lambda X: model.booster_.predict(X, raw_score=True)))


def xgb_binary_cat_parallel(rng):
    df, f = _cat_frame(rng, 500)
    y = (f + rng.logistic(size=len(f)) > 0.8).astype(int)
    model = xgb.XGBClassifier(n_estimators=4, num_parallel_tree=2, max_depth=4,
                              subsample=0.8, colsample_bynode=0.8, scale_pos_weight=2.5,
                              enable_categorical=True, max_cat_to_onehot=1,
                              random_state=0).fit(df, y)
    ev, fe = _cat_frame(rng, 301)
    ye = (fe + rng.logistic(size=len(fe)) > 0.8).astype(int)
    return dict(model=model, ens=treeimp.parse(model), X=ev, y=ye,
                lib=(np.ones(301, bool), lambda X: model.get_booster().predict(
                    xgb.DMatrix(X, enable_categorical=True), output_margin=True)))


def xgb_softprob(rng):
    X, f = _numeric_data(rng, 400)
    y = np.digitize(f + rng.normal(scale=0.5, size=len(f)), [-0.3, 0.9])
    model = xgb.XGBClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    Xe = _edge_rows(ens, X, rng)
    ye = rng.integers(0, 3, len(Xe))
    return dict(model=model, ens=ens, X=Xe, y=ye,
                lib=(_finite_rows(Xe), lambda X: model.get_booster().predict(
                    xgb.DMatrix(X), output_margin=True)))


def xgb_squared_numeric_cat(rng):
    n = 400
    X, f = _numeric_data(rng, n)
    X[:, 3] = rng.integers(0, 10, n)
    X[rng.random(n) < 0.15, 3] = np.nan
    y = (f + 2.0 * np.isin(X[:, 3], [2, 3, 8]) - 3.0 * np.isnan(X[:, 3])
         + rng.normal(scale=0.3, size=n))
    types = ["q", "q", "q", "c"]
    model = xgb.XGBRegressor(n_estimators=6, max_depth=4, enable_categorical=True,
                             feature_types=types, max_cat_to_onehot=1,
                             random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    Xe = _edge_rows(ens, X, rng)
    Xe[:, 3] = rng.choice([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 8.0, 9.0, np.nan], len(Xe))
    ye = rng.normal(size=len(Xe)) * 2
    return dict(model=model, ens=ens, X=Xe, y=ye,
                lib=(_finite_rows(Xe), lambda X: model.get_booster().predict(
                    xgb.DMatrix(X, feature_types=types, enable_categorical=True),
                    output_margin=True)))


def hgb_binary_cat(rng):
    n = 400
    X, f = _numeric_data(rng, n)
    X[:, 3] = rng.integers(0, 12, n)
    y = (f + 2.0 * np.isin(X[:, 3], [1, 4, 7, 9]) + rng.logistic(size=n) > 1.0).astype(int)
    model = HistGradientBoostingClassifier(max_iter=5, max_leaf_nodes=8, categorical_features=[3],
                                           random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    Xe = _edge_rows(ens, X, rng)
    Xe[:, 3] = rng.choice([-3.0, -0.5, 0.0, 0.5, 1.0, 1.5, 4.0, 4.5, 6.5, 9.0, 9.5, 11.0,
                           12.0, 1e12, np.nan], len(Xe))
    ye = rng.integers(0, 2, len(Xe))
    return dict(model=model, ens=ens, X=Xe, y=ye,
                lib=(_finite_rows(Xe), model.decision_function))


CASES = {f.__name__: f for f in (rf_multiclass, rf_regression, lgb_multiclass_cat,
                                 lgb_l2_numeric_cat, xgb_binary_cat_parallel, xgb_softprob,
                                 xgb_squared_numeric_cat, hgb_binary_cat)}
BOOSTING = [k for k in CASES if not k.startswith("rf_")]
_built = {}


def _case(name):
    """Model, ensemble, evaluation rows (and the float matrix the kernels read), paths."""
    if name not in _built:
        c = CASES[name](np.random.default_rng(sum(map(ord, name))))
        rows = RowSource(c["X"], c["ens"])
        c["rows"] = rows
        c["Xf"] = np.concatenate([chunk for _, chunk in rows.chunks()])
        c["ref"] = Reference(c["ens"], c["Xf"])
        _built[name] = c
    return _built[name]


@pytest.fixture(params=list(CASES))
def case(request):
    return _case(request.param)


@pytest.fixture(params=BOOSTING)
def boosting_case(request):
    return _case(request.param)


def _chunked(X, ens, size=97):
    """A RowSource of X that yields chunks of ``size`` rows (kernels see row offsets)."""
    rows = RowSource(X, ens)
    rows.chunks = lambda chunk_rows=size, *, split=False: RowSource.chunks(
        rows, size, split=True)
    return rows


# whole: the case's rows (DataFrame or array) in one chunk, all threads;
# chunked: chunks of 97 rows, one thread; tiled: the float rows repeated ``k`` times,
# enough to cross the kernels' row blocks (512 rows routing, 64-row batches, 16384-row
# chunks of the forest statistics kernel, 512-row groups of each of the staged kernel's
# N_BLOCKS statistic blocks)
VARIANTS = ["whole", "chunked", "tiled"]
TILES = {"routing": 5, "forest": 56, "staged": 10}


def _variant(c, variant, kernel):
    """(rows, reference, y, n_jobs) of a case for a test variant."""
    if variant == "whole":
        return c["rows"], c["ref"], c["y"], None
    if variant == "chunked":
        return _chunked(c["X"], c["ens"]), c["ref"], c["y"], 1
    k = TILES[kernel]
    y = None if c["y"] is None else np.tile(c["y"], k)
    return RowSource(np.tile(c["Xf"], (k, 1)), c["ens"]), c["ref"].tiled(k), y, None


def _weights_blocks(rng, n):
    w = rng.exponential(size=n)
    w[rng.random(n) < 0.1] = 0.0
    return w, rng.integers(0, N_BLOCKS, n).astype(np.int32)


# ============================================================== the models are as meant
def test_models_have_the_splits_the_tests_are_about():
    kinds = {name: _case(name)["ens"] for name in CASES}
    for name in ("lgb_multiclass_cat", "lgb_l2_numeric_cat", "xgb_binary_cat_parallel",
                 "xgb_squared_numeric_cat", "hgb_binary_cat"):
        assert kinds[name].is_categorical.any(), name
    modes = lambda e: set(e.nan_mode[(e.left >= 0) & e.is_categorical].tolist())  # noqa: E731
    assert modes(kinds["lgb_l2_numeric_cat"]) == {NAN_AS_ZERO}
    assert modes(kinds["xgb_squared_numeric_cat"]) == {NAN_CAT_NEGATIVE_UNLISTED}
    assert modes(kinds["hgb_binary_cat"]) == {NAN_CAT_EXACT}
    lgb_numeric = kinds["lgb_l2_numeric_cat"]
    assert NAN_ZERO_MISSING in lgb_numeric.nan_mode[(lgb_numeric.left >= 0)
                                                    & ~lgb_numeric.is_categorical]
    assert NAN_AS_ZERO in kinds["lgb_multiclass_cat"].nan_mode[
        (kinds["lgb_multiclass_cat"].left >= 0) & ~kinds["lgb_multiclass_cat"].is_categorical]
    xp = kinds["xgb_binary_cat_parallel"]
    assert xp.n_trees == 8 and np.array_equal(xp.tree_stage, np.repeat(np.arange(4), 2))
    assert xp.objective.params["pos_weight"] == 2.5
    assert kinds["rf_regression"].value_dim == 1
    assert kinds["rf_multiclass"].value_dim == 3
    assert kinds["xgb_softprob"].n_outputs == 3 and kinds["lgb_multiclass_cat"].n_outputs == 3


def test_reference_walk_reproduces_library_predictions(case):
    """The reference is itself right: its margin equals the library's (float32 tol)."""
    mask, lib_predict = case["lib"]
    X = case["X"]
    with np.errstate(all="ignore"):  # sklearn's finiteness check sums +-3e38 in float32
        lib = np.asarray(lib_predict(X[mask] if isinstance(X, np.ndarray) else X))
    ref = case["ref"].predict(case["ens"])[mask]
    np.testing.assert_allclose(ref, lib.reshape(ref.shape), rtol=1e-5, atol=1e-5)


# ============================================================== routing kernels
@pytest.mark.parametrize("variant", VARIANTS)
def test_apply_and_predict_raw(case, variant):
    ens = case["ens"]
    rows, ref, _, n_jobs = _variant(case, variant, "routing")
    local = ref.leaf - ens.tree_offsets[:-1]
    np.testing.assert_array_equal(ens.apply(rows, n_jobs=n_jobs), local)
    np.testing.assert_allclose(ens.predict_raw(rows, n_jobs=n_jobs), ref.predict(ens),
                               rtol=1e-12, atol=1e-12)


def test_deep_forest_routes_in_large_row_blocks():
    """Trees of > LARGE_TREE_NODES nodes take the large-task path of predict_raw/apply."""
    from sklearn.ensemble import RandomForestClassifier

    from treeimp.inputs.threads import numba_threads
    from treeimp.model.routing import LARGE_TREE_NODES, row_block

    rng = np.random.default_rng(3)
    X = rng.normal(size=(6000, 4))
    y = rng.integers(0, 3, 6000)  # labels of pure noise: every tree grows to ~2,000 nodes
    rf = RandomForestClassifier(n_estimators=4, random_state=0).fit(X, y)
    ens = treeimp.parse(rf)
    assert ens.n_nodes > LARGE_TREE_NODES * ens.n_trees
    with numba_threads(2):
        assert row_block(ens, len(X)) > 512
    np.testing.assert_array_equal(ens.predict_raw(X, n_jobs=2), rf.predict_proba(X))
    leaves = ens.apply(X, n_jobs=2)
    np.testing.assert_array_equal(leaves, rf.apply(X))


@pytest.mark.parametrize("tiles", [1, TILES["routing"]])
def test_add_trees_chunk_random_subset(case, tiles):
    ens, ref = case["ens"], case["ref"].tiled(tiles)
    rng = np.random.default_rng(7)
    X = np.ascontiguousarray(np.tile(case["Xf"], (tiles, 1)))
    for size in (1, max(1, ens.n_trees // 2)):
        trees = np.sort(rng.choice(ens.n_trees, size=size, replace=False)).astype(np.int64)
        start = rng.normal(size=(ref.n, ens.n_outputs))
        sign = -0.75
        strict, round32 = routing_flags(ens, X)
        expected = start + sign * (ref.predict(ens, trees) - ens.base_score)
        # the default task size, one that is no multiple of the batch, and a large one
        for row_block in (None, 100, 16384):
            out = start.copy()
            extra = () if row_block is None else (row_block,)
            add_trees_chunk(X, out, trees, sign, ens.tree_offsets, ens.tree_output,
                            ens.tree_scale, ens.value, ens.routing, strict,
                            round32, *extra)
            np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_permutation_importance_of_boosting_matches_full_repredict():
    """Boosting permutation re-routes only the trees that read the column (through
    add_trees_chunk); the reference re-predicts every permuted matrix with the walk,
    using scikit-learn's permutation scheme."""
    c = _case("lgb_l2_numeric_cat")
    ens, X, y = c["ens"], c["Xf"], c["y"]
    res = treeimp.permutation_importance(ens, X, y, scoring="neg_mean_squared_error",
                                         n_repeats=3, random_state=0)
    seed = np.random.RandomState(0).randint(np.iinfo(np.int32).max + 1)
    base = -mean_squared_error(y, c["ref"].predict(ens)[:, 0])
    expected = np.empty((ens.n_features, 3))
    for j in range(ens.n_features):
        rng = np.random.RandomState(seed)
        idx = np.arange(len(X))
        Xp = X.copy()
        for r in range(3):
            rng.shuffle(idx)
            Xp[:, j] = Xp[idx, j]
            margin = Reference(ens, Xp).predict(ens)[:, 0]
            expected[j, r] = base + mean_squared_error(y, margin)
    np.testing.assert_allclose(res.importances, expected, rtol=1e-10, atol=1e-12)


# ============================================================== forest statistics
@pytest.mark.parametrize("use_inbag", [False, True], ids=["all-rows", "inbag"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_forest_node_stats(case, variant, use_inbag):
    """Any ensemble's trees can be scored against a target matrix Z; boosting cases
    exercise tree_output != 0 and categorical routing in the same kernel. In-bag bits
    are random (row counts not a multiple of 8)."""
    ens = case["ens"]
    rows, ref, _, n_jobs = _variant(case, variant, "forest")
    rng = np.random.default_rng(11)
    n = ref.n
    Z = rng.normal(size=(n, ens.n_outputs))
    w, block = _weights_blocks(rng, n)
    inbag, bits = None, None
    if use_inbag:
        inbag = rng.random((ens.n_trees, n)) < 0.4
        bits = np.packbits(inbag, axis=1, bitorder="little")
    got = forest_node_stats(ens, rows, Z, w, block, N_BLOCKS, inbag_bits=bits, n_jobs=n_jobs)
    want = reference_forest_stats(ens, ref, Z, w, block, N_BLOCKS, inbag)
    assert_stats_equal(got, want, variant)


def test_forest_node_stats_of_one_hot_targets(case):
    """one_hot=True (class targets) keeps the class sums S' alone: they equal the full
    layout's S' planes and add up to its n' plane."""
    ens = case["ens"]
    rows, ref = case["rows"], case["ref"]
    rng = np.random.default_rng(12)
    classes = rng.integers(0, ens.n_outputs, size=ref.n)
    Z = (classes[:, None] == np.arange(ens.n_outputs)[None, :]).astype(float)
    w, block = _weights_blocks(rng, ref.n)
    if ens.value_dim != ens.n_outputs:  # trees that score one class each
        with pytest.raises(ValueError, match="one_hot"):
            forest_node_stats(ens, rows, Z, w, block, N_BLOCKS, one_hot=True)
        return
    full = forest_node_stats(ens, rows, Z, w, block, N_BLOCKS)
    lean = forest_node_stats(ens, rows, Z, w, block, N_BLOCKS, one_hot=True)
    assert lean.shape == (full.shape[0] - 2,) + full.shape[1:]
    np.testing.assert_array_equal(lean, full[2:])
    np.testing.assert_allclose(lean.sum(axis=0), full[0], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", ["rf_multiclass", "rf_regression"])
def test_forest_node_stats_out_of_bag_on_training_rows(name):
    """The forest's own in-bag rows (estimators_samples_), one-hot or regression targets."""
    c = _case(name)
    ens, model = c["ens"], c["model"]
    X, y = c["train"]
    n = len(X)
    rng = np.random.default_rng(3)
    if ens.objective.name == "class_probability":
        Z = (y[:, None] == model.classes_[None, :]).astype(float)
    else:
        Z = y.astype(float)[:, None]
    w, block = _weights_blocks(rng, n)
    bits = inbag_bits(model, n)
    inbag = np.unpackbits(bits, axis=1, bitorder="little", count=n).astype(bool)
    assert 0 < inbag.mean() < 1
    got = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS, inbag_bits=bits)
    want = reference_forest_stats(ens, Reference(ens, X), Z, w, block, N_BLOCKS, inbag)
    assert_stats_equal(got, want)


# ============================================================== staged statistics
@pytest.mark.parametrize("variant", VARIANTS)
def test_staged_pass(boosting_case, variant):
    ens = boosting_case["ens"]
    rows, ref, y, n_jobs = _variant(boosting_case, variant, "staged")
    rng = np.random.default_rng(5)
    w, block = _weights_blocks(rng, ref.n)
    got, margin = staged_pass(ens, rows, y, w, block, N_BLOCKS, n_jobs=n_jobs)
    y_idx = check_target(ens.objective, y, ens.classes)
    want, want_margin = reference_staged(ens, ref, y_idx, w, block, N_BLOCKS)
    assert_stats_equal(got, want, variant)
    np.testing.assert_allclose(margin, want_margin, rtol=1e-12, atol=1e-12)
    assert (want[2] > 0).any() and (want[3] > 0).any()
    # leave_one_out: one block more, the total, and the replicates total - block b
    both, _ = staged_pass(ens, rows, y, w, block, N_BLOCKS, n_jobs=n_jobs,
                          leave_one_out=True, keep_margin=False)
    assert both.shape == got.shape[:2] + (N_BLOCKS + 1,)
    total = want.sum(axis=2)
    np.testing.assert_allclose(both[:, :, -1], total, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(both[:, :, :-1], total[:, :, None] - want, rtol=1e-12,
                               atol=1e-12)


def test_logistic_terms_recompute_exp_that_left_the_product_range():
    """The staged kernel hands stage_terms e = exp(-s m) kept up to date by products;
    values outside [1e-300, 1e300] or NaN are recomputed from the margin, so the terms
    equal treeimp.model.losses' gradients at those margins either way."""
    from treeimp.kernels.staged import N_TERMS, stage_terms
    from treeimp.model.ensemble import Objective
    from treeimp.model.losses import loss_spec

    obj = Objective("logistic", {"sigmoid": 1.5, "pos_weight": 2.0}, link="sigmoid")
    code, params = loss_spec(obj, n_outputs=1)
    margin = np.array([[-470.0], [470.0], [3.0], [-2.0], [0.5], [0.0]])
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    w = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 0.0])
    n = len(y)
    # wrong or out-of-range values everywhere but row 4
    e = np.array([np.inf, 0.0, np.nan, 1e305, math.exp(-1.5 * 0.5), 1e-301])
    terms = np.zeros((1, N_TERMS, n))
    stage_terms(code, params, margin, n, y, w, np.empty((n, 1)), np.empty((n, 1)), terms, e)
    g, h = grad_hess_array(obj, margin, y)
    g, h = np.where(w > 0, g[:, 0], 0.0), np.where(w > 0, h[:, 0], 0.0)
    ratio = np.divide(g * g, h, out=np.zeros(n), where=h > 0)
    want = np.stack([w, -w * g, w * h, w * ratio], axis=1)
    np.testing.assert_allclose(terms[0].T, want, rtol=1e-13, atol=0)


def test_reference_gradients_agree_with_losses_module(boosting_case):
    """The hand-written gradients used above are those of treeimp.model.losses."""
    ens = boosting_case["ens"]
    rng = np.random.default_rng(2)
    n = 50
    margin = rng.normal(scale=2.0, size=(n, ens.n_outputs))
    y = check_target(ens.objective, boosting_case["y"][:n], ens.classes)
    g, h = grad_hess_array(ens.objective, margin, y)
    rg, rh = reference_grad_hess(ens.objective, margin, y)
    np.testing.assert_allclose(g, rg, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h, rh, rtol=1e-12, atol=1e-14)


# ============================================================== the comparison can fail
def test_comparison_rejects_a_wrong_statistic():
    """Moving one row to the sibling leaf, or a 1e-10 relative error in one cell, fails."""
    c = _case("lgb_multiclass_cat")
    ens, ref = c["ens"], c["ref"]
    rng = np.random.default_rng(11)
    Z = rng.normal(size=(ref.n, ens.n_outputs))
    w, block = _weights_blocks(rng, ref.n)
    good = forest_node_stats(ens, c["rows"], Z, w, block, N_BLOCKS)
    want = reference_forest_stats(ens, ref, Z, w, block, N_BLOCKS)
    assert_stats_equal(good, want)

    bad = want.copy()
    d, node, b = 2, int(np.argmax(np.abs(want[2, :, 0]))), 0
    bad[d, node, b] *= 1 + 1e-10
    with pytest.raises(AssertionError):
        assert_stats_equal(good, bad)

    # one row (weight > 0) reaches the sibling leaf instead of its own in tree 0
    i = int(np.flatnonzero(w > 0)[0])
    moved = Reference.__new__(Reference)
    moved.__dict__.update(ref.__dict__)
    leaf = int(ref.leaf[i, 0])
    parent = int(np.flatnonzero((ens.left == leaf) | (ens.right == leaf))[0])
    sibling = int(ens.right[parent] if ens.left[parent] == leaf else ens.left[parent])
    rows0, nodes0 = ref.path_rows[0].copy(), ref.path_nodes[0].copy()
    nodes0[(rows0 == i) & (nodes0 == leaf)] = sibling
    moved.path_rows = [rows0] + ref.path_rows[1:]
    moved.path_nodes = [nodes0] + ref.path_nodes[1:]
    with pytest.raises(AssertionError):
        assert_stats_equal(good, reference_forest_stats(ens, moved, Z, w, block, N_BLOCKS))


def test_numba_threads_dynamic_schedule_is_scoped():
    """``numba_threads(dynamic=True)`` hands prange iterations out one at a time inside
    the block only, and restores the caller's thread count and chunk size after it,
    also when the block raises."""
    import numba

    from treeimp.inputs.threads import numba_threads

    before = (numba.get_num_threads(), numba.get_parallel_chunksize())
    with numba_threads(1, dynamic=True):
        assert numba.get_parallel_chunksize() == 1
        assert numba.get_num_threads() == 1
    assert (numba.get_num_threads(), numba.get_parallel_chunksize()) == before
    with pytest.raises(RuntimeError), numba_threads(1, dynamic=True):
        raise RuntimeError("inside")
    assert (numba.get_num_threads(), numba.get_parallel_chunksize()) == before
    with numba_threads(1):
        assert numba.get_parallel_chunksize() == before[1]


def test_staged_pass_wide_rows_walk_in_place():
    """Rows up to COPY_ROW_BYTES are copied group by group before the walks, wider rows
    are walked where they are: both give the reference statistics and margins, and
    the two paths give the same bits (XGBoost routes in float32, so float64 rows of
    600 features, walked in place, and their float32 copy, copied, meet the same
    leaves)."""
    from treeimp.kernels.staged import COPY_ROW_BYTES

    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(8)
    n, F = 400, 600
    X = rng.normal(size=(n, F))
    y = (X[:, 0] + X[:, 599] + rng.logistic(size=n) > 0).astype(int)
    ens = treeimp.parse(xgb.XGBClassifier(n_estimators=6, max_depth=3).fit(X, y))
    assert F * 8 > COPY_ROW_BYTES >= F * 4
    w, block = _weights_blocks(rng, n)
    wide, m_wide = staged_pass(ens, RowSource(X, ens), y, w, block, N_BLOCKS, n_jobs=2)
    X32 = X.astype(np.float32)
    copied, m_copied = staged_pass(ens, RowSource(X32, ens), y, w, block, N_BLOCKS,
                                   n_jobs=2)
    want, want_margin = reference_staged(ens, Reference(ens, X), y.astype(float), w, block,
                                         N_BLOCKS)
    assert_stats_equal(wide, want, "wide")
    np.testing.assert_allclose(m_wide, want_margin, rtol=1e-12, atol=1e-12)
    assert np.array_equal(wide, copied) and np.array_equal(m_wide, m_copied)
