"""The fused formula kernels (treeimp/kernels/formulas.py) against the formulas of
measures.md written out split by split in Python, on real forests with B > 1 blocks."""

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor, RandomForestClassifier

import treeimp
from treeimp._input import RowSource
from treeimp.drivers import forest_node_stats
from treeimp.measures import NodeStats, by_class, class_parts, class_parts_both, mdi_oob, ufi
from treeimp.targets import forest_targets

N_BLOCKS = 4


def _forest(kind):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5))
    f = X[:, 0] + X[:, 1] * X[:, 2]
    if kind == "multiclass":
        y = np.digitize(f + rng.normal(scale=0.5, size=300), [-0.5, 0.7])
        model = RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0)
    else:
        y = f + rng.normal(scale=0.3, size=300)
        model = ExtraTreesRegressor(n_estimators=5, max_depth=6, bootstrap=True,
                                    random_state=0)
    model.fit(X, y)
    # evaluation rows: fresh ones, few enough that some children see no rows in a block
    Xe = rng.normal(size=(60, 5))
    ye = y[:60]
    return treeimp.parse(model), Xe, ye


def _stats(ens, X, y):
    Z, classification = forest_targets(ens, y)
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    arr = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS)
    return arr, classification


def _reference(ens, arr, classification):
    """(measure -> (B, T, F)) and per-class (measure -> (B, T, F, C)) by plain loops."""
    n, Q, S = arr[0], arr[1], arr[2:]
    B, C, T, F = n.shape[1], S.shape[0], ens.n_trees, ens.n_features
    mdi = np.zeros((B, T, F, C))
    u = np.zeros((B, T, F, C))
    for t in range(T):
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        root_w = ens.weight[lo]
        for m in range(lo, hi):
            l, r = ens.left[m], ens.right[m]
            if l < 0:
                continue
            f = ens.feature[m]
            v = ens.value
            wf = ens.weight / root_w
            for b in range(B):
                for c in range(C):
                    mdi[b, t, f, c] += ((v[l, c] - v[m, c]) * S[c, l, b]
                                        + (v[r, c] - v[m, c]) * S[c, r, b])
                if n[l, b] <= 0 or n[r, b] <= 0:
                    continue
                if classification:
                    for c in range(C):
                        p = S[c, :, b] / np.where(n[:, b] > 0, n[:, b], 1.0)
                        u[b, t, f, c] += (wf[l] * v[l, c] * p[l] + wf[r] * v[r, c] * p[r]
                                          - wf[m] * v[m, c] * p[m])
                else:
                    def mse(k, b=b):
                        return (Q[k, b] - 2 * ens.value[k, 0] * S[0, k, b]
                                + ens.value[k, 0] ** 2 * n[k, b]) / n[k, b]
                    wi = ens.weight * ens.impurity
                    insample = (wi[m] - wi[l] - wi[r]) / root_w
                    u[b, t, f, 0] += (wf[m] * mse(m) - wf[l] * mse(l) - wf[r] * mse(r)
                                      + insample)
    n_root = n[ens.tree_offsets[:-1]].T  # (B, T)
    mdi = mdi / n_root[:, :, None, None]
    return mdi, u


