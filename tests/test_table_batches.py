"""Tables read in batches (``treeimp/cli/table_batches.py``) and encoded batch by batch
(``cli_inputs.StreamedRows``): the batches put together equal what pandas / pyarrow read
from the whole file, and memory stays flat in the file's size."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pa = pytest.importorskip("pyarrow")

from treeimp.cli.inputs import (  # noqa: E402
    StreamedRows,
    encode_categories,
    read_table,
    split_target,
)
from treeimp.cli.table_batches import CSV_OPTIONS, open_table  # noqa: E402


def _frame(n, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "a": rng.normal(size=n),
        "k": rng.integers(-3, 9, n),
        "s": rng.choice(["x", "yy", "z", "w"], n),
        "f": rng.normal(size=n).astype(np.float32),
        "y": rng.integers(0, 2, n),
    })
    df.loc[::7, "a"] = np.nan
    df.loc[::11, "s"] = None
    return df


def _parquet_folder(path, df, parts, *, cat=None, row_group_size=None):
    path.mkdir()
    edges = np.linspace(0, len(df), parts + 1).astype(int)
    for i in range(parts):
        part = df.iloc[edges[i]:edges[i + 1]].reset_index(drop=True)
        if cat is not None:  # a 'category' column whose categories differ by file:
            values = part[cat].astype(str)  # those of the file, in order of appearance
            part = part.assign(c=pd.Categorical(values, categories=pd.unique(values)))
        part.to_parquet(path / f"part-{i:02d}.parquet", index=False,
                        row_group_size=row_group_size)
    return path


@pytest.mark.parametrize("batch_size", [1, 37, 1000])
def test_csv_batches_equal_the_whole_file(tmp_path, batch_size):
    df = _frame(300)
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    table = open_table(path, batch_size=batch_size)
    assert table.columns == list(df.columns) and table.n_rows is None
    assert table.kind == "csv"
    want = pd.read_csv(path, **CSV_OPTIONS)
    batches = list(table.frames(["y", "s", "a"]))
    assert len(batches) == -(-300 // batch_size)
    assert all(len(b) <= batch_size for b in batches)
    got = pd.concat(batches)
    pd.testing.assert_frame_equal(got, want[["y", "s", "a"]], check_dtype=batch_size > 7)
    # every batch's index is the rows' position in the file
    assert got.index.equals(pd.RangeIndex(300))
    # floats come back bit for bit
    assert np.array_equal(got["a"].to_numpy(), df["a"].to_numpy(), equal_nan=True)


def test_parquet_file_folder_and_glob_equal_the_whole_table(tmp_path):
    df = _frame(1000, seed=1)
    folder = _parquet_folder(tmp_path / "pq", df, 4, row_group_size=90)
    for source in (folder, str(folder / "part-*.parquet"), folder / "part-02.parquet"):
        table = open_table(source, batch_size=64)
        want = pd.read_parquet(source if not str(source).endswith("*.parquet") else folder)
        assert table.n_rows == len(want)  # from the files' metadata
        assert table.columns == list(df.columns)
        got = pd.concat(list(table.frames(["f", "y", "k", "s", "a"])))
        pd.testing.assert_frame_equal(got, want[["f", "y", "k", "s", "a"]])
        assert got["f"].dtype == np.float32 and got["k"].dtype == np.int64


def test_batches_are_x_y_and_weight_in_the_order_asked(tmp_path):
    df = _frame(50)
    df.to_csv(tmp_path / "t.csv", index=False)
    table = open_table(tmp_path / "t.csv", batch_size=20)
    chunks = list(table.batches(["f", "a"], "y", weight="k"))
    assert [len(c[0]) for c in chunks] == [20, 20, 10]
    X = pd.concat([c[0] for c in chunks])
    assert list(X.columns) == ["f", "a"]
    assert np.array_equal(pd.concat([c[1] for c in chunks]), df["y"])
    assert np.array_equal(pd.concat([c[2] for c in chunks]), df["k"])
    assert all(len(c) == 2 for c in table.batches(["a"], "y"))
    with pytest.raises(ValueError, match="both as a feature and as the target"):
        next(table.batches(["a", "y"], "y"))


def test_dictionary_labels_are_pyarrows_unified_order(tmp_path):
    """Files whose 'category' columns have different categories: the labels of the
    whole table are those pandas gives reading it at once (the order pyarrow unifies
    the dictionaries in), and a column of text gets its sorted distinct values."""
    df = _frame(400, seed=2)
    folder = _parquet_folder(tmp_path / "pq", df.assign(s=df["s"].fillna("v")), 3, cat="k")
    whole = pd.read_parquet(folder)
    table = open_table(folder, batch_size=50)
    assert table.text_candidates(["a", "c", "s", "k"]) == ["c", "s"]
    text, labels = table.text_labels(["c", "s", "a"])
    assert text == ["c", "s"]
    assert list(labels["c"]) == list(whole["c"].cat.categories)
    assert list(labels["c"]) != sorted(labels["c"])  # the files' order, not sorted
    assert list(labels["s"]) == list(whole["s"].astype("category").cat.categories)


def test_csv_text_labels_and_columns_mixing_numbers_and_text(tmp_path):
    path = tmp_path / "t.csv"
    # 's' looks numeric in the first rows and holds text further on
    pd.DataFrame({"s": ["1", "2"] * 30 + ["b", "a"], "a": np.arange(62.0),
                  "y": 0}).to_csv(path, index=False)
    table = open_table(path, batch_size=10)
    assert table.text_candidates(["s", "a"]) == []  # the first batch: numbers only
    text, labels = table.text_labels(["s", "a"])
    whole = pd.read_csv(path, **CSV_OPTIONS)
    assert text == ["s"]
    assert list(labels["s"]) == list(whole["s"].astype("category").cat.categories)
    got = pd.concat(list(table.frames(["s"], text=["s"])))["s"]
    assert got.astype(str).tolist() == whole["s"].astype(str).tolist()


def test_bad_paths_and_columns_are_named(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        open_table(tmp_path / "nope.csv")
    (tmp_path / "t.txt").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="unsupported suffix '.txt'"):
        open_table(tmp_path / "t.txt")
    with pytest.raises(ValueError, match="matches no file"):
        open_table(tmp_path / "*.parquet")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not Parquet"):
        open_table(tmp_path / "*.csv")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        open_table(tmp_path / "x.csv", batch_size=0)
    table = open_table(tmp_path / "x.csv")
    with pytest.raises(ValueError, match=r"has no column\(s\) \['c'\]"):
        next(table.frames(["a", "c"]))
    (tmp_path / "empty.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="has no rows"):
        list(open_table(tmp_path / "empty.csv").frames())
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match="cannot read data file"):
        open_table(tmp_path / "bad.parquet")


# run in a fresh interpreter: pyarrow's memory pool only reports its peak since start
_ITERATE = r"""
import sys, tracemalloc
import pyarrow as pa, pyarrow.dataset, pyarrow.parquet  # imported before the count
from treeimp.cli.table_batches import open_table
tracemalloc.start()
rows = 0
for _ in range(2):
    for X, y in open_table(sys.argv[1], batch_size=1000).batches(list("abcd"), "e"):
        rows += len(X)
