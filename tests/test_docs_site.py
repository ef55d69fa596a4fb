"""The documentation site (docs/), built with warnings as errors, looked at in headless
Chromium: the start page, a gallery page with the figure its example drew, and an API
page load with their titles, and every local asset they ask for is there.

The site is built once per session into a temporary folder, or taken from
``TREEIMP_DOCS_HTML`` (a folder holding an already built site: .ci/run builds it first
with ``-W`` and passes it here, so it is not built twice).
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import browser_page, local_failures, serve, unavailable

ROOT = Path(__file__).resolve().parent.parent
DOCS_PACKAGES = ("sphinx", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme", "matplotlib")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    given = os.environ.get("TREEIMP_DOCS_HTML")
    if given:
        html = Path(given)
        assert (html / "index.html").is_file(), f"TREEIMP_DOCS_HTML={given} holds no index.html"
        return html
    missing = [p for p in DOCS_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        unavailable(f"building the docs needs {', '.join(missing)} (pip install '.[docs]')")
    html = tmp_path_factory.mktemp("docs_html")
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q",
                           "-b", "html", str(ROOT / "docs"), str(html)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=1200)
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout}\n{proc.stderr}"
    return html


def _visit(page, url):
    response = page.goto(url, wait_until="load")
    assert response is not None and response.status == 200, (url, response)
    return response


def test_start_gallery_and_api_pages_load_in_a_browser(site):
    with serve(site) as base, browser_page() as page:
        failures = local_failures(page, base)

        _visit(page, base + "index.html")
        assert page.title().startswith("treeimp"), page.title()
        assert page.locator("h1").first.inner_text().strip().startswith("treeimp")
        assert page.locator("a[href='user_guide/index.html']").count() >= 1

        _visit(page, base + "auto_examples/forest_breast_cancer.html")
        assert "MDI-oob" in page.title(), page.title()
        figure = page.locator("img.sphx-glr-single-img").first
        figure.wait_for(state="attached")
        assert "sphx_glr_forest_breast_cancer" in figure.get_attribute("src")
        width = figure.evaluate("img => img.complete ? img.naturalWidth : 0")
        assert width > 0, "the gallery's figure did not load"
        # the example's printed output is on the page too
        assert "noise kept" in page.locator(".sphx-glr-script-out").first.inner_text()

        _visit(page, base + "api/treeimp.explain.html")
        assert page.title().startswith("treeimp.explain"), page.title()
        signature = page.locator("dt.sig#treeimp\\.explain")
        assert signature.count() == 1
        assert "Parameters" in page.locator("dl.py.function").first.inner_text()

        page.wait_for_load_state("networkidle")
        assert not failures, failures


def test_api_reference_lists_every_public_name():
    import treeimp

    text = (ROOT / "docs" / "api.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^   ([A-Za-z_]\w*)$", text, re.M))
    assert listed == set(treeimp.__all__), (set(treeimp.__all__) ^ listed)
