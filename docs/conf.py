"""Sphinx configuration of treeimp's documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` from the
repository root (``pip install ".[docs]"``). The gallery runs every script in
``examples/`` in its small mode (``--small``), writing its files under ``_build``.
"""

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # treeimp from this checkout, installed or not
sys.path.insert(0, str(DOCS))  # gallery_options
os.environ.setdefault("MPLBACKEND", "Agg")

import treeimp  # noqa: E402

project = "treeimp"
author = "the treeimp authors"
copyright = "2026, the treeimp authors"
version = release = treeimp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

exclude_patterns = ["_build", "**/*.md"]
templates_path = ["_templates"]
root_doc = "index"

# the API reference: one page per public name, from its numpydoc docstring
autosummary_generate = True
autodoc_default_options = {"members": False, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

intersphinx_mapping = {}

html_theme = "pydata_sphinx_theme"
html_title = "treeimp"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []
# pages without sub-pages: no (empty) section navigation on the left
html_sidebars = {page: [] for page in ("index", "getting_started", "methods", "studies",
                                       "supported_models", "performance", "architecture")}
html_show_sourcelink = False


sphinx_gallery_conf = {
    "examples_dirs": [str(ROOT / "examples")],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"\.py$",  # run every example, not only plot_*.py
    "reset_argv": "gallery_options.small_argv",  # --small, files under _build
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "run_stale_examples": True,  # every build runs every example against this code
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "show_memory": False,
    "plot_gallery": "True",
}
