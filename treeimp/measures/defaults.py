"""Calibrated defaults of the uncertainty estimates, chosen on null designs by
benchmarks/calibration.py (table and reasons in benchmarks/README.md)."""

import math

# random blocks of evaluation rows for the delete-a-block jackknife
DEFAULT_N_BLOCKS = 20
# out of bag, every row trains some trees and evaluates others; the jackknife over row
# blocks holds the trees fixed and misses that part of the variance (see api.explain)
OOB_VARIANCE_FACTOR = math.sqrt(1.6)

# the measures explain() reports when none are named, with the model's default screening
# measure added (treeimp.measures.screening.default_methods)
DEFAULT_METHODS = ("mdi", "mdi_oob", "ufi")

# cross-fitted (treeimp.cross_explain): the jackknife over all folds' row blocks holds
# the folds' models fixed, and every row trains the other folds' models as well as being
# evaluated by its own; measured on null designs (benchmarks/calibration.py)
CROSSFIT_VARIANCE_FACTOR = math.sqrt(1.25)
