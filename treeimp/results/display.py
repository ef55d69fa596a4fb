"""Which measures a printed or rendered :class:`~treeimp.Importances` shows, in which order,
and the one-line legend of each column (``print(res)``, the notebook display, the
command line's table and its HTML report share them).

Order: the screening measure first (the one ``select()`` uses; marked with ``*``), then
the other out-of-sample measures in the result's order, then the in-sample ones (``mdi``,
read from the model alone, shown for comparison: it is the biased number the library
itself reports). Rows are sorted by the first column shown.
"""

from __future__ import annotations

from ..measures import registry
from ..measures.screening import default_screening_method

MARK = "*"
SELECT_ALPHA = 0.05  # the false discovery rate select() uses when none is given


def screening_of(res):
    """The measure ``res.select()`` screens with when it is in ``res``, else None (a result
    that does not record its task, or whose screening measure was not computed)."""
    method = getattr(res, "screening", None)
    if method is None:
        task = getattr(res, "task", None)
        if task is None or res.kind not in ("forest", "boosting"):
            return None
        method = default_screening_method(res.kind, task, getattr(res, "objective", None))
    return method if method in res.methods and registry.needs_rows(method) else None


def display_order(res):
    """The methods of ``res`` in display order: screening measure, the other
    out-of-sample measures, the in-sample ones."""
    screen = screening_of(res)
    first = [screen] if screen is not None else []
    rest = [m for m in res.methods if m != screen]
    return (first + [m for m in rest if registry.needs_rows(m)]
            + [m for m in rest if not registry.needs_rows(m)])


def column_label(res, method):
    """The column's heading: the method's name, marked when it is the screening measure."""
    return method + MARK if method == screening_of(res) else method


def describe(res, method):
    """One line saying what a method's column holds."""
    if method in registry.names():
        return registry.get(method).description
    if res.table.index.name == "pair":
        return "held-out importance of each pair of features (treeimp.interaction_importance)"
    return method


def legend_lines(res, *, q_column=None, after_q=()):
    """One line per shown column (``name: what it holds``), first the mark of the
    screening measure and a reminder that columns have different units. ``q_column``:
    the heading of a q-value column shown beside the screening measure, if any;
    ``after_q``: (heading, meaning) of further columns shown after it."""
    screen = screening_of(res)
    order = display_order(res)
    lines = []
    if screen is not None:
        lines.append(f"{MARK} the screening measure (select() keeps its q < "
                     f"{SELECT_ALPHA:g}); rows sorted by it")
    else:
        lines.append(f"rows sorted by {order[0]}")
    width = max(len(column_label(res, m)) for m in order)
    if q_column is not None:
        width = max(width, len(q_column), *(len(h) for h, _ in after_q))
    for m in order:
        lines.append(f"  {column_label(res, m):<{width}}  {describe(res, m)}"
                     + ("" if registry.needs_rows(m) else "; for comparison only"))
        if m == screen and q_column is not None:
            lines.append(f"  {q_column:<{width}}  Benjamini-Hochberg q-value of {m} > 0 "
                         "(false discovery rate when kept)")
            lines += [f"  {h:<{width}}  {meaning}" for h, meaning in after_q]
    lines.append("value ± standard error; units differ by column: compare features "
                 "within a column")
    return lines
