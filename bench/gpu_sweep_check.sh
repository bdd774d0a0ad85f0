#!/usr/bin/env bash
# One device call after the kit's calls 1-2 (docs/gpu.md, "twenty-third session" and run 15): the kit's
# install, then in order of what issue 39 still lacks, each under what is left of BUDGET_S seconds:
#   1. on one 8B engine: the prompt request at TOKENS (target 1) and the 32 x 64 patching sweep with
#      vLLM's prefill of its cells (target 4; run 15 measured it before the cells crossed stacked),
#   2. the CUDA tests that run 15 could not collect (batches, faults) and the sweep's (target 7),
#   3. the dataset's reads per request against reads per step (target 3's lever).
# carry [".gpu/w3", ".gpu/pyt2"] (.gpu/pyt2, bench/gpu_pack_pytest.sh: pytest with only the two pygments
# lexers it imports, small enough to ride with w3); from the repo root: BUDGET_S=540 bash bench/gpu_sweep_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET_S=${BUDGET_S:-540}
left() { echo $((BUDGET_S - SECONDS - 10)); }
bash .gpu/w3/device.sh install > "$OUT/install.log" 2>&1
. /tmp/gpu-env.sh || { echo COLD; exit 3; }
export PYTHONPATH="$PYTHONPATH:$PWD/bench:$PWD/.gpu/pyt2"
echo "installed at ${SECONDS}s"

limit=$(left); [ "$limit" -gt 240 ] && limit=240
timeout -k 5 "$limit" python3 bench/gpu_prompt.py --out "$OUT/8b" --checkpoint llama3.1_8b --tokens "${TOKENS:-16,128,512}" \
  --repeat "${REPEAT:-5}" --patch 64 > "$OUT/8b.log" 2>&1
echo "sweep: exit $? at ${SECONDS}s"
mkdir -p "$OUT/logs"; cp ~/.cache/nnterp_widgets/logs/*.log "$OUT/logs/" 2>/dev/null

limit=$(left); [ "$limit" -gt 200 ] && limit=200
if [ "$limit" -gt 30 ]; then
  timeout -k 5 "$limit" python3 -m pytest -p no:cacheprovider -q -rfE --device=cuda tests/test_batches.py \
    tests/test_faults.py tests/test_interventions.py -k "not view and (test_batches or test_faults or patch or tracing or chunk)" \
    > "$OUT/tests.log" 2>&1
  echo "tests: exit $? at ${SECONDS}s"; tail -3 "$OUT/tests.log"
fi

limit=$(left)
if [ "$limit" -gt 100 ]; then
  timeout -k 5 "$limit" python3 bench/gpu_dataset_parts.py --out "$OUT/parts" --checkpoint llama3.1_8b --prompts 1000 \
    --repeat 1 --only top5,streams,lens_one_copy,step_streams,step_lens > "$OUT/parts.log" 2>&1
  echo "parts: exit $? at ${SECONDS}s"
fi
grep -h "^\[" "$OUT/8b.log" "$OUT/parts.log" 2>/dev/null | tail -30
