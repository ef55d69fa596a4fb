"""DATA paths of `treeimp explain`: only regular files (or folders of them) are read,
a malformed CSV line costs a bounded amount of memory, ragged and empty tables are
clear errors, and --output's suffix picks the format.

The checks against hangs run the command line in a subprocess with a timeout and an
address-space limit, so that a regression fails the test instead of the machine."""

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from treeimp.cli import table_batches
from treeimp.cli.main import main
from treeimp.cli.table_batches import open_table

xgb = pytest.importorskip("xgboost")

ROOT = Path(__file__).resolve().parent.parent
_POSIX = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and /dev/zero")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("data_files")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 3)), columns=["a", "b", "c"])
    y = X["a"] + 0.1 * rng.normal(size=120)
    xgb.XGBRegressor(n_estimators=3, max_depth=2, n_jobs=1).fit(X[:80], y[:80]).save_model(
        d / "m.json")
    return str(d / "m.json"), X[80:].assign(y=y[80:])


def _limit_memory():
    """In the child: at most 3 GB of address space, so that a reader that grows without
    bound dies quickly instead of taking the machine's memory."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _cli(args, timeout=90):
    """Run ``python -m treeimp explain ARGS``: (exit status, stderr, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "treeimp", "explain", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout, preexec_fn=_limit_memory)
    return proc.returncode, proc.stderr, time.monotonic() - start


@_POSIX
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_dev_zero_and_fifo_data_are_refused_at_once(model, tmp_path, suffix):
    """A data name that is a symlink to /dev/zero (endless) or a FIFO (blocks until a
    writer comes): exit 2 naming what it is, in the time of the start-up alone."""
    zero = tmp_path / f"zero{suffix}"
    zero.symlink_to("/dev/zero")
    fifo = tmp_path / f"fifo{suffix}"
    os.mkfifo(fifo)
    for path, kind in ((zero, "a character device"), (fifo, "a FIFO")):
        code, err, _ = _cli([model[0], path, "--target", "y"])
        assert code == 2, err[-2000:]
        assert err.startswith("treeimp: error: ") and err.count("\n") == 1, err
        assert kind in err and "not a regular file" in err and str(path) in err


@_POSIX
def test_special_files_in_a_parquet_folder_or_glob_are_refused(tmp_path):
    pytest.importorskip("pyarrow")
    folder = tmp_path / "rows"
    folder.mkdir()
    pd.DataFrame({"a": [1.0], "y": [0.0]}).to_parquet(folder / "p0.parquet", index=False)
    os.mkfifo(folder / "p1.parquet")
    for source in (folder, tmp_path / "rows" / "*.parquet"):
        with pytest.raises(ValueError, match=r"p1.parquet',? (which )?is a FIFO \(named "
                                             r"pipe\), not a regular file"):
            open_table(source)
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "sub").symlink_to(loop)
    with pytest.raises(ValueError, match="symlink loop"):
        open_table(loop)


