"""The Explainer: statistics of chunks of rows add up to the statistics of all rows.

Chunk boundaries and the order in which chunks are added are drawn by hypothesis; the
importances, standard errors, p-values and per-tree values must equal the one-call
result to 1e-12 relative (float sums in another order are the only difference).
"""

import pickle
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

import treeimp

N = 240  # evaluation rows
SEED = 7


def _data(n=2 * N, n_features=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    signal = X[:, 0] + 0.5 * X[:, 1] * X[:, 2]
    return X, signal + rng.normal(scale=0.5, size=n)


def _cases():
    """name -> (model, X_eval, y_eval, oob, methods): fitted once per test session."""
    X, t = _data()
    yb = (t > 0).astype(int)
    y3 = np.digitize(t, [-0.5, 0.5])
    cases = {}
    rf = RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0).fit(X[:N], y3[:N])
    cases["forest_oob"] = (rf, X[:N], y3[:N], True, ("mdi_oob", "mdi_oob_centered", "ufi"))
    rfr = RandomForestRegressor(n_estimators=12, max_depth=6, random_state=0).fit(X[:N], t[:N])
    cases["forest_held_out"] = (rfr, X[N:], t[N:], False, ("mdi_oob", "ufi", "pg2"))
    gbc = GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0)
    cases["sklearn_gb_multiclass"] = (gbc.fit(X[:N], y3[:N]), X[N:], y3[N:], False,
                                      ("mdi_oob", "ufi"))
    gbr = GradientBoostingRegressor(n_estimators=15, max_depth=3, random_state=0)
    cases["sklearn_gb_regression"] = (gbr.fit(X[:N], t[:N]), X[N:], t[N:], False,
                                      ("mdi_oob", "mdi_oob_centered", "ufi"))
    xgb = pytest.importorskip("xgboost")
    xb = xgb.XGBClassifier(n_estimators=15, max_depth=3, learning_rate=0.3, n_jobs=1)
    cases["xgboost_binary"] = (xb.fit(X[:N], yb[:N]), X[N:], yb[N:], False,
                               ("mdi_oob", "ufi", "naive_oob"))
    xm = xgb.XGBClassifier(n_estimators=8, max_depth=3, learning_rate=0.3, n_jobs=1)
    cases["xgboost_multiclass"] = (xm.fit(X[:N], y3[:N]), X[N:], y3[N:], False,
                                   ("mdi_oob", "ufi"))
    lgb = pytest.importorskip("lightgbm")
    lr = lgb.LGBMRegressor(n_estimators=15, num_leaves=8, verbose=-1, n_jobs=1)
    cases["lightgbm_regression"] = (lr.fit(X[:N], t[:N]), X[N:], t[N:], False,
                                    ("mdi_oob", "mdi_oob_centered", "ufi"))
    return cases


@pytest.fixture(scope="module")
def cases():
    return _cases()


def _arrays(res):
    out = {}
    for m in res.methods:
        out[f"{m}.table"] = res.table[m].to_numpy()
        out[f"{m}.stderr"] = res.stderr[m].to_numpy()
        out[f"{m}.pvalues"] = res.pvalues[m].to_numpy()
        out[f"{m}.per_tree"] = np.asarray(res.per_tree[m])
    return out


def _assert_close(got, want, rtol=1e-12):
    assert got.keys() == want.keys()
    for k in want:
        a, b = np.asarray(got[k], float), np.asarray(want[k], float)
        scale = np.nanmax(np.abs(b)) if np.isfinite(b).any() else 1.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=k)


def _chunked(ex, X, y, oob, cuts, order, methods=None):
    bounds = [0, *cuts, len(X)]
    parts = [ex.accumulate(X[a:b], y[a:b], rows=range(a, b), oob=oob, random_state=SEED,
                           methods=methods) for a, b in zip(bounds[:-1], bounds[1:])]
    return sum(parts[i] for i in order)


