"""``treeimp explain --report``: the HTML file opened in headless Chromium (Debian's
/usr/bin/chromium through the playwright package): its title, the figure decoded
(naturalWidth > 0), and no request for anything but the file itself."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

import treeimp
from tests.browser import browser_page
from treeimp.cli.main import main


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
    # offline=False: every request is recorded and asserted below (the file's own URL only)
    with browser_page(offline=False) as page:
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
