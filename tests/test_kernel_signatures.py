"""A typical call compiles each numba kernel for one type signature only.

Every extra signature is a whole compilation more on the first call in a fresh
environment (empty numba cache), e.g. a kernel called once with a contiguous and once
with a strided array. Checked in a fresh process (this test session calls the kernels
with other inputs too): after explain of an XGBoost model and of a forest on float32
rows, every kernel holds one signature: those the calls ran from Python (compiled or
loaded from the cache) and, when the cache was empty, the helpers compiled with them.
The fused split-sum kernels are the exception by design: their last two arguments
(boosting, forests: one of them None) drop the other family's ufi forms, so each family
compiles its own (smaller) version, and one process that explains both holds two.
"""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

CODE = r"""
import importlib, json, pkgutil
import numpy as np
import xgboost as xgb
from numba.core.registry import CPUDispatcher
from sklearn.ensemble import RandomForestRegressor
import treeimp
import treeimp.kernels

rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)).astype(np.float32)
y = X[:, 0] + rng.normal(size=300)
for model in (xgb.XGBRegressor(n_estimators=5, max_depth=3, n_jobs=1).fit(X, y),
              RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)):
    treeimp.explain(model, X[:150], y[:150])
out = {}
for info in pkgutil.iter_modules(treeimp.kernels.__path__):
    mod = importlib.import_module("treeimp.kernels." + info.name)
    for name, obj in vars(mod).items():
        if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
            out[info.name + "." + name] = [str(s) for s in obj.signatures]
print(json.dumps(out))
"""


def test_typical_calls_compile_each_kernel_once(tmp_path):
    # an empty numba cache: every kernel and helper the calls need is compiled, and so
    # listed (one loaded from a cache lists no helpers)
    done = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True,
                          text=True, timeout=900,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "NUMBA_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    sigs = json.loads(done.stdout.strip().splitlines()[-1])
    used = {name: s for name, s in sigs.items() if s}
    # the calls above ran kernels of parsing, structure and statistics
    assert {"ubjson_index.member_rows", "staged.staged_block_stats"} <= set(used), used
    several = {name: s for name, s in used.items() if len(s) > 1}
    by_family = {"fused_measures.leaf_split_sums", "fused_measures.tree_terms"}
    assert set(several) <= by_family, several
    for name in by_family:
        # one per family: the same arguments but the last two, (bool, none) for boosting
        # and (none, bool) for a forest
        sigs = sorted(several.get(name, []))
        assert len(sigs) == 2, (name, used.get(name))
        assert [s.rsplit(", ", 2)[0] for s in sigs] == [sigs[0].rsplit(", ", 2)[0]] * 2, sigs
        assert [s.rsplit(", ", 2)[1:] for s in sigs] == [["bool", "none)"],
                                                           ["none", "bool)"]], sigs
    # None arguments keep what these calls do not run out of the compilation: the
    # other objectives' terms (squared error here), the walks of trees that are not
    # plain (both models) and of trees without a full-tree layout (the booster's)
    never = {"staged.stage_terms", "staged._logistic_stage_terms",
             "gradients.set_stage_params", "route.walk_batch"}
    assert not never & set(used), sorted(never & set(used))
    assert "full_trees.full_tree_layout" in used and "route.walk_plain" in used, used
