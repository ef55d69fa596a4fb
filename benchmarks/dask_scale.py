"""Explaining held-out sets on a Dask cluster: how time and memory scale with rows and
workers.

A ``distributed.LocalCluster`` of 1 and then 2 worker processes (one thread each) explains
held-out sets of ``--rows`` rows x ``--features`` float32 features. The rows are
generated IN the workers (``dask.array`` random numbers with a fixed seed, chunk by
chunk; the client never holds them), and explained where they are: each partition
becomes node statistics on its worker, statistics are added up in a tree reduction and
finalised on the client. Models (trained on a small in-memory sample of the same
design): XGBoost (``--rounds`` rounds, depth ``--depth``) and a scikit-learn
RandomForest (``--trees`` trees), both explained on held-out rows.

Reported per model, worker count and row count: wall time of ``treeimp.explain`` (the
partition-length pass included; dask arrays know their chunk sizes, so there is none
here), rows per second per worker, each worker's resident memory before the run and its
peak during the run (Linux VmHWM, reset before the run; the largest over workers). The
peak should stay flat as rows grow: a worker holds a few partitions and at most
``split_every`` partitions' statistics at a time. For
comparison, the in-memory ``treeimp.explain`` on the first ``--in-memory-max`` row
counts (numpy arrays of the same design) with 1 and 2 threads.

    python benchmarks/dask_scale.py                      # 1M, 4M, 16M rows
    python benchmarks/dask_scale.py --rows 200000        # quick check

Numbers and the extrapolation to 100 workers are in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import treeimp  # noqa: E402
from treeimp.dask.explain import explain_dask  # noqa: E402

METHODS = ("mdi_oob", "ufi")


def design_numpy(n, p, seed):
    """Training / in-memory rows: y depends on the first 5 features, the rest noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p), dtype=np.float32)
    return X, _target(X, rng.standard_normal(n, dtype=np.float32))


def design_dask(n, p, seed, chunk_rows):
    """The same design as dask arrays, generated chunk by chunk in the workers."""
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.standard_normal((n, p), chunks=(chunk_rows, p), dtype=np.float32)
    noise = rng.standard_normal(n, chunks=chunk_rows, dtype=np.float32)
    return X, _target(X, noise)


def _target(X, noise):
    return (X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + 0.5 * X[:, 3] - 0.25 * X[:, 4]
            + 0.5 * noise)


def train_models(args):
    import xgboost as xgb
    from sklearn.ensemble import RandomForestRegressor

    X, y = design_numpy(args.train_rows, args.features, seed=1)
    models = {}
    if "xgboost" in args.models:
        models["xgboost"] = xgb.XGBRegressor(
            n_estimators=args.rounds, max_depth=args.depth, learning_rate=0.05,
            tree_method="hist", n_jobs=1, random_state=0).fit(X, y)
    if "forest" in args.models:
        models["forest"] = RandomForestRegressor(
            n_estimators=args.trees, min_samples_leaf=5, max_features=0.3, n_jobs=1,
            random_state=0).fit(X, y)
    return models


def _reset_peak_rss():
    """Start a new peak-memory measurement of this process (Linux: writing 5 to
    /proc/self/clear_refs resets VmHWM, the peak resident set size)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _peak_rss_mb():
    """Peak resident memory of this process since the last reset (VmHWM), in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise OSError("no VmHWM in /proc/self/status (peak memory needs Linux)")


def run_cluster(models, n_workers, args):
    from distributed import Client, LocalCluster

    rows_out = []
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=args.memory_limit) as cluster, \
            Client(cluster) as client:
        for name, model in models.items():
            ens = treeimp.parse(model)
            for n in args.rows:
                # warm-up explain on small chunks: numba's cached kernels loaded
                Xw, yw = design_dask(2 * n_workers * 1000, args.features, 7, 1000)
                treeimp.explain(ens, Xw, yw, methods=METHODS, random_state=0)
                client.run(_reset_peak_rss)
                start_mb = client.run(_peak_rss_mb)
                X, y = design_dask(n, args.features, seed=2, chunk_rows=args.chunk_rows)
                t = time.perf_counter()
                res = explain_dask(treeimp.Explainer(ens), X, y, methods=METHODS,
                                   random_state=0, split_every=args.split_every)
                wall = time.perf_counter() - t
                peak = client.run(_peak_rss_mb)
                rows_out.append({
                    "model": name, "where": f"dask {n_workers} worker"
                    + ("s" if n_workers > 1 else ""), "split_every": args.split_every,
                    "rows": n,
                    "wall (s)": round(wall, 4),
                    "rows/s per worker": round(n / wall / n_workers),
                    "worker RSS at start (MB)": round(max(start_mb.values())),
                    "worker peak RSS (MB)": round(max(peak.values())),
                    "top feature": res.ranking()[0]})
                print(rows_out[-1], flush=True)
    return rows_out


