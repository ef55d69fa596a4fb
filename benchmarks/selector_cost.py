"""Where the CPU time of one cross-fitted XGBoost ``ImportanceSelector`` fit goes
(issue 32's time target).

For each design of benchmarks/screening.py (seed 100 x design, its first repetition) the
selector of ``screening.py --selector --selector-methods default`` (XGBoost 100 rounds,
depth 3, learning rate 0.05, subsample 0.8, ``n_jobs=1``; cv=5, the shadow null) is
fitted ``--reps`` times after one untimed warm-up per task, and the process's CPU seconds
(``time.process_time``) are split by timing these calls (a timed call's
seconds exclude those of timed calls inside it):

- XGBoost's boosting rounds (``Booster.update``) and its data preparation
  (``QuantileDMatrix`` / ``DMatrix``: the quantile sketch of every column), in the fold
  fits on the widened matrix and in the fit of ``estimator_`` on all rows;
- treeimp's ``explain`` of each fold model on its held-out rows (parse and kernels);
- the shadow construction, the folds' row indexing, combining the folds, the shadow
  p-values, the parse of ``estimator_`` that tells the model's kind;
- XGBoost's scikit-learn wrapper (its ``fit`` less the rounds and data: parameters,
  callbacks, the rounds' feature checks);
- the rest: Python glue (``clone``, the selector's and ``cross_explain``'s own code).

With ``--scaling`` it also times single XGBoost fits of the same settings on normal
data of 640 rows (a training fold of 800) against the number of columns and ``max_bin``:
the boosting rounds' cost grows with columns x histogram bins, hardly with rows.

    python benchmarks/selector_cost.py --designs 0,4,5,6,8,9 --reps 3 [--scaling]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from screening import DESIGNS, boosting, warm_up  # noqa: E402

import treeimp  # noqa: E402
import treeimp.crossfit as crossfit  # noqa: E402
import treeimp.selector as selector  # noqa: E402

# the bucket the timed calls of the current stretch of code go to (fold fits or the fit
# of estimator_), the CPU seconds of the timed calls running (to take a nested call's time
# from its caller's) and the CPU seconds per part
_STATE = {"where": "folds", "stack": []}
_SECONDS: dict[str, float] = {}


def _timed(label, func, by_fit=False):
    """``func`` with its CPU seconds, less those of timed calls inside it, added to
    ``label`` (per fit bucket if ``by_fit``)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        stack = _STATE["stack"]
        stack.append(0.0)
        start = time.process_time()
        try:
            return func(*args, **kwargs)
        finally:
            spent = time.process_time() - start
            inner = stack.pop()
            if stack:
                stack[-1] += spent
            key = f"{label}, {_STATE['where']}" if by_fit else label
            _SECONDS[key] = _SECONDS.get(key, 0.0) + spent - inner
    return wrapper


def _in_bucket(name, func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        before, _STATE["where"] = _STATE["where"], name
        try:
            return func(*args, **kwargs)
        finally:
            _STATE["where"] = before
    return wrapper


def instrument():
    """Wrap the calls that are timed (module attributes, for this process only)."""
    import xgboost as xgb

    xgb.core.Booster.update = _timed("XGBoost rounds", xgb.core.Booster.update, True)
    # the wrapper's own Python (parameters, callbacks, the rounds' feature checks)
    for cls in (xgb.XGBClassifier, xgb.XGBRegressor):
        cls.fit = _timed("XGBoost scikit-learn wrapper", cls.fit, True)
    xgb.core.QuantileDMatrix.__init__ = _timed("XGBoost data", xgb.core.QuantileDMatrix.__init__,
                                               True)
    xgb.core.DMatrix.__init__ = _timed("XGBoost data", xgb.core.DMatrix.__init__, True)
    crossfit.explain = _timed("treeimp explain (folds)", crossfit.explain)
    crossfit._safe_indexing = _timed("fold rows", crossfit._safe_indexing)
    crossfit.combine_folds = _timed("combine folds", crossfit.combine_folds)
    selector._with_shadows = _timed("shadow construction", selector._with_shadows)
    selector._shadow_referenced = _timed("shadow p-values", selector._shadow_referenced)
    selector.Explainer = _timed("parse of estimator_", selector.Explainer)
    # the selector's own fits: estimator_ on all rows (the folds' go through crossfit)
    selector._fit = _in_bucket("estimator_", selector._fit)


def split_design(d, reps):
    """{part: mean CPU seconds per selector fit} for design number ``d``."""
    name = list(DESIGNS)[d]
    make, n = DESIGNS[name]
    seed = 100 * d
    X, y, _, task = make(n, np.random.default_rng(seed))
    _SECONDS.clear()
    total = 0.0
    for _ in range(reps):
        sel = treeimp.ImportanceSelector(boosting(task, seed, 100), random_state=seed)
        start = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
            sel.fit(X, y)
        total += time.process_time() - start
    row = {k: v / reps for k, v in _SECONDS.items()}
    row["Python glue (rest)"] = (total - sum(_SECONDS.values())) / reps
    row["total"] = total / reps
    row["columns fitted"] = X.shape[1] + len(sel.shadow_zscores_ if sel.shadow_zscores_
                                             is not None else [])
    return name, row


def scaling(rows=640):
    """CPU seconds of one XGBoost fit (the study's settings) against columns and max_bin."""
    import xgboost as xgb
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    out = []
    for p in (5, 50, 120, 400):
        X = rng.normal(size=(rows, p))
        y = (X[:, 0] + rng.normal(size=rows) > 0).astype(int)
        for max_bin in (256, 64):
            model = xgb.XGBClassifier(n_estimators=100, max_depth=3, learning_rate=0.05,
                                      subsample=0.8, random_state=0, n_jobs=1,
                                      max_bin=max_bin)
            with threadpool_limits(1, user_api="openmp"):
                model.fit(X, y)
                start = time.process_time()
                model.fit(X, y)
                out.append({"columns": p, "max_bin": max_bin,
                            "CPU s": time.process_time() - start})
    return pd.DataFrame(out)


def markdown(df, fmt):
    """A pipe table of ``df`` with its index as the first column."""
    lines = ["| | " + " | ".join(map(str, df.columns)) + " |",
             "|---|" + "|".join("---" for _ in df.columns) + "|"]
    for index, row in df.iterrows():
        lines.append(f"| {index} | " + " | ".join(format(v, fmt) for v in row) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--designs", default="0,4,5,6,8,9",
                    help="comma-separated design numbers of benchmarks/screening.py")
    ap.add_argument("--reps", type=int, default=3, help="timed fits per design")
    ap.add_argument("--scaling", action="store_true",
                    help="also time single XGBoost fits against columns and max_bin")
    args = ap.parse_args(argv)
    warm_up({"rounds": 100})
    instrument()
    table = {}
    for d in (int(s) for s in args.designs.split(",")):
        name, row = split_design(d, args.reps)
        table[name] = row
        print(f"{name}: {row['total']:.3f} CPU s", file=sys.stderr, flush=True)
    df = pd.DataFrame(table).T.fillna(0.0)
    first = ["columns fitted", "total"]
    df = df[first + sorted(c for c in df.columns if c not in first)]
    print(markdown(df.T, ".3f"))
    if args.scaling:
        print()
        print(markdown(scaling().pivot(index="columns", columns="max_bin", values="CPU s"),
                       ".4f"))
    return df


if __name__ == "__main__":
    main()
