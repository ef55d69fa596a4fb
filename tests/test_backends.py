"""The backend seam (``treeimp.backends``): every pass of rows through the trees goes
through the active backend, a backend is one class plus one registration, and the
registry refuses unknown names and incomplete backends.

(a) A recording backend that delegates to the numba one sees explain (forest out of bag,
boosting held out), predict_raw, apply and permutation importance, and their results
are bitwise those of the default backend. (b) A backend written here in plain numpy
(a level-by-level walk of the routing arrays, for ``add_trees`` and ``apply``) gives the
libraries' own margins and leaf ids. (c) Registry errors.
"""

import contextlib

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp
from treeimp import backends
from treeimp.backends.numba import NumbaBackend
from treeimp.kernels import route

xgb = pytest.importorskip("xgboost")

XGB_TOL = dict(rtol=1e-4, atol=1e-6)  # XGBoost sums in float32, treeimp in float64


@contextlib.contextmanager
def active(name, backend):
    """Register ``backend`` as ``name`` and make it active for a with block."""
    backends.register_backend(name, backend)
    try:
        with backends.use_backend(name):
            yield backend
    finally:
        backends.unregister_backend(name)


class Recording:
    """Delegates every operation to the numba backend and records its name."""

    def __init__(self):
        self.inner = NumbaBackend()
        self.calls = []


def _recorder(op):
    def call(self, *args):
        self.calls.append(op)
        return getattr(self.inner, op)(*args)

    call.__name__ = op
    return call


for _op in backends.OPERATIONS:
    setattr(Recording, _op, _recorder(_op))


def _regression(n=300, F=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    y = X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3] + rng.normal(scale=0.3, size=n)
    return X, y


def _assert_same_result(a, b):
    for name in ("table", "stderr", "pvalues"):
        x, y = getattr(a, name), getattr(b, name)
        assert list(x.columns) == list(y.columns) and list(x.index) == list(y.index)
        np.testing.assert_array_equal(x.to_numpy(), y.to_numpy())


# ------------------------------------------------------------ (a) one seam for all
def test_forest_oob_explain_goes_through_the_backend_bitwise():
    X, y = _regression()
    rf = RandomForestRegressor(n_estimators=12, max_depth=6, random_state=0).fit(X, y)
    want = treeimp.explain(rf, X, y, oob=True, random_state=0)
    with active("recording", Recording()) as rec:
        got = treeimp.explain(rf, X, y, oob=True, random_state=0)
    assert "forest_leaf_stats" in rec.calls and "inbag_counts" in rec.calls
    _assert_same_result(got, want)
    assert np.abs(want.table["mdi_oob"].to_numpy()).max() > 0  # not all zero


def test_boosting_held_out_explain_goes_through_the_backend_bitwise():
    X, y = _regression(400)
    m = xgb.XGBRegressor(n_estimators=15, max_depth=3, learning_rate=0.3).fit(X[:250],
                                                                              y[:250])
    want = treeimp.explain(m, X[250:], y[250:], random_state=0)
    with active("recording", Recording()) as rec:
        got = treeimp.explain(m, X[250:], y[250:], random_state=0)
    assert "staged_leaf_stats" in rec.calls
    _assert_same_result(got, want)
    assert np.abs(want.table["mdi_oob"].to_numpy()).max() > 0


def test_smoothed_scales_go_through_the_backend_bitwise():
    """The per-round scale pre-pass of XGBoost >= 3.4's smoothed objectives, called on
    an ordinary model (the sums it forms do not depend on the objective's name)."""
    from treeimp.inputs.rows import RowSource
    from treeimp.model.kernel_inputs import Loss, RowInputs
    from treeimp.model.losses import loss_spec
    from treeimp.stats.drivers import smoothed_scales, staged_trees

    X, y = _regression(200)
    m = xgb.XGBRegressor(n_estimators=6, max_depth=3).fit(X, y)
    ens = treeimp.parse(m)
    code, params = loss_spec(ens.objective, n_outputs=ens.n_outputs)
    rows_in = RowInputs(np.ascontiguousarray(y, np.float64), np.ones(1),
                        np.zeros(0, np.int32), np.zeros(0, np.int64),
                        np.zeros((0, ens.n_outputs)))
    args = (rows_in, Loss(code, params, ens.base_score), staged_trees(ens, code, params),
            ens.routing_arrays())
    want = smoothed_scales(ens, RowSource(X, ens), *args)
    with active("recording", Recording()) as rec:
        got = smoothed_scales(ens, RowSource(X, ens), *args)
    assert rec.calls and set(rec.calls) == {"staged_scale_sums"}
    np.testing.assert_array_equal(got, want)
    assert want.shape == (6, 1) and np.all(want > 0)


def test_predict_raw_apply_and_permutation_go_through_the_backend_bitwise():
    X, y = _regression()
    m = xgb.XGBRegressor(n_estimators=10, max_depth=3).fit(X, y)
    ens = treeimp.parse(m)
    want = (ens.predict_raw(X), ens.apply(X),
            treeimp.permutation_importance(m, X, y, n_repeats=2, random_state=0))
    with active("recording", Recording()) as rec:
        got = (ens.predict_raw(X), ens.apply(X),
               treeimp.permutation_importance(m, X, y, n_repeats=2, random_state=0))
    assert rec.calls[:2] == ["add_trees", "apply"]
    assert "apply" in rec.calls[2:]  # the permutation index's leaves
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2].importances, want[2].importances)
    assert np.abs(want[2].importances).max() > 0.01


