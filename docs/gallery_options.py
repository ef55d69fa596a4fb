"""What the documentation build passes to each example of the gallery (docs/conf.py
names these functions by their import path, so the configuration stays picklable)."""

from pathlib import Path

OUTPUT = Path(__file__).resolve().parent / "_build" / "gallery_output"


def small_argv(script_name, gallery_conf):
    """Every example runs in its small mode and writes its files under docs/_build, not
    into examples/output/."""
    return ["--small", "--out", str(OUTPUT)]
