"""Model files saved by older XGBoost / LightGBM versions load and predict like those versions.

``tests/fixtures/<library>-<version>/`` holds tiny models saved by that version with the
rows and the raw margins / ``pred_leaf`` that version computed on them (written by
``tests/fixtures/make_fixtures.py``, run in a throwaway environment per version). The
files are read by ``treeimp.load`` in a subprocess where importing xgboost or lightgbm
fails, so nothing here depends on the installed library versions: a format change
between versions (a new base_score form, category storage, ...) shows up as a failure
naming the version and file.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
# versions the fixtures must cover (model-formats.md trap 7): one per supported minor
EXPECTED = {
    "xgboost": ["2.0.3", "2.1.4", "3.0.5", "3.1.3", "3.2.0", "3.3.0", "3.4.1"],
    "lightgbm": ["4.0.0", "4.3.0", "4.5.0", "4.6.0", "4.7.0"],
}
OBJECTIVES = {"binary": "logistic", "softprob": "softmax", "multiclass": "softmax",
              "npt2": "squared_error", "dart": "squared_error", "poisson": "poisson",
              "expectile": "expectile_stack"}


def _objective(man, name):
    """The canonical objective a fixture model must parse to (None: not checked)."""
    if name == "quantile":  # XGBoost 3.4 fits it with a smoothed surrogate (losses.py)
        v = tuple(int(x) for x in man["version"].split(".")[:2])
        return "smoothed_quantile" if v >= (3, 4) else "quantiles"
    return OBJECTIVES.get(name)


def _manifests():
    return {d.name: json.loads((d / "manifest.json").read_text())
            for d in sorted(FIXTURES.iterdir()) if (d / "manifest.json").is_file()}


MANIFESTS = _manifests()
CASES = [(tag, name, file) for tag, man in MANIFESTS.items()
         for name, model in man["models"].items() for file in model["files"]]

_LOADER = textwrap.dedent("""
    import json, sys, warnings
    sys.modules["xgboost"] = None  # any import of xgboost or lightgbm now fails
    sys.modules["lightgbm"] = None
    import numpy as np
    import treeimp
    out = {}
    for model, rows, dest in json.loads(sys.argv[1]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ens = treeimp.load(model)
        X = np.load(rows)["rows"]
        np.savez(dest, margin=ens.predict_raw(X), nodes=ens.apply(X))
        out[model] = {"objective": ens.objective.name, "n_outputs": ens.n_outputs,
                      "n_trees": ens.n_trees, "categories": ens.feature_categories,
                      "n_categorical_splits": int(ens.is_categorical.sum())}
    assert sys.modules["xgboost"] is None and sys.modules["lightgbm"] is None
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """{(tag, file): (outputs npz, info)} from one subprocess without xgboost/lightgbm."""
    d = tmp_path_factory.mktemp("fixture_outputs")
    jobs = []
    for i, (tag, name, file) in enumerate(CASES):
        npz = FIXTURES / tag / MANIFESTS[tag]["models"][name]["npz"]
        jobs.append((str(FIXTURES / tag / file), str(npz), str(d / f"out{i}.npz")))
    proc = subprocess.run([sys.executable, "-c", _LOADER, json.dumps(jobs)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout)
    return {(tag, file): (np.load(job[2]), info[job[0]])
            for (tag, _, file), job in zip(CASES, jobs)}


def _lightgbm_leaf_numbers(ens_left_is_leaf, tree_offsets):
    """Global node -> LightGBM's leaf number k (as in test_parse_lightgbm._leaf_numbers):
    the leaves of each tree in node order are LightGBM's leaves 0, 1, ..."""
    seen = np.cumsum(ens_left_is_leaf)
    before = np.concatenate([[0], seen])[tree_offsets[:-1]]
    return seen - 1 - np.repeat(before, np.diff(tree_offsets))


def test_every_supported_version_has_fixtures():
    have = {}
    for man in MANIFESTS.values():
        have.setdefault(man["library"], []).append(man["version"])
    for lib, versions in EXPECTED.items():
        assert sorted(have.get(lib, [])) == sorted(versions), lib
    for tag, man in MANIFESTS.items():
        assert tag == f"{man['library']}-{man['version']}"


@pytest.mark.parametrize("tag,name,file", CASES, ids=[f"{t}/{f}" for t, _, f in CASES])
def test_fixture_margin_and_leaves(loaded, tag, name, file):
    man = MANIFESTS[tag]
    want = np.load(FIXTURES / tag / man["models"][name]["npz"])
    got, info = loaded[(tag, file)]
    margin, leaf = want["margin"], want["leaf"]
    assert info["n_outputs"] == margin.shape[1], f"{tag}/{file}: outputs"
    assert info["n_trees"] == leaf.shape[1], f"{tag}/{file}: trees"
    if _objective(man, name) is not None:
        assert info["objective"] == _objective(man, name)
    if man["library"] == "xgboost":
        # XGBoost sums in float32: equal to float32 rounding of the margin
        atol = 1e-6 * max(1.0, float(np.abs(margin).max()))
        np.testing.assert_allclose(got["margin"], margin, rtol=1e-6, atol=atol,
                                   err_msg=f"{tag}/{file}")
        np.testing.assert_array_equal(got["nodes"], leaf, err_msg=f"{tag}/{file}")
    else:
        atol = 1e-9 * max(1.0, float(np.abs(margin).max()))
        np.testing.assert_allclose(got["margin"], margin, rtol=1e-9, atol=atol,
                                   err_msg=f"{tag}/{file}")
        import treeimp

        ens = treeimp.load(FIXTURES / tag / file)
        numbers = _lightgbm_leaf_numbers(ens.is_leaf, ens.tree_offsets)
        ours = numbers[got["nodes"] + ens.tree_offsets[:-1][None, :]]
        np.testing.assert_array_equal(ours, leaf, err_msg=f"{tag}/{file}")
    if man["models"][name]["categories"] is not None:
        assert info["n_categorical_splits"] > 0
        stored = info["categories"]
        assert stored is None or stored == man["models"][name]["categories"], stored


def _cat_cases():
    return [c for c in CASES if MANIFESTS[c[0]]["models"][c[1]]["categories"] is not None]


@pytest.mark.parametrize("tag,name,file", _cat_cases(),
                         ids=[f"{t}/{f}" for t, _, f in _cat_cases()])
def test_fixture_categorical_frame(tag, name, file):
    """A DataFrame with the training labels predicts like the codes the library was given;
    where the file stores the labels, also with the categories in another order."""
    import treeimp

    model = MANIFESTS[tag]["models"][name]
    want = np.load(FIXTURES / tag / model["npz"])
    rows, margin = want["rows"], want["margin"]
    labels = model["categories"]
    cat_cols = [j for j, lv in enumerate(labels) if lv is not None]
    ok = np.all([np.isnan(rows[:, j]) | np.isin(rows[:, j], np.arange(len(labels[j])))
                 for j in cat_cols], axis=0)
    rows, margin = rows[ok], margin[ok]
    ens = treeimp.load(FIXTURES / tag / file)
    orders = [lambda lv: lv]
    if ens.feature_categories is not None:
        orders.append(lambda lv: lv[::-1])
    tol = 1e-6 if MANIFESTS[tag]["library"] == "xgboost" else 1e-9
    for order in orders:
        cols = {}
        for j in range(rows.shape[1]):
            if labels[j] is None:
                cols[f"c{j}"] = rows[:, j]
                continue
            values = [None if np.isnan(c) else labels[j][int(c)] for c in rows[:, j]]
            cols[f"c{j}"] = pd.Categorical(values, categories=order(labels[j]))
        frame = pd.DataFrame(cols)
        if ens.feature_names is not None:
            frame.columns = ens.feature_names
        atol = tol * max(1.0, float(np.abs(margin).max()))
        np.testing.assert_allclose(ens.predict_raw(frame), margin, rtol=tol, atol=atol)


@pytest.mark.parametrize("tag,name,file", CASES, ids=[f"{t}/{f}" for t, _, f in CASES])
def test_fixture_node_weights(tag, name, file):
    """Every split's training weight is its children's sum and positive at the root.
    LightGBM < 4.6 saves the root's internal_weight as 0: read as is, the in-sample
    fractions W_m / W_root (UFI, penalized Gini) were all 0."""
    import treeimp

    ens = treeimp.load(FIXTURES / tag / file)
    split = ~ens.is_leaf
    children = ens.weight[ens.left[split]] + ens.weight[ens.right[split]]
    np.testing.assert_allclose(ens.weight[split], children, rtol=1e-4, atol=1e-6)
    assert np.all(ens.weight[ens.tree_offsets[:-1]] > 0)