def test_symlink_loops_are_named(model, tmp_path, capsys):
    loop = tmp_path / "d.csv"
    loop.symlink_to(loop)
    assert main(["explain", model[0], str(loop), "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert "data file" in err and "symlink loop" in err and "does not exist" not in err
    mloop = tmp_path / "m.json"
    mloop.symlink_to(mloop)
    model[1].to_csv(tmp_path / "ok.csv", index=False)
    assert main(["explain", str(mloop), str(tmp_path / "ok.csv"), "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert "model file" in err and "symlink loop" in err and "does not exist" not in err
    dangling = tmp_path / "gone.csv"
    dangling.symlink_to(tmp_path / "nowhere.csv")
    assert main(["explain", model[0], str(dangling), "--target", "y"]) == 2
    assert "symbolic link to" in capsys.readouterr().err


@pytest.mark.parametrize("compress", [False, True])
def test_a_line_past_the_bound_fails_fast(tmp_path, monkeypatch, compress):
    """A regular file with no line break (a plain file of zeros, a gzip bomb of them):
    reading stops at the line bound, with the line's number, instead of taking memory
    in the size of the file."""
    monkeypatch.setattr(table_batches, "MAX_LINE_BYTES", 1 << 20)
    head = b"a,y\n1,2\n"
    body = b"\0" * (8 << 20)
    path = tmp_path / ("z.csv.gz" if compress else "z.csv")
    path.write_bytes(gzip.compress(head + body) if compress else head + body)
    with pytest.raises(ValueError, match=r"line 3 is longer than 1048576 bytes"):
        list(open_table(path).frames())
    # the header line itself
    path.write_bytes(gzip.compress(body) if compress else body)
    with pytest.raises(ValueError, match=r"line 1 is longer than 1048576 bytes"):
        open_table(path)


def test_lines_under_the_bound_read_as_pandas_reads_them(tmp_path, monkeypatch):
    monkeypatch.setattr(table_batches, "MAX_LINE_BYTES", 1 << 10)
    rng = np.random.default_rng(1)
    df = pd.DataFrame(rng.normal(size=(500, 30)), columns=[f"c{j}" for j in range(30)])
    path = tmp_path / "w.csv"
    df.to_csv(path, index=False)  # lines of ~600 bytes
    for suffix in ("", ".gz", ".bz2", ".xz", ".zip"):
        p = tmp_path / f"w.csv{suffix}"
        df.to_csv(p, index=False)
        got = pd.concat(list(open_table(p, batch_size=77).frames()))
        pd.testing.assert_frame_equal(got, pd.read_csv(p))


@pytest.mark.parametrize("rows, line", [
    ("1,2,3\n4,5,6,7\n8,9,10\n", 3),  # one row with an extra field
    ("1,2,3,4\n5,6,7,8\n", "the first row"),  # every row: pandas would index by field 1
])
def test_rows_with_extra_fields_are_refused_naming_the_line(model, tmp_path, capsys,
                                                            rows, line):
    path = tmp_path / "ragged.csv"
    path.write_text("a,b,y\n" + rows)
    with pytest.raises(ValueError, match=line if isinstance(line, str) else f"line {line} "):
        list(open_table(path, batch_size=1).frames())
    # the command line, with a model of these columns
    full = tmp_path / "full.csv"
    df = model[1].round(3)
    text = df.to_csv(index=False).splitlines()
    text[5] += ",7.5"
    full.write_text("\n".join(text) + "\n")
    assert main(["explain", model[0], str(full), "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert "line 6" in err and "5 fields" in err, err


def test_empty_tables_are_no_rows(model, tmp_path, capsys):
    head = tmp_path / "head.csv"
    head.write_text("a,b,c,y\n")
    assert main(["explain", model[0], str(head), "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert "has no rows" in err and "holds text" not in err
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert main(["explain", model[0], str(empty), "--target", "y"]) == 2
    assert "is empty" in capsys.readouterr().err
    pytest.importorskip("pyarrow")
    model[1][:0].to_parquet(tmp_path / "e.parquet", index=False)
    with pytest.raises(ValueError, match="has no rows"):
        open_table(tmp_path / "e.parquet")


def test_output_suffix_picks_the_format(model, tmp_path, capsys):
    data = tmp_path / "d.csv"
    model[1].to_csv(data, index=False)
    common = [model[0], str(data), "--target", "y", "--seed", "0", "--n-blocks", "5"]
    assert main(["explain", *common, "--output", str(tmp_path / "r.json")]) == 0
    records = json.loads((tmp_path / "r.json").read_text())
    assert {r["method"] for r in records} == {"mdi", "mdi_oob", "ufi"}
    assert main(["explain", *common, "--output", str(tmp_path / "r.csv")]) == 0
    frame = pd.read_csv(tmp_path / "r.csv")
    assert list(frame.columns[:2]) == ["feature", "method"] and len(frame) == 9
    assert main(["explain", *common, "--output", str(tmp_path / "r.txt")]) == 0
    assert "held-out rows" in (tmp_path / "r.txt").read_text()
    # a format the suffix contradicts is refused before any work
    assert main(["explain", *common, "--format", "table", "--output",
                 str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "--format table" in err and ".json" in err
    assert not (tmp_path / "t.json").exists()


def test_dask_datasets_empty_or_special_are_refused(model, tmp_path, capsys):
    pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    model[1][:0].to_parquet(tmp_path / "e.parquet", index=False)
    common = ["--target", "y", "--scheduler", "synchronous"]
    assert main(["explain", model[0], str(tmp_path / "e.parquet"), *common]) == 2
    err = capsys.readouterr().err
    assert "has no rows" in err and "n_blocks" not in err
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "f.parquet")
        assert main(["explain", model[0], str(tmp_path / "f.parquet"), *common]) == 2
        assert "a FIFO (named pipe), not a regular file" in capsys.readouterr().err
        (tmp_path / "loop.parquet").symlink_to(tmp_path / "loop.parquet")
        assert main(["explain", model[0], str(tmp_path / "loop.parquet"), *common]) == 2
        assert "symlink loop" in capsys.readouterr().err
