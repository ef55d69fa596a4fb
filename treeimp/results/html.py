"""HTML of an :class:`~treeimp.Importances`: the notebook display (``_repr_html_``) and
the table of the HTML report (``Importances.to_html``, ``treeimp explain --report``).

Every text taken from the data (feature names, the model's name) is escaped. Each
number cell shows 4 significant digits and carries the exact float64 in its ``title``
attribute (``repr`` of the value), so hovering shows it and a reader of the HTML can
check it.
"""

from __future__ import annotations

import html

import numpy as np

from .display import (
    SELECT_ALPHA,
    column_label,
    display_order,
    legend_lines,
    screening_of,
)

MAX_ROWS = 60  # rows of the notebook display; the report shows every feature

STYLE = ("<style>.treeimp-table td,.treeimp-table th{padding:2px 8px;text-align:right}"
         ".treeimp-table td:first-child,.treeimp-table th:first-child{text-align:left}"
         ".treeimp-legend{font-size:85%;font-family:monospace;white-space:pre-wrap;"
         "margin:4px 0}</style>")


def number_cell(value):
    """A ``<td>`` of one float: 4 significant digits shown, the exact value in title."""
    value = float(value)
    if np.isnan(value):
        return "<td></td>"
    return f'<td title="{value!r}">{value:.4g}</td>'


def summary_line(res):
    what = "pairs" if res.table.index.name == "pair" else "features"
    return (f"{res.model_name or res.kind}: {len(res.feature_names)} {what}, {res.n_rows} "
            f"evaluation rows; standard errors from {res.n_blocks} row blocks")


def importances_table(res, *, max_rows=None, alpha=SELECT_ALPHA):
    """``<table>`` of ``res`` in display order: per measure its value and standard error
    (none for measures read from the model alone); beside the screening measure its
    q-value and whether ``res.select(alpha=alpha)`` keeps the feature. Rows sorted by the
    first measure shown; ``max_rows``: at most that many rows (None: all)."""
    order = display_order(res)
    screen = screening_of(res)
    kept = set(res.select(screen, alpha)) if screen is not None else set()
    with_se = {m for m in order if np.isfinite(res.stderr[m].to_numpy(dtype=float)).any()}
    head = ["<th>" + html.escape(str(res.table.index.name or "feature")) + "</th>"]
    for m in order:
        head.append(f"<th>{html.escape(column_label(res, m))}</th>")
        if m in with_se:
            head.append(f"<th>{html.escape(m)} stderr</th>")
        if m == screen:
            head.append("<th>q</th><th>selected</th>")
    rows = res.ranking(order[0])
    shown = rows if max_rows is None else rows[:max_rows]
    body = []
    for f in shown:
        cells = [f"<th>{html.escape(str(f))}</th>"]
        for m in order:
            cells.append(number_cell(res.table.at[f, m]))
            if m in with_se:
                cells.append(number_cell(res.stderr.at[f, m]))
            if m == screen:
                cells.append(number_cell(res.qvalues.at[f, m]))
                cells.append("<td>yes</td>" if f in kept else "<td></td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = ("" if len(shown) == len(rows) else
            f"<p class='treeimp-legend'>{len(rows) - len(shown)} more rows not shown "
            "(res.table has them all)</p>")
    return ("<table class='treeimp-table'><thead><tr>" + "".join(head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>" + more)


def frame_table(frame, *, max_rows=None):
    """``<table>`` of a DataFrame of floats (index and headings escaped, numbers as in
    :func:`number_cell`); ``max_rows``: at most that many rows."""
    shown = frame if max_rows is None else frame.iloc[:max_rows]
    head = "".join(f"<th>{html.escape(str(c))}</th>"
                   for c in [frame.index.name or ""] + list(frame.columns))
    body = "".join("<tr><th>" + html.escape(str(i)) + "</th>"
                   + "".join(number_cell(v) for v in row) + "</tr>"
                   for i, row in zip(shown.index, shown.to_numpy(dtype=float)))
    more = ("" if len(shown) == len(frame) else
            f"<p class='treeimp-legend'>{len(frame) - len(shown)} more rows not shown</p>")
    return (f"{STYLE}<table class='treeimp-table'><thead><tr>{head}</tr></thead><tbody>"
            f"{body}</tbody></table>{more}")


def legend_html(res, alpha=SELECT_ALPHA):
    """The legend of :func:`importances_table` (one line per column; ``alpha``: the
    false discovery rate of its selection column), escaped."""
    screen = screening_of(res)
    selected = [("selected", f"kept by select(alpha={alpha:g})")]
    lines = (legend_lines(res, q_column="q", after_q=selected) if screen is not None
             else legend_lines(res))
    return "<div class='treeimp-legend'>" + html.escape("\n".join(lines)) + "</div>"


def importances_html(res, *, max_rows=MAX_ROWS):
    """The notebook display of ``res``: a one-line summary, the table, the legend."""
    return (f"<div class='treeimp'>{STYLE}<p><b>Importances</b> "
            f"{html.escape(summary_line(res))}</p>"
            + importances_table(res, max_rows=max_rows) + legend_html(res) + "</div>")
