"""Numba kernels. Each kernel module holds ``@njit(cache=True)`` functions only;
``api.py`` is the Python glue that feeds them chunks of rows."""
