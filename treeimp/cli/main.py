"""Command line: ``treeimp explain`` and ``treeimp demo`` (also ``python -m treeimp``).

Usage errors (a missing --target, an unknown option), errors from reading the inputs and
from :func:`treeimp.explain` (ValueError, TypeError, OSError) are printed as one line
``treeimp: error: ...`` with exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import shlex
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd

from ..explainer import Explainer
from ..measures import registry
from ..measures.defaults import DEFAULT_N_BLOCKS
from ..measures.registry import check_targets
from ..measures.screening import (
    default_methods,
    screening_method_of,
)
from ..model.ensemble import FOREST, TreeEnsemble
from ..results.display import column_label, display_order, legend_lines, screening_of
from ..results.importances import Q_COLUMN
from .demo import run_demo
from .evaluation_rows import open_rows
from .inputs import load_model
from .table_batches import DEFAULT_BATCH_ROWS

EXPLAIN_HELP = """\
Out-of-sample feature importances of a saved tree ensemble on held-out rows.

MODEL is an XGBoost model saved with save_model (.json or .ubj), a LightGBM model saved
with save_model (.txt), both read without importing xgboost or lightgbm and running no
code from the file; a scikit-learn model saved with skops (.skops; skops' trusted types
and the scikit-learn tree types treeimp has vetted are loaded, any other type is listed
and loaded only when named with --trust-pickle --trust-types); or a pickled
scikit-learn, XGBoost or LightGBM model (.pkl, .pickle, .joblib), loaded only with
--trust-pickle because unpickling runs code stored in the file. A scikit-learn Pipeline
ending in a tree model (skops or pickle) is explained on the columns its last step sees,
DATA holding its input columns.

DATA is a CSV or Parquet file, a folder of Parquet files or a quoted glob pattern of
them (Parquet needs pyarrow) of rows the model was NOT trained on (or, with --oob, the
training rows of a pickled bagged forest in training order). It is read in batches of
--batch-rows rows, so it need not fit in memory (--oob reads it whole); the result is
the same as from reading it at once. The column named by --target holds the labels;
every other column is a feature. When the model stores feature names, columns are
matched by name (order does not matter).
Text columns are read as categories when the model stores its training categories, or
when it is an XGBoost / LightGBM model with categorical splits.

On a Dask cluster (--scheduler, needs pip install "treeimp[dask]"): DATA is a Parquet
dataset, a file, a directory or a glob such as 'data/*.parquet' (quote it), read with
dask.dataframe.read_parquet; its partitions are explained where they are read and only
the node statistics come back. The result equals the in-memory one on the same rows.

On Spark (--spark [MASTER], needs pip install "treeimp[spark]" and Java 17 or 21): DATA
is a Parquet dataset read with spark.read.parquet, explained on the executors. The
importances equal the in-memory ones; their standard errors do too when --id-column
names a column holding each row's position (else they depend on Spark's partitioning).

