"""``import treeimp`` loads its public names lazily (PEP 562): checked in fresh processes,
since this test session has long imported every stage."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

# packages no public name needs at import; the first five never load before their use
DEFERRED = ("xgboost", "lightgbm", "catboost", "dask", "matplotlib", "pandas", "sklearn",
            "scipy", "numba")


def _run(code):
    """Run ``code`` in a fresh interpreter with the worktree on the path; its stdout."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg",
                               "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_loads_no_stage_and_no_heavy_package():
    out = _run("import sys, treeimp\n"
               "print(sorted(m for m in sys.modules if m.startswith('treeimp')))\n"
               f"print(sorted(p for p in {DEFERRED!r} if p in sys.modules))\n")
    assert out.split("\n")[:2] == ["['treeimp']", "[]"]


def test_every_public_name_resolves_and_is_listed():
    out = _run("import importlib, inspect, treeimp\n"
               "names = list(treeimp.__all__)\n"
               "assert names and set(names) <= set(dir(treeimp)), names\n"
               "assert '__version__' in dir(treeimp) and treeimp.__version__\n"
               "for n in names:\n"
               "    ns = {}\n"
               "    exec(f'from treeimp import {n} as x', ns)\n"
               "    x = ns['x']\n"
               "    assert x is getattr(treeimp, n), n\n"
               "    home = importlib.import_module(x.__module__)\n"
               "    assert getattr(home, n) is x, n\n"
               "    assert inspect.isclass(x) or inspect.isfunction(x), n\n"
               "print(len(names))\n")
    assert int(out) == 18


def test_unknown_names_raise_attribute_error_and_stages_resolve():
    out = _run("import treeimp\n"
               "try:\n"
               "    treeimp.no_such_name\n"
               "except AttributeError as e:\n"
               "    print(e)\n"
               "import treeimp.measures.registry as r\n"
               "print(treeimp.measures.registry is r)\n")
    assert out.split("\n")[:2] == ["module 'treeimp' has no attribute 'no_such_name'", "True"]


_FOREST = ("import numpy as np\n"
           "from sklearn.ensemble import RandomForestRegressor\n"
           "rng = np.random.default_rng(0)\n"
           "X = rng.normal(size=(60, 3))\n"
           "model = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0)\n"
           "model.fit(X, X[:, 0] + rng.normal(size=60))\n"
           # the number of splits per tree, from scikit-learn's own tree arrays
           "truth = [int((e.tree_.children_left >= 0).sum()) for e in model.estimators_]\n")


def test_splits_of_a_parsed_model_without_the_measures_loaded():
    out = _run("import sys\n" + _FOREST +
               "import treeimp\n"
               "ens = treeimp.parse(model)\n"
               "print('treeimp.measures.formulas' in sys.modules)\n"
               "s = ens.splits\n"
               "print(list(np.diff(s.tree_splits)) == truth, len(s.m) == sum(truth))\n")
    assert out.split("\n")[:2] == ["False", "True True"]


def test_splits_after_importing_only_the_ensemble_module():
    out = _run(_FOREST +
               "import treeimp.model.ensemble\n"
               "from treeimp.parsers import parse\n"
               "ens = parse(model)\n"
               "assert isinstance(ens, treeimp.model.ensemble.TreeEnsemble)\n"
               "s = ens.splits\n"
               "print(list(np.diff(s.tree_splits)) == truth, len(s.m) == sum(truth))\n")
    assert out.split("\n")[0] == "True True"
