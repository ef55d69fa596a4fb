"""``treeimp explain --report``: the HTML file opened in headless Chromium (Debian's
/usr/bin/chromium through the playwright package): its title, the figure decoded
(naturalWidth > 0), and no request for anything but the file itself."""

import contextlib
import os
import pickle
import shutil

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

import treeimp
from treeimp.cli.main import main

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def browser_page():
    """A page of a headless Chromium; skips when playwright or the browser is missing."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM) and shutil.which("chromium") is None:
        pytest.skip("no chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def test_cli_report_opens_offline_with_its_figure(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=["a", "b", "<script>c", "d"])
    y = X["a"] + 0.5 * X["<script>c"] + rng.normal(size=300)
    rf = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X[:150],
                                                                                 y[:150])
    (tmp_path / "rf.pkl").write_bytes(pickle.dumps(rf))
    X[150:].assign(y=y[150:]).to_csv(tmp_path / "d.csv", index=False)
    report = tmp_path / "audit.html"
    argv = ["explain", str(tmp_path / "rf.pkl"), str(tmp_path / "d.csv"), "--target", "y",
            "--trust-pickle", "--report", str(report)]
    assert main(argv) == 0
    capsys.readouterr()
    res = treeimp.explain(rf, X[150:], y[150:], random_state=0)
    url = report.resolve().as_uri()
    requests = []
    with browser_page() as page:
        page.on("request", lambda r: requests.append(r.url))
        page.goto(url)
        page.wait_for_load_state("load")
        assert page.title() == "treeimp report: sklearn forest"
        width = page.eval_on_selector("#treeimp-figure", "img => img.complete && "
                                      "img.naturalWidth")
        assert width > 0
        # the table's first column in the browser: the features by the screening measure
        shown = page.eval_on_selector_all(".treeimp-table tbody tr th",
                                          "cells => cells.map(c => c.textContent)")
        text = page.inner_text("body")
    assert shown == res.ranking("mdi_oob_centered")
    # the data: URL of the figure is no request; nothing but the file was fetched
    assert [u for u in requests if not u.startswith("data:")] == [url]
    assert "treeimp explain" in text and "--report" in text  # the command line
    assert "seed\t0" in text or "seed 0" in text
