#!/usr/bin/env bash
# The whole test run: install everything the suite needs, start a throwaway PostgreSQL, lint, type-check, test
# (and, with no arguments, check the harness matrix in docs/integrations.md against the suite's results and test the
# integrations at their lowest declared framework versions).
# Usage: bash scripts/test.sh [pytest args...]   (CI runs it with none: .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
# Output goes to a pipe in CI: unbuffered, a run stopped from outside shows how far it really got.
export PYTHONUNBUFFERED=1
# Python caches the bytecode of what it imports, once, in the venv (setup.sh installs with --no-compile). A machine
# that sets PYTHONDONTWRITEBYTECODE (this project's test machines and CI do) turns that off, and every process then
# compiles torch and transformers from source: 5.7 against 2.5 CPU-s for their import, in each of the hundreds of
# processes a run starts. The sandbox sets its own environment (alight_sandbox.guards), so workspaces stay clean.
unset PYTHONDONTWRITEBYTECODE
# Each stamp also says how idle the CPUs were since the last one: on a small machine the run's length is its CPU.
last_busy=0 last_total=0
stamp() {
    local busy total
    read -r busy total < <(awk '/^cpu /{ print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8 }' /proc/stat)
    local idle=""
    [ "$last_total" -gt 0 ] && idle=", CPU idle $(( 100 - 100 * (busy - last_busy) / (total - last_total) ))% since the last stamp"
    echo "== $1 $(date -u +%H:%M:%S) (${SECONDS}s) load $(cut -d' ' -f1-3 /proc/loadavg)$idle"
    last_busy=$busy last_total=$total
}

stamp "set-up"
bash scripts/setup.sh --all
stamp "set-up done"

pg_dir=$(mktemp -d /tmp/alight-pg.XXXXXX)
trap 'bash scripts/postgres.sh stop "$pg_dir"' EXIT
ALIGHT_TEST_PG_URL=$(bash scripts/postgres.sh start "$pg_dir")
export ALIGHT_TEST_PG_URL
echo "test PostgreSQL: $ALIGHT_TEST_PG_URL"

status=0
.venv/bin/ruff check . || status=1
.venv/bin/ruff format --check . || status=1
.venv/bin/pyright || status=1

# The whole run records each harness-matrix cell's outcome (tests/conftest.py) for the matrix check below.
recording=()
if [ "$#" -eq 0 ]; then
  mkdir -p .alight && rm -f .alight/harness-matrix.json
  # ... and each test file's seconds, the order the next runs hand files out in (tests/longest_first.py).
  recording=(ALIGHT_HARNESS_MATRIX="$PWD/.alight/harness-matrix.json" ALIGHT_TEST_DURATIONS="$PWD/.alight/test-durations.json")
fi

# One worker more than there are cores (at most 4: each worker holds its own models), one file per worker at a
# time so a file's shared set-up is built once, the longest files first (tests/longest_first.py). The tests wait
# on servers, subprocesses and sandboxes: serially the suite kept under one of two cores busy, and on 2 cores
# 3 workers ran it 1-2 minutes sooner than 2 (docs/testing.md, Workers).
cores=$(nproc)
# A container held to fewer CPUs than it sees (cgroup v2 quota) counts its quota.
if read -r quota period 2>/dev/null </sys/fs/cgroup/cpu.max && [ "$quota" != max ]; then
  cores=$(( (quota + period - 1) / period ))
fi
workers=${ALIGHT_TEST_WORKERS:-$((cores + 1))}
[ "$workers" -gt 4 ] && workers=4
[ "$workers" -lt 1 ] && workers=1

stamp "pytest ($workers workers)"
set +e
env "${recording[@]}" .venv/bin/pytest -q -p no:cacheprovider -n "$workers" --dist loadfile --no-loadscope-reorder --durations=25 "$@"
rc=$?
set -e
stamp "pytest done"
# 5 = no tests collected: only an error when the whole suite is empty.
if [ "$rc" -eq 5 ] && [ "$#" -gt 0 ]; then rc=0; fi
if [ "$rc" -ne 0 ]; then status=$rc; fi
if [ "$#" -eq 0 ]; then
  # docs/integrations.md's harness matrix is what this run's tests earned, cell by cell.
  .venv/bin/python scripts/harness_matrix.py --check --last || status=1
  # Each integration at the lowest framework versions it declares.
  stamp "lowest versions"
  bash integrations/test_lowest_versions.sh || status=1
fi
stamp "done, status $status"
exit "$status"
