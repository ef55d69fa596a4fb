"""A LocalCluster for the dask tests, started only by the tests that ask for it.

Test modules do ``pytest.importorskip("distributed")`` first (so without dask they are
skipped cleanly) and then ``from tests.dask_fixtures import dask_client``.
"""

from __future__ import annotations

import numpy as np
import pytest

# One cluster for every test module that imports the fixture (pytest registers an
# imported fixture once per module): started by the first, closed after the last.
_SHARED = {"users": 0}


@pytest.fixture(scope="session")
def dask_client():
    """A distributed.Client on 2 worker processes of 1 thread each, for the session."""
    from distributed import Client, LocalCluster

    if _SHARED["users"] == 0:
        cluster = LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                               dashboard_address=None, memory_limit="2GiB")
        _SHARED.update(cluster=cluster, client=Client(cluster))
    _SHARED["users"] += 1
    try:
        yield _SHARED["client"]
    finally:
        _SHARED["users"] -= 1
        if _SHARED["users"] == 0:
            _SHARED.pop("client").close()
            _SHARED.pop("cluster").close()


def ensemble_fields(ens):
    """Every field of a TreeEnsemble: arrays as arrays, the rest as they are."""
    import dataclasses

    items = (((f.name, getattr(ens, f.name)) for f in dataclasses.fields(ens))
             if dataclasses.is_dataclass(ens) else vars(ens).items())
    return dict(items)


def assert_same_ensemble(a, b, *, skip=()):
    """Two ensembles hold equal arrays (NaN equal to NaN) and equal settings, besides
    the fields named in ``skip``."""
    fa, fb = ensemble_fields(a), ensemble_fields(b)
    assert sorted(fa) == sorted(fb)
    for name in set(fa) - set(skip):
        x, y = fa[name], fb[name]
        if isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray), name
            assert x.dtype == y.dtype and x.shape == y.shape, name
            assert np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"), name
        elif x is None or isinstance(x, (int, float, str, bool, tuple)):
            if isinstance(x, float) and x != x:
                assert y != y, name
            else:
                assert x == y, name
