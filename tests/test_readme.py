"""The Python examples of the README and of the documentation's user guide run as
printed: the README's quick start, then every Python block of the user guide pages, in
one namespace (the pages use the quick start's data, forest and booster)."""

import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# the order the blocks run in: the audit page's forest result is checked before the
# later pages reuse the name ``res``
GUIDE = ["audit", "out_of_core", "screening", "boosting", "pipelines", "rows_oob"]


def _markdown_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def _rst_blocks(path):
    """The bodies of the ``.. code-block:: python`` directives of a reST page."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.strip() != ".. code-block:: python":
            continue
        body = []
        for later in lines[i + 1:]:
            if later.strip() and not later.startswith(" "):
                break
            body.append(later)
        blocks.append(textwrap.dedent("\n".join(body)).strip("\n") + "\n")
    return blocks


def test_quick_start_is_short_and_self_contained():
    blocks = _markdown_blocks(README)
    assert len(blocks) >= 1
    quick = [line for line in blocks[0].splitlines() if line.strip()]
    assert len(quick) <= 15, len(quick)
    assert "make_classification" in blocks[0] and "import xgboost" in blocks[0]
    # the documentation's quick start is the README's, word for word
    assert blocks[0] == _rst_blocks(ROOT / "docs" / "getting_started.rst")[0]


def test_every_user_guide_page_is_run_here():
    pages = {p.stem for p in (ROOT / "docs" / "user_guide").glob("*.rst")
             if _rst_blocks(p)}
    assert pages == set(GUIDE)


def _run(blocks, namespace, name):
    for i, block in enumerate(blocks):
        if "import dask" in block and importlib.util.find_spec("dask") is None:
            continue  # the Dask example needs the optional extra treeimp[dask]
        exec(compile(block, f"{name} python block {i + 1}", "exec"), namespace)


def test_readme_and_user_guide_python_blocks_run(capsys):
    pytest.importorskip("xgboost")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace = {"__name__": "readme"}
    try:
        _run(_markdown_blocks(README), namespace, "README.md")
        out = capsys.readouterr().out
        assert "Importances(" in out and "mdi_oob" in out  # print(res) of the quick start
        for page in GUIDE:
            _run(_rst_blocks(ROOT / "docs" / "user_guide" / f"{page}.rst"), namespace,
                 f"docs/user_guide/{page}.rst")
            if page == "audit":
                res = namespace["res"]
                # the defaults and the forest's screening measure, which select() tests
                assert set(res.methods) == {"mdi", "mdi_oob", "mdi_oob_centered", "ufi"}
                assert list(res.table_by_class["mdi_oob"].columns) == [0, 1]
    finally:
        plt.close("all")