Classifiers: pickled models map labels through their classes_; model files do not
store class labels, so for them the target must hold the class indices 0..K-1 the
model was trained on (0/1 for binary models).
"""


# the seed of the row blocks when --seed is not given: a run gives the same result every
# time (the Python API's random_state=0)
DEFAULT_SEED = 0

FORMATS = ("table", "csv", "json")
# --output suffixes that name a format: the format follows them, a --format that
# contradicts them is refused (any other suffix takes any format, table by default)
FORMAT_OF_SUFFIX = {".json": "json", ".csv": "csv"}


def output_format(fmt, output):
    """The --format to write: ``fmt`` when given, else the one --output's suffix names,
    else "table". A --format other than the one the suffix names is a ValueError."""
    named = FORMAT_OF_SUFFIX.get(os.path.splitext(output or "")[1].lower())
    if fmt is None:
        return named or "table"
    if named is not None and named != fmt:
        raise ValueError(f"--format {fmt} does not match --output {output!r}, whose suffix "
                         f"{os.path.splitext(output)[1]!r} names {named}; pass --format "
                         f"{named} or an --output name that fits {fmt}")
    return fmt


def method_choices():
    """The measures ``--methods`` takes: the registry's, except those needing parameters
    the command line does not pass (pg_oob's alpha and lam)."""
    return registry.names(passed_params=False)


def _methods_section():
    """The Methods part of ``treeimp explain --help``, one line per measure."""
    lines = ["Methods (--methods):"]
    width = max(len(n) for n in method_choices())
    for name in method_choices():
        m = registry.get(name)
        only = ("" if set(m.kinds) == set(registry.KINDS)
                else f" [{' and '.join(m.kinds)} models only]")
        lines += textwrap.wrap(f"{m.description}{only}", 88, initial_indent=f"  {name:<{width}}  ",
                               subsequent_indent=" " * (width + 4))
    return "\n".join(lines) + "\n"


def _check_method_names(methods):
    """--methods names that the command line can pass (model-specific checks: explain)."""
    choices = method_choices()
    if not methods:
        raise ValueError(f"--methods is empty; choose from {list(choices)}")
    for name in methods:
        if name not in choices:
            why = ""
            if name in registry.names():
                m = registry.get(name)
                why = (f" ({name!r}, {m.description}, takes {', '.join(m.params)}, "
                       "which the command line does not pass)")
            raise ValueError(f"unknown method {name!r} in --methods{why}; valid methods: "
                             f"{list(choices)}")


class UsageError(ValueError):
    """A command line argparse rejects (reported in one line, not argparse's usage text)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see: {self.prog} --help)")


def build_parser():
    parser = _Parser(prog="treeimp", description="Out-of-sample feature "
                     "importance for tree ensembles.")
    sub = parser.add_subparsers(dest="command", required=True)

    ex = sub.add_parser("explain", help="importances of a saved model on a data file",
                        description=EXPLAIN_HELP + "\n" + _methods_section(),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("model", metavar="MODEL", help="model file: .json/.ubj (XGBoost), .txt "
                    "(LightGBM), .skops, .pkl/.pickle/.joblib (with --trust-pickle)")
    ex.add_argument("data", metavar="DATA", help="held-out rows: .csv, .parquet, a folder "
                    "of .parquet files or a quoted glob pattern of them")
    ex.add_argument("--target", required=True, metavar="COL",
                    help="name of the label column in DATA")
    ex.add_argument("--methods", default=None, metavar="LIST",
                    help=f"comma-separated: {', '.join(method_choices())} (see Methods "
                    "above) (default: mdi,mdi_oob,ufi and the model's default screening "
                    "measure, as explain computes)")
    ex.add_argument("--select", type=float, default=None, metavar="ALPHA",
                    help="also screen: list the features whose importance is significantly "
                    "> 0 at false discovery rate ALPHA (Benjamini-Hochberg), by the default "
                    "screening measure of the model's kind and task: ufi for boosting "
                    "regression, mdi_oob_centered otherwise (added to --methods if absent)")
    ex.add_argument("--format", choices=FORMATS, default=None,
                    help="table (readable), csv or json (one record per feature and "
                    "method: importance, stderr, pvalue, qvalue); default: by the suffix "
                    "of --output (.json, .csv), else table")
    ex.add_argument("--output", metavar="FILE", help="write the result here instead of "
                    "standard output (a .json or .csv name sets --format)")
    ex.add_argument("--plot", metavar="PNG", help="also save a bar chart (needs matplotlib)")
    ex.add_argument("--report", metavar="HTML", help="also write one self-contained HTML "
                    "file (no network, no script): the model, the table, the in-sample MDI "
                    "beside the out-of-sample measure as a figure (needs matplotlib), the "
                    "features kept by --select's test (false discovery rate 0.05 without "
                    "--select) and the command line, seed and versions that reproduce it")
    ex.add_argument("--oob", action="store_true", help="pickled RandomForest / ExtraTrees "
                    "with bootstrap only: DATA are the training rows, each tree is measured "
                    "on its out-of-bag rows")
    ex.add_argument("--n-blocks", type=int, default=DEFAULT_N_BLOCKS, metavar="B",
                    help="row blocks for standard errors and p-values (default "
                    f"{DEFAULT_N_BLOCKS})")
    ex.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S",
                    help="seed of the random row blocks: every run with the same seed, "
                    "model and data gives the same numbers (default "
                    f"{DEFAULT_SEED}; pass another seed for other row blocks)")
    ex.add_argument("--drop", default="", metavar="LIST",
                    help="comma-separated columns of DATA to ignore (e.g. an ID column)")
    ex.add_argument("--qid", default=None, metavar="COL",
                    help="learning-to-rank models (XGBoost rank:*, LightGBM lambdarank): "
                    "the column of DATA holding each row's query id (each query's rows "
                    "together); the table is then read whole")
    ex.add_argument("--n-jobs", type=int, default=None, metavar="N",
                    help="threads (default: all cores)")
    ex.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS, metavar="N",
                    help="rows of DATA read at a time (default "
                    f"{DEFAULT_BATCH_ROWS}): memory grows with N, not with DATA's size")
    ex.add_argument("--progress", action="store_true",
                    help="show a progress bar in rows of DATA (needs tqdm; default: shown "
                    "when standard error is a terminal and the run is long)")
    ex.add_argument("--columns-by-position", action="store_true",
                    help="the model stores no feature names: take DATA's feature columns "
                    "in their order as the model's features (without this flag such a "
                    "model is refused)")
    ex.add_argument("--iteration-range", default=None, metavar="START,STOP",
                    help="boosting rounds to explain (XGBoost's iteration_range; default: "
                    "those the model's own predict uses)")
    ex.add_argument("--missing", type=float, default=None, metavar="VALUE",
                    help="XGBoost's missing-value sentinel: VALUE is routed as missing")
    ex.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="run on Dask: ADDRESS of a distributed scheduler (tcp://host:8786), "
                    "or processes, threads or synchronous (dask's local schedulers); DATA "
                    "is then a Parquet dataset (file, directory or glob)")
    ex.add_argument("--spark", nargs="?", const="local[*]", default=None, metavar="MASTER",
                    help="run on Spark: a local[*] session, or MASTER (local[N], "
                    "spark://host:7077, yarn, ...); DATA is then a Parquet dataset (file, "
                    "directory or glob); needs pip install \"treeimp[spark]\" and Java")
    ex.add_argument("--id-column", default=None, metavar="NAME",
                    help="with --spark: the column of row identities (non-negative "
                    "integers, unique) that fixes each row's jackknife block whatever the "
                    "partitioning; not a feature")
    ex.add_argument("--trust-pickle", action="store_true",
                    help="load .pkl/.pickle/.joblib files (this runs code stored in the "
                    "file, use only for files you trust) and, with --trust-types, the "
                    "types of a skops file named there")
    ex.add_argument("--trust-types", default="", metavar="LIST",
                    help="comma-separated types of a .skops file to trust besides skops' "
                    "defaults and the scikit-learn tree types treeimp trusts (needs "
                    "--trust-pickle; the error for a refused file lists its types)")

    demo = sub.add_parser("demo", help="MDI vs MDI-oob and UFI on breast cancer data (15%% "
                          "of labels flipped) with a row ID and two pure-noise columns")
    demo.add_argument("--trees", type=int, default=300, help="number of trees (default 300)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return parser


def main(argv=None):
    """Run the command line; returns the exit status (0 success, 2 error)."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser().parse_args(argv)  # subparsers are _Parser too
        if args.command == "demo":
            return _demo(args)
        return _explain(args, argv)
    except (ValueError, TypeError, OSError) as exc:
        if isinstance(exc, BrokenPipeError):  # e.g. `treeimp explain ... | head`
            return 0
        print(f"treeimp: error: {_one_line(exc)}", file=sys.stderr)
        return 2


def _demo(args):
    if args.trees < 1:
        raise ValueError("--trees must be >= 1")
    run_demo(n_estimators=args.trees, random_state=args.seed)
    return 0


def _explain(args, argv):
    """``treeimp explain``: arguments -> model -> explainer -> rows -> importances ->
    output (``argv``: the command line, for the report)."""
    run = _read_arguments(args)
    model, ex = _load_explainer(args, run)
    _check_oob_model(args, model, ex.ensemble)
    rows = open_rows(args, model, ex.ensemble, run.drop, _warn)
    methods, screen = _methods(args, run.methods, ex.ensemble)
    res = _importances(rows, ex, methods)
    _write_output(args, run, res, screen)
    if args.report:
        _write_report(args, argv, res, ex.ensemble)
    return 0


@dataclasses.dataclass(frozen=True)
class _Run:
    """What the arguments of ``treeimp explain`` say, checked before any work."""

    methods: list | None  # None: explain's defaults for the model, resolved once parsed
    drop: list
    fmt: str
    rounds: tuple | None
    trust_types: list


def _read_arguments(args):
    """The arguments checked (output paths before the work, not after it)."""
    methods = None if args.methods is None else _names_of(args.methods)
    if methods is not None:
        _check_method_names(methods)
    if args.plot:
        _check_writable(args.plot, "--plot")
        _check_plotting()
    if args.output:
        _check_writable(args.output, "--output")
    if args.report:
        _check_writable(args.report, "--report")
    _check_batch_options(args)
    return _Run(methods=methods, drop=_names_of(args.drop),
                fmt=output_format(args.format, args.output),
                rounds=_iteration_range(args.iteration_range),
                trust_types=_names_of(args.trust_types))


def _names_of(text):
    """A comma-separated list of names (blanks dropped)."""
    return [c.strip() for c in text.split(",") if c.strip()]


def _load_explainer(args, run):
    """(the model loaded from ``args.model``, the one Explainer of it: the model parsed
    once, with --iteration-range and --missing)."""

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_model(args.model, trust_pickle=args.trust_pickle, warn=_warn,
                           trust_types=run.trust_types)
        ex = Explainer(model, iteration_range=run.rounds, missing=args.missing,
                       n_jobs=args.n_jobs)
    _pass_on(caught, run.rounds)
    return model, ex


def _pass_on(caught, rounds):
    """The warnings of loading and parsing the model, as the command line's warnings."""
    for w in caught:  # e.g. best_iteration stored in the file: moot with --iteration-range
        if rounds is None or "best_iteration" not in str(w.message):
            hint = (" (on the command line: --iteration-range START,STOP)"
                    if "iteration_range" in str(w.message) else "")
            _warn(f"{w.message}{hint}")


def _check_oob_model(args, model, ens):
    """--oob needs a bagged forest loaded as an object (a model file stores no in-bag
    rows)."""

    if not args.oob or (not isinstance(model, TreeEnsemble) and ens.kind == FOREST):
        return
    what = ("is a model file, which stores no in-bag rows" if isinstance(model, TreeEnsemble)
            else f"holds a {type(model).__name__}, which has no out-of-bag rows")
    raise ValueError("--oob needs a pickled bagged forest (RandomForest / ExtraTrees with "
                     f"bootstrap=True); {args.model!r} {what}: pass held-out rows and "
                     "leave out --oob")


def _check_batch_options(args):
    if args.batch_rows < 1:
        raise ValueError(f"--batch-rows must be >= 1, got {args.batch_rows}")
    if args.progress:
        from importlib.util import find_spec

        if find_spec("tqdm") is None:
            raise ValueError("--progress needs tqdm: pip install tqdm")


def _methods(args, methods, ens):
    """(the methods to compute, the screening method of --select or None): the
    model's defaults when --methods is not given, --select's measure added."""

    methods = default_methods(ens) if methods is None else methods
    screen = None if args.select is None else _screening_method(args.select, ens)
    if screen is not None and screen not in methods:
        methods = methods + [screen]
    check_targets(methods, ens)
    return methods, screen


def _screening_method(alpha, ens):
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"--select needs a false discovery rate in (0, 1), got {alpha}")
    return screening_method_of(ens)


