"""Dask collections as aligned partitions with global row starts; the optional extra."""

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from treeimp.dask import is_dask_collection

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")

from treeimp.dask.partitions import split_partitions  # noqa: E402

UNEVEN = (3, 0, 1, 6, 2)


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _frame(n=12):
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                         "y": np.arange(n), "w": np.arange(n) + 0.5})


def test_is_dask_collection_reads_the_type_module_only():
    X = da.zeros((4, 2))
    assert is_dask_collection(X)
    assert is_dask_collection(dd.from_pandas(_frame(), npartitions=2))
    assert is_dask_collection(dd.from_pandas(_frame(), npartitions=2)["a"])
    assert not is_dask_collection(np.zeros((4, 2)))
    assert not is_dask_collection(pd.DataFrame({"a": [1]}))


def test_dask_array_partitions_follow_chunks():
    rng = np.random.default_rng(1)
    Xn = rng.normal(size=(12, 5))
    X = da.from_array(Xn, chunks=(UNEVEN, 2))  # split columns are joined into whole rows
    y = da.from_array(np.arange(12.0), chunks=(UNEVEN,))
    base = da.from_array(np.arange(24.0).reshape(12, 2), chunks=(UNEVEN, 1))
    p = split_partitions(X, y, sample_weight=np.arange(12) * 2.0, base_margin=base)
    np.testing.assert_array_equal(p.lengths, UNEVEN)
    np.testing.assert_array_equal(p.starts, [0, 3, 3, 4, 10])
    assert p.n_rows == 12 and p.n_partitions == 5
    assert p.rows(3) == range(4, 10)
    for i in range(5):
        rows = p.rows(i)
        cut = slice(rows.start, rows.stop)
        part = dask.compute(p.X[i])[0]
        assert part.shape == (len(rows), 5)
        np.testing.assert_array_equal(part, Xn[cut])
        np.testing.assert_array_equal(dask.compute(p.y[i])[0], np.arange(12.0)[cut])
        np.testing.assert_array_equal(p.sample_weight[i], 2.0 * np.arange(12)[cut])
        assert dask.compute(p.base_margin[i])[0].shape == (len(rows), 2)


def test_dataframe_with_unknown_divisions_counts_its_partitions():
    df = _frame(12)
    d = dd.from_pandas(df, npartitions=4).clear_divisions()
    assert not d.known_divisions
    lengths = d.map_partitions(len).compute().tolist()
    p = split_partitions(d[["a", "b"]], d["y"], sample_weight=d["w"].to_dask_array(),
                         base_margin=df["a"])
    np.testing.assert_array_equal(p.lengths, lengths)
    np.testing.assert_array_equal(p.starts, np.concatenate([[0], np.cumsum(lengths)[:-1]]))
    for i in range(p.n_partitions):
        rows = p.rows(i)
        cut = slice(rows.start, rows.stop)
        part = dask.compute(p.X[i])[0]
        pd.testing.assert_frame_equal(part, df[["a", "b"]].iloc[cut])
        np.testing.assert_array_equal(dask.compute(p.y[i])[0], df["y"].to_numpy()[cut])
        np.testing.assert_array_equal(dask.compute(p.sample_weight[i])[0],
                                      df["w"].to_numpy()[cut])
        pd.testing.assert_series_equal(p.base_margin[i], df["a"].iloc[cut])


def test_misaligned_companions_are_refused_with_their_numbers():
    X = da.zeros((12, 3), chunks=(UNEVEN, 3))
    with pytest.raises(ValueError, match="y has 3 partitions but X has 5"):
        split_partitions(X, da.zeros(12, chunks=4))
    with pytest.raises(ValueError, match=r"sample_weight's partition 1 has 1 rows but X's "
                       r"has 0 \(rows per partition: X \[3, 0, 1, 6, 2\], sample_weight "
                       r"\[3, 1, 0, 6, 2\]\)"):
        split_partitions(X, sample_weight=da.zeros(12, chunks=((3, 1, 0, 6, 2),)))
    with pytest.raises(ValueError, match=r"base_margin has 11 rows but X .*5 partitions.* "
                       "has 12"):
        split_partitions(X, base_margin=np.zeros(11))
    df = _frame(12)
    d4 = dd.from_pandas(df, npartitions=4)
    with pytest.raises(ValueError, match="y has 2 partitions but X has 4"):
        split_partitions(d4[["a"]], d4["y"].repartition(npartitions=2))
    other = dd.from_pandas(df.set_index(df.index + 100), npartitions=4)
    with pytest.raises(ValueError, match="different divisions"):
        split_partitions(d4[["a"]], other["y"])
    with pytest.raises(ValueError, match=r"partition 0 has 4 rows but X's has 3"):
        split_partitions(d4.clear_divisions()[["a"]], da.zeros(12, chunks=((4, 3, 3, 2),)))
    with pytest.raises(ValueError, match=r"two-dimensional.*shape \(12,\)"):
        split_partitions(X[:, 0])
    with pytest.raises(ValueError, match="two-dimensional.*dask Series"):
        split_partitions(d4["a"])
    with pytest.raises(TypeError, match="not a dask array or DataFrame"):
        split_partitions(np.zeros((3, 2)))
    with pytest.raises(TypeError, match="dask Bag"):
        import dask.bag as db

        split_partitions(db.from_sequence([1, 2]))


class _FakeDaskArray:
    """Looks like a dask array by its type's module, with dask not importable."""


_FakeDaskArray.__module__ = "dask.array.core"
_FakeDaskArray.__name__ = "Array"


def test_missing_dask_names_the_extra(monkeypatch):
    for name in ("dask", "dask.array", "dask.dataframe"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    with pytest.raises(ImportError, match=r'X is a dask array.*pip install "treeimp\[dask\]"'):
        split_partitions(_FakeDaskArray())


def test_treeimp_imports_and_explains_without_dask():
    code = textwrap.dedent("""
        import sys
        sys.modules["dask"] = None  # as if dask were not installed
        import numpy as np
        import treeimp
        from sklearn.ensemble import RandomForestRegressor
        rng = np.random.default_rng(0)
        X = rng.normal(size=(200, 3)); y = X[:, 0] + rng.normal(size=200)
        rf = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y)
        res = treeimp.explain(rf, X, y, oob=True, random_state=0)
        # mdi, mdi_oob, mdi_oob_centered (the forest's screening measure), ufi
        assert res.table.shape == (3, 4)
        assert not any(m == "dask" or m.startswith("dask.") for m in sys.modules
                       if sys.modules[m] is not None)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
