"""Fuzz ``treeimp.load`` with damaged model files, each case in a worker subprocess.

    PYTHONPATH=. python tests/fuzz/fuzz_models.py --cases 10000 --out fuzz-out

Seeds are tiny XGBoost (.json, .ubj), LightGBM (.txt) and CatBoost (.json) models
trained here (``mutate.build_seeds``); each case damages one seed (``mutate.mutate``,
seeded by the case number, so a case can be replayed with ``--replay N``) and hands
the file to a worker process, which answers within ``--timeout`` seconds or is killed.
Outcomes of treeimp's part:

* ``clean_error``: a ValueError or TypeError (the message is kept);
* ``wrapped_internal``: a ValueError whose message only names an internal exception
  (``files.py`` reports a KeyError, IndexError, ... inside a parser as a ValueError
  "... KeyError: ..."): no crash, but the message does not say what is wrong;
* ``loads``: the file loads and ``predict_raw`` runs on test rows;
* ``loads_wide``: the file loads with more than 100,000 features (not predicted);
* ``internal``: any other exception type (a traceback);
* ``crash``: the worker died (a signal: segfault, abort);
* ``hang``: no answer within the time limit.

For files that load, the library loads the same file too (xgboost.Booster,
lightgbm.Booster, catboost.CatBoost) and both margins are compared on the same rows:
``mismatch`` when they differ beyond float32 rounding, ``agree`` when they do,
``library_refuses`` when only treeimp loads the file (or the library fails on the
rows), ``library_crash`` / ``library_hang`` when the library's process dies or stalls.
The worker is restarted after every crash or hang. Each finding's file is kept in
``--out`` with a line in ``findings.jsonl``; ``summary.json`` holds the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzz.mutate import build_seeds, fmt_of, mutate  # noqa: E402

_INTERNAL_NAMES = ("KeyError:", "IndexError:", "AttributeError:", "TypeError:",
                   "ZeroDivisionError:", "OverflowError")


# ---------------------------------------------------------------------- worker side
def _rows(n_features, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(64, n_features)) * 2
    X[:16] = np.round(np.abs(X[:16]))  # category codes for categorical splits
    X[rng.random(X.shape) < 0.1] = np.nan
    return X


def _library_margin(fmt, path, X):
    if fmt.startswith("xgb"):
        import xgboost as xgb

        b = xgb.Booster(model_file=path)
        b.set_param({"nthread": 1})
        types = b.feature_types
        dm = (xgb.DMatrix(X, feature_types=types, enable_categorical=True)
              if types and "c" in types else xgb.DMatrix(X))
        return b.predict(dm, output_margin=True)
    if fmt == "lgbm":
        import lightgbm as lgb

        return lgb.Booster(model_file=path).predict(X, raw_score=True, num_threads=1)
    from catboost import CatBoost

    m = CatBoost()
    m.load_model(path, format="json")
    return m.predict(X, prediction_type="RawFormulaVal", thread_count=1)


def _agree(a, b):
    a = np.asarray(a, np.float64).reshape(len(b), -1)
    b = np.asarray(b, np.float64).reshape(len(b), -1)
    if a.shape != b.shape:
        return False, f"shapes {a.shape} vs {b.shape}"
    # float32 rounding: the libraries add leaf values in float32 (XGBoost, CatBoost
    # partly) or float64; allow a few float32 ulps of the largest term
    scale = np.maximum(np.abs(a), np.abs(b))
    same = (a == b) | (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= 1e-5 * (1 + scale))
    if same.all():
        return True, ""
    i = np.argwhere(~same)[0]
    return False, f"row {i[0]} output {i[1]}: treeimp {a[tuple(i)]!r} library {b[tuple(i)]!r}"


def worker(warm):
    """Answer one case per input line ``path<TAB>margin file``: a JSON line with
    treeimp's outcome; a file that loads has its margins on :func:`_rows` saved."""
    import warnings

    warnings.simplefilter("ignore")
    import treeimp

    for path in warm:  # warm up: imports and numba compiles before the first case
        treeimp.load(path).predict_raw(_rows(4), n_jobs=1)
    print("READY", flush=True)
    for line in sys.stdin:
        path, margin_file = line.rstrip("\n").split("\t")
        out = {}
        try:
            ens = treeimp.load(path)
            if ens.n_features > 10**5:  # too wide to compare: the rows would not fit
                print(json.dumps({"outcome": "loads_wide"}), flush=True)
                continue
            mine = ens.predict_raw(_rows(ens.n_features), n_jobs=1)
            np.save(margin_file, mine)
            out["outcome"] = "loads"
            out["n_features"] = int(ens.n_features)
        except (ValueError, TypeError) as exc:
            msg = str(exc)
            out["outcome"] = ("wrapped_internal" if type(exc) is ValueError and any(
                s in msg for s in _INTERNAL_NAMES) else "clean_error")
            out["message"] = f"{type(exc).__name__}: {msg}"[:400]
        except BaseException as exc:  # noqa: BLE001  (the finding to report)
            import traceback

            out["outcome"] = "internal"
            out["message"] = "".join(traceback.format_exception(exc))[-3000:]
        print(json.dumps(out), flush=True)


