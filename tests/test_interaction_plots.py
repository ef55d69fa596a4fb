"""Plots of SHAP interaction values: Interactions.importance / plot (heatmap) /
dependence / to_shap and Contributions.dependence, checked against numpy computations
of the same numbers from the values, the artists' coordinates read back from matplotlib,
and shap's own plots taking to_shap's output."""

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.ensemble import RandomForestRegressor  # noqa: E402

import treeimp  # noqa: E402
from treeimp.attributions.contributions import Contributions  # noqa: E402
from treeimp.attributions.interactions import Interactions  # noqa: E402
from treeimp.stats.blocks import block_key, row_blocks  # noqa: E402

NAMES = ["a", "b", "c", "d", "e"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _synthetic(n=400, F=5, K=None, seed=0, nan_rows=0):
    """Interactions with chosen symmetric values (pair strengths set apart), data with a
    categorical column; no model needed."""
    rng = np.random.default_rng(seed)
    shape = (n, F, F) if K is None else (n, F, F, K)
    v = rng.normal(size=shape) * rng.uniform(0.1, 2.0, size=(1, F, F) + shape[3:])
    v = v + np.swapaxes(v, 1, 2)
    if nan_rows:
        v[rng.choice(n, nan_rows, replace=False)] = np.nan
    data = pd.DataFrame(rng.normal(size=(n, F)), columns=NAMES[:F])
    data[NAMES[F - 1]] = pd.Categorical(rng.choice(["lo", "mid", "hi"], n),
                                        categories=["lo", "mid", "hi"])
    base = np.zeros(n if K is None else (n, K))
    return Interactions(v, base, NAMES[:F], data,
                        output_names=None if K is None else [f"o{k}" for k in range(K)])


def _numpy_pairs(v, n_blocks=20, random_state=0):
    """{(j, k): (mean |v_jk| over non-NaN rows, delete-a-block jackknife SE)} for j < k,
    written out from the definition."""
    n, F = v.shape[:2]
    blocks = row_blocks(range(n), block_key(random_state), n_blocks)
    out = {}
    for j in range(F):
        for k in range(j + 1, F):
            a = np.abs(v[:, j, k])
            ok = ~np.isnan(a)
            mean = a[ok].mean()
            loo = np.array([a[ok & (blocks != b)].mean() for b in range(n_blocks)])
            se = np.sqrt((n_blocks - 1) / n_blocks * np.sum((loo - loo.mean()) ** 2))
            out[(j, k)] = (mean, se)
    return out


def _col(data, k):
    """Column k as plotted: a categorical column by its codes."""
    col = data.iloc[:, k]
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy().astype(float)
    return col.to_numpy(dtype=float)


def _points(ax):
    """(x, y) of every scatter point drawn in ``ax``, and the colour values of the
    coloured ones."""
    cols = [c for c in ax.collections if len(c.get_offsets())]
    xy = np.vstack([c.get_offsets() for c in cols])
    colored = [c for c in cols if c.get_array() is not None]
    return xy, (np.asarray(colored[0].get_array()) if colored else None), colored


def test_importance_equals_numpy_means_and_block_errors():
    inter = _synthetic(nan_rows=7)
    table = inter.importance()
    ref = _numpy_pairs(inter.values)
    assert len(table) == len(ref) == 10
    for (j, k), (mean, se) in ref.items():
        row = table.loc[f"{NAMES[j]} x {NAMES[k]}"]
        assert (row["feature_1"], row["feature_2"]) == (NAMES[j], NAMES[k])
        np.testing.assert_allclose(row["importance"], mean, rtol=1e-12)
        np.testing.assert_allclose(row["stderr"], se, rtol=1e-10)
    # ranked: the largest first, in the order numpy's sort gives
    order = sorted(ref, key=lambda p: -ref[p][0])
    assert list(table.index) == [f"{NAMES[j]} x {NAMES[k]}" for j, k in order]
    assert table.index.name == "pair"
    # rows are independent here: the block error is about sd / sqrt(n)
    a = np.abs(inter.values[:, 0, 1])
    a = a[~np.isnan(a)]
    iid = a.std(ddof=1) / np.sqrt(len(a))
    assert 0.5 * iid < table.loc["a x b", "stderr"] < 2.0 * iid
    # other blocks, other errors; the same means
    other = inter.importance(n_blocks=10, random_state=3)
    np.testing.assert_allclose(other.loc[table.index, "importance"], table["importance"])
    assert not np.allclose(other.loc[table.index, "stderr"], table["stderr"])


def test_importance_of_each_output_and_in_bag_values():
    inter = _synthetic(n=200, K=2)
    for output in (1, "o1"):
        t = inter.importance(output=output)
        ref = _numpy_pairs(inter.values[..., 1])
        np.testing.assert_allclose(t.loc["b x d", "importance"], ref[(1, 3)][0])
    assert not np.isclose(inter.importance(output=0).loc["b x d", "importance"],
                          inter.importance(output=1).loc["b x d", "importance"])


def test_heatmap_cells_are_the_top_pairs_numbers():
    inter = _synthetic(nan_rows=5)
    ref = _numpy_pairs(inter.values)
    top = 3
    best = sorted(ref, key=lambda p: -ref[p][0])[:top]
    # the features of the top pairs, the strongest pair's first
    feats = list(dict.fromkeys(f for pair in best for f in pair))
    fig = inter.plot(top=top)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [NAMES[f] for f in feats]
    assert [t.get_text() for t in ax.get_xticklabels()] == labels
    cells = np.ma.filled(ax.images[0].get_array(), np.nan)
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t for t in ax.texts}
    for r, fr in enumerate(feats):
        for c, fc in enumerate(feats):
            if r == c:
                assert np.isnan(cells[r, c]) and (r, c) not in texts
                continue
            mean, se = ref[(min(fr, fc), max(fr, fc))]
            np.testing.assert_allclose(cells[r, c], mean, rtol=1e-12)
            t = texts[(r, c)]
            assert t.get_text() == f"{mean:.3g}\n\u00b1{se:.2g}"
            in_top = (min(fr, fc), max(fr, fc)) in best
            assert (t.get_fontweight() == "bold") == in_top
    fig.canvas.draw()


