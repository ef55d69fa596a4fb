"""`python -m treeimp demo`: in-sample MDI versus out-of-bag importances on real data.

Breast cancer data (bundled with scikit-learn) with three columns added that carry no
information about the diagnosis: a row ID (unique per row, the classic trap for
impurity importance), a Gaussian noise column and a random 100-level code (like a
postcode). The data set is nearly separable, so shallow trees split on real features
only; real data are rarely that clean, and 15% of the diagnoses are flipped at random
to make the task as hard as usual ones. Fully grown trees then keep splitting to
isolate the flipped rows, and any column that separates a few rows serves, noise
included: in-sample MDI credits those splits, measured out of bag they do not help.
A random forest is fit on all rows and MDI is shown next to MDI-oob and UFI (each tree
on its out-of-bag rows) with standard errors.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..api import explain

NOISE = ("row_id", "noise_gauss", "noise_100_levels")
FLIPPED = 0.15  # share of diagnoses flipped at random
METHODS = ("mdi", "mdi_oob", "ufi")


def demo_data(random_state=0):
    """Breast cancer features plus the NOISE columns; labels with FLIPPED of them
    flipped at random."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer(as_frame=True)
    X = data.data.copy()
    rng = np.random.default_rng(random_state)
    n = len(X)
    X["row_id"] = rng.permutation(n).astype(float)
    X["noise_gauss"] = rng.normal(size=n)
    X["noise_100_levels"] = rng.integers(0, 100, n).astype(float)
    y = data.target.to_numpy().copy()
    flip = rng.random(n) < FLIPPED
    y[flip] = 1 - y[flip]
    return X, y


def demo_importances(*, n_estimators=300, random_state=0):
    """The demo's forest and its Importances (mdi, mdi_oob, ufi; out of bag)."""
    from sklearn.ensemble import RandomForestClassifier


    X, y = demo_data(random_state)
    rf = RandomForestClassifier(n_estimators=n_estimators, random_state=random_state,
                                n_jobs=-1).fit(X, y)
    return explain(rf, X, y, oob=True, methods=METHODS, random_state=random_state)


def rank_moves(res, noise=NOISE):
    """Per noise column: its rank by each method (1 = most important), how many real
    features each method puts below it, and its out-of-bag values with standard errors."""
    table = res.table
    ranks = table.rank(ascending=False, method="min").astype(int)
    real = [f for f in table.index if f not in noise]
    rows = {}
    for c in noise:
        row = {f"{m} rank": int(ranks.loc[c, m]) for m in METHODS}
        row.update({f"real below ({m})": int((table.loc[real, m] < table.loc[c, m]).sum())
                    for m in METHODS})
        for m in ("mdi_oob", "ufi"):
            row[m], row[f"{m} se"] = table.loc[c, m], res.stderr.loc[c, m]
        rows[c] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def run_demo(*, n_estimators=300, random_state=0, out=print):
    res = demo_importances(n_estimators=n_estimators, random_state=random_state)
    out(f"Random forest ({n_estimators} trees) on breast cancer, {int(FLIPPED * 100)}% of "
        "the diagnoses flipped, plus a row ID, a Gaussian noise column and a random "
        f"100-level code; {res.n_rows} rows, importances on each tree's out-of-bag rows.\n")
    show = pd.DataFrame({
        "mdi": res.table["mdi"].map(lambda v: f"{v:.4f}"),
        "mdi rank": res.table["mdi"].rank(ascending=False, method="min").astype(int),
        "mdi_oob": [f"{v:+.4f} ± {s:.4f}" for v, s in zip(res.table["mdi_oob"],
                                                          res.stderr["mdi_oob"])],
        "mdi_oob rank": res.table["mdi_oob"].rank(ascending=False, method="min").astype(int),
        "ufi": [f"{v:+.4f} ± {s:.4f}" for v, s in zip(res.table["ufi"], res.stderr["ufi"])],
        "p (ufi > 0)": res.pvalues["ufi"].map(lambda p: f"{p:.3f}"),
        "": ["<- noise" if f in NOISE else "" for f in res.table.index],
    }, index=res.table.index).sort_values("mdi rank", kind="stable")
    with pd.option_context("display.width", 160, "display.max_rows", 50):
        out(show.to_string())
    out("\n" + what_moved(res))
    return res


def what_moved(res, noise=NOISE):
    """Where each noise column ranks by in-sample MDI (and how many real features it
    beats there) and where out-of-bag MDI-oob puts it, with value ± standard error."""
    moves = rank_moves(res, noise)
    n = len(res.table)
    parts = []
    for c in moves.index:
        r = moves.loc[c].to_dict()
        parts.append(f"{c}: MDI #{r['mdi rank']:.0f} of {n}, above {r['real below (mdi)']:.0f} "
                     f"real features -> MDI-oob #{r['mdi_oob rank']:.0f}, "
                     f"{r['mdi_oob']:+.4f} ± {r['mdi_oob se']:.4f} (UFI {r['ufi']:+.4f} ± "
                     f"{r['ufi se']:.4f})")
    return ("What moved (rank 1 = most important). In-sample MDI credits the noise columns "
            "with the splits that isolate a few rows; out of bag those splits are measured "
            "on rows the tree did not see:\n  " + "\n  ".join(parts))