def library_zygote(timeout):
    """Serve library margins, one forked child per request line
    ``fmt<TAB>path<TAB>n_features<TAB>margin file``, so that a library crash or hang
    costs a fork rather than a restart. Answers a JSON line: ``ok``, ``refuses``,
    ``crash`` or ``hang``. Nothing runs in this process but the imports, so forking is
    safe (no OpenMP or other threads yet)."""
    import signal
    import warnings

    warnings.simplefilter("ignore")
    import catboost  # noqa: F401
    import lightgbm  # noqa: F401
    import xgboost  # noqa: F401

    print("READY", flush=True)
    for line in sys.stdin:
        fmt, path, n_features, margin_file = line.rstrip("\n").split("\t")
        pid = os.fork()
        if pid == 0:
            code = 0
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # library messages: not answers
            try:
                np.save(margin_file, _library_margin(fmt, path, _rows(int(n_features))))
            except BaseException as exc:  # noqa: BLE001
                Path(margin_file + ".err").write_text(f"{type(exc).__name__}: {exc}"[:300])
                code = 3
            os._exit(code)
        deadline = time.monotonic() + timeout
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.005)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            print(json.dumps({"library": "library_hang"}), flush=True)
            continue
        if os.WIFSIGNALED(status):
            out = {"library": "library_crash", "message": f"signal {os.WTERMSIG(status)}"}
        elif os.WEXITSTATUS(status) == 3:
            out = {"library": "library_refuses",
                   "message": Path(margin_file + ".err").read_text()}
        elif os.WEXITSTATUS(status) == 0:
            out = {"library": "ok"}
        else:
            out = {"library": "library_crash", "message": f"exit {os.WEXITSTATUS(status)}"}
        print(json.dumps(out), flush=True)