def test_heatmap_top_larger_than_pairs_and_given_axes():
    inter = _synthetic(F=3)
    fig, ax = plt.subplots()
    out = inter.plot(top=50, ax=ax)
    assert out is fig
    assert len(ax.texts) == 6  # 3 pairs, each cell twice


def test_interactions_dependence_main_effect_coloured_by_argmax():
    inter = _synthetic(nan_rows=4)
    v = inter.values
    j = 1
    strength = np.nanmean(np.abs(v[:, j, :]), axis=0)
    strength[j] = -np.inf
    k = int(np.argmax(strength))
    fig = inter.dependence("b")
    ax = fig.axes[0]
    assert fig.axes[1].get_ylabel() == NAMES[k]  # the colour bar
    xy, colors, _ = _points(ax)
    x = inter.data.iloc[:, j].to_numpy()
    ok = ~np.isnan(v[:, j, j])
    np.testing.assert_array_equal(xy[:, 0], x[ok])
    np.testing.assert_array_equal(xy[:, 1], v[ok, j, j])
    np.testing.assert_array_equal(colors, _col(inter.data, k)[ok])
    assert "4 rows" in ax.get_title()


def test_interactions_dependence_of_a_pair_and_categorical_axis():
    inter = _synthetic()
    fig = inter.dependence("e", "a")
    ax = fig.axes[0]
    xy, colors, _ = _points(ax)
    codes = inter.data["e"].cat.codes.to_numpy()
    np.testing.assert_array_equal(xy[:, 0], codes)
    np.testing.assert_array_equal(xy[:, 1], inter.values[:, 4, 0])
    np.testing.assert_array_equal(colors, inter.data["a"].to_numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["lo", "mid", "hi"]
    # (a, a) is the main effect, coloured by the strongest partner as without a partner
    same, main = inter.dependence("a", "a"), inter.dependence("a")
    np.testing.assert_array_equal(_points(same.axes[0])[0], _points(main.axes[0])[0])
    np.testing.assert_array_equal(_points(same.axes[0])[0][:, 1], inter.values[:, 0, 0])
    assert same.axes[1].get_ylabel() == main.axes[1].get_ylabel()
    # no colour
    fig = inter.dependence(0, color=None)
    xy, colors, _ = _points(fig.axes[0])
    assert colors is None and len(fig.axes) == 1


def test_contributions_dependence_colour_from_interactions_on_a_subsample():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=list("pqrs"))
    y = X.p * X.r + 0.3 * X.q + 0.1 * rng.normal(size=300)
    model = RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0,
                                  n_jobs=1).fit(X, y)
    contrib = treeimp.contributions(model, X, n_jobs=1)
    inter = treeimp.interactions(model, X.iloc[:120], n_jobs=1)
    strength = np.abs(inter.values[:, 0, :]).mean(axis=0)
    strength[0] = -np.inf
    k = int(np.argmax(strength))
    assert k == 2  # p interacts with r in this design
    fig = contrib.dependence("p", interactions=inter)
    xy, colors, _ = _points(fig.axes[0])
    np.testing.assert_array_equal(xy[:, 0], X.p.to_numpy())
    np.testing.assert_array_equal(xy[:, 1], contrib.values[:, 0])
    np.testing.assert_array_equal(colors, X.iloc[:, k].to_numpy())
    assert fig.axes[1].get_ylabel() == "r"
    # the approximation from the contributions alone finds the same partner here
    fig = contrib.dependence("p")
    assert fig.axes[1].get_ylabel() == "r"
    assert "approximate" in fig.axes[0].get_title()
    # a chosen colour, into a given Axes
    fig, ax = plt.subplots()
    assert contrib.dependence("q", color="s", ax=ax) is fig


