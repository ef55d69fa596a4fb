"""The registry of measures (treeimp/measures/registry.py): one entry is all a new measure needs to
flow through explain, Importances, ImportanceSelector, the plots and the command line;
every entry is accepted for the models it declares and refused for the others, and errors
name exactly the registry's valid methods."""

import ast
import json
import pickle
import re

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp
from treeimp.cli.main import main, method_choices
from treeimp.measures import formulas as measures
from treeimp.measures import registry
from treeimp.measures.registry import Measure
from treeimp.model.ensemble import BOOSTING, FOREST
from treeimp.selector import ImportanceSelector, selection_methods


# ------------------------------------------------------------------ a new measure
def _split_share(ens, st, classification, params, parts):
    """Per tree, the share of the evaluation weight that passes through splits on each
    feature: sum over splits m on k of n'_m / n'_root (a held-out split count)."""
    sp = measures._splits(ens)
    return measures._per_row(sp, st, measures._per_tree(sp, st.n[sp.m]))


SPLIT_SHARE = Measure(
    "split_share", "share of the evaluation rows passing through splits on the feature",
    "test measure", formula=_split_share, label="held-out split share", kinds=(FOREST,))


def _brute_split_share(rf, X):
    """The same from scikit-learn's own decision paths: per tree, the mean over rows of
    the number of splits on k along the row's path; averaged over trees."""
    per_tree = []
    for est in rf.estimators_:
        reached = np.asarray(est.decision_path(X).sum(axis=0)).ravel()
        t = est.tree_
        internal = t.children_left >= 0
        per_tree.append([reached[internal & (t.feature == k)].sum() / len(X)
                         for k in range(X.shape[1])])
    return np.mean(per_tree, axis=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=240) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def rf(data):
    X, y = data
    return RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(
        X[:160], y[:160])


def test_a_registered_measure_flows_through_everything(rf, data, tmp_path, capsys):
    X, y = data
    Xv, yv = X[160:], y[160:]
    assert "split_share" not in registry.names()
    with registry.registered(SPLIT_SHARE):
        # explain: computed from the node statistics, next to the built-in measures
        res = treeimp.explain(rf, Xv, yv, methods=("mdi", "split_share", "mdi_oob"),
                              random_state=0, n_blocks=4)
        np.testing.assert_allclose(res.table["split_share"], _brute_split_share(rf, Xv),
                                   rtol=1e-12)
        assert res.per_tree["split_share"].shape == (8, 4)
        assert np.isfinite(res.stderr["split_share"]).all()
        assert (res.stderr["split_share"] > 0).any()
        # Importances: an out-of-sample measure (ranked by, selectable, p-values)
        assert res.ranking() == res.ranking("split_share")
        assert res.select("split_share", 0.5) == [
            f for f in res.ranking("split_share") if res.qvalues.loc[f, "split_share"] < 0.5]
        assert "split_share" not in res.table_by_class  # no per-class form
        # the plots title its panel with the entry's label
        import matplotlib

        matplotlib.use("Agg")
        fig = res.plot(method="split_share")
        assert fig.axes[0].get_title() == "held-out split share"
        # ImportanceSelector: a valid method, used for the test
        assert "split_share" in selection_methods()
        sel = ImportanceSelector(RandomForestClassifier(n_estimators=5, max_depth=3,
                                                        random_state=0),
                                 method="split_share", oob=False, n_blocks=4,
                                 random_state=0).fit(X, y)
        assert sel.method_ == "split_share"
        assert "split_share" in sel.importances_.methods
        # the command line: a --methods choice, described in --help, computed
        assert "split_share" in method_choices()
        with pytest.raises(SystemExit):
            main(["explain", "--help"])
        assert re.search(r"split_share\s+share of the evaluation rows", capsys.readouterr().out)
        model, csv = tmp_path / "rf.pkl", tmp_path / "data.csv"
        frame = pd.DataFrame(Xv, columns=[f"x{j}" for j in range(4)]).assign(y=yv)
        frame.to_csv(csv, index=False)
        model.write_bytes(pickle.dumps(rf))
        code = main(["explain", str(model), str(csv), "--target", "y", "--trust-pickle",
                     "--methods", "split_share", "--format", "json", "--seed", "0",
                     "--n-blocks", "4", "--columns-by-position"])
        out = capsys.readouterr()
        assert code == 0, out.err
        records = json.loads(out.out)
        assert [r["method"] for r in records] == ["split_share"] * 4
        np.testing.assert_allclose([r["importance"] for r in records],
                                   res.table["split_share"], rtol=1e-12)
        # a forest-only measure: refused for boosting, naming the valid ones
        booster = xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X[:160], y[:160])
        with pytest.raises(ValueError, match=r"split_share.*forests only"):
            treeimp.explain(booster, Xv, yv, methods=("split_share",))
        with pytest.raises(ValueError, match="already registered"):
            registry.register(SPLIT_SHARE)
    # unregistered: gone everywhere
    assert "split_share" not in registry.names()
    assert "split_share" not in method_choices()
    assert "split_share" not in selection_methods()
    with pytest.raises(ValueError, match="unknown method 'split_share'"):
        treeimp.explain(rf, Xv, yv, methods=("split_share",))
    assert main(["explain", str(model), str(csv), "--target", "y", "--trust-pickle",
                 "--methods", "split_share", "--columns-by-position"]) == 2
    assert "unknown method 'split_share'" in capsys.readouterr().err


