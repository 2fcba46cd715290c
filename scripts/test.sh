#!/usr/bin/env bash
# The whole test run: install the workspace, start a throwaway PostgreSQL, lint, type-check, test
# (and, with no arguments, the integrations at their lowest declared framework versions).
# Usage: bash scripts/test.sh [pytest args...]   (CI runs it with none: .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

pg_dir=$(mktemp -d /tmp/alight-pg.XXXXXX)
trap 'bash scripts/postgres.sh stop "$pg_dir"' EXIT
ALIGHT_TEST_PG_URL=$(bash scripts/postgres.sh start "$pg_dir")
export ALIGHT_TEST_PG_URL
echo "test PostgreSQL: $ALIGHT_TEST_PG_URL"

status=0
.venv/bin/ruff check . || status=1
.venv/bin/ruff format --check . || status=1
.venv/bin/pyright || status=1

set +e
.venv/bin/pytest -q -p no:cacheprovider --durations=25 "$@"
rc=$?
set -e
# 5 = no tests collected: only an error when the whole suite is empty.
if [ "$rc" -eq 5 ] && [ "$#" -gt 0 ]; then rc=0; fi
if [ "$rc" -ne 0 ]; then status=$rc; fi
# The whole run also tests each integration at the lowest framework versions it declares.
if [ "$#" -eq 0 ]; then
  bash integrations/test_lowest_versions.sh || status=1
fi
exit "$status"
