"""Matplotlib figures of SHAP interaction values and contributions: the heatmap of the
strongest pairs of features (``Interactions.plot``) and dependence plots
(``Interactions.dependence``, ``Contributions.dependence``). They take arrays and
tables; the classes in ``attributions/`` pick the output, the feature and the values.
matplotlib is imported inside the functions (the ``plot`` extra), never at package
import."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from .pair_importance import check_top

# categories of a colouring feature labelled on its colour bar, when there are so few
MAX_LABELLED_CATEGORIES = 12


def pyplot():
    """matplotlib.pyplot, or an ImportError saying how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plotting needs matplotlib, which is not installed; install it "
                          "with the 'plot' extra: pip install treeimp[plot]") from exc
    return plt


def select_output(a, per_row_ndim, output, output_names):
    """One output of ``a``: ``a`` itself when it has no outputs axis (``per_row_ndim``
    axes per row; ``output`` must then be 0), else ``a[..., k]`` for ``output`` k (an
    int, or a name in ``output_names``)."""
    n_outputs = a.shape[-1] if a.ndim == per_row_ndim + 2 else 1
    if (not isinstance(output, (numbers.Integral, str)) or isinstance(output, bool)):
        raise ValueError(f"output must be an output's position or name, got {output!r}")
    if isinstance(output, str):
        names = list(output_names or [])
        if output not in names:
            raise ValueError(f"unknown output {output!r}; outputs are {names}")
        output = names.index(output)
    if not 0 <= output < n_outputs:
        raise ValueError(f"output={output} but there {'is' if n_outputs == 1 else 'are'} "
                         f"{n_outputs} output{'' if n_outputs == 1 else 's'} "
                         f"(0 .. {n_outputs - 1})")
    return a if n_outputs == 1 and a.ndim == per_row_ndim + 1 else a[..., int(output)]


def feature_index(f, names):
    """The position of feature ``f`` (a name in ``names`` or a position)."""
    if isinstance(f, (numbers.Integral, np.integer)) and not isinstance(f, bool):
        if not 0 <= f < len(names):
            raise ValueError(f"feature index {f} is out of range for {len(names)} features")
        return int(f)
    if not isinstance(f, str) or f not in names:
        raise ValueError(f"unknown feature {f!r}; features are {list(names)[:10]}"
                         + (" ..." if len(names) > 10 else ""))
    return names.index(f)


def feature_column(data, j, n_rows):
    """Column ``j`` of the explained ``data`` as (float values with NaN missing,
    categories or None): a pandas categorical, string, object or boolean column gives
    its category codes and the categories' labels."""
    if data is None:
        raise ValueError("this result has no data (feature groups have no one value per "
                         "row): the dependence plot needs the feature's values")
    if isinstance(data, pd.DataFrame):
        col = data.iloc[:, j]
    elif hasattr(data, "tocsc"):  # scipy.sparse
        col = pd.Series(np.asarray(data.tocsc()[:, j].toarray()).ravel())
    else:
        arr = data.to_numpy() if hasattr(data, "to_numpy") else np.asarray(data)
        if arr.ndim != 2:
            raise ValueError(f"data must be 2-D (rows x features), got shape {arr.shape}")
        col = pd.Series(arr[:, j])
    if len(col) != n_rows:
        raise ValueError(f"data has {len(col)} rows but the values have {n_rows}")
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy().astype(np.float64)
        codes[codes < 0] = np.nan
        return codes, [str(c) for c in col.cat.categories]
    if col.dtype.kind in "biuf":
        return col.to_numpy(dtype=np.float64, na_value=np.nan), None
    try:
        return col.to_numpy(dtype=np.float64, na_value=np.nan), None
    except (TypeError, ValueError):
        codes, uniques = pd.factorize(col, sort=True, use_na_sentinel=True)
        codes = codes.astype(np.float64)
        codes[codes < 0] = np.nan
        return codes, [str(u) for u in uniques]


def color_index(color, names, auto):
    """The colouring feature's position: ``auto()`` for "auto" (None: no colour), None for
    None, else the named feature."""
    if color is None:
        return None
    if isinstance(color, str) and color == "auto":
        return auto()
    return feature_index(color, names)


