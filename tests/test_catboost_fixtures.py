"""CatBoost JSON model files saved by older CatBoost releases load and predict like them.

``tests/fixtures/catboost-<version>/`` holds tiny models saved by that version, with the
rows and the raw predictions / ``calc_leaf_indexes`` that version computed on them
(written by ``tests/fixtures/make_catboost_fixtures.py``). They are read by
``treeimp.load`` in a subprocess where importing catboost fails.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = ["1.2.7", "1.2.10"]
OBJECTIVES = {"regression": "squared_error", "binary": "logistic", "multiclass": "softmax",
              "depthwise": "squared_error"}
CASES = [(d.name, name, spec) for d in sorted(FIXTURES.glob("catboost-*"))
         for name, spec in json.loads((d / "cases.json").read_text())["models"].items()]

_LOADER = textwrap.dedent("""
    import json, sys
    sys.modules["catboost"] = None  # any import of catboost now fails
    import numpy as np, pandas as pd
    import treeimp
    out = {}
    for model, rows, dest in json.loads(sys.argv[1]):
        ens = treeimp.load(model)
        z = np.load(rows)
        cols, is_cat = list(z["columns"]), z["is_cat"]
        num, cat = iter(z["num"].T), iter(z["cat"].T)
        X = pd.DataFrame({c: (next(cat) if k else next(num)) for c, k in zip(cols, is_cat)})
        np.savez(dest, margin=ens.predict_raw(X), nodes=ens.apply(X),
                 left=ens.left, right=ens.right, offsets=ens.tree_offsets)
        out[model] = {"objective": ens.objective.name, "n_outputs": ens.n_outputs,
                      "model_name": ens.model_name}
    assert sys.modules["catboost"] is None
    print(json.dumps(out))
""")


def test_every_expected_version_has_fixtures():
    tags = {tag for tag, _, _ in CASES}
    assert tags == {f"catboost-{v}" for v in EXPECTED}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    d = tmp_path_factory.mktemp("catboost_fixture_outputs")
    jobs = [(str(FIXTURES / tag / spec["file"]), str(FIXTURES / tag / spec["npz"]),
             str(d / f"out{i}.npz")) for i, (tag, _, spec) in enumerate(CASES)]
    proc = subprocess.run([sys.executable, "-c", _LOADER, json.dumps(jobs)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout)
    return {(tag, name): (np.load(job[2]), info[job[0]], np.load(job[1]))
            for (tag, name, _), job in zip(CASES, jobs)}


def _catboost_leaves(out, n_outputs):
    """treeimp's local leaf node per (row, normal-form tree) -> CatBoost's leaf index per
    (row, CatBoost tree), by ``catboost_leaf_ids`` of the parsed structure."""
    from treeimp.parsers.catboost import catboost_leaf_ids

    class _Structure:  # the fields catboost_leaf_ids reads
        left, tree_offsets = out["left"], out["offsets"]
        right = out["right"]
        n_nodes, n_trees = len(out["left"]), len(out["offsets"]) - 1

    ids = catboost_leaf_ids(_Structure)
    cols = np.arange(0, _Structure.n_trees, n_outputs)
    return ids[out["offsets"][cols] + out["nodes"][:, cols]]


@pytest.mark.parametrize("tag,name", [(t, n) for t, n, _ in CASES])
def test_fixture_predicts_like_its_catboost(loaded, tag, name):
    out, info, ref = loaded[(tag, name)]
    assert info["objective"] == OBJECTIVES[name], tag
    assert info["model_name"] == "catboost boosting"
    np.testing.assert_allclose(out["margin"], ref["margin"], rtol=1e-12, atol=1e-12,
                               err_msg=f"{tag} {name}")
    leaves = _catboost_leaves(out, info["n_outputs"])
    if name != "depthwise":  # symmetric: leaf L is node 2^D - 1 + L
        D = int(np.log2(out["offsets"][1] - out["offsets"][0] + 1)) - 1
        np.testing.assert_array_equal(out["nodes"][:, ::info["n_outputs"]] - (2**D - 1),
                                      ref["leaf"])
    np.testing.assert_array_equal(leaves, ref["leaf"], err_msg=f"{tag} {name}")
