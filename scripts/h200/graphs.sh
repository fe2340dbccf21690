#!/usr/bin/env bash
# torch.webgpu graphs on the GPU machine: builds (scripts/h200/build.sh), runs the graph
# tests, then the replay benchmark (200-op chain host cost; Qwen2.5-0.5B-sized decode step,
# eager vs replayed, webgpu and CUDA). Prints PASS/FAIL lines and the figures.
#   bash scripts/h200/graphs.sh          (run from the repository root)
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
status=0
if python3 -m pytest tests/python/test_graphs.py -q -p no:cacheprovider; then
  echo "PASS test_graphs.py"
else
  echo "FAIL test_graphs.py"; status=1
fi
cd benchmarks
python3 graph_replay.py --cuda --tokens 32 --dtype float32 || { echo "FAIL graph_replay float32"; status=1; }
python3 graph_replay.py --cuda --tokens 32 --dtype float16 || { echo "FAIL graph_replay float16"; status=1; }
exit $status
