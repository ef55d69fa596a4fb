"""treeimp.load on damaged model files of every format: a ValueError or TypeError that
names the file, or a model that predicts; never another exception, a crash or a hang.

The files are tiny XGBoost (.json, .ubj), LightGBM (.txt) and CatBoost (.json) models
trained here (``tests/fuzz/mutate.py``), damaged blindly and knowing the format (edge
values in place of numbers, dropped list elements and keys, overwritten UBJSON
lengths, ...). ``tests/fuzz/fuzz_models.py`` runs many more cases in subprocesses and
also compares the margins with the libraries'.
"""

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treeimp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fuzz.mutate import build_seeds, fmt_of, mutate  # noqa: E402

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
pytest.importorskip("catboost")

SECONDS = 20.0  # per load: a hang fails the test (these small files load far faster)
SEEDS = {}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    if not SEEDS:
        folder = tmp_path_factory.mktemp("seeds")
        for name, path in build_seeds(str(folder)).items():
            SEEDS[name] = Path(path).read_bytes()
    return SEEDS


def _check_load(path):
    t0 = time.monotonic()
    try:
        ens = treeimp.load(path)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert msg and len(msg) < 2000, msg
        assert "Traceback" not in msg
    else:
        if ens.n_features <= 1000:
            X = np.random.default_rng(0).normal(size=(8, ens.n_features))
            X[0] = np.nan
            out = ens.predict_raw(X, n_jobs=1)
            assert out.shape == (8, ens.n_outputs)
    assert time.monotonic() - t0 < SECONDS


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(which=st.integers(0, 10**6), seed=st.integers(0, 2**32 - 1))
def test_damaged_model_files(seeds, tmp_path, which, seed):
    names = sorted(seeds)
    name = names[which % len(names)]
    rng = np.random.default_rng(seed)
    damaged, _ = mutate(seeds[name], fmt_of(name), rng)
    ext = {"xgb_ubj": ".ubj", "lgbm": ".txt"}.get(fmt_of(name), ".json")
    path = tmp_path / f"m{ext}"
    path.write_bytes(damaged)
    _check_load(path)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=st.sampled_from([b"{", b"{L", b'{"ctr_data"', b'{"features_info"', b"tree\n",
                             b"tree\nversion=v4\n", b'{"learner"']),
       body=st.binary(max_size=300))
def test_random_bytes_behind_each_format_header(tmp_path, head, body):
    path = tmp_path / "m.bin"
    path.write_bytes(head + body)
    _check_load(path)
