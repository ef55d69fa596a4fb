"""Held-out rows on a Dask cluster (the optional extra ``pip install "treeimp[dask]"``).

Importing this package does not import dask: :func:`is_dask_collection` recognises a
dask array or DataFrame by its type's module, so ``treeimp`` works without dask
installed and only a dask collection passed in asks for it.
"""

from .collections import DASK_EXTRA, is_dask_collection, require_dask

__all__ = ["DASK_EXTRA", "is_dask_collection", "require_dask"]
