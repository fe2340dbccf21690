#!/usr/bin/env bash
# One device call on eager speed (2026-12-06 evening): the small models' HF eager decode
# against CUDA eager with every step's time (dynamic cache: compile spikes show as outliers),
# the data-movement rows with and without Dawn's robustness clamps (what limits them), and
# eager submit policies alternated on GPT-2's dynamic-cache decode.
#   bash scripts/h200/eager_ab.sh            STEPS="e2e movement submit" by default
#   STEPS=policy: submit policies alternated in one process (POLICIES, POLICY_RUNS)
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
steps=" ${STEPS:-e2e movement submit} "
has() { [[ $steps == *" $1 "* ]]; }
if has e2e; then
  echo "== e2e ${EAGER_MODELS:-gpt2,gpt-neo,opt,pythia}"
  timeout ${E2E_LIMIT:-240} python3 scripts/e2e_models.py --dtype float32 --tokens 32 --cuda --init-device cuda \
    --models ${EAGER_MODELS:-gpt2,gpt-neo,opt,pythia} --json $OUT/e2e.json > $OUT/e2e.log 2>&1
  grep -A20 "^model " $OUT/e2e.log
  python3 - "$OUT/e2e.json" <<'PY'
import json, statistics, sys
for row in json.load(open(sys.argv[1]))["results"]:
    for dev, r in row.get("devices", {}).items():
        if "step_ms" in r and dev != "cpu":
            s = r["step_ms"]; med = statistics.median(s)
            print(f"{row['model']:8} {dev:7} {r['tok_s']:7.1f} tok/s  median step {med:6.2f} ms  "
                  f"steps over 1.5x median: {[(i, x) for i, x in enumerate(s) if x > 1.5 * med]}")
PY
fi
if has movement; then
  for e in BASELINE=1 TORCH_WEBGPU_DAWN_TOGGLES=disable_robustness; do
    echo "== movement: $e"
    env $e timeout 150 python3 benchmarks/run.py --cuda --only movement > $OUT/movement_${e%%=*}.log 2>&1
    grep "^movement" $OUT/movement_${e%%=*}.log
  done
fi
if has submit; then
  B="python3 benchmarks/decode_breakdown.py --model ${MODEL:-gpt2} --modes eager --cache dynamic --init-device cuda --repeat 3"
  for round in 1 2; do
    for e in BASELINE=1 TORCH_WEBGPU_EAGER_FIRST_BATCH=32 TORCH_WEBGPU_MAX_BATCH=64; do
      echo "== submit policy round $round: $e"
      env $e timeout 100 $B --devices webgpu 2>&1 | grep '^{' | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(f\"generate {r.get('generate_tok_s', 0):.1f} {r.get('generate_tok_s_runs')} forward {r.get('forward_tok_s', 0):.1f} \"
          f\"issue {r.get('forward_issue_ms_per_token', 0):.2f} ms submits/token {r.get('submits_per_token')} {r.get('error', '')}\")"
    done
  done
  echo "== cuda eager"; timeout 100 $B --devices cuda 2>&1 | tail -1
fi
# STEPS=defer: eager generate with transformers' stop check deferred (as on mps; opt-in through
# torch_webgpu.generation.defer_stop_check) on webgpu and on cuda, against the plain check.
if has defer; then
  for mc in ${DEFER_RUNS:-gpt2 opt}; do
    for d in "" --defer-stop; do
      echo "== eager generate, dynamic cache: $mc ${d:-(stop check each token)}"
      timeout 150 python3 benchmarks/decode_breakdown.py --model $mc --modes eager --cache dynamic --init-device cuda \
        --devices webgpu,cuda --repeat 3 $d 2>&1 | grep "^| webgpu\|^| cuda"
    done
  done
fi
# STEPS=policy: the submit policies alternated inside one process (decode_breakdown.py
# --batch-policies), so that the machine's drift between processes cannot pose as an effect.
if has policy; then
  for mc in ${POLICY_RUNS:-gpt2:dynamic gpt2:static qwen2.5:dynamic}; do
    echo "== policies in one process: $mc"
    timeout 200 python3 benchmarks/decode_breakdown.py --model ${mc%%:*} --cache ${mc##*:} --init-device cuda \
      --repeat ${REPEAT:-4} --batch-policies ${POLICIES:-256:0,256:32,64:0} 2>&1 | grep "^|"
  done
fi
