#!/usr/bin/env bash
# Idempotent set-up for a fresh machine with only Python 3.11 + pip:
# creates .venv, installs the CPU build of torch (on this machine's local wheel store)
# and pyro_ar in editable mode with its test extras.
# GPU users: install the torch build for their CUDA first (see README), then run this.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import importlib, pyro_ar, pytest, sklearn, sphinx, hypothesis, myst_nb, jupytext, ipykernel, ipywidgets, nbconvert; importlib.import_module('sphinx-mathjax-offline')" >/dev/null 2>&1; then
    # torch first, pinned to the CPU build we test against, so the unpinned range below
    # does not pull a multi-GB CUDA build. Any torch already installed is kept.
    .venv/bin/python -c "import torch" >/dev/null 2>&1 || .venv/bin/pip install -q "torch==2.13.0"
    .venv/bin/pip install -q -e ".[test]"
fi