# ------------------------------------------------------------------ every entry, every model
def _models():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 3))
    yc = (X[:, 0] + rng.normal(size=150) > 0).astype(int)
    yr = X[:, 0] + 0.3 * rng.normal(size=150)
    Yr = np.c_[yr, X[:, 1]]
    Yc = np.c_[yc, (X[:, 1] > 0).astype(int)]
    tr, te = slice(0, 100), slice(100, None)
    forest = dict(n_estimators=4, max_depth=3, random_state=0)
    boost = dict(n_estimators=3, max_depth=2)
    return X[te], {
        "forest classification": (RandomForestClassifier(**forest).fit(X[tr], yc[tr]), yc[te]),
        "forest regression": (RandomForestRegressor(**forest).fit(X[tr], yr[tr]), yr[te]),
        "forest multi-output regression": (RandomForestRegressor(**forest).fit(X[tr], Yr[tr]),
                                           Yr[te]),
        "forest multi-output classification": (
            RandomForestClassifier(**forest).fit(X[tr], Yc[tr]), Yc[te]),
        "forest with median nodes": (RandomForestRegressor(
            criterion="absolute_error", **forest).fit(X[tr], yr[tr]), yr[te]),
        "boosting classification": (xgb.XGBClassifier(**boost).fit(X[tr], yc[tr]), yc[te]),
        "boosting regression": (xgb.XGBRegressor(**boost).fit(X[tr], yr[tr]), yr[te]),
    }


def _declared(entry, case):
    """Whether ``entry`` declares itself defined for the model of ``case``."""
    kind = BOOSTING if case.startswith("boosting") else FOREST
    if kind not in entry.kinds:
        return False
    if entry.source == registry.LINEAR_LEAVES:  # these models' leaves are constants
        return False
    if case == "forest multi-output regression":
        return entry.vector_targets
    if case == "forest multi-output classification":
        return entry.class_targets
    if case == "forest with median nodes":
        return not entry.needs_node_means
    return True


def test_the_built_in_declarations():
    """The restrictions the registry declares are those of the papers (measures.md)."""
    assert registry.names(FOREST) == ("mdi", "mdi_oob", "mdi_oob_centered", "ufi",
                                      "naive_oob", "pg1", "pg2", "pg3", "pg_oob",
                                      "shap_oob", "saabas_oob")
    assert registry.names(BOOSTING) == ("mdi", "mdi_oob", "mdi_oob_centered", "ufi",
                                        "naive_oob", "shap_oob", "saabas_oob",
                                        "leaf_models")
    assert registry.names(needs_rows=False) == ("mdi",)
    assert registry.names(passed_params=True) == ("pg_oob",)
    assert registry.by_source(["shap_oob", "ufi", "mdi", "mdi_oob", "leaf_models"]) == {
        registry.MODEL: ["mdi"], registry.NODE_STATS: ["ufi", "mdi_oob"],
        registry.CONTRIBUTIONS: ["shap_oob"], registry.LINEAR_LEAVES: ["leaf_models"]}
    assert {m.name for m in registry.all_measures() if m.needs_node_means} == {
        "ufi", "pg1", "pg2", "pg3", "pg_oob"}
    assert {m.name for m in registry.all_measures() if m.per_class} == {
        "mdi_oob", "mdi_oob_centered", "ufi"}
    # the per-row measures name the contributions they average
    assert {m.name: m.contributions for m in registry.all_measures()
            if m.source == registry.CONTRIBUTIONS} == {"shap_oob": "shap",
                                                       "saabas_oob": "saabas"}
    for m in registry.all_measures():
        assert m.description and "\n" not in m.description and m.paper


