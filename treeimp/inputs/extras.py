"""Optional packages: import them where a feature needs them, or raise an ImportError
that names the extra to install."""

from __future__ import annotations

import importlib


def require_modules(modules, what, needs, extra):
    """Import every module of ``modules`` (returns None), or raise ImportError: ``what``
    needed it (e.g. "X is a dask array"), treeimp's support ``needs`` these packages,
    install them with ``extra``."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(f"{what}: treeimp's {needs} ({name} could not be imported: "
                              f"{exc}); install them with {extra}") from exc
