"""What the first call compiles: numba's compilations of one treeimp call, kernel by kernel.

Runs one call in this process with an empty numba cache (a temporary NUMBA_CACHE_DIR,
set before numba is imported) and prints the wall and CPU time of the first and the
second call, then per compiled function (treeimp's kernels and the numba library
functions they pull in) the CPU time of its compilations without those of the
functions it calls ("self") and with them ("incl."), how many type signatures it was
compiled for, and the kernels called from Python ("top level"). CPU times, because
compilation runs on one thread and the wall time of a shared machine depends on its
load. Numba's event API (``numba.core.event``, "numba:compile") reports the
compilations; a function inlined by numba (``inline="always"``) is part of its caller.

Usage: python benchmarks/compile_profile.py [--model xgb_regressor|xgb_classifier|forest]
       [--call explain|contributions] [--rows 1000] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="xgb_regressor",
                   choices=("xgb_regressor", "xgb_classifier", "forest"))
    p.add_argument("--call", default="explain", choices=("explain", "contributions"))
    p.add_argument("--rows", type=int, default=1000, help="training and held-out rows each")
    p.add_argument("--top", type=int, default=25, help="compiled functions listed")
    return p.parse_args(argv)


class CompileTimes:
    """Listener of numba's "numba:compile" events: CPU time per compiled function."""

    def __init__(self):
        self.stack = []  # [name, start, CPU time of nested compilations]
        self.self_s = collections.defaultdict(float)
        self.incl_s = collections.defaultdict(float)
        self.signatures = collections.defaultdict(int)
        self.top = collections.defaultdict(float)

    def on_start(self, event):
        fn = event.data["dispatcher"].py_func
        self.stack.append([f"{fn.__module__}.{fn.__qualname__}", time.process_time(), 0.0])

    def on_end(self, event):
        name, start, nested = self.stack.pop()
        spent = time.process_time() - start
        self.incl_s[name] += spent
        self.self_s[name] += spent - nested
        self.signatures[name] += 1
        if self.stack:
            self.stack[-1][2] += spent
        else:
            self.top[name] += spent


def main(argv=None):
    args = parse_args(argv)
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="treeimp-cold-")
    t0 = time.perf_counter()
    import numpy as np

    import treeimp
    import_s = time.perf_counter() - t0
    from numba.core import event

    times = CompileTimes()

    class Listener(event.Listener):
        def on_start(self, ev):
            times.on_start(ev)

        def on_end(self, ev):
            times.on_end(ev)

    event.register("numba:compile", Listener())

    rng = np.random.default_rng(0)
    n = args.rows
    X = rng.normal(size=(2 * n, 10)).astype(np.float32)
    if args.model == "xgb_classifier":
        y = (X[:, 0] + rng.logistic(size=2 * n) > 0).astype(np.int32)
    else:
        y = X[:, 0] + rng.normal(size=2 * n)
    if args.model == "forest":
        from sklearn.ensemble import RandomForestRegressor
        model = RandomForestRegressor(n_estimators=10, min_samples_leaf=5, random_state=0)
    else:
        import xgboost as xgb
        cls = xgb.XGBClassifier if args.model == "xgb_classifier" else xgb.XGBRegressor
        model = cls(n_estimators=20, max_depth=6, tree_method="hist")
    model.fit(X[:n], y[:n])

    def call():
        if args.call == "explain":
            treeimp.explain(model, X[n:], y[n:])
        else:
            treeimp.contributions(model, X[n:])

    cpu, wall = time.process_time(), time.perf_counter()
    call()
    first_cpu, first_wall = time.process_time() - cpu, time.perf_counter() - wall
    wall = time.perf_counter()
    call()
    second_wall = time.perf_counter() - wall
    print(f"{args.model} {args.call}, {n} rows: import treeimp {import_s:.3f} s; first call "
          f"{first_wall:.2f} s wall, {first_cpu:.2f} s CPU; second call {second_wall:.3f} s")
    print(f"compilations of kernels called from Python (CPU s, {sum(times.top.values()):.2f} "
          "in all):")
    for name, s in sorted(times.top.items(), key=lambda kv: -kv[1]):
        print(f"  {s:6.2f}  {name}")
    print(f"compiled functions, the {args.top} costliest (CPU s):")
    print(f"  {'self':>6s}  {'incl.':>6s}  {'sigs':>4s}  function")
    for name, s in sorted(times.self_s.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {s:6.2f}  {times.incl_s[name]:6.2f}  {times.signatures[name]:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