@pytest.mark.parametrize("kind", ["multiclass", "regression"])
def test_fused_sums_equal_split_by_split_loops(kind):
    ens, X, y = _forest(kind)
    arr, classification = _stats(ens, X, y)
    st = NodeStats.from_array(arr)
    exp_mdi, exp_ufi = _reference(ens, arr, classification)
    # some split in some block has a child without rows: the skip rule is exercised
    sp_children = ens.left[ens.left >= 0]
    assert np.any(arr[0][sp_children] == 0)
    seen = ~np.isnan(mdi_oob(ens, st))
    assert seen.all()
    np.testing.assert_allclose(mdi_oob(ens, st), exp_mdi.sum(-1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ufi(ens, st, classification=classification), exp_ufi.sum(-1),
                               rtol=1e-12, atol=1e-12)
    if classification:
        one = NodeStats.from_array(arr[:, :, :1].copy())
        for name, exp in (("mdi_oob", exp_mdi), ("ufi", exp_ufi)):
            np.testing.assert_allclose(by_class(name, ens, one), exp[0], rtol=1e-12,
                                       atol=1e-12)


def test_both_class_parts_in_one_pass_equal_the_loops():
    """class_parts_both (mdi_oob and ufi from one pass over one-hot class sums) gives the
    split-by-split loops' per-class sums, bitwise what the one-measure kernel gives."""
    ens, X, y = _forest("multiclass")
    arr, classification = _stats(ens, X, y)
    Z, _ = forest_targets(ens, y)
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    lean = NodeStats.from_array(
        forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS, one_hot=True),
        one_hot=True)
    exp_mdi, exp_ufi = _reference(ens, arr, classification)
    both = class_parts_both(ens, lean)
    n_root = arr[0][ens.tree_offsets[:-1]].T  # (B, T): the loops' mdi is per root row
    np.testing.assert_allclose(both["mdi_oob"] / n_root[:, :, None, None], exp_mdi,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(both["ufi"], exp_ufi, rtol=1e-12, atol=1e-12)
    for name in ("mdi_oob", "ufi"):
        np.testing.assert_array_equal(both[name], class_parts(name, ens, lean))


@pytest.mark.parametrize("kind", ["multiclass", "regression"])
def test_leave_one_out_form_equals_block_sums(kind):
    """forest_node_stats(leave_one_out=True): one block more than the rows use; the last
    holds the per-block statistics summed over blocks, and block b's replicate is that
    total minus block b's statistics."""
    ens, X, y = _forest(kind)
    Z, _ = forest_targets(ens, y)
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    per_block = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS)
    both = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS,
                             leave_one_out=True)
    assert both.shape == per_block.shape[:2] + (N_BLOCKS + 1,)
    totals, loo = both[:, :, -1], both[:, :, :-1]
    np.testing.assert_allclose(totals, per_block.sum(axis=2), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(loo, per_block.sum(axis=2, keepdims=True) - per_block,
                               rtol=1e-12, atol=1e-12)
    # the last block feeds the formulas exactly as the per-block statistics summed would
    stats = NodeStats.from_array(both)
    total, jack = stats.blocks(slice(-1, None)), stats.blocks(slice(None, -1))
    one = NodeStats.from_array(per_block.sum(axis=2, keepdims=True))
    np.testing.assert_allclose(mdi_oob(ens, total), mdi_oob(ens, one), rtol=1e-12)
    np.testing.assert_allclose(mdi_oob(ens, stats)[-1:], mdi_oob(ens, one), rtol=1e-12)
    assert jack.n_blocks == N_BLOCKS


def test_one_hot_statistics_give_the_same_measures():
    """Class sums alone (n' their sum, built only when a formula reads all of it) give
    every forest measure of the full layout (n', Q', S')."""
    from treeimp import registry
    from treeimp.measures import compute

    ens, X, y = _forest("multiclass")
    Z, classification = forest_targets(ens, y)
    assert classification
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    full = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS)
    lean = forest_node_stats(ens, RowSource(X, ens), Z, w, block, N_BLOCKS, one_hot=True)
    from_stats = [m.name for m in registry.all_measures("forest")
                  if m.source == registry.NODE_STATS and not m.params]
    assert {"mdi_oob", "ufi", "naive_oob", "pg1"} <= set(from_stats)
    for method in from_stats:
        a = compute(method, ens, NodeStats.from_array(full), classification=True)
        one_hot = NodeStats.from_array(lean, one_hot=True)
        b = compute(method, ens, one_hot, classification=True)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14, err_msg=method)
    for method in ("mdi_oob", "ufi"):  # these never build all of n'
        one_hot = NodeStats.from_array(lean, one_hot=True)
        compute(method, ens, one_hot, classification=True)
        assert one_hot.n_is_class_sum, method