@st.composite
def _chunking(draw):
    k = draw(st.integers(min_value=0, max_value=8))
    # repeated cut points give empty chunks
    cuts = sorted(draw(st.lists(st.integers(0, N), min_size=k, max_size=k)))
    order = draw(st.permutations(list(range(k + 1))))
    return cuts, order


@pytest.mark.parametrize("name", ["forest_oob", "forest_held_out", "sklearn_gb_multiclass",
                                  "sklearn_gb_regression", "xgboost_binary",
                                  "xgboost_multiclass", "lightgbm_regression"])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(chunking=_chunking())
def test_chunked_statistics_equal_one_call(cases, name, chunking):
    model, X, y, oob, methods = cases[name]
    cuts, order = chunking
    ex = treeimp.Explainer(model)
    want = _arrays(ex.explain(X, y, oob=oob, methods=methods, random_state=SEED))
    got = _arrays(ex.finalize(_chunked(ex, X, y, oob, cuts, order), methods=methods))
    _assert_close(got, want)


def test_explain_is_finalize_of_accumulate_and_stats_are_left_unchanged(cases):
    model, X, y, oob, methods = cases["xgboost_binary"]
    ex = treeimp.Explainer(model)
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    stats = ex.accumulate(X, y, sample_weight=w, random_state=3)
    before = stats.planes.copy()
    a = _arrays(ex.finalize(stats, methods=methods))
    np.testing.assert_array_equal(stats.planes, before)  # finalize works on a copy
    b = _arrays(ex.finalize(stats, methods=methods))
    c = _arrays(ex.explain(X, y, sample_weight=w, methods=methods, random_state=3))
    _assert_close(a, b, rtol=0)
    _assert_close(a, c, rtol=0)


def test_node_stats_survive_pickling_compactly(cases):
    model, X, y, oob, methods = cases["forest_oob"]
    ex = treeimp.Explainer(model)
    stats = ex.accumulate(X[:40], y[:40], rows=range(40), oob=True, random_state=SEED)
    blob = pickle.dumps(stats)
    back = pickle.loads(blob)
    np.testing.assert_array_equal(back.planes, stats.planes)
    np.testing.assert_array_equal(back.block_weight, stats.block_weight)
    assert back.n_rows == 40 and back.settings == stats.settings
    # 40 rows reach few leaves: only those are stored
    assert len(blob) < stats.planes.nbytes / 3
    rest = ex.accumulate(X[40:], y[40:], rows=range(40, N), oob=True, random_state=SEED)
    want = _arrays(ex.explain(X, y, oob=True, methods=methods, random_state=SEED))
    _assert_close(_arrays(ex.finalize(back + rest, methods=methods)), want)


def test_the_explainer_pickles_and_explains_the_same(cases):
    model, X, y, oob, methods = cases["lightgbm_regression"]
    ex = treeimp.Explainer(model)
    back = pickle.loads(pickle.dumps(ex))
    _assert_close(_arrays(back.explain(X, y, methods=methods, random_state=1)),
                  _arrays(ex.explain(X, y, methods=methods, random_state=1)), rtol=0)
    assert back.fingerprint == ex.fingerprint


def test_random_state_none_is_one_key_per_explainer_shared_by_its_copies(cases):
    """random_state=None: every call of one Explainer (and of its pickled copies, even
    when pickled before its first call) draws the same row blocks, another Explainer
    other ones; the standard errors show which."""
    model, X, y, oob, methods = cases["lightgbm_regression"]
    ex = treeimp.Explainer(model)
    copy = pickle.loads(pickle.dumps(ex))  # before any call
    first = _arrays(ex.explain(X, y, methods=methods))
    _assert_close(_arrays(ex.explain(X, y, methods=methods)), first, rtol=0)
    _assert_close(_arrays(copy.explain(X, y, methods=methods)), first, rtol=0)
    _assert_close(_arrays(pickle.loads(pickle.dumps(ex)).explain(X, y, methods=methods)),
                  first, rtol=0)
    other = treeimp.Explainer(model).explain(X, y, methods=methods)
    assert not np.array_equal(other.stderr.to_numpy(),
                              ex.explain(X, y, methods=methods).stderr.to_numpy())
    # the same blocks as an explicit key: accumulate with None combines with explain's
    stats = ex.accumulate(X, y)
    _assert_close(_arrays(ex.finalize(stats, methods=methods)), first)


