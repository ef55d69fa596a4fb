"""plot_importances: headless rendering, labels, one bar per shown feature, whiskers,
negative values, per-tree box plots, argument errors, the missing-matplotlib message."""

import sys

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # noqa: E402

import treeimp  # noqa: E402
from treeimp.results.importances import Importances  # noqa: E402
from treeimp.results.plot import plot_importances  # noqa: E402

METHODS = ("mdi", "mdi_oob", "ufi")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _forest_result(task):
    if task == "regression":
        X, y = make_regression(n_samples=300, n_features=8, n_informative=3, noise=5.0,
                               random_state=0)
        model = RandomForestRegressor(n_estimators=15, min_samples_leaf=3, random_state=0,
                                      n_jobs=1)
    else:
        n_classes = 2 if task == "binary" else 3
        X, y = make_classification(n_samples=300, n_features=8, n_informative=3,
                                   n_redundant=0, n_classes=n_classes, random_state=0)
        model = RandomForestClassifier(n_estimators=15, random_state=0, n_jobs=1)
    model.fit(X, y)
    return treeimp.explain(model, X, y, oob=True, methods=METHODS, random_state=0, n_jobs=1)


@pytest.fixture(scope="module", params=["regression", "binary", "multiclass"])
def forest_result(request):
    return _forest_result(request.param)


def _synthetic(kind="forest", n_features=6, seed=0):
    """An Importances with chosen values (negative ones included), no model needed."""
    rng = np.random.default_rng(seed)
    idx = pd.Index([f"f{j}" for j in range(n_features)], name="feature")
    table = pd.DataFrame({"mdi": rng.uniform(0.01, 1.0, n_features),
                          "mdi_oob": np.linspace(0.5, -0.4, n_features),
                          "ufi": rng.normal(0.0, 1.0, n_features)}, index=idx)
    se = pd.DataFrame({"mdi": np.nan, "mdi_oob": 0.05, "ufi": 0.1}, index=idx)
    per_tree = {m: rng.normal(table[m].to_numpy(), 0.3, size=(25, n_features))
                for m in METHODS}
    per_tree["ufi"][:, 1] = np.nan  # a feature no tree could measure
    return Importances(table=table, stderr=se, stderr_trees=se, per_tree=per_tree,
                       block_values={}, n_blocks=10, kind=kind, n_rows=123,
                       model_name=f"test {kind}")


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def _has_whiskers(ax):
    return any(isinstance(c, ErrorbarContainer) for c in ax.containers)


def _check_bar_figure(fig, res, methods, top):
    n_show = min(top, len(res.table))
    rank_by = next((m for m in methods if m != "mdi"), methods[0])
    expected = res.ranking(rank_by)[:n_show]
    axes = fig.axes
    assert len(axes) == len(methods)
    assert axes[0].get_ylabel()
    assert [t.get_text() for t in axes[0].get_yticklabels()] == expected
    for ax, m in zip(axes, methods):
        assert ax.get_xlabel() and ax.get_title()
        bars = _bars(ax)
        assert len(bars) == n_show
        # bar lengths are the table's values, in ranking order, most important on top
        widths = [b.get_width() for b in sorted(bars, key=lambda b: b.get_y())]
        np.testing.assert_allclose(widths, res.table[m].loc[expected].to_numpy())
        assert _has_whiskers(ax) == (m != "mdi")
        values = res.table[m].loc[expected].to_numpy()
        if np.nanmin(values) < 0:
            assert ax.get_xlim()[0] < np.nanmin(values)
        assert ax.get_xlim()[1] >= 0


@pytest.mark.parametrize("top", [3, 20])
def test_bars_forest(forest_result, top):
    fig = forest_result.plot(top=top)
    _check_bar_figure(fig, forest_result, list(METHODS), top)
    assert "mean over trees" in fig.axes[0].get_xlabel()
    fig.canvas.draw()


def test_per_tree_forest(forest_result):
    fig = plot_importances(forest_result, method=["mdi", "ufi"], kind="per_tree", top=5)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_title()
        # one box (a patch, patch_artist=True) per shown feature
        assert len(ax.patches) == 5
    assert fig.axes[0].get_ylabel()
    fig.canvas.draw()


def test_negative_values_visible_with_zero_line():
    res = _synthetic()
    fig = plot_importances(res, method="mdi_oob", top=6)
    (ax,) = fig.axes
    assert res.table["mdi_oob"].min() < 0
    assert ax.get_xlim()[0] < res.table["mdi_oob"].min() - 0.05 + 1e-12  # whisker too
    assert any(np.allclose(line.get_xdata(), 0.0) for line in ax.lines)
    _check_bar_figure(fig, res, ["mdi_oob"], 6)
    fig.canvas.draw()


def test_per_tree_negative_and_unmeasured_feature():
    res = _synthetic()
    fig = plot_importances(res, method="ufi", kind="per_tree", top=6)
    (ax,) = fig.axes
    assert ax.get_xlim()[0] < np.nanmin(res.per_tree["ufi"])
    assert ax.get_xlim()[1] > np.nanmax(res.per_tree["ufi"])
    fig.canvas.draw()


def test_boosting_label_and_single_method_ranking():
    res = _synthetic(kind="boosting")
    fig = plot_importances(res, method="mdi", top=4)
    assert "sum over trees" in fig.axes[0].get_xlabel()
    _check_bar_figure(fig, res, ["mdi"], 4)  # only mdi plotted: ranked by mdi
    assert not _has_whiskers(fig.axes[0])


def test_given_axes():
    res = _synthetic()
    fig, axes = plt.subplots(1, 2)
    out = plot_importances(res, method=["mdi", "ufi"], top=4, ax=axes)
    assert out is fig
    assert [len(_bars(a)) for a in axes] == [4, 4]
    with pytest.raises(ValueError, match="ax has 2 Axes but 3 panels"):
        plot_importances(res, ax=axes)


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "gain"}, r"'gain' is not in this result; valid methods: \['mdi', 'mdi_oob'"),
    ({"method": []}, "method is empty"),
    ({"kind": "violin"}, r"kind must be one of \['bar', 'per_tree'\]"),
    ({"top": 0}, "top must be a positive integer"),
    ({"top": 2.5}, "top must be a positive integer"),
    ({"top": True}, "top must be a positive integer"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plot_importances(_synthetic(), **kwargs)


def test_missing_matplotlib_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install treeimp\[plot\]"):
        _synthetic().plot()


def test_xgboost_result():
    xgb = pytest.importorskip("xgboost")
    X, y = make_classification(n_samples=400, n_features=6, n_informative=3, n_redundant=0,
                               random_state=1)
    model = xgb.XGBClassifier(n_estimators=15, max_depth=3, n_jobs=1, random_state=0)
    model.fit(X[:250], y[:250])
    res = treeimp.explain(model, X[250:], y[250:], methods=METHODS, random_state=0, n_jobs=1)
    fig = res.plot(top=4)
    _check_bar_figure(fig, res, list(METHODS), 4)
    assert "sum over trees" in fig.axes[0].get_xlabel()
    fig = res.plot(kind="per_tree", method="mdi_oob")
    assert len(fig.axes[0].patches) == 6
    fig.canvas.draw()
