#!/usr/bin/env bash
# The device call after bench/gpu_sweep_check.sh, on the same warm machine (its install kept):
#   1. the CUDA tests of generation and batches (target 7: the reader, engine.steps, steering in place),
#   2. a batch's generation against its floors on the 8B shape (bench/generation.py --each).
# carry [".gpu/pyt2"]; from the repo root: OUT=... BUDGET_S=560 bash bench/gpu_gen_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET_S=${BUDGET_S:-560}
left() { echo $((BUDGET_S - SECONDS - 10)); }
. /tmp/gpu-env.sh || { echo COLD; exit 3; }
export PYTHONPATH="$PYTHONPATH:$PWD/bench:$PWD/.gpu/pyt2"

limit=$(left); [ "$limit" -gt 300 ] && limit=300
timeout -k 5 "$limit" python3 -m pytest -p no:cacheprovider -q -rfE --device=cuda tests/test_generation.py \
  tests/test_batches.py -k "not view" > "$OUT/gen-tests.log" 2>&1
echo "tests: exit $? at ${SECONDS}s"; tail -3 "$OUT/gen-tests.log"

limit=$(left)
if [ "$limit" -gt 90 ]; then
  timeout -k 5 "$limit" python3 bench/generation.py --each 32 --repeat 1 --checkpoint llama3.1_8b > "$OUT/gen-each.log" 2>&1
  echo "each: exit $? at ${SECONDS}s"; tail -12 "$OUT/gen-each.log"
fi
