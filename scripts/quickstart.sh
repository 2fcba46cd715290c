#!/usr/bin/env bash
# The README's first command: install what the quickstart runs (scripts/setup.sh with no part), then train
# the quickstart calculator agent.
# Prints a before/after table and the path of the training plot. Extra arguments go to `alight train`
# (e.g. --seed 1, --steps 4, --output-dir runs/try2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Bytecode is cached on first import (setup.sh installs with --no-compile); where PYTHONDONTWRITEBYTECODE is set,
# every agent and server process would compile torch, transformers and openai from source (scripts/test.sh).
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/alight train examples/quickstart/config.yaml "$@"
