"""How a split node reads a missing (NaN) value: the per-node ``nan_mode`` codes of the
normal form (``TreeEnsemble.nan_mode``), shared by the routing and structure kernels."""

NAN_MISSING = 0
NAN_AS_ZERO = 1
NAN_ZERO_MISSING = 2
NAN_CAT_EXACT = 3  # categorical nodes only: a non-integer value is an unlisted code
NAN_CAT_NEGATIVE_UNLISTED = 4  # categorical nodes only: a negative value is unlisted
