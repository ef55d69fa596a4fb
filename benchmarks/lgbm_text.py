"""treeimp's parse of a LightGBM model against LightGBM's own reading of its text.

A 500-tree, 63-leaf LGBMRegressor on 20 features (5,000 rows); in one process, rounds
of interleaved calls (each timed call after an untimed one), medians of wall and CPU
(``time.process_time``, all threads of the process) time:

* ``parse_lightgbm_text(text)`` and ``treeimp.parse(path)`` (the saved file),
* ``lightgbm.Booster(model_str=text)`` (LightGBM's ``model_from_string``),
* ``treeimp.parse(model)`` of the live LGBMRegressor (its text included),
* ``booster.model_to_string()``.

Usage: ``PYTHONPATH=. python benchmarks/lgbm_text.py [rounds]`` (default 9). The load
average is printed before and after: on a shared machine the wall times follow it.
"""

import os
import statistics
import sys
import tempfile
import time

import lightgbm as lgb
import numpy as np

import treeimp
from treeimp.parsers.lgbm import parse_lightgbm_text


def main(rounds=9):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 20))
    y = X[:, 0] + np.sin(X[:, 1]) + 0.3 * rng.normal(size=5000)
    model = lgb.LGBMRegressor(n_estimators=500, num_leaves=63, verbose=-1).fit(X, y)
    booster = model.booster_
    text = booster.model_to_string(num_iteration=-1)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.txt")
        with open(path, "w") as f:
            f.write(text)
        cases = {
            "treeimp parse_lightgbm_text(text)": lambda: parse_lightgbm_text(text),
            "treeimp.parse(path)": lambda: treeimp.parse(path),
            "lightgbm.Booster(model_str=text)": lambda: lgb.Booster(model_str=text),
            "treeimp.parse(LGBMRegressor)": lambda: treeimp.parse(model),
            "booster.model_to_string()": lambda: booster.model_to_string(num_iteration=-1),
        }
        print(f"Python {sys.version.split()[0]}, lightgbm {lgb.__version__}, treeimp "
              f"{treeimp.__version__}; text {len(text):,} bytes; load {os.getloadavg()}")
        for call in cases.values():
            call()
        times = {name: ([], []) for name in cases}
        for _ in range(rounds):
            for name, call in cases.items():
                call()
                wall, cpu = time.perf_counter(), time.process_time()
                call()
                times[name][0].append(time.perf_counter() - wall)
                times[name][1].append(time.process_time() - cpu)
    median = {name: (statistics.median(w), statistics.median(c))
              for name, (w, c) in times.items()}
    for name, (w, c) in median.items():
        print(f"{name:36s} wall {1e3 * w:6.1f} ms  CPU {1e3 * c:6.1f} ms")
    w0, c0 = median["lightgbm.Booster(model_str=text)"]
    for name in ("treeimp parse_lightgbm_text(text)", "treeimp.parse(path)",
                 "treeimp.parse(LGBMRegressor)"):
        w, c = median[name]
        print(f"{name} / model_from_string: wall {w / w0:.2f}x, CPU {c / c0:.2f}x")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
