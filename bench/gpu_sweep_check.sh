#!/usr/bin/env bash
# One device call after the kit's calls 1-2 (docs/gpu.md, "twenty-third session"): the kit's install, then
# in order of what issue 39 still lacks, each under what is left of BUDGET_S seconds:
#   1. the 8B shape's 32 x 64 patching sweep and vLLM's prefill of its cells (target 4),
#   2. the CUDA tests of the sweep, edit_in_place, ablation and the engine's processes (target 7),
#   3. the dataset's reads per request against reads per step (target 3's lever).
# carry [".gpu/w3", ".gpu/pyt2"] (.gpu/pyt2, bench/gpu_pack_pytest.sh: pytest with only the two pygments
# lexers it imports, small enough to ride with w3); from the repo root: BUDGET_S=540 bash bench/gpu_sweep_check.sh
# (TOKENS=16 REPEAT=1: the least before the sweep, which is then timed once, cold)
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

limit=$(left); [ "$limit" -gt 220 ] && limit=220
timeout -k 5 "$limit" python3 bench/gpu_prompt.py --out "$OUT/8b" --checkpoint llama3.1_8b --tokens "${TOKENS:-512}" \
  --repeat "${REPEAT:-2}" --patch 64 > "$OUT/8b.log" 2>&1
echo "sweep: exit $? at ${SECONDS}s"
mkdir -p "$OUT/logs"; cp ~/.cache/nnterp_widgets/logs/*.log "$OUT/logs/" 2>/dev/null

limit=$(left); [ "$limit" -gt 200 ] && limit=200
if [ "$limit" -gt 30 ]; then
  timeout -k 5 "$limit" python3 -m pytest -p no:cacheprovider -q -rfE --device=cuda tests/test_engine_core.py \
    tests/test_faults.py tests/test_interventions.py -k "edit_in_place or faults or patch or tracing or chunk or ablat" \
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