def _importances(rows, ex, methods):
    with warnings.catch_warnings():  # the rows' encoding has told the user already
        warnings.filterwarnings("ignore", message=".*labels the model never saw")
        return rows.importances(ex, methods)


def _write_output(args, run, res, screen):
    """The result to --output (or standard output) in its format, and the --plot."""
    text = _formatted(args, run.fmt, res, screen)
    if args.plot:
        _save_plot(res, args.plot)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _write_report(args, argv, res, ens):
    """--report: :meth:`Importances.to_html` with the model's summary and the settings
    that reproduce the run (the figure drawn off screen)."""
    settings = {"command line": shlex.join(["treeimp", *argv]),
                "seed": args.seed, "row blocks": args.n_blocks,
                "model file": args.model, "data": args.data, "target": args.target,
                "evaluation rows": "out of bag (--oob)" if args.oob else "held out"}
    alpha = 0.05 if args.select is None else args.select
    res.to_html(args.report, model_summary=ens.summary(), settings=settings, alpha=alpha)


def _formatted(args, fmt, res, screen):
    if fmt == "json":
        return res.to_json() + "\n"
    if fmt == "csv":
        return res.to_frame().to_csv(index=False)
    text = format_table(res, model_file=args.model, data_file=args.data,
                        target=args.target, oob=args.oob) + "\n"
    if screen is not None:
        kept = res.select(screen, args.select)
        text += (f"kept at false discovery rate {args.select:g} by {screen}: "
                 f"{', '.join(kept) if kept else '(none)'}\n")
    return text