def test_statistics_of_other_models_or_settings_do_not_combine(cases):
    rf, X, y, _, _ = cases["forest_oob"]
    rfr = cases["forest_held_out"][0]
    ex = treeimp.Explainer(rf)
    a = ex.accumulate(X[:100], y[:100], rows=range(100), random_state=0)
    with pytest.raises(ValueError, match="different n_blocks: 20 vs 10"):
        a + ex.accumulate(X[100:], y[100:], rows=range(100, N), random_state=0, n_blocks=10)
    with pytest.raises(ValueError, match="different random_state"):
        a + ex.accumulate(X[100:], y[100:], rows=range(100, N), random_state=1)
    with pytest.raises(ValueError, match="different oob"):
        a + ex.accumulate(X[100:], y[100:], rows=range(100, N), random_state=0, oob=True)
    # another model: a forest of the same shape but other trees
    other = RandomForestClassifier(n_estimators=12, max_depth=6, random_state=1).fit(X, y)
    b = treeimp.Explainer(other).accumulate(X[100:], y[100:], rows=range(100, N),
                                            random_state=0)
    with pytest.raises(ValueError, match="different the model"):
        a + b
    with pytest.raises(ValueError, match="accumulated for another model"):
        ex.finalize(b)
    # the same model with another iteration range is another model
    xgb_model, Xv, yv = cases["xgboost_binary"][:3]
    full = treeimp.Explainer(xgb_model).accumulate(Xv, yv, random_state=0)
    part = treeimp.Explainer(xgb_model, iteration_range=(0, 5)).accumulate(Xv, yv,
                                                                           random_state=0)
    with pytest.raises(ValueError, match="different the model"):
        full + part
    regression = treeimp.Explainer(rfr)
    with pytest.raises(TypeError, match="NodeStats"):
        regression.finalize(regression.explain(X, y.astype(float)))
    with pytest.raises(TypeError, match="unsupported operand"):
        a + "stats"


def test_per_row_measures_accumulate_in_chunks_when_named(cases):
    model, X, y, oob, _ = cases["forest_oob"]
    methods = ("mdi_oob", "shap_oob", "saabas_oob")
    ex = treeimp.Explainer(model)
    want = _arrays(ex.explain(X, y, oob=True, methods=methods, random_state=SEED))
    stats = _chunked(ex, X, y, True, [50, 51, 170], [2, 0, 3, 1], methods=methods)
    _assert_close(_arrays(ex.finalize(stats, methods=methods)), want)
    # saabas_oob is mdi_oob computed row by row
    got = ex.finalize(stats, methods=methods)
    np.testing.assert_allclose(got.table["saabas_oob"], got.table["mdi_oob"], rtol=1e-9)
    plain = _chunked(ex, X, y, True, [100], [0, 1])
    with pytest.raises(ValueError, match="name them in accumulate's methods="):
        ex.finalize(plain, methods=methods)


def test_empty_chunks_and_bad_positions(cases):
    model, X, y, oob, methods = cases["forest_oob"]
    ex = treeimp.Explainer(model)
    empty = ex.accumulate(X[:0], y[:0], rows=range(0, 0), oob=True, random_state=SEED)
    assert empty.n_rows == 0 and not empty.planes.any()
    with pytest.raises(ValueError, match="X has 0 rows but y has 3"):
        ex.accumulate(X[:0], y[:3], random_state=SEED)
    with pytest.raises(ValueError, match="rows has 10 positions but the chunk has 5 rows"):
        ex.accumulate(X[:5], y[:5], rows=range(10), random_state=SEED)
    with pytest.raises(ValueError, match=f"beyond the forest's {N} training rows"):
        ex.accumulate(X[:5], y[:5], rows=range(N, N + 5), oob=True, random_state=SEED)
    with pytest.raises(ValueError, match="n_blocks=20 is more than the 5 evaluation rows"):
        ex.finalize(empty + ex.accumulate(X[:5], y[:5], rows=range(5), oob=True,
                                          random_state=SEED))


