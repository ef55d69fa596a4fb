"""Node statistics -> importances: the measure registry, the numpy formulas, the
screening defaults and the scores of permutation importance."""
