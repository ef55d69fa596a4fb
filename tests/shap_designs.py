"""Simulation designs of the SHAP-oob tests (small, seeded): Strobl et al.'s null case
(paper 001, section 2.2) and Li et al.'s classification design (paper 000, section 5)."""

import numpy as np


def strobl_null(n, seed):
    """X1 continuous, X2..X5 with 2, 4, 10, 20 categories; y independent of X."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=n)]
                        + [rng.integers(0, k, size=n) for k in (2, 4, 10, 20)]).astype(float)
    y = rng.integers(0, 2, size=n)
    return X, y


def li_classification(n, seed, p=50):
    """Feature j (1-based) takes the values 0..j; 5 relevant features drawn from the first
    ten; P(y = 1 | X) = logistic(2/5 sum_{j in S} X_j / j - 1). Returns X, y, relevant."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, j + 1, size=n) for j in range(1, p + 1)]).astype(float)
    S = rng.choice(10, size=5, replace=False)
    eta = 0.4 * sum(X[:, j] / (j + 1) for j in S) - 1.0
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    relevant = np.zeros(p, bool)
    relevant[S] = True
    return X, y, relevant


def ranking_auc(score, relevant):
    """P(score of a relevant feature > score of a noise feature), ties counting 1/2."""
    s = np.asarray(score, float)
    pos, neg = s[relevant], s[~relevant]
    diff = pos[:, None] - neg[None, :]
    return float(np.mean((diff > 0) + 0.5 * (diff == 0)))