def test_streaming_chunks_through_explain_equals_the_in_memory_call(cases):
    model, X, y, oob, methods = cases["xgboost_multiclass"]
    want = _arrays(treeimp.explain(model, X, y, methods=methods, random_state=SEED))
    chunks = ((X[a:a + 37], y[a:a + 37]) for a in range(0, len(X), 37))
    got = _arrays(treeimp.explain(model, chunks, methods=methods, random_state=SEED))
    _assert_close(got, want)
    w = np.linspace(0.5, 1.5, len(y))
    want_w = _arrays(treeimp.explain(model, X, y, sample_weight=w, methods=methods,
                                     random_state=SEED))
    listed = [(X[a:a + 100], y[a:a + 100], w[a:a + 100]) for a in range(0, len(X), 100)]
    _assert_close(_arrays(treeimp.explain(model, listed, methods=methods,
                                          random_state=SEED)), want_w)
    with pytest.raises(ValueError, match="give y inside the chunks"):
        treeimp.explain(model, iter(listed), y)
    with pytest.raises(TypeError, match=r"chunk 1 must be a tuple \(X, y\)"):
        treeimp.explain(model, iter([(X, y), X]))
    with pytest.raises(ValueError, match="empty iterable of chunks"):
        treeimp.explain(model, iter([]))


def test_an_explainer_used_from_four_threads_gives_the_serial_results(cases):
    jobs = [(name, seed) for name in ("forest_oob", "xgboost_binary", "lightgbm_regression")
            for seed in (0, 1)]
    explainers = {name: treeimp.Explainer(cases[name][0]) for name, _ in jobs}

    def run(name, seed):
        model, X, y, oob, methods = cases[name]
        return _arrays(explainers[name].explain(X, y, oob=oob, methods=methods,
                                                random_state=seed))

    serial = {job: run(*job) for job in jobs}
    results, errors = {}, []

    def worker(k):
        try:
            for i in range(3):
                job = jobs[(k + i) % len(jobs)]
                results[(k, i)] = (job, run(*job))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 12
    for job, got in results.values():
        _assert_close(got, serial[job], rtol=0)


def test_statistics_of_the_same_rows_do_not_combine(cases):
    """Adding statistics of rows already counted would count them twice: refused, naming
    the rows; disjoint chunks, in any order and given as arrays of positions, still add
    up to the one-call result."""
    model, X, y, oob, methods = cases["xgboost_binary"]
    ex = treeimp.Explainer(model)
    s = ex.accumulate(X[:100], y[:100], rows=range(100), random_state=SEED)
    with pytest.raises(ValueError, match=r"rows overlap: rows 0 \.\. 99 are in both"):
        s + s
    with pytest.raises(ValueError, match="rows overlap"):
        sum([s, ex.accumulate(X[100:], y[100:], rows=range(100, N), random_state=SEED), s])
    # a chunk that overlaps the end of another
    late = ex.accumulate(X[90:120], y[90:120], rows=range(90, 120), random_state=SEED)
    with pytest.raises(ValueError, match=r"rows 90 \.\. 99 are in both"):
        late + s
    # positions given as arrays: the even and the odd rows, then an odd row again
    even = np.arange(0, N, 2)
    odd = np.arange(1, N, 2)[::-1]  # any order
    a = ex.accumulate(X[even], y[even], rows=even, random_state=SEED)
    b = ex.accumulate(X[odd], y[odd], rows=odd, random_state=SEED)
    total = b + a
    assert total.n_rows == N
    np.testing.assert_array_equal(total.rows, [[0, N]])
    _assert_close(_arrays(ex.finalize(total, methods=methods)),
                  _arrays(ex.explain(X, y, methods=methods, random_state=SEED)))
    again = ex.accumulate(X[[7]], y[[7]], rows=[7], random_state=SEED)
    with pytest.raises(ValueError, match=r"rows 7 \.\. 7 are in both"):
        a + b + again
    with pytest.raises(ValueError, match=r"rows 7 \.\. 7 are in both"):
        again + a + b
    # one chunk that names a position twice
    with pytest.raises(ValueError, match="position 7 appears more than once"):
        ex.accumulate(X[:3], y[:3], rows=[7, 1, 7], random_state=SEED)
    # the rows seen travel with pickled statistics
    back = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(back.rows, [[0, 100]])
    with pytest.raises(ValueError, match="rows overlap"):
        back + s
    # streamed chunks and the empty chunk still add
    empty = ex.accumulate(X[:0], y[:0], rows=range(5, 5), random_state=SEED)
    assert (s + empty).rows.tolist() == [[0, 100]]


