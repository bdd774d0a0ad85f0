#!/usr/bin/env bash
# The GPU run, in one device call after the kit's install (docs/gpu.md):
#   . /tmp/gpu-env.sh || { echo COLD; exit 3; }; bash bench/gpu_run.sh [tests] [families] [bench]
# From the repo root. Parts default to all three; each runs under its own time limit
# (seconds, from the environment): TESTS_S=250 FAMILIES_S=150 BENCH_S=100; FAMILIES_JOBS=4
# families at once. Extra
# arguments for a part: TESTS_ARGS (pytest's, e.g. "-k steer"), FAMILIES_ARGS
# (e.g. "--families qwen2,deepseek_v2"), BENCH_ARGS (e.g. "--tokens 512").
# Writes to $OUT (default ./gpu-out): tests.log, families.{log,json,md}, bench.log,
# gpu_prompt.{json,md}, env.txt and summary.md (printed at the end).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.md"
PY=${PYTHON:-python3}
TESTS_S=${TESTS_S:-250} FAMILIES_S=${FAMILIES_S:-150} BENCH_S=${BENCH_S:-100}
PARTS=("$@"); [ ${#PARTS[@]} -eq 0 ] && PARTS=(tests families bench)
want() { local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

# The kit's environment, if the caller did not source it.
case ":${PYTHONPATH:-}:" in *:/tmp/site:*) ;; *) [ -f /tmp/gpu-env.sh ] && . /tmp/gpu-env.sh ;; esac
export PYTHONPATH="${PYTHONPATH:-}:$PWD" VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-0} \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 \
  VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING} OUT
# pytest is not part of the kit; a copy made by bench/gpu_pack_pytest.sh can be carried.
if ! $PY -c "import pytest" 2>/dev/null && [ -d .gpu/pytest ]; then export PYTHONPATH="$PYTHONPATH:$PWD/.gpu/pytest"; fi

{
  echo "# GPU run $(date -u +%FT%TZ)"; echo
  echo '```'
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -2
  $PY - <<'PY' 2>&1
import importlib, sys
print("python", sys.version.split()[0])
for name in ("torch", "vllm", "nnsight", "transformers", "triton", "pytest", "anywidget", "ipywidgets", "plotly"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as error:
        print(name, "MISSING", type(error).__name__)
import torch
print("cuda", torch.version.cuda, "available", torch.cuda.is_available())
PY
  echo '```'
} > "$OUT/env.txt"
cat "$OUT/env.txt" > "$SUMMARY"
echo >> "$SUMMARY"

run_part() {  # name seconds log command...
  local name=$1 limit=$2 log=$3; shift 3
  local start=$SECONDS
  echo "== $name (limit ${limit}s): $*"
  timeout -k 15 "$limit" "$@" > "$log" 2>&1
  local rc=$?
  local took=$((SECONDS - start))
  local what="exit $rc"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && what="TIMED OUT after ${limit}s (partial results kept)"
  echo "== $name: $what in ${took}s"
  printf '## %s: %s in %ss\n\n' "$name" "$what" "$took" >> "$SUMMARY"
  return 0
}

if want tests; then
  if $PY -c "import pytest" 2>/dev/null; then
    files=(tests/test_platform.py tests/test_engine_core.py tests/test_engine_interior.py tests/test_session.py)
    if $PY -c "from nnterp_widgets.checkpoints.trained import installed; assert installed()" 2>/dev/null; then
      files+=(tests/test_trained_model.py)
    else echo "the trained model's package is missing: tests/test_trained_model.py left out" | tee -a "$SUMMARY"; fi
    if $PY -c "import anywidget, ipywidgets, plotly" 2>/dev/null; then files+=(tests/test_widgets.py)
    else echo "widget stack missing (kit call 4): tests/test_widgets.py left out" | tee -a "$SUMMARY"; fi
    # Last, so that a time limit cuts these first: their transformers references were
    # made device-aware without a GPU run yet.
    files+=(tests/test_interventions.py tests/test_causal.py)
    run_part tests "$TESTS_S" "$OUT/tests.log" $PY -m pytest -p no:cacheprovider -v -rfE --device=cuda \
      --junitxml="$OUT/tests.xml" "${files[@]}" ${TESTS_ARGS:-}
    { echo '```'; grep -E " (PASSED|FAILED|ERROR|SKIPPED)|^(FAILED|ERROR) |=====" "$OUT/tests.log" | tail -120; echo '```'; echo; } >> "$SUMMARY"
  else
    echo "## tests: NOT RUN: pytest is not importable (carry .gpu/pytest: bench/gpu_pack_pytest.sh)" | tee -a "$SUMMARY"
    echo >> "$SUMMARY"
  fi
fi

if want families; then
  run_part families "$FAMILIES_S" "$OUT/families.log" $PY tools/gpu_families.py --out "$OUT" --jobs "${FAMILIES_JOBS:-4}" \
    --budget $(( FAMILIES_S > 80 ? FAMILIES_S - 40 : FAMILIES_S / 2 )) ${FAMILIES_ARGS:-}
  if [ -f "$OUT/families.md" ]; then cat "$OUT/families.md" >> "$SUMMARY"
  else { echo '```'; tail -30 "$OUT/families.log"; echo '```'; } >> "$SUMMARY"; fi
  echo >> "$SUMMARY"
fi

if want bench; then
  run_part bench "$BENCH_S" "$OUT/bench.log" $PY bench/gpu_prompt.py --out "$OUT" ${BENCH_ARGS:-}
  if [ -f "$OUT/gpu_prompt.md" ]; then cat "$OUT/gpu_prompt.md" >> "$SUMMARY"
  else { echo '```'; tail -30 "$OUT/bench.log"; echo '```'; } >> "$SUMMARY"; fi
fi

echo; cat "$SUMMARY"