# ------------------------------------------------- (b) a backend in one class
def _walk(X, root, routing, strict, round32):
    """The leaf (global node index) every row of X reaches from ``root``: all rows one
    level at a time, each node's comparison written out in numpy."""
    left, right, feature, threshold, flags = routing[:5]
    if np.any(flags & (route.CATEGORICAL | route.NAN_ZERO_MISSING)):
        raise ValueError("this test backend routes numeric splits only")
    rows = np.arange(X.shape[0])
    node = np.full(X.shape[0], root, np.int64)
    while True:
        f = flags[node]
        inner = (f & route.LEAF) == 0
        if not inner.any():
            return node
        x = X[rows, feature[node]].astype(np.float64)
        if round32:
            x = x.astype(np.float32).astype(np.float64)
        x = np.where(np.isnan(x) & ((f & route.NAN_AS_ZERO) != 0), 0.0, x)
        below = x < threshold[node] if strict else x <= threshold[node]
        go_left = np.where(np.isnan(x), (f & route.MISSING_LEFT) != 0, below)
        node = np.where(inner, np.where(go_left, left[node], right[node]), node)


class NumpyWalk(NumbaBackend):
    """``add_trees`` and ``apply`` in plain numpy; the other operations are the numba
    backend's."""

    def __init__(self):
        self.used = []

    def add_trees(self, X, out, trees, sign, tree_offsets, tree_output, tree_scale, value,
                  routing, strict, round32, row_block):
        self.used.append("add_trees")
        vdim = value.shape[1]
        for t in trees:  # in the given order, as the margins are defined
            leaf = _walk(X, tree_offsets[t], routing, strict, round32)
            col = tree_output[t]
            out[:, col:col + vdim] += (sign * tree_scale[t]) * value[leaf]

    def apply(self, X, out, tree_offsets, routing, strict, round32, row_block):
        self.used.append("apply")
        for t in range(tree_offsets.shape[0] - 1):
            out[:, t] = _walk(X, tree_offsets[t], routing, strict, round32) - tree_offsets[t]


def _with_nan(X, seed=1):
    X = X.copy()
    X[np.random.default_rng(seed).random(X.shape) < 0.1] = np.nan
    return X


def test_numpy_backend_gives_xgboost_margins_and_leaves():
    X, y = _regression()
    X = _with_nan(X)
    m = xgb.XGBRegressor(n_estimators=8, max_depth=4).fit(X[:200], y[:200])
    ens = treeimp.parse(m)
    default = ens.predict_raw(X[200:])
    with active("numpy-walk", NumpyWalk()) as walk:
        margin, leaves = ens.predict_raw(X[200:]), ens.apply(X[200:])
    assert walk.used == ["add_trees", "apply"]
    np.testing.assert_allclose(margin[:, 0], m.predict(X[200:], output_margin=True),
                               **XGB_TOL)
    np.testing.assert_array_equal(leaves, m.apply(X[200:]))
    np.testing.assert_array_equal(margin, default)  # the same additions in the same order


def test_numpy_backend_gives_sklearn_probabilities_and_leaves():
    X, y = _regression()
    rf = RandomForestClassifier(n_estimators=7, max_depth=5, random_state=0)
    rf.fit(X[:200], y[:200] > 0)
    ens = treeimp.parse(rf)
    default = ens.predict_raw(X[200:])
    with active("numpy-walk", NumpyWalk()) as walk:
        proba, leaves = ens.predict_raw(X[200:]), ens.apply(X[200:])
    assert walk.used == ["add_trees", "apply"]
    np.testing.assert_allclose(proba, rf.predict_proba(X[200:]), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(leaves, rf.apply(X[200:]))
    np.testing.assert_array_equal(proba, default)


# ------------------------------------------------------------ (c) the registry
def test_unknown_backend_is_a_value_error_listing_the_registered_ones():
    listed = r"unknown backend 'cuda'; registered backends: \['numba'\]"
    with pytest.raises(ValueError, match=listed):
        backends.get_backend("cuda")
    with pytest.raises(ValueError, match=listed):
        backends.set_backend("cuda")
    with pytest.raises(ValueError, match=listed), backends.use_backend("cuda"):
        pass
    with pytest.raises(ValueError, match="unknown backend"):
        backends.get_backend(3)
    assert backends.get_backend() is backends.get_backend("numba")


def test_incomplete_backend_is_a_type_error_naming_the_missing_operations():
    class AddOnly:
        def add_trees(self, *args):
            pass

        apply = None  # not callable: missing too

    with pytest.raises(TypeError) as err:
        backends.register_backend("add-only", AddOnly())
    missing = str(err.value).split("does not implement ")[1].split(";")[0]
    assert missing.split(", ") == ["apply", "forest_leaf_stats", "staged_leaf_stats",
                                   "staged_scale_sums", "inbag_counts"]
    assert "add-only" not in backends.backend_names()
    with pytest.raises(TypeError, match="non-empty string"):
        backends.register_backend("", NumbaBackend())


def test_names_taken_and_active_backends_are_kept():
    with pytest.raises(ValueError, match="already registered"):
        backends.register_backend("numba", NumbaBackend())
    with pytest.raises(ValueError, match="cannot be unregistered"):
        backends.unregister_backend("numba")
    with active("second", NumbaBackend()):
        assert backends.get_backend() is backends.get_backend("second")
        with pytest.raises(ValueError, match="is active"):
            backends.unregister_backend("second")
    assert "second" not in backends.backend_names()
    assert backends.get_backend() is backends.get_backend("numba")


def test_use_backend_restores_the_previous_one_after_an_error():
    backends.register_backend("third", NumbaBackend())
    try:
        with pytest.raises(RuntimeError), backends.use_backend("third"):
            raise RuntimeError
        assert backends.get_backend() is backends.get_backend("numba")
    finally:
        backends.unregister_backend("third")