def test_finalize_checks_the_statistics_shape_against_the_model(cases):
    """Statistics of another model whose settings were made to agree (the fingerprint
    replaced) must not be finalised: their shape is checked, naming both numbers."""
    rf, X, y, _, _ = cases["forest_oob"]
    ex = treeimp.Explainer(rf)
    other = RandomForestClassifier(n_estimators=12, max_depth=6, random_state=1).fit(X, y)
    ex_other = treeimp.Explainer(other)
    stats = ex_other.accumulate(X, y, random_state=0)
    mine = ex.ensemble.leaf_slots.node.shape[0]
    theirs = ex_other.ensemble.leaf_slots.node.shape[0]
    assert mine != theirs
    stats.settings["model"] = ex.fingerprint  # forged
    with pytest.raises(ValueError, match=f"{theirs} leaf slots but the model has {mine}"):
        ex.finalize(stats)
    # the number of blocks of the settings against the arrays'
    good = ex.accumulate(X, y, random_state=0)
    forged = pickle.loads(pickle.dumps(good))
    forged.settings["n_blocks"] = 10
    with pytest.raises(ValueError, match="20 blocks but their settings say 10"):
        ex.finalize(forged)
    # rows counted against the positions recorded
    forged = pickle.loads(pickle.dumps(good))
    forged.n_rows = 2 * N
    with pytest.raises(ValueError, match=f"{2 * N} rows but their positions cover {N}"):
        ex.finalize(forged)
    # the layout of the terms
    forged = pickle.loads(pickle.dumps(good))
    forged.layout = forged.settings["layout"] = "boosting"
    with pytest.raises(ValueError, match="layout 'boosting' but the model's is"):
        ex.finalize(forged)


def test_pickles_of_the_previous_format_or_with_bad_positions_are_refused(cases):
    model, X, y, _, _ = cases["lightgbm_regression"]
    stats = treeimp.Explainer(model).accumulate(X, y, random_state=0)
    state = stats.__getstate__()
    cls = type(stats)
    previous = {k: v for k, v in state.items() if k != "rows"} | {"_format": 2}
    with pytest.raises(ValueError, match=r"earlier treeimp \(format 2\).*positions"):
        cls.__new__(cls).__setstate__(previous)
    for runs, match in (([[0, 100], [50, N]], "not sorted, disjoint"),
                        ([[0, 100]], f"count {N} rows but their positions cover 100")):
        with pytest.raises(ValueError, match=match):
            cls.__new__(cls).__setstate__(dict(state, rows=np.array(runs)))
    with pytest.raises(ValueError, match="must have shape"):
        cls.__new__(cls).__setstate__(dict(state, _values=state["_values"][:1]))
