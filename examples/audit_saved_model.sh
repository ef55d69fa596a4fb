#!/usr/bin/env bash
# Audit a saved model from the command line: which features does it really use?
#
# Trains a small XGBoost classifier on synthetic data with a row ID and pure-noise
# columns, saves it as model.json (the format XGBoost's save_model writes) together with
# held-out rows in data.csv, then runs
#
#     treeimp explain model.json data.csv --target y --format table
#     treeimp explain model.json data.csv --target y --format json --output importances.json
#
# The model file is read without importing xgboost. The labels are the class indices
# 0/1: a model file does not store class labels.
#
# Usage: examples/audit_saved_model.sh [--small] [--out DIR]
#   --small    fewer rows and trees (fast, for CI)
#   --out DIR  where model.json, data.csv and the outputs go (default examples/output/audit)
# Environment: PYTHON (default: python), TREEIMP (default: treeimp; e.g. "python -m treeimp")
set -euo pipefail

SMALL=0
OUT="examples/output/audit"
while [ $# -gt 0 ]; do
    case "$1" in
        --small) SMALL=1; shift ;;
        --out) OUT="$2"; shift 2 ;;
        --out=*) OUT="${1#--out=}"; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "audit_saved_model.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
PYTHON="${PYTHON:-python}"
read -r -a TREEIMP <<< "${TREEIMP:-treeimp}"
mkdir -p "$OUT"

"$PYTHON" - "$OUT" "$SMALL" <<'PY'
import sys

import numpy as np
import pandas as pd
import xgboost as xgb

out, small = sys.argv[1], sys.argv[2] == "1"
n, trees = (1200, 40) if small else (6000, 300)
rng = np.random.default_rng(0)
X = pd.DataFrame({f"signal_{j}": rng.normal(size=n) for j in range(4)})
X["row_id"] = rng.permutation(n).astype(float)         # unique per row: pure noise
for j in range(3):
    X[f"noise_{j}"] = rng.normal(size=n)                # independent of y
logit = 1.5 * X["signal_0"] - X["signal_1"] + X["signal_2"] * X["signal_3"]
y = (logit + rng.logistic(size=n) > 0).astype(int)       # class indices 0/1

train = np.arange(n) < n // 2
model = xgb.XGBClassifier(n_estimators=trees, max_depth=6, learning_rate=0.1,
                          random_state=0).fit(X[train], y[train])
model.save_model(f"{out}/model.json")
held_out = X[~train].assign(y=y[~train])
held_out.to_csv(f"{out}/data.csv", index=False)
print(f"saved {out}/model.json ({trees} trees) and {out}/data.csv "
      f"({len(held_out)} held-out rows)")
PY

echo
echo "\$ treeimp explain $OUT/model.json $OUT/data.csv --target y --format table --seed 0"
"${TREEIMP[@]}" explain "$OUT/model.json" "$OUT/data.csv" --target y --format table --seed 0 \
    | tee "$OUT/importances.txt"

echo
echo "\$ treeimp explain $OUT/model.json $OUT/data.csv --target y --format json --seed 0 \\"
echo "      --output $OUT/importances.json"
"${TREEIMP[@]}" explain "$OUT/model.json" "$OUT/data.csv" --target y --format json --seed 0 \
    --output "$OUT/importances.json"
"$PYTHON" - "$OUT/importances.json" <<'PY'
import json
import sys

records = json.load(open(sys.argv[1]))
print(f"wrote {sys.argv[1]}: {len(records)} records like {records[0]}")
PY
