"""Recognising dask collections without importing dask, and asking for the extra."""

from __future__ import annotations

import importlib

from ..inputs.extras import require_modules

DASK_EXTRA = 'pip install "treeimp[dask]"'

# dask arrays and DataFrames live in dask.array / dask.dataframe (dask-expr's collections
# in dask.dataframe.dask_expr); the separate dask_expr package of 2024 named its own.
_DASK_MODULES = ("dask", "dask_expr")


def is_dask_collection(x) -> bool:
    """True for a dask array, DataFrame, Series or Bag (anything defined by dask).

    Reads ``type(x).__module__`` only, so it never imports dask and costs nothing for
    numpy, pandas or polars inputs.
    """
    module = type(x).__module__ or ""
    return module.split(".", 1)[0] in _DASK_MODULES


def require_dask(what="a dask collection", *, modules=("dask",)):
    """Import dask (and ``modules``), or raise ImportError naming the extra to install.

    ``what`` says what needed it, e.g. "X is a dask array".
    """
    require_modules(modules, what, "Dask support needs dask with its dataframe and "
                    "distributed parts", DASK_EXTRA)
    return importlib.import_module("dask")