def transfer_sizes(models, args):
    """What travels: the pickled Explainer (scattered once to every worker) and one
    partition's pickled statistics (what each partition sends into the reduction)."""
    import pickle

    X, y = design_numpy(args.chunk_rows, args.features, seed=3)
    out = {}
    for name, model in models.items():
        ex = treeimp.Explainer(model, n_jobs=1)
        stats = ex.accumulate(X, y, rows=range(len(X)), random_state=0)
        out[name] = {"explainer (MB)": round(len(pickle.dumps(ex)) / 2**20, 2),
                     "statistics per partition (MB)":
                         round(len(pickle.dumps(stats)) / 2**20, 2),
                     "statistics in memory (MB)": round(stats._array.nbytes / 2**20, 2),
                     "partition rows": args.chunk_rows}
        print(name, out[name], flush=True)
    return out


def run_in_memory(models, args):
    rows_out = []
    for n in [r for r in args.rows if r <= args.in_memory_max]:
        X, y = design_numpy(n, args.features, seed=2)
        for name, model in models.items():
            ens = treeimp.parse(model)
            treeimp.explain(ens, X[:2000], y[:2000], methods=METHODS, random_state=0)
            for threads in (1, 2):
                t = time.perf_counter()
                treeimp.explain(ens, X, y, methods=METHODS, random_state=0, n_jobs=threads)
                wall = time.perf_counter() - t
                rows_out.append({"model": name, "where": f"in memory, {threads} thread"
                                 + ("s" if threads > 1 else ""), "split_every": "",
                                 "rows": n,
                                 "wall (s)": round(wall, 4),
                                 "rows/s per worker": round(n / wall / threads),
                                 "worker RSS at start (MB)": "",
                                 "worker peak RSS (MB)": "", "top feature": ""})
                print(rows_out[-1], flush=True)
        del X, y
    return rows_out


def to_markdown(rows):
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:,}" if isinstance(r[c], int) else str(r[c])
                                       for c in cols) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=lambda s: [int(float(v)) for v in s.split(",")],
                    default=[1_000_000, 4_000_000, 16_000_000],
                    help="held-out row counts, comma-separated (default 1e6,4e6,16e6)")
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--workers", type=lambda s: [int(v) for v in s.split(",")],
                    default=[1, 2], help="worker processes per cluster (default 1,2)")
    ap.add_argument("--chunk-rows", type=int, default=250_000,
                    help="rows per partition (default 250000: 50 MB of float32; at most "
                    "1/8 of the smallest --rows)")
    ap.add_argument("--split-every", type=int, default=4,
                    help="fan-in of the reduction of partition statistics (default 4, "
                    "explain_dask's)")
    ap.add_argument("--train-rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--models", default="xgboost,forest")
    ap.add_argument("--in-memory-max", type=int, default=4_000_000,
                    help="in-memory comparison up to this many rows (default 4e6)")
    ap.add_argument("--memory-limit", default="4GiB", help="per worker")
    ap.add_argument("--no-in-memory", action="store_true",
                    help="skip the in-memory comparison")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",")]
    # at least 8 partitions of the smallest set, so that 2 workers share the work
    args.chunk_rows = max(1000, min(args.chunk_rows, min(args.rows) // 8))
    models = train_models(args)
    sizes = transfer_sizes(models, args)
    rows = []
    for w in args.workers:
        rows += run_cluster(models, w, args)
    if not args.no_in_memory:
        rows += run_in_memory(models, args)
    print(to_markdown(rows))
    print(to_markdown([{"model": k, **v} for k, v in sizes.items()]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": rows, "sizes": sizes}, fh, indent=1)


if __name__ == "__main__":
    main()
