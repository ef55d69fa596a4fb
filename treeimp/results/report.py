"""A self-contained HTML report of an :class:`~treeimp.Importances`
(``Importances.to_html``, ``treeimp explain --report``): the model, the table, the
in-sample MDI beside the out-of-sample measure as a figure, the selected features and
how they were tested, and what is needed to reproduce the numbers.

The file needs nothing else: the style is inline, the figure a base64 PNG in an
``<img>`` (data: URL), no script and no link to the network. Text from the data and the
caller (feature names, the model's name, settings) is escaped.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import numbers
import platform
from importlib import metadata

from .. import __version__
from ..measures import registry
from .display import SELECT_ALPHA, display_order, screening_of
from .html import STYLE, importances_table, legend_html, summary_line
from .plot import plot_importances

# distributions whose versions the report lists when installed (read from their metadata,
# nothing imported)
VERSIONED = ("treeimp", "numpy", "pandas", "scipy", "numba", "scikit-learn", "xgboost",
             "lightgbm", "catboost", "matplotlib")

PAGE_STYLE = ("<style>body{font-family:sans-serif;margin:24px;max-width:1100px}"
              "h1{font-size:140%}h2{font-size:115%;margin-top:24px}"
              ".treeimp-kv th{text-align:left;padding:2px 12px 2px 0;font-weight:normal;"
              "color:#444}.treeimp-kv td{font-family:monospace}</style>")


def versions():
    """{distribution: version} of the installed packages in :data:`VERSIONED`, and
    Python's."""
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if name == "treeimp":  # run from a source tree, not installed
                out[name] = f"{__version__} (source tree)"
    return out


def report_html(res, *, title=None, model_summary=None, settings=None, alpha=SELECT_ALPHA,
                top=30):
    """The report of ``res`` as one HTML document (a str).

    Parameters
    ----------
    res : Importances
    title : str, optional
        The page title; default "treeimp report: <model name>".
    model_summary : dict, optional
        {label: text} describing the model (``TreeEnsemble.summary()``); default: what
        ``res`` records (its model's name, kind, task and objective).
    settings : dict, optional
        {label: value} needed to reproduce the result (the command line, the seed, the
        files); listed with the package versions.
    alpha : float, default 0.05
        The false discovery rate of the selection shown.
    top : int, default 30
        Features in the figure.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    name = res.model_name or res.kind
    title = f"treeimp report: {name}" if title is None else str(title)
    if model_summary is None:
        model_summary = {"model": name, "task": str(getattr(res, "task", None) or "unknown"),
                         "objective": str(getattr(res, "objective", None) or "unknown")}
    model_summary = {**model_summary, "evaluation rows": str(res.n_rows)}
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{html.escape(title)}</title>{PAGE_STYLE}{STYLE}</head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p>{html.escape(summary_line(res))}</p>",
             "<h2>Model</h2>", _key_values(model_summary),
             "<h2>Importances</h2>", importances_table(res, alpha=alpha), legend_html(res, alpha),
             "<h2>In-sample MDI beside the out-of-sample measure</h2>", _figure(res, top),
             "<h2>Selected features</h2>", _selection(res, alpha),
             "<h2>To reproduce</h2>",
             _key_values({**{str(k): str(v) for k, v in (settings or {}).items()},
                          "created": datetime.datetime.now(datetime.timezone.utc)
                          .strftime("%Y-%m-%d %H:%M UTC")}),
             "<p>Package versions:</p>", _key_values(versions()),
             "</body></html>"]
    return "\n".join(parts)


def _key_values(pairs):
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in pairs.items())
    return f"<table class='treeimp-kv'>{rows}</table>"


def _figure(res, top):
    """``<img>`` of the bar chart of mdi and the first out-of-sample measure shown (a
    data: URL of a PNG), or a sentence saying why there is none."""
    try:
        import matplotlib
    except ImportError:
        return "<p>(no figure: matplotlib is not installed; pip install treeimp[plot])</p>"
    order = display_order(res)
    first = order[0]
    methods = ["mdi", first] if "mdi" in res.methods and first != "mdi" else [first]
    backend = matplotlib.get_backend()
    import matplotlib.pyplot as plt

    try:
        plt.switch_backend("Agg")  # drawn into memory, never shown
        fig = plot_importances(res, method=methods, top=top)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
    finally:
        plt.switch_backend(backend)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    alt = " beside ".join(registry.title(m) for m in methods)
    return (f"<img id='treeimp-figure' alt='{html.escape(alt, quote=True)}' "
            f"src='data:image/png;base64,{data}'>")


def _selection(res, alpha):
    screen = screening_of(res)
    if screen is None:
        return ("<p>No selection: this result does not record its screening measure "
                "(call select(method=...) with one of "
                f"{html.escape(str([m for m in res.methods if registry.needs_rows(m)]))}).</p>")
    kept = res.select(screen, alpha)
    how = (f"Test: for each feature, a one-sided t-test of {screen} &gt; 0 (its value over "
           f"its delete-a-block jackknife standard error from {res.n_blocks} random row "
           f"blocks, t with {res.dof} degrees of freedom), then the Benjamini-Hochberg "
           f"adjustment across the {len(res.feature_names)} features; kept when the "
           f"q-value is below the false discovery rate {alpha:g}.")
    listed = ("<p>(none)</p>" if not kept else
              "<ol>" + "".join(f"<li>{html.escape(str(f))}</li>" for f in kept) + "</ol>")
    return (f"<p>{len(kept)} of {len(res.feature_names)} kept by "
            f"<b>{html.escape(screen)}</b> at false discovery rate {alpha:g}:</p>"
            + listed + f"<p>{how}</p>")
