"""Matplotlib figures of an :class:`~treeimp.Importances`: bars with standard-error
whiskers, or box plots of the per-tree values. matplotlib is imported inside the function
(the ``plot`` extra), never at package import."""

from __future__ import annotations

import inspect
import numbers

import numpy as np

from ..measures.registry import needs_rows, title

KINDS = ("bar", "per_tree")


def plot_importances(res, method=None, kind="bar", top=20, ax=None):
    """Plot feature importances, one panel per method, panels sharing the feature axis.

    Methods have different scales (MDI is an impurity decrease on the training rows,
    MDI-oob and UFI are measured on out-of-sample rows, boosting sums over trees), so each
    method gets its own panel and x axis; the panels share the feature axis, so a feature
    reads across one row: MDI next to MDI-oob or UFI shows the in-sample bias at a glance
    (a row ID with a long MDI bar and a zero MDI-oob bar). Features are the ``top`` ones
    by the first out-of-sample method plotted (by the first method when only "mdi" is
    plotted), most important at the top. Negative importances (splits that hurt on rows
    the trees did not see) are drawn as they are, left of a zero line, never clipped.

    Parameters
    ----------
    res : Importances
        The result of :func:`treeimp.explain`.
    method : str, list of str or None, default None
        Methods to plot, one panel each; None plots every method in ``res.table``.
    kind : {"bar", "per_tree"}, default "bar"
        "bar": horizontal bars of ``res.table`` with whiskers of +- one standard error
        (``res.stderr``; none for "mdi", which uses no evaluation rows and has no error).
        "per_tree": box plots of ``res.per_tree[method]``, one box per feature over the
        trees (trees that saw no evaluation rows are left out).
    top : int, default 20
        Number of features shown (all of them when there are fewer).
    ax : matplotlib Axes or sequence of Axes, optional
        One Axes per panel to draw into; by default a new figure is created.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ImportError
        When matplotlib is not installed (``pip install treeimp[plot]``).
    ValueError
        For an unknown ``method`` or ``kind``, a ``top`` that is not a positive integer,
        or an ``ax`` whose number of Axes is not the number of panels.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> import treeimp
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> rf = RandomForestClassifier(n_estimators=20, random_state=0).fit(X, y)
    >>> res = treeimp.explain(rf, X, y, oob=True, random_state=0)
    >>> fig = treeimp.results.plot.plot_importances(res, method=["mdi", "ufi"], top=3)
    >>> len(fig.axes)
    2
    """
    methods = _check_methods(res, method)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    if kind == "per_tree":
        lacking = [m for m in methods if m not in res.per_tree]
        if lacking:
            raise ValueError(f"this result keeps no per-tree values of {lacking} (pairs of "
                             "interaction_importance: they would take n_trees x pairs "
                             "numbers); plot kind='bar'")
    if isinstance(top, bool) or not isinstance(top, numbers.Integral) or top < 1:
        raise ValueError(f"top must be a positive integer (1, 2, ...), got {top!r}")
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plotting needs matplotlib, which is not installed; install it "
                          "with the 'plot' extra: pip install treeimp[plot]") from exc

    rank_by = next((m for m in methods if needs_rows(m)), methods[0])
    features = res.table[rank_by].sort_values(ascending=False, kind="stable").index[:top]
    rows = [res.table.index.get_loc(f) for f in features]
    fig, axes = _axes(plt, ax, len(methods), len(features))
    positions = np.arange(len(features))
    forest = res.kind == "forest"
    over = "mean over trees" if forest else "sum over trees"
    for k, (m, a) in enumerate(zip(methods, axes)):
        color = f"C{k % 10}"
        if kind == "bar":
            _bars(a, res, m, features, positions, color)
            a.set_xlabel(f"importance ({over})")
        else:
            _boxes(a, res, m, rows, positions, color)
            a.set_xlabel("importance of each tree" + ("" if forest else
                                                       " (the total is their sum)"))
        a.axvline(0.0, color="black", linewidth=0.8, zorder=0)
        a.set_title(title(m))
        a.set_yticks(positions)
        a.set_yticklabels([str(f) for f in features])
        a.set_ylim(len(features) - 0.5, -0.5)  # most important at the top
        a.grid(axis="x", alpha=0.3)
    axes[0].set_ylabel("feature")
    what = ("whiskers: \u00b11 standard error" if kind == "bar"
            else "boxes: the trees' values")
    name = res.model_name or res.kind
    fig.suptitle(f"{name}, {res.n_rows} evaluation rows ({what})\ntop {len(features)} of "
                 f"{len(res.table)} features by {title(rank_by)}",
                 fontsize="medium")
    return fig


def _check_methods(res, method):
    valid = list(res.table.columns)
    if method is None:
        return valid
    methods = [method] if isinstance(method, str) else list(method)
    if not methods:
        raise ValueError(f"method is empty; valid methods for this result: {valid}")
    bad = [m for m in methods if m not in valid]
    if bad:
        raise ValueError(f"method {bad[0]!r} is not in this result; valid methods: {valid}")
    return list(dict.fromkeys(methods))


def _axes(plt, ax, n_panels, n_features):
    if ax is None:
        height = 1.6 + 0.32 * n_features
        fig, axes = plt.subplots(1, n_panels, sharey=True, squeeze=False,
                                 figsize=(max(6.0, 1.8 + 3.2 * n_panels), height),
                                 layout="constrained")
        return fig, list(axes[0])
    axes = list(np.ravel(np.asarray(ax, dtype=object)))
    if len(axes) != n_panels:
        raise ValueError(f"ax has {len(axes)} Axes but {n_panels} panels are drawn (one "
                         "per method); pass one Axes per method or method=...")
    return axes[0].figure, axes


def _bars(a, res, m, features, positions, color):
    value = res.table[m].loc[features].to_numpy(dtype=float)
    se = res.stderr[m].loc[features].to_numpy(dtype=float)
    xerr = None if np.all(np.isnan(se)) else se
    a.barh(positions, value, xerr=xerr, color=color, alpha=0.85, height=0.7,
           error_kw={"ecolor": "black", "capsize": 2.5, "elinewidth": 1.0})
    _include_extremes(a, value, se)


def _include_extremes(a, value, se):
    """Keep every bar end and whisker end inside the x limits (also when negative)."""
    lo = value - np.nan_to_num(se)
    hi = value + np.nan_to_num(se)
    finite = np.isfinite(lo) & np.isfinite(hi)
    if finite.any():
        a.update_datalim([(min(0.0, lo[finite].min()), 0.0), (max(0.0, hi[finite].max()), 0.0)],
                         updatey=False)
        a.autoscale_view(scaley=False)


def _boxes(a, res, m, rows, positions, color):
    pt = np.asarray(res.per_tree[m], dtype=float)
    data = [pt[:, j][~np.isnan(pt[:, j])] for j in rows]
    style = {"patch_artist": True, "widths": 0.6, "manage_ticks": False,
             "boxprops": {"facecolor": color, "alpha": 0.6},
             "medianprops": {"color": "black"},
             "flierprops": {"markersize": 2.5, "alpha": 0.5}}
    # matplotlib 3.10 replaced vert=False by orientation="horizontal"
    if "orientation" in inspect.signature(a.boxplot).parameters:
        style["orientation"] = "horizontal"
    else:
        style["vert"] = False
    a.boxplot(data, positions=positions, **style)
