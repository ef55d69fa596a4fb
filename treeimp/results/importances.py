"""The result of :func:`treeimp.explain`: importances with their uncertainty."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
from scipy import special as _special

from ..measures.registry import needs_rows
from ..measures.screening import default_screening_method
from .display import column_label, display_order, legend_lines, screening_of
from .html import importances_html
from .plot import plot_importances
from .report import report_html

Q_COLUMN = "q"


def one_sided_pvalues(value, stderr, dof):
    """P(T > value / stderr) for T ~ t(dof); value 0 with stderr 0 gives 1."""
    value = np.asarray(value, dtype=float)
    stderr = np.asarray(stderr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = value / stderr
    z = np.where(stderr > 0, z, np.where(value > 0, np.inf, np.where(value < 0, -np.inf, 0.0)))
    # scipy.stats.t.sf(z, dof) is special.stdtr(dof, -z), here without its argument
    # checks and masks (the same numbers for every z, +-inf and NaN, and every dof)
    p = _special.stdtr(dof, -z)
    p = np.where((stderr == 0) & (value == 0), 1.0, p)
    return np.where(np.isnan(value) | np.isnan(stderr), np.nan, p)


def bh_qvalues(p):
    """Benjamini-Hochberg adjusted p-values of a 1-D array (NaN entries stay NaN)."""
    p = np.asarray(p, dtype=float)
    q = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return q
    order = ok[np.argsort(p[ok], kind="stable")]
    m = order.size
    ranked = p[order] * m / np.arange(1, m + 1)
    q[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return q


def format_column(values, stderr):
    """One number format for a whole column of ``value ± stderr`` strings: fixed point
    with the decimals that give the smallest standard error 2 significant digits (the
    largest value 4 when there are no errors), scientific notation when that would need
    more than 8 decimals or the values reach 1e6. NaN values print as "nan"."""
    values = np.asarray(values, dtype=float)
    stderr = np.asarray(stderr, dtype=float)
    has_se = np.isfinite(stderr).any()
    se_pos = stderr[np.isfinite(stderr) & (stderr > 0)]
    finite = np.abs(values[np.isfinite(values)])
    big = finite.size > 0 and finite.max() >= 1e6
    if has_se and se_pos.size:
        decimals = 1 - int(np.floor(np.log10(se_pos.min())))
    elif finite.size and finite.max() > 0:
        decimals = 3 - int(np.floor(np.log10(finite.max())))
    else:
        decimals = 0
    scientific = big or decimals > 8
    decimals = max(decimals, 0)

    def one(v, sci_digits):
        if np.isnan(v):
            return "nan"
        return f"{v:.{sci_digits}e}" if scientific else f"{v:.{decimals}f}"

    if not has_se:
        return [one(v, 3) for v in values]
    return [one(v, 3) if np.isnan(s) else f"{one(v, 3)} ± {one(s, 1)}"
            for v, s in zip(values, stderr)]


def format_q(q):
    """A q-value in 3 decimals ("<0.001" below that, blank for NaN)."""
    if q != q:
        return ""
    return "<0.001" if q < 0.001 else f"{q:.3f}"


class Importances:
    """Feature importances of one model on one set of evaluation rows.

    ``print(res)`` and the notebook display show the screening measure first (the one
    ``select()`` uses, marked ``*``) with its q-value, then the other out-of-sample
    measures, then the in-sample ``mdi`` (for comparison), rows sorted by the first
    column, and a legend line per column (``treeimp.results.display``); the notebook
    table also flags the features ``select()`` keeps. ``to_html`` writes a report.

    Attributes
    ----------
    table : DataFrame
        Index = feature names, one column per method. Forests: mean over trees;
        boosting: sum over trees.
    stderr : DataFrame
        Standard errors from ``n_blocks`` random blocks of evaluation rows: a
        delete-a-block jackknife (each measure recomputed without one block's rows,
        sqrt((B-1)/B * sum of squared deviations)), which stays right for the non-linear
        measures (ufi, pg, naive_oob). With ``oob=True`` it is multiplied by
        sqrt(1.6) (``treeimp.measures.defaults.OOB_VARIANCE_FACTOR``): every row trains some trees
        and evaluates others, which resampling rows with the trees fixed does not see;
        the factor and the default of 20 blocks are measured on null designs
        (benchmarks/calibration.py). NaN for "mdi" (and any measure the registry reads
        from the model alone), which uses no rows.
    stderr_trees : DataFrame
        Across-trees standard error as Li et al.'s code reports it; it ignores that
        trees share data and is too small: for comparison only.
    pvalues, qvalues : DataFrame
        One-sided p-values for importance > 0 (t with ``dof`` degrees of freedom:
        n_blocks - 1, or for :func:`treeimp.cross_explain` the sum over folds of each
        fold's n_blocks - 1) and their Benjamini-Hochberg adjustment across features.
    per_tree : dict
        method -> (n_trees, n_features) unnormalised per-tree values (NaN for a tree
        that saw no evaluation rows).
    block_values : dict
        method -> (n_blocks, n_features) the estimate without each row block
        (jackknife replicates).
    block_weight : ndarray (n_blocks,) or None
        The evaluation weight (row count without sample weights) of every row block
        (blocks are drawn per row, so their sizes differ: see ``treeimp/stats/blocks.py``).
    table_by_class : dict
        Classification forests: method with a per-class form in the registry
        (``treeimp.measures.registry``: "mdi_oob", "mdi_oob_centered", "ufi") ->
        DataFrame (features x classes) of per-class parts; each row sums to that
        method's ``table`` value.
    groups : dict or None
        With ``explain(..., groups=...)``: {group name: [its member features]}; the
        index of every table then holds the group names.
    task : str or None
        "classification" or "regression" (``treeimp.measures.screening.model_task``); with
        ``kind`` and ``objective`` it picks the default screening measure of ``select``.
    objective : str or None
        The model's canonical objective name (``treeimp.model.losses``).
    screening : str or None
        The measure ``select()`` screens with when none is named, for results whose
        measures are not the model's default ones (:func:`treeimp.interaction_importance`:
        its pair measure); None: the default of ``kind`` and ``task``.
    """

    def __init__(self, *, table, stderr, stderr_trees, per_tree, block_values, n_blocks,
                 kind, n_rows, model_name="", table_by_class=None, groups=None, dof=None,
                 block_weight=None, task=None, objective=None, screening=None):
        self.table = table
        self.screening = screening
        self.task = task
        self.objective = objective
        self.block_weight = block_weight
        self.stderr = stderr
        self.stderr_trees = stderr_trees
        self.per_tree = per_tree
        self.block_values = block_values
        self.n_blocks = n_blocks
        self.kind = kind
        self.n_rows = n_rows
        self.model_name = model_name
        self.table_by_class = table_by_class or {}
        self.groups = groups
        # degrees of freedom of the t reference: n_blocks - 1, or (cross-fitting) the sum
        # over folds of each fold's n_blocks - 1
        self.dof = n_blocks - 1 if dof is None else dof
        methods = list(table.columns)
        # the tables of ``assemble`` share one column Index: no second pass over its labels
        if methods and (stderr.columns is table.columns or list(stderr.columns) == methods):
            # every column at once (the p-values are elementwise), and each column's
            # q-values from them: no pandas column lookups
            pv = one_sided_pvalues(table.to_numpy(dtype=float),
                                   stderr.to_numpy(dtype=float), self.dof)
            qv = np.column_stack([bh_qvalues(pv[:, j]) for j in range(pv.shape[1])])
            self.pvalues = pd.DataFrame(pv, index=table.index, columns=table.columns)
            self.qvalues = pd.DataFrame(qv, index=table.index, columns=table.columns)
        else:
            pv = {m: one_sided_pvalues(table[m], stderr[m], self.dof) for m in methods}
            self.pvalues = pd.DataFrame(pv, index=table.index)
            self.qvalues = pd.DataFrame({m: bh_qvalues(self.pvalues[m].to_numpy())
                                         for m in methods}, index=table.index)

    @property
    def methods(self):
        return list(self.table.columns)

    @property
    def feature_names(self):
        return list(self.table.index)

    def _method(self, method):
        if method is None:
            method = next((m for m in self.methods if needs_rows(m)), self.methods[0])
        if method not in self.table.columns:
            raise ValueError(f"method {method!r} was not computed; this result has "
                             f"{self.methods}")
        return method

    def _row_methods(self):
        """The computed measures that have p-values (measured on evaluation rows)."""
        return [m for m in self.methods if needs_rows(m)]

    def ranking(self, method=None):
        """Feature names, most important first, for one method."""
        method = self._method(method)
        return list(self.table[method].sort_values(ascending=False, kind="stable").index)

    def select(self, method=None, alpha=0.05):
        """Features whose importance is significantly positive at false discovery rate
        ``alpha`` (Benjamini-Hochberg q-value < alpha), most important first.

        ``method=None``: the result's own ``screening`` measure when it has one (pairs
        of :func:`treeimp.interaction_importance`), else the default screening measure
        of the model's kind and task
        (:func:`treeimp.measures.screening.default_screening_method`), which ``explain`` computes
        when ``methods`` is not given; a ValueError if this result lacks it (never
        another measure in its place)."""
        if method is None:
            # results pickled before ``screening`` was recorded have none
            method = getattr(self, "screening", None)
        if method is None:

            # results pickled before task and objective were recorded have neither
            task = getattr(self, "task", None)
            if task is None:
                raise ValueError("this result does not record the model's task, so its "
                                 "default screening measure is unknown; name the measure: "
                                 f"select(method=...) with one of {self._row_methods()}")
            method = default_screening_method(self.kind, task,
                                              getattr(self, "objective", None))
            if method not in self.methods:
                raise ValueError(
                    f"select() screens a {self.kind} {task} model with {method!r}, which "
                    f"was not computed: this result has {self.methods}. Explain with "
                    f"methods=None (the default) or a list holding {method!r}, or name "
                    "another measure: select(method=...)")
        method = self._method(method)
        if not needs_rows(method):
            raise ValueError(f"{method!r} is measured on the training rows and has no "
                             "p-values; select with an out-of-sample method")
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise TypeError(f"alpha must be a number in (0, 1), got {alpha!r}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        q = self.qvalues[method]
        keep = q[q < alpha].index
        return [f for f in self.ranking(method) if f in set(keep)]

    def plot(self, method=None, kind="bar", top=20, ax=None):
        """Matplotlib figure: horizontal bars with standard-error whiskers (several
        methods side by side), or ``kind="per_tree"`` box plots of per-tree values.
        See :func:`treeimp.results.plot.plot_importances`."""

        return plot_importances(self, method=method, kind=kind, top=top, ax=ax)

    def to_frame(self):
        """Tidy form: one row per (feature, method) with importance, stderr, p and q."""
        parts = []
        for m in self.methods:
            parts.append(pd.DataFrame({
                "feature": self.table.index, "method": m,
                "importance": self.table[m].to_numpy(), "stderr": self.stderr[m].to_numpy(),
                "pvalue": self.pvalues[m].to_numpy(), "qvalue": self.qvalues[m].to_numpy(),
            }))
        return pd.concat(parts, ignore_index=True)

    def to_json(self, path=None):
        """The tidy frame as JSON records (written to ``path`` when given)."""
        text = self.to_frame().to_json(orient="records", double_precision=15)
        if path is not None:
            with open(path, "w") as fh:
                fh.write(text)
        return text

    def to_html(self, path=None, *, title=None, model_summary=None, settings=None,
                alpha=0.05, top=30):
        """A self-contained HTML report: the model, the table (value, standard error,
        q-value and selection of every feature), the in-sample MDI beside the
        out-of-sample screening measure as an embedded PNG figure (needs matplotlib;
        without it the report says so), the selected features and how they were tested,
        and the settings and package versions needed to reproduce the numbers. The file
        loads nothing from the network and runs no script.

        Parameters
        ----------
        path : str or path-like, optional
            Where to write the report (UTF-8); it is returned either way.
        title : str, optional
            The page title (default "treeimp report: <model name>").
        model_summary : dict, optional
            {label: text} describing the model, e.g. ``TreeEnsemble.summary()`` of
            ``treeimp.parse(model)``; default: the model name, task and objective this
            result records.
        settings : dict, optional
            {label: value} of what reproduces the result, e.g.
            ``{"random_state": 0, "data": "valid.csv"}`` (explain's ``random_state``
            draws the row blocks: pass it to reproduce the standard errors).
        alpha : float, default 0.05
            False discovery rate of the selection shown.
        top : int, default 30
            Features in the figure.

        Returns
        -------
        str
            The HTML document.
        """
        text = report_html(self, title=title, model_summary=model_summary,
                           settings=settings, alpha=alpha, top=top)
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text

    def __repr__(self):
        order = display_order(self)
        screen = screening_of(self)
        show = {}
        for m in order:
            show[column_label(self, m)] = format_column(self.table[m].to_numpy(),
                                                        self.stderr[m].to_numpy())
            if m == screen:
                show[Q_COLUMN] = [format_q(q) for q in self.qvalues[m].to_numpy()]
        show = pd.DataFrame(show, index=self.table.index)
        show = show.loc[self.ranking(order[0])]
        what = "pairs" if self.table.index.name == "pair" else "features"
        head = (f"Importances({self.model_name or self.kind}, {self.n_rows} evaluation rows, "
                f"{len(self.feature_names)} {what}; value ± stderr from {self.n_blocks} "
                "row blocks)")
        legend = legend_lines(self, q_column=Q_COLUMN if screen is not None else None)
        with pd.option_context("display.max_rows", 30, "display.width", 120):
            return "\n".join([head, show.to_string(max_rows=30), *legend])

    def _repr_html_(self):
        """The notebook display: see :func:`treeimp.results.html.importances_html`."""
        return importances_html(self)