def heatmap(table, top, n_rows, n_blocks, ax=None, title=None):
    """The matrix of mean |phi_jk| of the features in the ``top`` pairs of ``table`` (as
    ``pair_importance.pair_table``: ranked, columns feature_1, feature_2, importance,
    stderr), every off-diagonal cell annotated "mean ± standard error", the ``top``
    pairs in bold; the diagonal (main effects, on another scale) left blank. Returns the
    figure."""
    top = check_top(top)
    if table.empty:
        raise ValueError("a heatmap of pairs needs at least 2 features, there is 1")
    plt = pyplot()
    shown = table.iloc[:top]
    feats = list(dict.fromkeys(v for pair in zip(shown["feature_1"], shown["feature_2"])
                               for v in pair))
    pos = {f: i for i, f in enumerate(feats)}
    M = len(feats)
    value = np.full((M, M), np.nan)
    error = np.full((M, M), np.nan)
    inside = table[table["feature_1"].isin(pos) & table["feature_2"].isin(pos)]
    for a, b, v, s in zip(inside["feature_1"], inside["feature_2"], inside["importance"],
                          inside["stderr"]):
        value[pos[a], pos[b]] = value[pos[b], pos[a]] = v
        error[pos[a], pos[b]] = error[pos[b], pos[a]] = s
    if ax is None:
        fig, ax = plt.subplots(figsize=(2.6 + 1.1 * M, 1.8 + 0.9 * M), layout="constrained")
    else:
        fig = ax.figure
    cmap = plt.get_cmap("Reds").with_extremes(bad="white")
    vmax = np.nanmax(value) if np.any(np.isfinite(value)) else 1.0
    image = ax.imshow(np.ma.masked_invalid(value), cmap=cmap, vmin=0.0,
                      vmax=vmax if vmax > 0 else 1.0)
    bold = {(pos[a], pos[b]) for a, b in zip(shown["feature_1"], shown["feature_2"])}
    for r in range(M):
        for c in range(M):
            if r == c or np.isnan(value[r, c]):
                continue
            dark = value[r, c] > 0.6 * vmax
            ax.text(c, r, f"{value[r, c]:.3g}\n\u00b1{error[r, c]:.2g}", ha="center",
                    va="center", fontsize="small", color="white" if dark else "black",
                    fontweight="bold" if (r, c) in bold or (c, r) in bold else "normal")
    ax.set_xticks(range(M), feats, rotation=45, ha="right")
    ax.set_yticks(range(M), feats)
    fig.colorbar(image, ax=ax, label="mean |SHAP interaction value| over rows")
    ax.set_title(title or (f"top {len(shown)} of {len(table)} pairs (bold), {n_rows} rows\n"
                           f"\u00b1 standard error over {n_blocks} random row blocks"),
                 fontsize="medium")
    return fig


def dependence(x, y, c=None, *, xlabel, ylabel, clabel=None, ax=None, title=None):
    """Scatter of ``y`` against ``x``, coloured by ``c``: each of x and c is (float
    values, categories or None) from ``feature_column``, y float values; rows where x or
    y is missing are not drawn (their number is said in the title), rows missing c are
    drawn grey. Returns the figure."""
    plt = pyplot()
    xv, xcats = x
    ok = ~(np.isnan(xv) | np.isnan(y))
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.2 if c is not None else 6.0, 4.8),
                               layout="constrained")
    else:
        fig = ax.figure
    if c is None:
        ax.scatter(xv[ok], y[ok], s=12, alpha=0.8, linewidths=0)
    else:
        cv, ccats = c
        has_c = ok & ~np.isnan(cv)
        no_c = ok & np.isnan(cv)
        if no_c.any():
            ax.scatter(xv[no_c], y[no_c], s=12, color="#9a9a9a", alpha=0.8, linewidths=0,
                       label=f"{clabel} missing")
            ax.legend(loc="best", fontsize="small")
        points = ax.scatter(xv[has_c], y[has_c], c=cv[has_c], cmap="coolwarm", s=12,
                            alpha=0.8, linewidths=0)
        bar = fig.colorbar(points, ax=ax, label=clabel)
        if ccats is not None and len(ccats) <= MAX_LABELLED_CATEGORIES:
            bar.set_ticks(range(len(ccats)), labels=ccats)
    if xcats is not None:
        ax.set_xticks(range(len(xcats)), xcats)
    ax.axhline(0.0, color="grey", lw=0.6, zorder=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    dropped = int(np.sum(~ok))
    note = f" ({dropped} rows with a missing value not drawn)" if dropped else ""
    ax.set_title((title or "") + note, fontsize="medium")
    return fig
