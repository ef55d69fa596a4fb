"""The notebook display (``_repr_html_``) of Importances, Contributions and TreeEnsemble,
and the HTML report (``Importances.to_html``), read back with the standard library's
HTML parser: the numbers in the cells are the object's, text from the data is escaped,
the columns come in the documented order with a legend."""

from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp
from treeimp.measures.registry import get as measure

# feature names a page must show as text, never run or parse as markup
NASTY = ["<script>alert(1)</script>", "a&b", "q\"uote'", "</td><td>x", "plain"]


class _Tables(HTMLParser):
    """Every <table> of a page as rows of (tag, text, attributes) cells; the <title>, the
    text outside tables, the <img> and <script> tags."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.text, self.images, self.scripts = [], [], [], 0
        self.title = None
        self._cell = self._row = None
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
            self.tables[-1].append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = [tag, "", dict(attrs)]
            self._row.append(self._cell)
        elif tag == "img":
            self.images.append(dict(attrs))
        elif tag == "script":
            self.scripts += 1
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._cell = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title = data
        elif self._cell is not None:
            self._cell[1] += data
        else:
            self.text.append(data)


def _parse(text):
    parser = _Tables()
    parser.feed(text)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, len(NASTY))), columns=NASTY)
    y = 2 * X[NASTY[0]] + X["a&b"] + rng.normal(size=400)
    rf = RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0).fit(X[:200],
                                                                                  y[:200])
    res = treeimp.explain(rf, X[200:], y[200:], random_state=0)
    return rf, X, y, res


def _number(cell):
    """The exact float a number cell carries (title), after checking its shown text is
    that float to 4 significant digits; NaN for an empty cell."""
    tag, text, attrs = cell
    if text == "":
        return np.nan
    value = float(attrs["title"])
    assert float(text) == pytest.approx(value, rel=6e-4, abs=0), (text, value)
    return value


def test_importances_html_table_holds_the_numbers_and_escapes_names(forest):
    _, _, _, res = forest
    page = _parse(res._repr_html_())
    assert page.scripts == 0
    (table,) = page.tables
    head = [c[1] for c in table[0]]
    # screening measure first (marked), its stderr, q-value and selection; the other
    # out-of-sample measures; the in-sample mdi last, without a stderr column
    assert head == ["feature", "mdi_oob_centered*", "mdi_oob_centered stderr", "q",
                    "selected", "mdi_oob", "mdi_oob stderr", "ufi", "ufi stderr", "mdi"]
    rows = table[1:]
    names = [r[0][1] for r in rows]
    assert names == res.ranking("mdi_oob_centered")  # the exact names, unescaped as text
    assert set(names) == set(NASTY)
    kept = set(res.select())
    for row in rows:
        f = row[0][1]
        got = dict(zip(head[1:], row[1:]))
        for m in ("mdi_oob_centered", "mdi_oob", "ufi", "mdi"):
            label = m + "*" if m == "mdi_oob_centered" else m
            assert _number(got[label]) == res.table.at[f, m]
            if m != "mdi":
                assert _number(got[f"{m} stderr"]) == res.stderr.at[f, m]
        assert _number(got["q"]) == res.qvalues.at[f, "mdi_oob_centered"]
        assert (got["selected"][1] == "yes") == (f in kept)
    assert 0 < len(kept) < len(NASTY)  # both kinds of row are checked
    legend = "".join(page.text)
    for m in res.methods:
        assert measure(m).description in legend
    assert "screening measure" in legend


def test_printed_result_orders_marks_and_explains_the_columns(forest):
    _, _, _, res = forest
    lines = repr(res).splitlines()
    assert lines[1].split() == ["mdi_oob_centered*", "q", "mdi_oob", "ufi", "mdi"]
    star = next(i for i, ln in enumerate(lines) if ln.startswith("* "))
    assert "select()" in lines[star]
    explained = [ln.split()[0] for ln in lines[star + 1:star + 6]]
    assert explained == ["mdi_oob_centered*", "q", "mdi_oob", "ufi", "mdi"]
    assert all(len(ln.split()) > 3 for ln in lines[star + 1:star + 6])


def test_notebook_display_caps_long_tables():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 70))
    y = X[:, 0] + rng.normal(size=300)
    rf = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X[:150],
                                                                                 y[:150])
    res = treeimp.explain(rf, X[150:], y[150:], methods=["mdi_oob"], random_state=0)
    page = _parse(res._repr_html_())
    (table,) = page.tables
    assert len(table) == 1 + 60
    assert "10 more rows not shown" in "".join(page.text)
    # mdi_oob is not the forest's screening measure: nothing marked, no selection column
    assert [c[1] for c in table[0]] == ["feature", "mdi_oob", "mdi_oob stderr"]


def test_contributions_html_holds_mean_abs_values(forest):
    rf, X, _, _ = forest
    c = treeimp.contributions(rf, X[200:260])
    page = _parse(c._repr_html_())
    (table,) = page.tables
    assert [cell[1] for cell in table[0]] == ["feature", "mean |phi|"]
    want = np.abs(c.values).mean(axis=0)
    got = {r[0][1]: _number(r[1]) for r in table[1:]}
    assert got == pytest.approx(dict(zip(NASTY, want)), rel=1e-12)
    shown = [r[0][1] for r in table[1:]]
    assert shown == [NASTY[k] for k in np.argsort(-want, kind="stable")]
    assert repr(c) in "".join(page.text)


def test_tree_ensemble_html_summarises_the_model():
    rng = np.random.default_rng(2)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["<b>x</b>", "y&z", "w"])
    y = (X["w"] > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0).fit(X, y)
    ens = treeimp.parse(rf)
    page = _parse(ens._repr_html_())
    (table,) = page.tables
    got = {r[0][1]: r[1][1] for r in table}
    nodes = sum(e.tree_.node_count for e in rf.estimators_)
    assert got["model"] == "sklearn forest" and got["trees"] == "4"
    assert got["nodes"] == str(nodes) and got["features"] == "3"
    assert got["classes"] == "0, 1"
    assert got["feature names"] == "<b>x</b>, y&z, w"  # as text, escaped in the markup
    assert "<b>x</b>" not in ens._repr_html_()


def test_report_is_one_escaped_page(forest, tmp_path):
    pytest.importorskip("matplotlib")
    _, _, _, res = forest
    path = tmp_path / "r.html"
    text = res.to_html(path, settings={"random_state": 0, "<i>note</i>": "a<b"})
    assert path.read_text(encoding="utf-8") == text
    page = _parse(text)
    assert page.scripts == 0 and page.title == "treeimp report: sklearn forest"
    assert len(page.images) == 1 and page.images[0]["src"].startswith(
        "data:image/png;base64,")
    assert "http://" not in text and "https://" not in text
    table = page.tables[1]  # after the model's summary
    assert [r[0][1] for r in table[1:]] == res.ranking("mdi_oob_centered")
    kv = {r[0][1]: r[1][1] for t in page.tables for r in t if len(r) == 2}
    assert kv["random_state"] == "0" and kv["<i>note</i>"] == "a<b"
    assert kv["scikit-learn"] == __import__("sklearn").__version__
    body = "".join(page.text)
    kept = res.select()
    assert f"{len(kept)} of {len(NASTY)} kept by" in body
    assert "Benjamini-Hochberg" in body
    with pytest.raises(ValueError, match="alpha"):
        res.to_html(alpha=1.5)


def test_pair_results_name_their_measure():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] * X[:, 1] + rng.normal(scale=0.3, size=300)
    rf = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X[:150],
                                                                                 y[:150])
    res = treeimp.interaction_importance(rf, X[150:], y[150:], random_state=0)
    lines = repr(res).splitlines()
    assert lines[1].split() == [res.screening + "*", "q"]
    legend = lines[lines.index(next(ln for ln in lines if ln.startswith("* "))) + 1]
    assert "pair of features" in legend
    page = _parse(res._repr_html_())
    shown = [r[0][1] for r in page.tables[0][1:]]
    assert shown == res.ranking(res.screening) and all(" x " in p for p in shown)
