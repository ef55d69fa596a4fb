"""Finalising from leaf sums (measures.LeafStats, kernels/formulas.leaf_split_sums) against
the statistics propagated up the trees first (kernels/node_stats.propagate_up) and the
numpy forms of the formulas, on forests and boosted models with B > 1 blocks."""

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor

from tests.test_formulas import N_BLOCKS, _forest, _reference, _ufi_replicates_by_loops
from treeimp import parse
from treeimp.inputs.rows import RowSource
from treeimp.inputs.targets import forest_targets
from treeimp.measures import formulas as measures
from treeimp.measures import per_method
from treeimp.measures.formulas import LeafStats
from treeimp.measures.formulas import NodeSums as NodeStats
from treeimp.stats.drivers import forest_leaf_sums, node_planes, staged_leaf_sums

FUSED = ("mdi_oob", "mdi_oob_centered", "ufi")


def _leaves(case):
    """(ens, leaf sums (n_leaves, B, D) as Explainer.accumulate keeps them, layout name,
    classification)."""
    import treeimp

    if case.startswith("boosting"):
        pytest.importorskip(case.split()[1])
        rng = np.random.default_rng(5)
        X = rng.normal(size=(260, 4))
        f = X[:, 0] + X[:, 1] * X[:, 2]
        if case.endswith("xgboost"):
            import xgboost as xgb

            y = (f + rng.normal(scale=0.5, size=260) > 0).astype(int)
            model = xgb.XGBClassifier(n_estimators=6, max_depth=4, learning_rate=0.3,
                                      subsample=0.7, random_state=0, n_jobs=1)
        else:
            import lightgbm as lgb

            y = f + rng.normal(scale=0.3, size=260)
            model = lgb.LGBMRegressor(n_estimators=6, num_leaves=12, min_child_samples=5,
                                      learning_rate=0.2, verbose=-1, n_jobs=1)
        ens = treeimp.parse(model.fit(X[:200], y[:200]))
        block = (np.arange(60) % N_BLOCKS).astype(np.int32)
        w = np.random.default_rng(1).uniform(0.5, 2.0, size=60)
        arr, _ = staged_leaf_sums(ens, RowSource(X[200:], ens), y[200:], w, block,
                                  N_BLOCKS, keep_margin=False)
        return ens, arr, "boosting", False
    ens, X, y = _forest(case.split()[0])
    Z, classification = forest_targets(ens, y)
    one_hot = case.endswith("one-hot")
    block = (np.arange(len(X)) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(X))
    arr = forest_leaf_sums(ens, RowSource(X, ens), Z, w, block, N_BLOCKS, one_hot=one_hot)
    return ens, arr, "one_hot" if one_hot else "regression", classification


def _propagated(ens, leaves, layout):
    arr = node_planes(ens, leaves, leave_one_out=True, propagate=True)
    return NodeStats.from_array(arr, boosting=layout == "boosting", one_hot=layout == "one_hot",
                                total_last=True)


CASES = ["multiclass", "multiclass one-hot", "regression", "boosting xgboost",
         "boosting lightgbm"]


@pytest.mark.parametrize("case", CASES)
def test_leaf_sums_give_what_propagated_statistics_give(case):
    ens, leaves, layout, classification = _leaves(case)
    before = leaves.copy()
    lazy = LeafStats(leaves, ens, layout)
    eager = _propagated(ens, leaves, layout)
    assert lazy.n_blocks == eager.n_blocks == N_BLOCKS + 1
    assert lazy.boosting == eager.boosting and lazy.n_values == eager.n_values
    assert lazy.n_is_class_sum == eager.n_is_class_sum
    roots = ens.tree_offsets[:-1]
    np.testing.assert_array_equal(lazy.root_counts(), eager.n_at(roots))
    # every fused measure alone, and all of them from one pass, equal the same kernels'
    # sums over the propagated statistics (the same additions in the same order), and
    # the numpy forms to rounding
    together = measures.fused_parts(FUSED, ens, lazy, classification)
    for name in FUSED:
        alone = measures.fused_parts([name], ens, lazy, classification)[name]
        want = measures.fused_parts([name], ens, eager, classification)[name]
        np.testing.assert_array_equal(alone, want, err_msg=name)
        np.testing.assert_array_equal(together[name], want, err_msg=name)
        got = per_method.compute(name, ens, lazy, classification=classification)
        plain = per_method.compute(name, ens, eager, classification=classification, fused=False)
        np.testing.assert_allclose(got, plain, rtol=1e-12,
                                   atol=1e-12 * np.nanmax(np.abs(plain)), err_msg=name)
    # a view of some blocks reads the same blocks of the propagated statistics
    last = lazy.blocks(slice(-1, None))
    assert last.n_blocks == 1
    np.testing.assert_array_equal(last.n_at(roots), eager.blocks(slice(-1, None)).n_at(roots))
    np.testing.assert_array_equal(
        measures.fused_parts(["mdi_oob"], ens, last, classification)["mdi_oob"],
        measures.fused_parts(["mdi_oob"], ens, eager, classification)["mdi_oob"][-1:])
    # measures without a fused form read the planes: built once, equal
    got = per_method.compute("naive_oob", ens, lazy, classification=classification)
    np.testing.assert_array_equal(
        got, per_method.compute("naive_oob", ens, eager, classification=classification))
    np.testing.assert_array_equal(lazy.S, eager.S)
    # the accumulated statistics are read, never written
    np.testing.assert_array_equal(leaves, before)


