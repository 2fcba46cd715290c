#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the tests: `start` prints a SQLAlchemy URL, `stop` removes it.
# Usage: URL=$(bash scripts/postgres.sh start [DIR]);  bash scripts/postgres.sh stop [DIR]
# DIR defaults to $ALIGHT_PG_DIR or /tmp/alight-pg-<uid>. Uses the Debian `postgresql` package,
# installing it when initdb is missing; runs the server as the `postgres` user when we are root.
set -euo pipefail
cmd=${1:-}
dir=${2:-${ALIGHT_PG_DIR:-/tmp/alight-pg-$(id -u)}}

find_bin() {
    local initdb
    initdb=$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -z "$initdb" ] && command -v initdb >/dev/null; then initdb=$(command -v initdb); fi
    if [ -z "$initdb" ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "postgres.sh: installing the Debian postgresql package" >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 \
                || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
            initdb=$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
        else
            echo "postgres.sh: initdb not found; install PostgreSQL (apt-get install postgresql)" >&2
            exit 1
        fi
    fi
    dirname "$initdb"
}

# Root may not run initdb/postgres: run them as the postgres (or nobody) user instead.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        local user=postgres
        id "$user" >/dev/null 2>&1 || user=nobody
        su -s /bin/bash "$user" -c "$(printf '%q ' "$@")"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

case "$cmd" in
start)
    bin=$(find_bin)
    if [ -f "$dir/port" ] && as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        echo "postgresql+psycopg://alight@127.0.0.1:$(cat "$dir/port")/alight"
        exit 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    port=$(free_port)
    echo "$port" >"$dir/port"
    [ "$(id -u)" = 0 ] && chown -R "$(id -u postgres 2>/dev/null || id -u nobody)" "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U alight --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    # Durability off: this cluster lives for one test run and is thrown away.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U alight alight
    echo "postgresql+psycopg://alight@127.0.0.1:$port/alight"
    ;;
stop)
    if [ -d "$dir/data" ]; then
        bin=$(find_bin)
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start|stop [DIR]" >&2
    exit 2
    ;;
esac
