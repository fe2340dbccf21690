#!/usr/bin/env bash
# GPT-Neo's eager decode: e2e_models.py (dynamic cache) alone and after GPT-2 in one process,
# with every step's time, then GPU kernel tables of eager decode (static cache) for both.
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
for models in gpt-neo gpt2,gpt-neo; do
  echo "== e2e $models"
  timeout 200 python3 scripts/e2e_models.py --dtype float32 --tokens 32 --cuda --init-device cuda \
    --models $models --json $OUT/e2e_${models/,/_}.json > $OUT/e2e_${models/,/_}.log 2>&1
  python3 - "$OUT/e2e_${models/,/_}.json" <<'PY'
import json, sys
for row in json.load(open(sys.argv[1]))["results"]:
    for dev, r in row["devices"].items():
        if "step_ms" in r:
            print(row["model"], dev, f"{r['tok_s']:.1f} tok/s", "steps ms:", r["step_ms"])
PY
done
for m in gpt2 gpt-neo; do
  echo "== GPU kernels, eager decode: $m"
  timeout 150 python3 benchmarks/decode_breakdown.py --model $m --modes eager --devices webgpu \
    --init-device cuda --profile > $OUT/prof_$m.log 2>&1
  grep -v "Warning\|warn(" $OUT/prof_$m.log | tail -50
done