def test_fused_measures_share_one_array_per_distinct_input():
    """Measures reading the same node values get one row of the stacked inputs; the
    dummy in-sample weights of mdi_oob are padded, not read."""
    ens, leaves, layout, classification = _leaves("multiclass")
    lazy = LeafStats(leaves, ens, layout)
    sp = measures._splits(ens)
    reqs = [measures._request(measures.MDI_OOB, ens, lazy),
            measures._ufi_request(ens, sp, lazy, classification)]
    bundle = measures._fused_measures(reqs)
    assert list(bundle.v_of) == [0, 0] and bundle.v.shape[0] == 1  # the forest's values
    assert list(bundle.w_of) == [0, 1] and bundle.w.shape == (2, ens.n_nodes)
    assert not bundle.v.flags.writeable and not bundle.w.flags.writeable


def test_unknown_layout_is_refused():
    ens, leaves, _, _ = _leaves("regression")
    with pytest.raises(ValueError, match="layout"):
        LeafStats(leaves, ens, "planes")


@pytest.mark.parametrize("case", ["regression", "boosting xgboost"])
def test_leaf_slots_follow_the_leaves_tree_by_tree(case):
    ens, leaves, _, _ = _leaves(case)
    slots = ens.leaf_slots
    assert ens.leaf_slots is slots  # a cached property
    is_leaf = ens.left < 0
    np.testing.assert_array_equal(slots.node, np.flatnonzero(is_leaf))
    np.testing.assert_array_equal(slots.slot[slots.node], np.arange(slots.node.shape[0]))
    assert np.all(slots.slot[~is_leaf] == -1)
    assert leaves.shape[0] == slots.node.shape[0]
    for t in range(ens.n_trees):
        own = slots.node[slots.tree_start[t]:slots.tree_start[t + 1]]
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        np.testing.assert_array_equal(own, lo + np.flatnonzero(is_leaf[lo:hi]))
    assert not any(a.flags.writeable for a in slots)


def test_statistics_pickled_in_the_node_plane_layout_are_refused():
    """NodeStats pickled by a version that kept node planes (their state has no format
    mark) must not be read as leaf sums: a clear error, not wrong numbers."""
    import pickle

    import treeimp
    from treeimp.stats.node_stats import NodeStats as Accumulated

    ens, X, y = _forest("regression")
    stats = treeimp.Explainer(ens).accumulate(X, y, random_state=0)
    state = stats.__getstate__()
    back = pickle.loads(pickle.dumps(stats))
    np.testing.assert_array_equal(back.planes, stats.planes)
    old = {k: v for k, v in state.items() if k != "_format"}
    with pytest.raises(ValueError, match="earlier treeimp"):
        Accumulated.__new__(Accumulated).__setstate__(old)


def test_trees_without_splits_and_repeated_features_give_the_loops():
    """A forest with single-leaf trees (no split terms, nothing to prefetch) between
    trees that split on one feature several times (several terms into one output cell)
    gives, from leaf sums and from propagated statistics, mdi_oob's and ufi's
    split-by-split loops (test_formulas: the sums per root row and the replicates
    expanded about the total)."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 6))
    y = 2.0 * X[:, 0] + np.sin(3.0 * X[:, 0]) + rng.normal(scale=0.3, size=300)
    model = ExtraTreesRegressor(n_estimators=12, max_depth=4, max_features=1,
                                min_impurity_decrease=0.01, bootstrap=True, random_state=3)
    ens = parse(model.fit(X[:240], y[:240]))
    splits = np.diff(measures._splits(ens).tree_splits)
    assert np.any(splits == 0) and np.any(splits > 0)  # single leaves and split trees
    sp = measures._splits(ens)
    tree_of_split = np.repeat(np.arange(ens.n_trees), splits)
    assert len(set(zip(tree_of_split, sp.key))) < len(sp.key)  # a feature split twice
    Z, classification = forest_targets(ens, y[240:])
    block = (np.arange(60) % N_BLOCKS).astype(np.int32)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=60)
    leaves = forest_leaf_sums(ens, RowSource(X[240:], ens), Z, w, block, N_BLOCKS)
    lazy = LeafStats(leaves, ens, "regression")
    eager = _propagated(ens, leaves, "regression")
    n, Q, S = eager.n, eager.Q, eager.S
    exp_mdi, _ = _reference(ens, n, Q, S, classification)
    exp_ufi = _ufi_replicates_by_loops(ens, {"n": n, "S": S, "Q": Q, "H": None, "R": None},
                                       classification)
    n_root = n[ens.tree_offsets[:-1]].T  # (B + 1, T)
    for st in (lazy, eager):
        got = measures.fused_parts(("mdi_oob", "ufi"), ens, st, classification)
        with np.errstate(invalid="ignore", divide="ignore"):
            mdi = got["mdi_oob"][..., 0] / n_root[:, :, None]
        seen = n_root > 0
        np.testing.assert_allclose(mdi[seen], exp_mdi[..., 0][seen], rtol=1e-12,
                                   atol=1e-12 * np.abs(exp_mdi).max())
        np.testing.assert_allclose(got["ufi"][..., 0], exp_ufi, rtol=1e-10,
                                   atol=1e-12 * np.abs(exp_ufi).max())
        assert np.abs(exp_ufi).max() > 0 and np.abs(exp_mdi).max() > 0