def _iteration_range(text):
    """--iteration-range "START,STOP" -> (start, stop), or None."""
    if text is None:
        return None
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(f"--iteration-range must be two integers START,STOP (e.g. 0,100), "
                         f"got {text!r}") from None


def format_table(res, *, model_file="", data_file="", target="", oob=False):
    """Readable table: value ± standard error per method in display order (the
    screening measure first, marked, with its Benjamini-Hochberg q-value; the in-sample
    mdi last; ``treeimp.results.display``), features sorted by the first column, and a
    legend of one line per column."""
    rows = "out-of-bag rows of" if oob else "held-out rows of"
    head = [f"{res.model_name or res.kind} {model_file}: {len(res.feature_names)} features, "
            f"{res.n_rows} {rows} {data_file}, target {target!r}",
            f"standard errors: jackknife over {res.n_blocks} row blocks; p- and q-values of "
            "every measure: --format csv or json"]
    methods = display_order(res)
    screen = screening_of(res)
    order = res.ranking(methods[0])
    cols = {}
    for m in methods:
        value, se = res.table[m][order], res.stderr[m][order]
        cols[column_label(res, m)] = [_format_value(v, s) for v, s in zip(value, se)]
        if m == screen:
            cols[Q_COLUMN] = [_format_p(q) for q in res.qvalues[m][order]]
    show = pd.DataFrame(cols, index=pd.Index(order, name="feature"))
    with pd.option_context("display.max_rows", None, "display.max_columns", None,
                           "display.width", 200, "display.max_colwidth", 40):
        body = show.to_string()
    legend = legend_lines(res, q_column=Q_COLUMN if screen is not None else None)
    return "\n".join(head + [body] + legend)