def test_approximate_partner_of_a_product():
    """y = x0 * x3 + x1: the binned approximation picks x3 for x0 and x0 for x3 (the
    contributions are the true Shapley values of the product, not of a model)."""
    rng = np.random.default_rng(2)
    n = 1000
    X = rng.normal(size=(n, 4))
    # Shapley values of f = x0 x3 + x1 with independent centred features (interventional)
    phi = np.column_stack([X[:, 0] * X[:, 3] / 2, X[:, 1], 0 * X[:, 2], X[:, 0] * X[:, 3] / 2])
    c = Contributions(phi, np.zeros(n), ["x0", "x1", "x2", "x3"], X)
    assert c.dependence("x0").axes[1].get_ylabel() == "x3"
    assert c.dependence("x3").axes[1].get_ylabel() == "x0"


def test_out_of_bag_values_and_in_bag_values():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(160, 4))
    y = X[:, 0] * X[:, 1] + rng.normal(scale=0.3, size=160)
    forest = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0,
                                   n_jobs=1).fit(X, y)
    inter = treeimp.interactions(forest, X, oob=True, n_jobs=1)
    assert np.isnan(inter.values[:, 0, 0]).any()  # rows in-bag for every tree
    for which, v in (("values", inter.values), ("in", inter.values_in)):
        t = inter.importance(which)
        ref = _numpy_pairs(v)
        np.testing.assert_allclose(t.loc["x0 x x1", ["importance", "stderr"]].to_numpy(dtype=float),
                                   ref[(0, 1)], rtol=1e-10)
    pytest.importorskip("shap")
    e = inter.to_shap()
    np.testing.assert_array_equal(e.values, inter.values)  # phi^oob, as Contributions


def test_to_shap_is_taken_by_shaps_interaction_plots():
    shap = pytest.importorskip("shap")
    rng = np.random.default_rng(4)
    X = pd.DataFrame(rng.normal(size=(150, 4)), columns=list("wxyz"))
    y = X.w * X.x + X.y
    model = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0,
                                  n_jobs=1).fit(X, y)
    inter = treeimp.interactions(model, X, n_jobs=1)
    e = inter.to_shap()
    assert isinstance(e, shap.Explanation)
    assert e.values.shape == (150, 4, 4)
    np.testing.assert_array_equal(e.values, inter.values)
    np.testing.assert_array_equal(e.data, X.to_numpy())
    assert list(e.feature_names) == list("wxyz")
    np.testing.assert_array_equal(e.base_values, inter.base_values)

    shap.summary_plot(e.values, e.data, feature_names=e.feature_names, show=False)
    # a panel per feature, each its main effect and its pairs
    assert sorted(a.get_title() for a in plt.gcf().axes) == list("wxyz")
    plt.close("all")
    shap.summary_plot(e, show=False)
    plt.close("all")
    fig, ax = plt.subplots()
    shap.dependence_plot(("w", "x"), e.values, e.data, feature_names=e.feature_names,
                         ax=ax, show=False)
    xy, _, _ = _points(ax)
    # shap draws 2 phi_wx (the pair's two halves) against w
    np.testing.assert_allclose(np.sort(xy[:, 1]), np.sort(2 * inter.values[:, 0, 1]))
    plt.close("all")
    shap.decision_plot(float(inter.base_values[0]), e.values, features=e.data,
                       feature_names=list(e.feature_names), show=False)


