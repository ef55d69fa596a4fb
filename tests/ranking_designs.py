"""A simulated ranking design shared by the ranking tests of every library."""

import numpy as np


def query_design(n_queries, seed):
    """Queries of 5 to 19 rows; relevance driven by x0; x1..x3 binary noise, x4
    continuous (high-cardinality) noise. Returns (X, y, query sizes)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 20, size=n_queries)
    n = int(sizes.sum())
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 2, size=(n, 3)),
                         rng.uniform(size=n)])
    y = np.clip(np.round(1.5 * X[:, 0] + rng.normal(size=n)) + 2, 0, 4).astype(int)
    return X, y, sizes


def held_out_false_positives(res):
    """Checks of an explain of a model fitted on ``query_design`` rows, evaluated on
    other rows of the design: held-out mdi_oob ranks x0 first with p < 1e-3. Returns how
    many of the noise features x1..x4 have p < 0.05 (5% each under the null)."""
    assert res.ranking("mdi_oob")[0] == "x0"
    assert res.pvalues.loc["x0", "mdi_oob"] < 1e-3
    return int((res.pvalues.loc[["x1", "x2", "x3", "x4"], "mdi_oob"] < 0.05).sum())
