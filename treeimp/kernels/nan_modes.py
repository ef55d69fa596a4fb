"""How a node treats NaN: the per-node ``nan_mode`` codes of the normal form (uint8).

The parsers write these codes into ``TreeEnsemble.nan_mode``; ``structure.py`` turns
them into the routing flag bits of ``route.py`` (which are a different encoding).
"""

NAN_MISSING = 0  # NaN follows missing_left
NAN_AS_ZERO = 1  # NaN is replaced by 0.0 and compared
NAN_ZERO_MISSING = 2  # NaN and values near 0.0 follow missing_left (LightGBM Zero)
NAN_CAT_EXACT = 3  # categorical nodes only: a non-integer value is an unlisted code
NAN_CAT_NEGATIVE_UNLISTED = 4  # categorical nodes only: a negative value is unlisted
