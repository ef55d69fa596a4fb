"""The optional progress bar: visible when asked for, silent otherwise, same numbers."""

import sys

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import treeimp
from treeimp.inputs import rows as _input
from treeimp.stats import progress

pytest.importorskip("tqdm")
xgb = pytest.importorskip("xgboost")


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(_input, "CHUNK_ROWS", 100)
    monkeypatch.setattr(_input.RowSource.chunks, "__defaults__", (100,))


def _data(n=400):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + rng.normal(size=n) > 0).astype(int)


def test_bar_shown_when_asked_and_numbers_unchanged(capsys, small_chunks):
    X, y = _data()
    rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    quiet = treeimp.explain(rf, X, y, oob=True, random_state=0, progress=False)
    assert capsys.readouterr().err == ""
    shown = treeimp.explain(rf, X, y, oob=True, random_state=0, progress=True)
    err = capsys.readouterr().err
    assert "treeimp.explain" in err and "400" in err
    np.testing.assert_array_equal(quiet.table.to_numpy(), shown.table.to_numpy())
    np.testing.assert_array_equal(quiet.stderr.to_numpy(), shown.stderr.to_numpy())

    model = xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X[:200], y[:200])
    a = treeimp.explain(model, X[200:], y[200:], random_state=0, progress=False)
    b = treeimp.explain(model, X[200:], y[200:], random_state=0, progress=True)
    assert "treeimp.explain" in capsys.readouterr().err
    # per-chunk sums add in another order: equal to rounding
    np.testing.assert_allclose(a.table.to_numpy(), b.table.to_numpy(), rtol=1e-12,
                               atol=1e-15)


@pytest.fixture
def long_run(monkeypatch):
    """Every run counts as long enough for the automatic bar."""
    monkeypatch.setattr(progress, "AUTO_WORK", 0)


def _fake_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # capsys's stderr


def _explain(progress_value):
    X, y = _data()
    rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    treeimp.explain(rf, X, y, oob=True, random_state=0, progress=progress_value)


def test_automatic_bar_is_silent_when_not_a_terminal(capsys, long_run):
    assert not sys.stderr.isatty()
    _explain(None)
    assert capsys.readouterr().err == ""


def test_automatic_bar_shown_on_a_terminal_for_long_runs(capsys, long_run, monkeypatch):
    _fake_terminal(monkeypatch)
    _explain(None)
    assert "treeimp.explain" in capsys.readouterr().err


def test_automatic_bar_silent_on_a_terminal_for_short_runs(capsys, monkeypatch):
    assert 400 * 5 < progress.AUTO_WORK  # rows x trees of _explain
    _fake_terminal(monkeypatch)
    _explain(None)
    assert capsys.readouterr().err == ""


def test_progress_true_and_false_override_the_terminal_test(capsys, long_run, monkeypatch):
    _explain(True)  # not a terminal, shown anyway
    assert "treeimp.explain" in capsys.readouterr().err
    _fake_terminal(monkeypatch)
    _explain(False)  # a terminal and a long run, silent anyway
    assert capsys.readouterr().err == ""


def test_bad_progress_value():
    X, y = _data()
    rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="progress"):
        treeimp.explain(rf, X, y, oob=True, progress="yes")


def test_permutation_importance_bar(capsys):
    X, y = _data()
    rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    a = treeimp.permutation_importance(rf, X, y, n_repeats=2, random_state=0, progress=True)
    assert "permutation_importance" in capsys.readouterr().err
    b = treeimp.permutation_importance(rf, X, y, n_repeats=2, random_state=0, progress=False)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(a.importances, b.importances)
