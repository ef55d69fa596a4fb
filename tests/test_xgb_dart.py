"""DART models in every form XGBoost stores them predict and explain as XGBoost does.

XGBoost < 3.3 saves ``booster="dart"`` as ``gradient_booster.name == "dart"`` with the
per-tree ``weight_drop`` next to ``gbtree``; XGBoost 3.3 as a "gbtree" with
``weight_drop`` next to its ``model``; XGBoost 3.4 as a "gbtree" whose ``model`` holds
``weight_drop`` (dropout became a gbtree option). Either way a tree's leaf values enter
the margin times its weight. Truths: XGBoost's own
``output_margin`` and ``pred_contribs`` on the same booster, live and re-loaded from
its saved JSON / UBJSON file; the documents are also rewritten from one layout into the
other (the weights moved, nothing else), which must not change what treeimp reads.
"""

import json

import numpy as np
import pytest

import treeimp
from treeimp.parsers.ubjson import read_ubjson
from treeimp.parsers.xgb import parse_xgboost_json

xgb = pytest.importorskip("xgboost")


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.05] = np.nan
    y = 2.0 * np.nan_to_num(X[:, 0]) + 0.3 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def dart():
    X, y = _data()
    params = {"booster": "dart", "rate_drop": 0.5, "skip_drop": 0.0, "max_depth": 3,
              "eta": 0.3, "seed": 0, "nthread": 1}
    import warnings

    with warnings.catch_warnings():  # 3.4: "booster=dart is deprecated"
        warnings.simplefilter("ignore")
        booster = xgb.train(params, xgb.DMatrix(X[:200], y[:200]), 12)
    return booster, X, y


def _split(doc):
    """(model without weights, weights) of a DART document in any layout."""
    gb = doc["learner"]["gradient_booster"]
    model = dict(gb["gbtree"]["model"] if gb["name"] == "dart" else gb["model"])
    weights = gb["weight_drop"] if "weight_drop" in gb else model.pop("weight_drop")
    return model, weights


def _weights(doc):
    return np.asarray(_split(doc)[1], dtype=np.float64)


def _as_layout(doc, layout):
    """The document with its weights where XGBoost < 3.3 ("old"), 3.3 ("mid") or 3.4
    ("new") puts them."""
    model, weights = _split(doc)
    if layout == "old":
        gb = {"name": "dart", "weight_drop": weights,
              "gbtree": {"name": "gbtree", "model": model}}
    elif layout == "mid":
        gb = {"name": "gbtree", "weight_drop": weights, "model": model}
    else:
        gb = {"name": "gbtree", "model": {**model, "weight_drop": weights}}
    doc["learner"]["gradient_booster"] = gb
    return doc


def _margin(booster, X):
    out = booster.predict(xgb.DMatrix(X), output_margin=True)
    return np.asarray(out, np.float64).reshape(len(X), -1)


def _check_margin(got, want):
    # XGBoost sums in float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * max(1, np.abs(want).max()))


def test_weights_are_not_all_one(dart):
    booster, _, _ = dart
    w = _weights(json.loads(bytes(booster.save_raw("json"))))
    assert np.ptp(w) > 0.1  # otherwise the tests below could not see a missed weight


def test_live_booster_margin_and_contributions(dart):
    booster, X, _ = dart
    rows = X[200:]
    ens = treeimp.parse(booster)
    _check_margin(ens.predict_raw(rows), _margin(booster, rows))
    got = treeimp.contributions(booster, rows)
    want = booster.predict(xgb.DMatrix(rows), pred_contribs=True)
    np.testing.assert_allclose(got.values, want[:, :-1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.base_values, want[:, -1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["json", "ubj"])
@pytest.mark.parametrize("layout", ["saved", "old", "mid", "new"])
def test_saved_documents_in_both_layouts(dart, tmp_path, fmt, layout):
    booster, X, _ = dart
    rows = X[200:]
    path = tmp_path / f"dart.{fmt}"
    booster.save_model(path)
    if layout == "saved":
        ens = treeimp.load(path)
    else:
        raw = path.read_bytes()
        doc = json.loads(raw) if fmt == "json" else read_ubjson(raw)
        doc = _as_layout(doc, layout)
        ens = parse_xgboost_json(doc, learning_rate=0.3)
        np.testing.assert_allclose(ens.tree_scale, _weights(doc), rtol=1e-7)
    _check_margin(ens.predict_raw(rows), _margin(booster, rows))


def test_explain_finite_and_informative_feature_first(dart):
    booster, X, y = dart
    res = treeimp.explain(booster, X[200:], y[200:], methods=("mdi_oob", "ufi"),
                          random_state=0)
    for method in ("mdi_oob", "ufi"):
        assert np.isfinite(res.table[method]).all()
        assert res.ranking(method)[0] == res.feature_names[0]
