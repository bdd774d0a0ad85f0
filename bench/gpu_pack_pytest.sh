#!/usr/bin/env bash
# pytest for the device machine, whose image may lack it (the kit does not carry it):
# copies pytest and what it imports (pluggy, iniconfig, packaging, pygments; all pure
# Python) from this checkout's venv into .gpu/pytest, which git ignores (the kit's
# `echo /.gpu/ >> .git/info/exclude`). Carry it with the GPU run's call:
#   carry [".gpu/pytest"]; bench/gpu_run.sh appends it to PYTHONPATH when pytest is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/work/main/.venv/bin/python}
git check-ignore -q .gpu/pytest || { echo "add /.gpu/ to .git/info/exclude first (docs/gpu.md)"; exit 1; }
SITE=$($PY -c "import pytest, os; print(os.path.dirname(os.path.dirname(pytest.__file__)))")
rm -rf .gpu/pytest && mkdir -p .gpu/pytest
for name in pytest _pytest pluggy iniconfig packaging pygments py.py; do
  [ -e "$SITE/$name" ] && cp -r "$SITE/$name" .gpu/pytest/
done
for info in "$SITE"/{pytest,pluggy,iniconfig,packaging,pygments}-*.dist-info; do cp -r "$info" .gpu/pytest/; done
find .gpu/pytest -name __pycache__ -prune -exec rm -rf {} +
du -sh .gpu/pytest
# .gpu/pyt2: the same with only the pygments lexers pytest imports (python, diff), small
# enough to ride with the kit's w3 (bench/gpu_sweep_check.sh).
rm -rf .gpu/pyt2 && cp -r .gpu/pytest .gpu/pyt2
find .gpu/pyt2/pygments/lexers -mindepth 1 -maxdepth 1 ! -name __init__.py ! -name _mapping.py ! -name python.py \
  ! -name diff.py -exec rm -rf {} +
du -sh .gpu/pyt2
