"""Calibrated defaults of the uncertainty estimates, chosen on null designs by
benchmarks/calibration.py (table and reasons in benchmarks/README.md)."""

import math

# random blocks of evaluation rows for the delete-a-block jackknife
DEFAULT_N_BLOCKS = 20
# out of bag, every row trains some trees and evaluates others; the jackknife over row
# blocks holds the trees fixed and misses that part of the variance (see api.explain)
OOB_VARIANCE_FACTOR = math.sqrt(1.6)

# the measures explain() reports when none are named
DEFAULT_METHODS = ("mdi", "mdi_oob", "ufi")
