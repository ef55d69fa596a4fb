"""The staged pass writes every cell of its statistics itself (kernels/staged.py, fresh):
a buffer holding garbage gives the sums XGBoost's own margins and leaves give, with
blocks without rows before, between and after the others, on one and two threads."""

import numpy as np
import pytest

import treeimp
from treeimp.inputs.rows import RowSource
from treeimp.stats.drivers import staged_leaf_sums

xgb = pytest.importorskip("xgboost")


def _model_rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1400, 4))
    y = X[:, 0] - X[:, 1] * X[:, 2] + rng.normal(scale=0.3, size=1400)
    model = xgb.XGBRegressor(n_estimators=5, max_depth=3, learning_rate=0.4,
                             n_jobs=1).fit(X[:400], y[:400])
    # blocks 1, 3 and 4 of 7 have rows (1,000 rows: groups of rows span blocks)
    block = np.array([1, 3, 4])[rng.integers(0, 3, size=1000)].astype(np.int32)
    return model, X[400:], y[400:], block


def _truth(model, ens, X, y, block, n_blocks):
    """Leaf sums of n', S' = -g, H' = 1, R' = g^2 (squared error, unit weights) from
    XGBoost's own margins before every tree and its leaf indices."""
    booster = model.get_booster()
    dm = xgb.DMatrix(X)
    leaves = booster.predict(dm, pred_leaf=True).astype(np.int64)
    out = np.zeros((ens.leaf_slots.node.shape[0], n_blocks, 4))
    for t in range(ens.n_trees):
        margin = booster.predict(dm, output_margin=True, iteration_range=(0, t)) if t else (
            np.full(len(y), float(ens.base_score[0])))
        g = margin - y
        slot = ens.leaf_slots.slot[ens.tree_offsets[t] + leaves[:, t]]
        for d, term in enumerate((np.ones_like(g), -g, np.ones_like(g), g * g)):
            np.add.at(out[:, :, d], (slot, block), term)
    return out


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_garbage_in_the_buffer_gives_xgboosts_sums(n_jobs):
    model, X, y, block = _model_rows()
    ens = treeimp.parse(model)
    want = _truth(model, ens, X, y, block, 7)
    out = np.full((ens.leaf_slots.node.shape[0], 7, 4), np.nan)
    got, _ = staged_leaf_sums(ens, RowSource(X, ens), y, np.ones(1), block, 7,
                              n_jobs=n_jobs, keep_margin=False, out=out, out_zeroed=False)
    assert got is out
    # XGBoost's margins are float32: agreement to about 1e-7 relative
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    zeroed, _ = staged_leaf_sums(ens, RowSource(X, ens), y, np.ones(1), block, 7,
                                 n_jobs=n_jobs, keep_margin=False)
    np.testing.assert_array_equal(got, zeroed)  # the same sums, bit for bit


@pytest.mark.parametrize("ranker", [False, True])
def test_an_explainers_kept_buffer_is_not_read_by_the_staged_pass(ranker):
    model, X, y, _ = _model_rows()
    kw = {}
    if ranker:  # a ranker's statistics come from another kernel (zeroed first)
        qid = np.repeat(np.arange(100), 10)
        y = (y > 0).astype(int)
        model = xgb.XGBRanker(n_estimators=5, max_depth=3, n_jobs=1).fit(X, y, qid=qid)
        kw = {"qid": qid}
    ex = treeimp.Explainer(model)
    first = ex.explain(X, y, methods=("mdi_oob", "ufi"), random_state=0, **kw)
    ex._pool._idle[:] = np.nan  # garbage where the next call's statistics will go
    second = ex.explain(X, y, methods=("mdi_oob", "ufi"), random_state=0, **kw)
    np.testing.assert_array_equal(second.table.to_numpy(), first.table.to_numpy())
    np.testing.assert_array_equal(second.stderr.to_numpy(), first.stderr.to_numpy())
    assert np.isfinite(first.table.to_numpy()).all()