# ---------------------------------------------------------------------- parent side
class Worker:
    """The worker process; its answers are read from the pipe's descriptor with a
    deadline (select), one line at a time."""

    def __init__(self, args):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
               "NUMBA_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
        self.proc = subprocess.Popen([sys.executable, __file__, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        if self.line(600) != "READY":
            raise RuntimeError("the fuzz worker did not start")

    def line(self, timeout):
        """The next line, None at the deadline, "" when the worker has exited."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return ""
            self.buf += chunk
        out, self.buf = self.buf.split(b"\n", 1)
        return out.decode()

    def ask(self, request, timeout):
        """The JSON answer to one request line; 'hang' when none came within
        ``timeout`` seconds, 'crash (exit n)' when the process died."""
        self.proc.stdin.write((request + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            line = self.line(deadline - time.monotonic())
            if line is None:
                return "hang"
            if line == "":
                self.proc.wait()
                return f"crash (exit {self.proc.returncode})"
            if line.startswith("{"):  # anything else: printed by a library
                return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _case(seeds, names, i):
    rng = np.random.default_rng([20261127, i])
    name = names[rng.integers(len(names))]
    data = Path(seeds[name]).read_bytes()
    damaged, how = mutate(data, fmt_of(name), rng)
    return name, damaged, how


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--first", type=int, default=0, help="number of the first case")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per case and part")
    p.add_argument("--out", default="fuzz-out")
    p.add_argument("--replay", type=int, help="write case N's file to --out and stop")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(argv[1:])
    if argv[:1] == ["--library"]:
        return library_zygote(float(argv[1]))
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = build_seeds(str(out / "seeds"))
    names = sorted(seeds)
    if args.replay is not None:
        name, damaged, how = _case(seeds, names, args.replay)
        path = out / f"case{args.replay}{Path(seeds[name]).suffix}"
        path.write_bytes(damaged)
        print(path, name, how)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="fuzz-"))
    warm = ["--worker"] + [seeds[n] for n in names if n.endswith("_reg")]
    counts, library = Counter(), Counter()
    t0 = time.monotonic()
    w = Worker(warm)
    lib_w = Worker(["--library", str(args.timeout)])
    findings = open(out / "findings.jsonl", "a")
    log = open(out / "cases.jsonl", "a")
    for i in range(args.first, args.first + args.cases):
        t_case = time.monotonic()
        name, damaged, how = _case(seeds, names, i)
        ext = Path(seeds[name]).suffix
        path = tmp / f"case{ext}"
        path.write_bytes(damaged)
        for f in tmp.glob("*.npy*"):
            f.unlink()
        mine = w.ask(f"{path}\t{tmp / 'mine.npy'}", args.timeout)
        outcome = (mine if isinstance(mine, str) else mine["outcome"]).split(" ")[0]
        counts[outcome] += 1
        lib = {}
        if outcome == "loads":
            lib = lib_w.ask(f"{fmt_of(name)}\t{path}\t{mine['n_features']}\t"
                            f"{tmp / 'theirs.npy'}", args.timeout + 10)
            if isinstance(lib, str):  # the zygote itself failed: restart it
                lib_w.close()
                lib_w = Worker(["--library", str(args.timeout)])
                lib = {"library": "library_" + lib.split(" ")[0]}
            elif lib["library"] == "ok":
                ok, why = _agree(np.load(tmp / "mine.npy"), np.load(tmp / "theirs.npy"))
                lib = {"library": "agree" if ok else "mismatch", "message": why}
            library[lib["library"]] += 1
        lib_outcome = lib.get("library")
        if outcome in ("crash", "hang", "internal", "wrapped_internal") or \
                lib_outcome == "mismatch":
            keep = out / f"finding{i}{ext}"
            keep.write_bytes(damaged)
            findings.write(json.dumps({"case": i, "seed": name, "mutation": how,
                                       "treeimp": mine, "library": lib,
                                       "file": str(keep)}) + "\n")
            findings.flush()
        log.write(json.dumps({"case": i, "seed": name, "mutation": how, "treeimp": outcome,
                              "library": lib_outcome,
                              "seconds": round(time.monotonic() - t_case, 3)}) + "\n")
        log.flush()
        if isinstance(mine, str):
            w.close()
            w = Worker(warm)
        done = i - args.first + 1
        if done % 100 == 0 or done == args.cases:
            rate = done / (time.monotonic() - t0)
            print(f"{done} cases, {rate:.1f}/s: {dict(counts)} library {dict(library)}",
                  flush=True)
    w.close()
    lib_w.close()
    summary = {"cases": args.cases, "first": args.first, "treeimp": dict(counts),
               "library": dict(library), "seconds": round(time.monotonic() - t0, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))
    bad = sum(counts[k] for k in ("crash", "hang", "internal")) + library["mismatch"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
