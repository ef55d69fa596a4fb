"""The README's Python examples run as printed: the quick start, then the screening /
plots block, in one namespace (the second block uses the first one's data and forest)."""

import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_quick_start_is_short_and_self_contained():
    blocks = _python_blocks()
    assert len(blocks) >= 2
    quick = [line for line in blocks[0].splitlines() if line.strip()]
    assert len(quick) <= 15, len(quick)
    assert "make_classification" in blocks[0] and "import xgboost" in blocks[0]


def test_readme_python_blocks_run(capsys):
    pytest.importorskip("xgboost")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace = {"__name__": "readme"}
    try:
        for i, block in enumerate(_python_blocks()):
            if "import dask" in block and importlib.util.find_spec("dask") is None:
                continue  # the Dask example needs the optional extra treeimp[dask]
            exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    finally:
        plt.close("all")
    out = capsys.readouterr().out
    assert "Importances(" in out and "mdi_oob" in out  # print(res) of the quick start
    res = namespace["res"]
    # the defaults and the forest's screening measure, which select() tests
    assert set(res.methods) == {"mdi", "mdi_oob", "mdi_oob_centered", "ufi"}
    assert list(res.table_by_class["mdi_oob"].columns) == [0, 1]
