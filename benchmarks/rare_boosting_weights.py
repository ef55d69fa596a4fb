"""Class weights for the cross-fitted XGBoost screening on rare positives (issue 32):
does fitting each fold's clone class-balanced raise the selector's power?

The screening is ``ImportanceSelector``'s default for a boosting classifier, rebuilt
step by step so that the fit's and the evaluation's row weights can differ: the shadow
copies of ``ImportanceSelector`` (``null=None``, cross-fitted: four copies of the 30
columns, 120 shadows; the README's table was measured with the two copies, 60 shadows,
of a rule withdrawn on merge), 5 stratified folds, on each fold a clone of the study's booster
(XGBoost, 100 rounds, depth 3, learning rate 0.05, subsample 0.8) fitted with the
weights ``w_fit`` of its training rows and explained with ``treeimp.explain`` on the
held-out rows with the weights ``w_eval`` (20 row blocks), the folds combined by
``treeimp.crossfit.combine_folds`` and tested with the library's shadow null
(z less the shadows' mean z, t reference), Benjamini-Hochberg at 0.05. The seeds are
the selector's for ``random_state`` = the study's seed, so "none" is the selector's
default result.

Weightings (``--weights``), each row's weight computed from the class counts of the
rows it weights (the training fold for ``w_fit``, the held-out fold for ``w_eval``):

- ``none``: unweighted (the selector's default today);
- ``balanced``: scikit-learn's ``compute_sample_weight("balanced")``, n / (k n_class),
  for the fit and the evaluation (the held-out loss the weighted model was fitted to);
- ``balanced-fit``: balanced weights for the fit, the held-out rows unweighted;
- ``sqrt-balanced``: the square roots of the balanced weights, fit and evaluation;
- ``scale_pos_weight``: XGBoost's ``scale_pos_weight`` = negatives / positives of all
  rows, the held-out rows unweighted (what treeimp explains of such a model).

Designs: "rare positives (4%)" and its null twin "rare null" (benchmarks/screening.py,
the study's seeds 100 x 6 + repetition). Per run: power, false selections, FDR, and
over the noise features the fraction with p < 0.05 and the mean and sd of
z = Phi^-1(1 - p).

    python benchmarks/rare_boosting_weights.py --weights balanced --method ufi --reps 10
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import clone
from sklearn.utils.class_weight import compute_sample_weight

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from screening import DESIGNS, boosting, rare_null, score  # noqa: E402

from treeimp import ImportanceSelector  # noqa: E402
from treeimp.api import explain  # noqa: E402
from treeimp.crossfit import _folds, combine_folds  # noqa: E402
from treeimp.selector import _shadow_referenced, _with_shadows  # noqa: E402

WEIGHTS = ("none", "balanced", "balanced-fit", "sqrt-balanced", "scale_pos_weight")
SEED_DESIGN = list(DESIGNS).index("rare positives (4%)")


def row_weights(kind, y):
    """The fit's or evaluation's row weights of ``kind`` for the labels ``y`` (None:
    unweighted)."""
    if kind == "balanced":
        return compute_sample_weight("balanced", y)
    if kind == "sqrt-balanced":
        return np.sqrt(compute_sample_weight("balanced", y))
    return None


def screen(X, y, seed, weights, method, n_blocks=20, cv=5):
    """The cross-fitted shadow-null screening with the given weighting: (kept mask,
    p-values, importances) of the real features."""
    est = boosting("classification", seed, 100)
    if weights == "scale_pos_weight":
        est.set_params(scale_pos_weight=float(np.sum(y == 0) / np.sum(y == 1)))
    fit_kind = "balanced" if weights == "balanced-fit" else weights
    eval_kind = None if weights == "balanced-fit" else weights
    # the selector's seeds for random_state=seed (ImportanceSelector.fit)
    _, block_seed, shadow_seed = (int(s) for s in np.random.RandomState(seed).randint(
        np.iinfo(np.int32).max, size=3))
    names = [f"x{j}" for j in range(X.shape[1])]
    sel = ImportanceSelector(est)
    work, work_names = _with_shadows(X, names, sel._n_copies(len(names)), shadow_seed)
    folds = _folds(est, cv, work, y, block_seed, len(y))
    seeds = np.random.default_rng(block_seed).integers(np.iinfo(np.int32).max,
                                                        size=len(folds))
    parts, shares = [], []
    for (train, test), s in zip(folds, seeds):
        model = clone(est)
        w_fit = row_weights(fit_kind, y[train])
        model.fit(work[train], y[train], **({} if w_fit is None else
                                            {"sample_weight": w_fit}))
        w_eval = row_weights(eval_kind, y[test])
        parts.append(explain(model, work[test], y[test], methods=(method,),
                             sample_weight=w_eval, feature_names=work_names,
                             n_blocks=n_blocks, random_state=int(s), n_jobs=1))
        shares.append(len(test) if w_eval is None else w_eval.sum())
    shares = np.asarray(shares, dtype=np.float64)
    res = combine_folds(parts, shares / shares.sum(), n_rows=len(y))
    real, _, _ = _shadow_referenced(res, method, len(names))
    return (real.qvalues[method].to_numpy() < 0.05, real.pvalues[method].to_numpy(),
            real.table[method].to_numpy())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", choices=WEIGHTS, default="balanced")
    ap.add_argument("--method", default="mdi_oob_centered", choices=("mdi_oob_centered",
                                                                      "ufi"))
    ap.add_argument("--design", default="rare positives (4%)",
                    choices=("rare positives (4%)", "rare null"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--first-rep", type=int, default=0)
    args = ap.parse_args(argv)
    make = rare_null if args.design == "rare null" else DESIGNS[args.design][0]
    rows, noise_z = [], []
    for r in range(args.first_rep, args.first_rep + args.reps):
        seed = 100 * SEED_DESIGN + r
        X, y, relevant, _ = make(2000, np.random.default_rng(seed))
        t = time.process_time()
        kept, p, value = screen(X, y, seed, args.weights, args.method)
        row = score(kept, p, value, relevant, X.shape[1])
        row["seconds"] = time.process_time() - t
        rows.append(row)
        noise = np.setdiff1d(np.arange(X.shape[1]), relevant)
        noise_z.append(stats.norm.isf(np.clip(p[noise], 1e-300, 1.0)))
    df = pd.DataFrame(rows)
    z = np.concatenate(noise_z)
    print(f"{args.design} | weights={args.weights} | {args.method} | runs "
          f"{args.first_rep}-{args.first_rep + args.reps - 1}: power {df['power'].mean():.2f}"
          f" false {df['false'].mean():.2f} FDR {df['fdp'].mean():.3f} | noise p<.05 "
          f"{np.mean(z > stats.norm.isf(0.05)):.3f} z mean {z.mean():.2f} sd {z.std():.2f}"
          f" | CPU s {df['seconds'].mean():.2f}")


if __name__ == "__main__":
    main()