print(rows, tracemalloc.get_traced_memory()[1], pa.default_memory_pool().max_memory())
"""


def test_memory_is_flat_in_the_file_size(tmp_path):
    """Iterating, twice over, a CSV file and a Parquet folder (one file of 29 row groups
    and seven small ones) whose rows take 6 MB in memory, in batches of 1,000 rows: the
    peak of Python / numpy allocations (tracemalloc) and of pyarrow's memory pool each
    stay under 1.2 MB, a fifth of the table."""
    n = 150_000
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(n, 5)), columns=list("abcde"))
    bound = 1_200_000
    assert df.memory_usage(index=False).sum() >= 5 * bound
    csv = tmp_path / "big.csv"
    df.to_csv(csv, index=False, float_format="%.6g")
    folder = tmp_path / "pq"
    folder.mkdir()
    df.iloc[:n - 7000].to_parquet(folder / "a.parquet", index=False, row_group_size=5_000)
    for i in range(7):
        df.iloc[n - 7000 + 1000 * i:n - 6000 + 1000 * i].to_parquet(
            folder / f"b{i}.parquet", index=False)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for source in (csv, folder):
        out = subprocess.run([sys.executable, "-c", _ITERATE, str(source)], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        rows, traced, arrow = map(int, out.stdout.split())
        assert rows == 2 * n
        assert traced < bound, (source.name, traced)
        assert arrow < bound, (source.name, arrow)


def test_streamed_rows_encode_as_the_whole_table(tmp_path):
    """A LightGBM model with a categorical split and no stored categories, a text
    column in a CSV file: each batch's X is coded with the sorted labels of the whole
    file, as the in-memory command line codes it, and y is checked batch by batch."""
    lgb = pytest.importorskip("lightgbm")
    import treeimp

    rng = np.random.default_rng(3)
    n = 600
    labels = np.array(["d", "b", "a", "c", "e"])
    codes = rng.integers(0, 5, n)
    x = rng.normal(size=n)
    y = ((codes % 2 == 0) + x + rng.normal(scale=0.5, size=n) > 0.5).astype(int)
    train = pd.DataFrame({"x": x, "t": codes})
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5,
                               verbose=-1).fit(train, y, categorical_feature=["t"])
    path = tmp_path / "model.txt"
    model.booster_.save_model(path)
    ens = treeimp.parse(str(path))
    assert ens.feature_categories is None or ens.feature_categories[1] is None
    data = tmp_path / "d.csv"
    # sorted labels a..e are codes 0..4: the file's text labels code as training did
    pd.DataFrame({"y": y, "t": np.sort(labels)[codes], "x": x}).to_csv(data, index=False)
    told = []
    rows = StreamedRows(open_table(data, batch_size=64), ens, "y", warn=told.append)
    chunks = list(rows)
    assert len(chunks) == -(-n // 64)
    whole = read_table(data)
    X, want_y = split_target(whole, "y", ens)
    want_X = encode_categories(X, ens, lambda m: None)
    got_X = pd.concat([c[0] for c in chunks])
    assert list(got_X.columns) == ["x", "t"]
    assert np.array_equal(got_X["t"].cat.codes, want_X["t"].cat.codes)
    assert np.array_equal(got_X["x"], want_X["x"])
    assert np.array_equal(pd.concat([c[1] for c in chunks]), want_y)
    assert len(told) == 1 and "sorted order" in told[0]
    # numbers in the first batch, text further on: its codes cannot match one read's
    mixed = tmp_path / "mixed.csv"
    pd.DataFrame({"y": y, "t": np.where(np.arange(n) < 100, "1", np.sort(labels)[codes]),
                  "x": x}).to_csv(mixed, index=False)
    with pytest.raises(ValueError, match=r"column 't' holds text .* in rows 64\.\."):
        list(StreamedRows(open_table(mixed, batch_size=64), ens, "y"))
    # the in-memory explain of the batches put together equals that of the whole file
    a = treeimp.explain(ens, got_X, pd.concat([c[1] for c in chunks]), random_state=0)
    b = treeimp.explain(ens, want_X, want_y, random_state=0)
    for m in a.methods:
        assert np.array_equal(a.table[m], b.table[m], equal_nan=True)