def test_to_shap_of_several_outputs_one_at_a_time():
    shap = pytest.importorskip("shap")
    inter = _synthetic(n=60, F=3, K=2)
    inter.data = inter.data.assign(c=np.arange(60.0))  # numeric data for shap's colours
    e = inter.to_shap()
    assert e.values.shape == (60, 3, 3, 2)
    np.testing.assert_array_equal(e[..., 1].values, inter.values[..., 1])
    shap.summary_plot(e[..., 1], show=False)


@pytest.mark.parametrize("call, match", [
    (lambda i: i.dependence("zz"), "unknown feature 'zz'"),
    (lambda i: i.dependence("a", "zz"), "unknown feature 'zz'"),
    (lambda i: i.dependence(7), "feature index 7 is out of range for 5 features"),
    (lambda i: i.dependence("a", color="zz"), "unknown feature 'zz'"),
    (lambda i: i.plot(top=0), "top must be a positive integer"),
    (lambda i: i.plot(top=-2), "top must be a positive integer"),
    (lambda i: i.plot(top=1.5), "top must be a positive integer"),
    (lambda i: i.plot(kind="bar"), "kind must be 'heatmap'"),
    (lambda i: i.plot(output=1), r"output=1 but there is 1 output"),
    (lambda i: i.importance(output=-1), r"output=-1 but there is 1 output"),
    (lambda i: i.importance(output="p"), "unknown output 'p'"),
    (lambda i: i.importance("in"), "which='in' needs out-of-bag"),
    (lambda i: i.importance("oob"), "which must be 'values' or 'in'"),
    (lambda i: i.importance(n_blocks=1), "n_blocks must be >= 2"),
    (lambda i: i.importance(n_blocks=51), "n_blocks=51 is more than the 50"),
])
def test_bad_input_on_interactions(call, match):
    with pytest.raises(ValueError, match=match):
        call(_synthetic(n=50))


def test_bad_input_on_several_outputs_and_contributions():
    inter = _synthetic(n=50, K=2)
    with pytest.raises(ValueError, match=r"output=2 but there are 2 outputs \(0 .. 1\)"):
        inter.plot(output=2)
    one = _synthetic(n=50)
    c = Contributions(one.values.sum(axis=2), np.zeros(50), NAMES, one.data)
    with pytest.raises(ValueError, match="unknown feature 'zz'"):
        c.dependence("zz")
    with pytest.raises(ValueError, match="output=3 but there is 1 output"):
        c.dependence("a", output=3)
    with pytest.raises(ValueError, match="interactions must be of the same features"):
        c.dependence("a", interactions=_synthetic(n=50, F=4))
    grouped = Contributions(one.values.sum(axis=2), np.zeros(50), NAMES, None)
    with pytest.raises(ValueError, match="no data"):
        grouped.dependence("a")
    with pytest.raises(ValueError, match="at least 2 features"):
        Interactions(np.ones((5, 1, 1, 1)), np.zeros((5, 1)), ["a"], None).plot()


def test_missing_matplotlib_message_and_numbers_without_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    inter = _synthetic(n=40)
    assert len(inter.importance()) == 10  # the table needs no matplotlib
    with pytest.raises(ImportError, match=r"pip install treeimp\[plot\]"):
        inter.plot()
    with pytest.raises(ImportError, match=r"pip install treeimp\[plot\]"):
        inter.dependence("a")
