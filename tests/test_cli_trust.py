"""The command line runs no code from a model file unless told to: pickles need
--trust-pickle, skops files with untrusted types too."""

import os
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from treeimp.cli.main import main


class _WritesFile:
    """Unpickling this calls open(path, 'w'): a file appears if the pickle is loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=120)
    names = ["x0", "x1", "x2"]  # stored in the model: the CLI matches columns by name
    rf = RandomForestRegressor(n_estimators=5, random_state=0).fit(
        pd.DataFrame(X[:80], columns=names), y[:80])
    df = pd.DataFrame(X[80:], columns=names).assign(y=y[80:])
    df.to_csv(tmp_path / "d.csv", index=False)
    return rf, str(tmp_path / "d.csv")


@pytest.mark.parametrize("suffix", [".pkl", ".joblib"])
def test_pickle_without_trust_does_not_execute(tmp_path, capsys, data, suffix):
    marker = tmp_path / "pwned.txt"
    path = tmp_path / f"evil{suffix}"
    path.write_bytes(pickle.dumps(_WritesFile(str(marker))))
    code = main(["explain", str(path), data[1], "--target", "y"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--trust-pickle" in err and "runs code" in err
    assert not marker.exists()
    # with the flag the file is trusted: it is loaded (and then is no model)
    assert main(["explain", str(path), data[1], "--target", "y", "--trust-pickle"]) == 2
    assert marker.exists()
    os.remove(marker)


def _mdi_oob(out):
    got = pd.read_csv(pd.io.common.StringIO(out))
    return got[got.method == "mdi_oob"].set_index("feature")["importance"]


def test_skops_forest_loads_without_trust(tmp_path, capsys, data):
    """skops itself does not trust sklearn.tree._tree.Tree; treeimp's vetted list does,
    so a saved forest needs no flag (and gives the API's numbers)."""
    sio = pytest.importorskip("skops.io")
    rf, csv = data
    path = tmp_path / "rf.skops"
    sio.dump(rf, path)
    assert "sklearn.tree._tree.Tree" in sio.get_untrusted_types(file=path)
    code = main(["explain", str(path), csv, "--target", "y", "--seed", "0",
                 "--format", "csv"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""  # nothing trusted beyond the vetted types: no warning
    df = pd.read_csv(csv)
    import treeimp

    res = treeimp.explain(rf, df[["x0", "x1", "x2"]], df["y"], random_state=0)
    np.testing.assert_allclose(_mdi_oob(out)[res.table.index], res.table["mdi_oob"],
                               rtol=1e-12)


def test_skops_function_reference_is_refused_until_named(tmp_path, capsys, data):
    """A forest carrying a reference to os.system: refused without flags and with
    --trust-pickle alone, the message naming the type; loaded (the reference is only
    loaded, never called) when the user names it with --trust-types."""
    sio = pytest.importorskip("skops.io")
    rf, csv = data
    rf.hook_ = os.system  # an attribute skops saves as a function reference
    path = tmp_path / "rf.skops"
    sio.dump(rf, path)
    del rf.hook_
    system = f"{os.system.__module__}.system"  # posix.system
    base = ["explain", str(path), csv, "--target", "y", "--seed", "0", "--format", "csv"]
    for extra in ([], ["--trust-pickle"], ["--trust-pickle", "--trust-types", "numpy.sum"]):
        assert main(base + extra) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and system in err and "sklearn.tree" not in err
        assert f"--trust-pickle --trust-types {system}" in err
    assert main(base + ["--trust-types", system]) == 2  # naming needs --trust-pickle
    assert "--trust-types needs --trust-pickle" in capsys.readouterr().err
    assert main(base + ["--trust-pickle", "--trust-types", system]) == 0
    out, err = capsys.readouterr()
    assert "warning" in err and system in err
    df = pd.read_csv(csv)
    import treeimp

    res = treeimp.explain(rf, df[["x0", "x1", "x2"]], df["y"], random_state=0)
    np.testing.assert_allclose(_mdi_oob(out)[res.table.index], res.table["mdi_oob"],
                               rtol=1e-12)


def test_skops_untrusted_type_is_listed(tmp_path, capsys, data):
    sio = pytest.importorskip("skops.io")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    pipe = make_pipeline(FunctionTransformer(np.nan_to_num), data[0])
    path = tmp_path / "p.skops"
    sio.dump(pipe, path)
    untrusted = [t for t in sio.get_untrusted_types(file=path) if "sklearn.tree" not in t]
    assert untrusted
    code = main(["explain", str(path), data[1], "--target", "y"])
    err = capsys.readouterr().err
    assert code == 2 and "neither skops nor treeimp trusts" in err and untrusted[0] in err
    code = main(["explain", str(path), data[1], "--target", "y", "--trust-pickle",
                 "--trust-types", ",".join(untrusted)])
    assert code == 0, capsys.readouterr().err


def test_skops_pipeline_with_one_hot_categorical(tmp_path, capsys):
    sio = pytest.importorskip("skops.io")
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    import treeimp

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"city": rng.choice(["Oslo", "Lima", "Pune"], 300),
                       "a": rng.normal(size=300), "b": rng.normal(size=300)})
    y = 2 * df.a + (df.city == "Oslo") + 0.1 * rng.normal(size=300)
    pipe = make_pipeline(ColumnTransformer([("oh", OneHotEncoder(), ["city"])],
                                           remainder="passthrough"),
                         RandomForestRegressor(n_estimators=5, random_state=0))
    pipe.fit(df[:200], y[:200])
    path = tmp_path / "pipe.skops"
    sio.dump(pipe, path)
    test = df[200:].assign(y=y[200:])[["b", "y", "city", "a"]]  # any column order
    test.to_csv(tmp_path / "d.csv", index=False)
    argv = ["explain", str(path), str(tmp_path / "d.csv"), "--target", "y", "--seed", "0",
            "--format", "csv"]
    assert main(argv) == 0  # the vetted types suffice
    got = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    res = treeimp.explain(pipe, df[200:], y[200:], random_state=0)
    got = got[got.method == "mdi_oob"].set_index("feature")["importance"]
    np.testing.assert_allclose(got[res.table.index], res.table["mdi_oob"], rtol=1e-12)