def _format_value(value, stderr):
    """``value ± stderr`` with the error to 2 significant digits and the value to the
    same decimal place (scientific notation for very small or large errors)."""
    if np.isnan(value):
        return "nan"
    if np.isnan(stderr):
        return f"{value:.4g}"
    if stderr == 0:
        return f"{value:.4g} ± 0"
    if not 1e-5 <= stderr < 1e5:
        return f"{value:.3g} ± {stderr:.2g}"
    decimals = max(0, 1 - int(np.floor(np.log10(stderr))))
    return f"{value:.{decimals}f} ± {stderr:.{decimals}f}"


def _format_p(p):
    if np.isnan(p):
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _check_writable(path, option):
    """A file can be written at ``path``: its folder exists and is writable, and the
    path is not a folder or a read-only file. Nothing is created."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.islink(target) and not os.path.exists(target):
        try:
            os.stat(target)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ValueError(f"{option} {path!r} is a symlink loop (a chain of symbolic "
                                 "links that leads back to itself)") from None
    if os.path.isdir(target):
        raise ValueError(f"{option} {path!r} is a directory; give a file name")
    if not os.path.isdir(folder):
        raise ValueError(f"{option} {path!r}: the directory {folder!r} does not exist")
    if os.path.exists(target):
        if not os.access(target, os.W_OK):
            raise ValueError(f"{option} {path!r} exists and is not writable")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path!r}: the directory {folder!r} is not writable")


def _check_plotting():
    from importlib.util import find_spec

    if find_spec("matplotlib") is None:
        raise ValueError("--plot needs matplotlib: pip install matplotlib")


def _save_plot(res, path):
    _check_plotting()
    import matplotlib

    matplotlib.use("Agg")  # the command line only writes files
    fig = res.plot()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)


def _warn(message):
    print(f"treeimp: warning: {message}", file=sys.stderr)


def _one_line(exc):
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.strerror}: {exc.filename!r}"
    return text or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
