#!/usr/bin/env bash
# Run each integration's in-process tests against the LOWEST framework versions it declares.
# The lowest versions are installed into overlay folders (PYTHONPATH) so the project venv is untouched.
# Usage: integrations/test_lowest_versions.sh   (needs PyPI access; about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OVERLAY=${ALIGHT_LOWEST_DIR:-/tmp/alight-lowest}

overlay() {  # overlay NAME PACKAGE==VERSION...
  local dir="$OVERLAY/$1"; shift
  [ -d "$dir" ] || $PY -m pip install -q --no-compile --no-deps --target "$dir" "$@"
  echo "$dir"
}

run() {  # run OVERLAY_DIR TEST_FILE
  echo "== $2 on $(PYTHONPATH=$1 $PY -c 'import sys; from importlib.metadata import version as v; print(*[f"{d} {v(d)}" for d in sys.argv[1:]], sep=", ")' "${@:3}")"
  PYTHONPATH="$1" $PY -m pytest -p no:cacheprovider -q "$2"
}

run "$(overlay openai_agents openai-agents==0.21.0)" tests/integrations/openai_agents/test_openai_agents_spans.py openai-agents
run "$(overlay langchain langchain-core==1.0.0 langchain-openai==1.0.0 langgraph==1.0.0 langgraph-prebuilt==1.0.0 \
  langgraph-checkpoint==2.1.2 langgraph-sdk==0.2.9)" tests/integrations/langchain/test_langchain_spans.py langchain-core langgraph
run "$(overlay autogen autogen-agentchat==0.7.0 autogen-core==0.7.0 autogen-ext==0.7.0)" \
  tests/integrations/autogen/test_autogen_spans.py autogen-agentchat autogen-core
run "$(overlay mcp mcp==2.0.0 mcp-types==2.0.0)" tests/integrations/mcp/test_mcp_spans.py mcp
