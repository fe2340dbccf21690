#!/usr/bin/env bash
# 2026-12-07 session probes on the lent GPU (see docs/PERFORMANCE.md for the figures).
#   STEPS="tests attn base" bash scripts/h200/probe_dec07.sh
#   STEPS="rand train autotune models" bash scripts/h200/probe_dec07.sh   (the later session's call)
# tests: the attention, pooling and reduction tests on the GPU; attn: the prefill rows with
# the blocks kernel (default) and the tiles kernel, alternated, each in its own process;
# base: run.py --cuda over the attention, pool, sort and movement sections.
# rand: the random-op tests of torch.compile and graph replay on the GPU; models: run.py
# --cuda --only models (HF generate: 512-token prefill latency, decode tok/s, peak memory);
# autotune: run.py --cuda --only gemm,gemv with TORCH_WEBGPU_GEMM_AUTOTUNE=1, then without;
# train: benchmarks/train_step.py --cuda (eager and compiled training steps).
#   STEPS="scantests scans trainro" bash scripts/h200/probe_dec07.sh   (the third session's call)
# scantests: the compiled scan and reduce-overhead tests on the GPU; scans:
# benchmarks/compiled_scans.py --cuda with TORCH_WEBGPU_COMPILE_SCAN=blocks, then serial;
# trainro: train_step.py --cuda --modes compiled,reduce-overhead (training replayed).
#   STEPS="ovw lanes replaynorm" bash scripts/h200/probe_dec07.sh   (the fourth session's call)
# ovw: the graph and reduce-overhead tests on the GPU (replay outputs that raise once
# overwritten); lanes: run.py --cuda --only gemv with the K-contiguous GEMV's lanes per row
# chosen (default) or forced to 16 and to 8 (GEMV_VARIANTS), each its own process;
# replaynorm: graph_replay.py --cuda with RMSNorm as HF writes it and as F.rms_norm.
#   STEPS="lanes llama" GEMV_VARIANTS="default gemv_lanes32" bash scripts/h200/probe_dec07.sh
# (the GEMV's lanes by output count; gemv_lanes32 is the old choice at K >= 256 words);
# llama: Llama-3.2-3B compiled decode (reduce-overhead, stop check deferred) on
# LLAMA_DEVICES (webgpu,cuda) with LLAMA_ENV set; rprof: replay_profile.py of the
# fused-norm decode step (kernel families, ours against CUDA's eager kernels).
#   STEPS="rowtests rows llama" bash scripts/h200/probe_dec07.sh
#   STEPS="ktimes eagerkt" bash scripts/h200/probe_dec07.sh   (the sixth session's first call)
# toggleab: run.py's TOGGLE_SECTIONS with Dawn toggles (TOGGLE_ENVS) against none.
# togdecode: decode_breakdown.py's eager decode (TOGGLE_MODEL) with each of TOGGLE_ENVS.
# hostab: eager decode (HOST_MODEL, dynamic cache) beside CUDA eager in each process, once per
# setting of HOST_ENVS (Dawn toggles, tcmalloc preloaded from .gl's Debian package), HOST_ROUNDS
# rounds alternated; HOST_PIN=1 pins each process to the CPUs of the GPU's NUMA node.
# replaytc: graph_replay.py --cuda with glibc's malloc, then with tcmalloc preloaded.
# imm (needs BENCH=ON): dispatch_bench, whose last table times uniforms as immediate data
# against a uniform binding (raw Dawn), without toggles and with allow_unsafe_apis.
# growab: e2e_models.py's eager decode with TORCH_WEBGPU_ALLOC_GROWTH=0 and =GROW_ON, alternated.
# fold: decode_breakdown.py of FOLD_MODELS compiled with the folded norms and without
# (TORCH_WEBGPU_COMPILE_RMS=0); rowtests: the GEMV and folded-norm tests on the GPU; rows: run.py --cuda's few-row linears with the
# row-blocked GEMV (default), a workgroup per row (gemv_row_each) and split-K tiles.
STEPS=${STEPS:-"tests attn base"}
OUT=${OUT:-/tmp/probe}
mkdir -p "$OUT"
source scripts/h200/build.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
tail -1 "$OUT/build.log"
nvidia-smi --query-gpu=name --format=csv,noheader
# run.py --cuda's rows (the arguments after the first two) once per TORCH_WEBGPU_GEMM_VARIANT
# value in $2 ("default": unset), each in its own process; logs $OUT/<$1>_<variant>.txt.
gemm_variants() {
  local name=$1 v
  for v in $2; do
    if [ "$v" = default ]; then unset TORCH_WEBGPU_GEMM_VARIANT; else export TORCH_WEBGPU_GEMM_VARIANT=$v; fi
    timeout 150 python3 benchmarks/run.py --cuda "${@:3}" > "$OUT/${name}_$v.txt" 2>&1
    echo "$name=$v"; grep -E '^(gemv|gemm)' "$OUT/${name}_$v.txt" | cut -c1-120
  done
  unset TORCH_WEBGPU_GEMM_VARIANT
}
for step in $STEPS; do
  case $step in
    tests)
      timeout 300 python3 -m pytest -q -p no:cacheprovider tests/python/test_attention.py tests/python/test_pool.py \
        tests/python/test_reduce.py tests/python/test_reduce_paths.py > "$OUT/tests.log" 2>&1
      tail -3 "$OUT/tests.log" ;;
    base)
      timeout 200 python3 benchmarks/run.py --cuda --only attention,pool,sort,movement --json "$OUT/base.json" > "$OUT/base.txt" 2>&1
      grep -E '^(attention|pool|sort|movement)' "$OUT/base.txt" | cut -c1-110 ;;
    rand)
      timeout 400 python3 -m pytest -q -p no:cacheprovider tests/python/test_compile_random.py tests/python/test_graphs.py \
        tests/python/test_compile_graphs.py tests/python/test_random.py tests/python/test_wgsl_library.py > "$OUT/rand.log" 2>&1
      tail -3 "$OUT/rand.log" ;;
    train)
      (cd benchmarks && timeout 400 python3 train_step.py --cuda > "$OUT/train.txt" 2>&1)
      grep -vE '^(W1207|\[transformers\])' "$OUT/train.txt" | tail -8 ;;
    autotune)
      for v in 1 0; do
        TORCH_WEBGPU_GEMM_AUTOTUNE=$v timeout 240 python3 benchmarks/run.py --cuda --only gemm,gemv --json "$OUT/gemm_at$v.json" > "$OUT/gemm_at$v.txt" 2>&1
        echo "autotune=$v"; grep -E '^(gemm|gemv)' "$OUT/gemm_at$v.txt" | cut -c1-120
      done ;;
    models)
      timeout 400 python3 benchmarks/run.py --cuda --only models --json "$OUT/models.json" > "$OUT/models.txt" 2>&1
      grep -E '^models' "$OUT/models.txt" | cut -c1-120; tail -2 "$OUT/models.txt" ;;
    scantests)
      timeout 400 python3 -m pytest -q -p no:cacheprovider tests/python/test_compile_scan.py \
        tests/python/test_compile_graphs.py > "$OUT/scantests.log" 2>&1
      grep -E '^(FAILED|E  )' "$OUT/scantests.log" | head -20; tail -1 "$OUT/scantests.log" ;;
    scans)
      for v in ${SCAN_MODES:-blocks serial}; do
        (cd benchmarks && TORCH_WEBGPU_COMPILE_SCAN=$v timeout 300 python3 compiled_scans.py --cuda > "$OUT/scans_$v.txt" 2>&1)
        echo "scans=$v"; grep -vE '^(W1207|V1207|I1207)' "$OUT/scans_$v.txt" | tail -17 | cut -c1-150
      done ;;
    trainro)
      (cd benchmarks && timeout 400 python3 train_step.py --cuda --modes compiled,reduce-overhead > "$OUT/trainro.txt" 2>&1)
      grep -vE '^(W1207|\[transformers\])' "$OUT/trainro.txt" | tail -8 ;;
    attn)
      for v in default tiles default tiles; do
        if [ $v = tiles ]; then export TORCH_WEBGPU_ATTENTION_VARIANT=tiles; else unset TORCH_WEBGPU_ATTENTION_VARIANT; fi
        timeout 100 python3 benchmarks/run.py --cuda --only attention --match prefill > "$OUT/attn_$v.txt" 2>&1
        echo "attention=$v"; grep -E '^attention' "$OUT/attn_$v.txt" | cut -c1-110
      done
      unset TORCH_WEBGPU_ATTENTION_VARIANT ;;
    ovw)
      timeout 400 python3 -m pytest -q -p no:cacheprovider tests/python/test_compile_graphs.py \
        tests/python/test_graphs.py > "$OUT/ovw.log" 2>&1
      grep -E '^(FAILED|E  )' "$OUT/ovw.log" | head -20; tail -1 "$OUT/ovw.log" ;;
    lanes)
      gemm_variants lanes "${GEMV_VARIANTS:-default gemv_lanes16 gemv_lanes8}" --only gemv --match "${GEMV_MATCH:-linear fp}" ;;
    llama)
      f="$OUT/llama_$(date +%H%M%S).txt"
      env ${LLAMA_ENV:-BASELINE=1} timeout ${LLAMA_S:-300} python3 benchmarks/decode_breakdown.py --model llama-3.2-3b \
        --modes reduce-overhead --init-device cuda --defer-stop --repeat 2 --devices ${LLAMA_DEVICES:-webgpu,cuda} \
        > "$f" 2>&1
      echo "llama ${LLAMA_ENV:-}"; grep -v "Warning\|warn(\|^\s*$\|cudagraph_utils" "$f" | tail -8 ;;
    rowtests)
      timeout 300 python3 -m pytest -q -p no:cacheprovider tests/python/test_gemv.py tests/python/test_linear_group.py \
        tests/python/test_linear_gated.py tests/python/test_rms_linear.py tests/python/test_layer_norm_linear.py \
        tests/python/test_compile_rms_linear.py > "$OUT/rowtests.log" 2>&1
      grep -E '^(FAILED|E  )' "$OUT/rowtests.log" | head -20; tail -1 "$OUT/rowtests.log" ;;
    ktimes)
      # Each row's figure by its kernels' GPU time alone beside the wall clock's (what bounds it).
      timeout ${KT_S:-500} python3 benchmarks/run.py --cuda --kernel-times --only ${KT_SECTIONS:-movement,pool,sort,gemv} \
        --json "$OUT/ktimes.json" > "$OUT/ktimes.txt" 2>&1
      grep -E '^(movement|pool|sort|gemv|gemm|bandwidth|reductions|attention|conv)' "$OUT/ktimes.txt" | cut -c1-200 ;;
    catab)
      # The cat kernel (vec4 words, one dispatch) against a copy per input, alternated.
      for v in ${CAT_ROUNDS:-0 default 0 default}; do
        if [ $v = 0 ]; then export TORCH_WEBGPU_CAT_WORDS=0; else unset TORCH_WEBGPU_CAT_WORDS; fi
        timeout 100 python3 benchmarks/run.py --cuda --kernel-times --only movement --match cat > "$OUT/cat_$v.txt" 2>&1
        echo "cat_words=$v"; grep -E '^movement' "$OUT/cat_$v.txt" | cut -c1-200
      done
      unset TORCH_WEBGPU_CAT_WORDS ;;
    eagerkt)
      # Eager decode's kernels per token on both devices (timestamp queries / CUPTI).
      for m in ${EAGER_KT_MODELS:-gpt2}; do
        f="$OUT/eagerkt_$m.txt"
        timeout ${EAGER_KT_S:-300} python3 benchmarks/decode_breakdown.py --model $m --modes eager --cache dynamic \
          --init-device cuda --repeat 3 --devices webgpu,cuda --profile > "$f" 2>&1
        echo "eagerkt $m"; grep -E '^\| (webgpu|cuda)|ms of kernels per token|gpu_time|^ +[0-9.]+ us/token' "$f" | head -40
        grep -A30 "Kernel\|kernel " "$f" | grep -E '^\S.*\|' | head -25
      done ;;
    toggleab)
      # Dawn toggles that take work off every dispatch: zeroing workgroup memory at each
      # kernel's start (disable_workgroup_init) and lazy clears of new buffers.
      for e in BASELINE=1 ${TOGGLE_ENVS:-TORCH_WEBGPU_DAWN_TOGGLES=disable_workgroup_init TORCH_WEBGPU_DAWN_TOGGLES=-lazy_clear_resource_on_first_use}; do
        f="$OUT/toggle_$(echo $e | tr -c 'a-zA-Z0-9_\n' _)"
        env $e timeout ${TOGGLE_S:-150} python3 benchmarks/run.py --cuda --only ${TOGGLE_SECTIONS:-gemv,reductions} > "$f.txt" 2>&1
        echo "== $e"; grep -E '^(gemv|reductions|bandwidth|movement|pool|host)' "$f.txt" | cut -c1-160
        [ -n "$TOGGLE_REPLAY" ] && (cd benchmarks && env $e timeout 150 python3 graph_replay.py --tokens 16 --norm fused 2>&1 | grep -E '^\[' | cut -c1-200)
      done ;;
    hostab)
      pin=()
      if [ "${HOST_PIN:-0}" = 1 ]; then
        bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f' | sed 's/^0000//')
        cpus=$(cat /sys/bus/pci/devices/0000${bus#0000}/local_cpulist 2>/dev/null || true)
        echo "GPU $bus local CPUs: ${cpus:-unknown}"
        [ -n "$cpus" ] && pin=(taskset -c "$cpus")
      fi
      tc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
      for round in ${HOST_ROUNDS:-1}; do
        for e in ${HOST_ENVS:-BASELINE=1 LD_PRELOAD=$tc TORCH_WEBGPU_DAWN_TOGGLES=skip_validation TORCH_WEBGPU_DAWN_TOGGLES=-lazy_clear_resource_on_first_use}; do
          echo "== round $round: $e"
          env $e "${pin[@]}" timeout ${HOST_S:-120} python3 benchmarks/decode_breakdown.py --model ${HOST_MODEL:-gpt2} \
            --modes eager --cache dynamic --devices webgpu,cuda --repeat 3 --init-device cuda 2>&1 | grep -E '^\| (webgpu|cuda)' | cut -c1-200
        done
      done ;;
    imm)
      for t in none allow_unsafe_apis; do
        echo "== toggles: $t"
        TORCH_WEBGPU_DAWN_TOGGLES=$([ $t = none ] || echo $t) timeout 120 ./build-gpu/dispatch_bench \
          --dispatches ${IMM_DISPATCHES:-2000} --reps 10 2>&1 | tail -18
      done ;;
    togdecode)
      # The same Dawn toggles on eager decode (host issue per token, generate tok/s).
      for e in BASELINE=1 ${TOGGLE_ENVS:-TORCH_WEBGPU_DAWN_TOGGLES=-lazy_clear_resource_on_first_use TORCH_WEBGPU_DAWN_TOGGLES=disable_workgroup_init}; do
        echo "== $e"
        env $e timeout ${TOGGLE_S:-90} python3 benchmarks/decode_breakdown.py --model ${TOGGLE_MODEL:-gpt2} --modes eager \
          --cache dynamic --devices webgpu --repeat 3 --init-device cuda 2>&1 | grep -E '^\| webgpu'
      done ;;
    growab)
      # Growth headroom for growing tensors (a dynamic KV cache) off and on, alternated:
      # the README's eager table (e2e_models.py) beside CUDA eager in each process.
      for round in ${GROW_ROUNDS:-1 2}; do
        for g in 0 ${GROW_ON:-50}; do
          f="$OUT/grow_${round}_$g"
          TORCH_WEBGPU_ALLOC_GROWTH=$g timeout ${GROW_S:-150} python3 scripts/e2e_models.py --dtype float32 --tokens 32 \
            --cuda --init-device cuda --models ${GROW_MODELS:-gpt2,opt} --json "$f.json" > "$f.log" 2>&1
          echo "growth=$g round $round"; grep -A6 "^model " "$f.log" | cut -c1-160
        done
      done ;;
    rows)
      gemm_variants rows "${ROW_VARIANTS:-default gemv_row_each splitk}" --only gemm --match "few rows" ;;
    fold)
      # The folded norms (TORCH_WEBGPU_COMPILE_RMS=1, the default) against none, per model.
      for m in ${FOLD_MODELS:-gpt2}; do
        for v in 1 0; do
          f="$OUT/fold_${m}_$v.txt"
          devices=webgpu; [ $v = 1 ] && devices=${FOLD_DEVICES:-webgpu,cuda}
          TORCH_WEBGPU_COMPILE_RMS=$v timeout ${FOLD_S:-200} python3 benchmarks/decode_breakdown.py --model $m \
            --modes reduce-overhead --init-device cuda --defer-stop --repeat 3 --devices $devices > "$f" 2>&1
          echo "fold $m RMS=$v"; grep -E '^\| (webgpu|cuda)' "$f"; grep -E 'Error|error' "$f" | tail -2
        done
      done ;;
    rprof)
      timeout 200 python3 scripts/h200/replay_profile.py --skip-chain --norm fused --tokens 16 > "$OUT/rprof.txt" 2>&1
      tail -46 "$OUT/rprof.txt" | cut -c1-130 ;;
    replaytc)
      for pre in "" /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
        echo "== LD_PRELOAD=${pre:-none}"
        (cd benchmarks && LD_PRELOAD=$pre timeout 200 python3 graph_replay.py --cuda --tokens 16 > "$OUT/replaytc_${pre:+tc}.txt" 2>&1)
        grep -E '^\[' "$OUT/replaytc_${pre:+tc}.txt" | cut -c1-200
      done ;;
    replaynorm)
      for v in hf fused; do
        (cd benchmarks && timeout 200 python3 graph_replay.py --cuda --tokens 16 --norm $v > "$OUT/replay_$v.txt" 2>&1)
        grep -E '^\[' "$OUT/replay_$v.txt" | cut -c1-200
      done ;;
  esac
done
