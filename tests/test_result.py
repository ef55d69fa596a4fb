"""Importances: p-values, q-values, tidy export and selection against scipy and by hand."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from treeimp.results.importances import Importances

FEATURES = ["a", "b", "c", "d", "e", "f"]


def _result(values, stderr, n_blocks=10, mdi=None):
    """A hand-made result: one method "ufi" (plus "mdi" when given, stderr NaN)."""
    idx = pd.Index(FEATURES, name="feature")
    table = {"ufi": np.asarray(values, dtype=float)}
    se = {"ufi": np.asarray(stderr, dtype=float)}
    if mdi is not None:
        table = {"mdi": np.asarray(mdi, dtype=float), **table}
        se = {"mdi": np.full(len(FEATURES), np.nan), **se}
    table, se = pd.DataFrame(table, index=idx), pd.DataFrame(se, index=idx)
    per_tree = {m: table[m].to_numpy()[None] for m in table.columns}
    blocks = {m: np.full((n_blocks, len(FEATURES)), np.nan) for m in table.columns}
    return Importances(table=table, stderr=se, stderr_trees=se, per_tree=per_tree,
                       block_values=blocks, n_blocks=n_blocks, kind="forest", n_rows=500,
                       model_name="sklearn forest")


# values chosen to span strong, weak, zero and negative effects
VALUES = [0.30, 0.02, 0.0, -0.05, 0.011, 0.12]
STDERR = [0.05, 0.01, 0.02, 0.04, 0.01, 0.03]


@pytest.mark.parametrize("n_blocks", [2, 5, 10, 30])
def test_pvalues_are_the_one_sided_t_tail(n_blocks):
    res = _result(VALUES, STDERR, n_blocks=n_blocks)
    expected = stats.t.sf(np.divide(VALUES, STDERR), n_blocks - 1)
    np.testing.assert_allclose(res.pvalues["ufi"].to_numpy(), expected, rtol=1e-12)
    # one-sided for importance > 0: large positive -> small p, negative -> p > 1/2
    p = res.pvalues["ufi"]
    assert p["a"] < p["f"] < p["b"] < 0.5 < p["d"]
    assert p["c"] == pytest.approx(0.5)
    # the upper tail: a t variable exceeds the observed ratio with probability p
    rng = np.random.default_rng(0)
    draws = rng.standard_t(n_blocks - 1, size=200_000)
    assert np.mean(draws > VALUES[1] / STDERR[1]) == pytest.approx(p["b"], abs=3e-3)


def test_pvalues_with_zero_or_nan_stderr_and_nan_values():
    values = [0.2, -0.1, 0.0, np.nan, 0.3, 0.05]
    stderr = [0.0, 0.0, 0.0, 0.1, np.nan, 0.02]
    p = _result(values, stderr).pvalues["ufi"].to_numpy()
    # a positive value with no spread is certain, a negative or zero one is not
    assert p[0] == 0.0 and p[1] == 1.0 and p[2] == 1.0
    assert np.isnan(p[3]) and np.isnan(p[4])
    assert p[5] == pytest.approx(stats.t.sf(2.5, 9), rel=1e-12)


def test_pvalues_are_scipys_t_tail_bit_for_bit():
    """The tail is taken from scipy.special.stdtr directly: the same numbers as
    scipy.stats.t.sf for ratios of every size, +-inf (zero stderr), NaN, and degrees of
    freedom from 1 to large and invalid (0, negative: NaN)."""
    from treeimp.results.importances import one_sided_pvalues

    rng = np.random.default_rng(3)
    ratio = np.concatenate([rng.normal(scale=s, size=50) for s in (0.1, 2.0, 40.0, 1e4)]
                           + [[0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300]])
    value = np.where(np.isfinite(ratio), ratio, np.sign(np.nan_to_num(ratio, nan=1.0)))
    stderr = np.where(np.isfinite(ratio), 1.0, 0.0)
    stderr[-3] = np.nan  # the NaN ratio: a NaN standard error
    for dof in (1, 2, 9, 19, 57, 1000, 0, -1):
        with np.errstate(invalid="ignore"):
            expected = stats.t.sf(np.where(stderr > 0, value / np.where(stderr > 0, stderr,
                                                                        1.0), ratio), dof)
        expected = np.where(np.isnan(stderr), np.nan, expected)
        got = one_sided_pvalues(value, stderr, dof)
        assert np.array_equal(got, expected, equal_nan=True), dof


def test_qvalues_are_benjamini_hochberg():
    res = _result(VALUES, STDERR)
    p = res.pvalues["ufi"].to_numpy()
    np.testing.assert_allclose(res.qvalues["ufi"].to_numpy(),
                               stats.false_discovery_control(p, method="bh"), rtol=1e-12)


def test_qvalues_skip_nan_entries():
    """NaN p-values stay NaN and do not count among the hypotheses."""
    values = [0.30, np.nan, 0.0, -0.05, 0.011, 0.12]
    res = _result(values, STDERR)
    p = res.pvalues["ufi"].to_numpy()
    q = res.qvalues["ufi"].to_numpy()
    ok = ~np.isnan(p)
    assert np.isnan(q[1]) and ok.sum() == 5
    np.testing.assert_allclose(q[ok], stats.false_discovery_control(p[ok]), rtol=1e-12)


def test_mdi_column_has_nan_pvalues():
    res = _result(VALUES, STDERR, mdi=[0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert res.pvalues["mdi"].isna().all() and res.qvalues["mdi"].isna().all()


def test_to_frame_and_to_json_round_trip(tmp_path):
    mdi = [0.5, 0.1, 0.05, 0.2, 0.1, 0.05]
    res = _result(VALUES, STDERR, mdi=mdi)
    p = stats.t.sf(np.divide(VALUES, STDERR), 9)
    q = stats.false_discovery_control(p)
    expected = {("ufi", f): (v, s, pv, qv)
                for f, v, s, pv, qv in zip(FEATURES, VALUES, STDERR, p, q)}
    expected.update({("mdi", f): (v, np.nan, np.nan, np.nan) for f, v in zip(FEATURES, mdi)})

    frame = res.to_frame()
    assert list(frame.columns) == ["feature", "method", "importance", "stderr", "pvalue",
                                   "qvalue"]
    assert len(frame) == 12
    path = tmp_path / "imp.json"
    text = res.to_json(path)
    assert path.read_text() == text
    records = json.loads(text)
    for rows in (frame.to_dict("records"), records):
        assert {(r["method"], r["feature"]) for r in rows} == set(expected)
        for r in rows:
            want = expected[(r["method"], r["feature"])]
            got = [np.nan if r[k] is None else r[k]
                   for k in ("importance", "stderr", "pvalue", "qvalue")]
            # JSON keeps 15 significant digits
            np.testing.assert_allclose(got, want, rtol=1e-11, equal_nan=True)


def test_select_keeps_features_below_the_fdr_level_most_important_first():
    res = _result(VALUES, STDERR)
    q = stats.false_discovery_control(stats.t.sf(np.divide(VALUES, STDERR), 9))
    for alpha in (0.001, 0.01, 0.05, 0.2, 0.5):
        keep = {f for f, qv in zip(FEATURES, q) if qv < alpha}
        chosen = res.select("ufi", alpha=alpha)
        assert set(chosen) == keep
        vals = [VALUES[FEATURES.index(f)] for f in chosen]
        assert vals == sorted(vals, reverse=True)
    # by hand: t = 6, 4, 2 give p = 1.0e-4, 1.6e-3, 0.038; BH: q_b = 0.038 * 6/3 > 0.05
    assert res.select("ufi", alpha=0.05) == ["a", "f"]
    assert res.select("ufi", alpha=0.08) == ["a", "f", "b"]
    # no task recorded: no default screening measure, and no other measure in its place
    with pytest.raises(ValueError, match="does not record the model's task"):
        res.select()


def test_select_errors():
    res = _result(VALUES, STDERR, mdi=[0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="'mdi'.*no p-values"):
        res.select("mdi")
    for alpha in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\)"):
            res.select("ufi", alpha=alpha)
    with pytest.raises(ValueError, match=r"'mdi_oob' was not computed.*\['mdi', 'ufi'\]"):
        res.select("mdi_oob")


def test_repr_lists_features_methods_and_values():
    res = _result(VALUES, STDERR, mdi=[0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    text = repr(res)
    assert text.startswith("Importances(sklearn forest, 500 evaluation rows, 6 features")
    for name in FEATURES + ["mdi", "ufi"]:
        assert name in text
    assert "0.300 ± 0.050" in text
    lines = text.splitlines()
    # most important first (by ufi): a, f, b, e, c, d; then the legend
    order = [ln.split()[0] for ln in lines[3:9]]
    assert order == ["a", "f", "b", "e", "c", "d"]
    # the out-of-sample measure first, the in-sample mdi last; no screening measure
    # recorded (no task): nothing marked, no q column
    assert lines[1].split() == ["ufi", "mdi"]
    assert lines[9] == "rows sorted by ufi"
    assert [ln.split()[0] for ln in lines[10:12]] == ["ufi", "mdi"]