def test_every_entry_is_accepted_where_declared_and_refused_elsewhere():
    X, models = _models()
    for case, (model, y) in models.items():
        ok = [m.name for m in registry.all_measures() if _declared(m, case)]
        res = treeimp.explain(model, X, y, methods=ok, alpha=0.5, lam=1.0, random_state=0,
                              n_blocks=3)
        assert res.methods == ok, case
        for name in ok:
            assert np.isfinite(res.table[name]).all(), (case, name)
            assert np.isfinite(res.stderr[name]).all() == registry.get(name).needs_rows
        for entry in registry.all_measures():
            if entry.name in ok:
                continue
            with pytest.raises(ValueError, match=re.escape(repr(entry.name))) as err:
                treeimp.explain(model, X, y, methods=("mdi", entry.name), alpha=0.5,
                                lam=1.0)
            msg = str(err.value)
            assert any(w in msg for w in ("only", "not defined for", "node means")), msg


def _listed(msg, after):
    """The Python list printed after ``after`` in an error message."""
    return ast.literal_eval(re.search(re.escape(after) + r"\s*(\[[^\]]*\])", msg).group(1))


def test_errors_list_exactly_the_registrys_valid_names(rf, data):
    X, y = data
    booster = xgb.XGBRegressor(n_estimators=2, max_depth=2).fit(X, X[:, 0])
    for model, target, kind in ((rf, y, FOREST), (booster, X[:, 0], BOOSTING)):
        for methods in (("nope",), ()):
            with pytest.raises(ValueError) as err:
                treeimp.explain(model, X, target, methods=methods)
            after = "valid methods:" if methods else "choose from"
            assert _listed(str(err.value), after) == list(registry.names(kind))
        with registry.registered(SPLIT_SHARE):
            with pytest.raises(ValueError) as err:
                treeimp.explain(model, X, target, methods=("nope",))
            assert _listed(str(err.value), "valid methods:") == list(registry.names(kind))
            assert ("split_share" in str(err.value)) == (kind == FOREST)
    Y = np.c_[y, 1 - y]
    two = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, Y)
    with pytest.raises(ValueError) as err:
        treeimp.explain(two, X, Y, methods=("mdi", "shap_oob"))
    assert _listed(str(err.value), "use methods from") == [
        m.name for m in registry.all_measures(FOREST) if m.class_targets]
    with pytest.raises(ValueError) as err:
        ImportanceSelector(rf, method="pg_oob").fit(X, y)
    assert _listed(str(err.value), "one of") == list(selection_methods())
    assert main(["explain", "m.json", "d.csv", "--target", "y", "--methods", "pg_oob"]) == 2


def test_compute_dispatches_through_the_registry(rf, data):
    """measures.compute gives the entry's formula, and refuses measures of another kind
    or another source with a clear error."""
    from treeimp.measures.formulas import NodeSums as NodeStats
    from treeimp.measures.per_method import compute

    X, y = data
    ens = treeimp.parse(rf)
    rng = np.random.default_rng(0)
    n_nodes = len(ens.left)
    n = rng.uniform(1.0, 5.0, size=(n_nodes, 2))
    S = rng.uniform(0.0, 1.0, size=(2, n_nodes, 2)) * n
    st = NodeStats(n=n, S=S, Q=None)
    for name in ("mdi_oob", "naive_oob", "pg2"):
        entry = registry.get(name)
        np.testing.assert_array_equal(
            compute(name, ens, st, classification=True),
            entry.formula(ens, st, True, entry.params_for({}), None))
    np.testing.assert_array_equal(
        compute("pg_oob", ens, st, classification=True, alpha=0.5, lam=1.0),
        compute("pg2", ens, st, classification=True))
    with pytest.raises(ValueError, match="not computed from node statistics"):
        compute("shap_oob", ens, st, classification=True)
    boost = NodeStats(n=n, S=S[:1], Q=None, H=n, R=n)
    with pytest.raises(ValueError, match=r"'pg1' .*forests only; boosting models support "
                                         r"mdi, mdi_oob"):
        compute("pg1", ens, boost, classification=False)


@pytest.mark.parametrize("kwargs, msg", [
    (dict(source="rows"), "source must be one of"),
    (dict(kinds=("tree",)), "kinds must be"),
    (dict(formula=None), "needs a formula"),
    (dict(params=("beta",)), "needs check_params"),
    (dict(source=registry.CONTRIBUTIONS), "contributions='shap' or 'saabas'"),
])
def test_malformed_entries_are_refused(kwargs, msg):
    base = dict(name="toy", description="d", paper="p", formula=_split_share)
    with pytest.raises(ValueError, match=msg):
        Measure(**{**base, **kwargs})
    with pytest.raises(ValueError, match="no measure named 'toy'"):
        registry.unregister("toy")
