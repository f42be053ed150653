#!/usr/bin/env bash
# A PostgreSQL 15 server of the project's own, in a folder, for tests and benchmarks: never
# the machine's cluster. It listens on 127.0.0.1 at a free port and on a unix socket in
# the folder, with one superuser `gw` that connects without a password (trust: loopback
# and the folder's socket only). As root it runs as the `postgres` user (initdb refuses
# root), so the folder is made under /tmp, where that user can reach it.
#
#   tools/pg_server.sh start DIR                   initdb if needed, start; prints the URL
#   tools/pg_server.sh stop DIR                     fast shutdown
#   tools/pg_server.sh restart-immediate DIR        crash-like restart (no checkpoint)
#   tools/pg_server.sh kill DIR                     SIGKILL the postmaster
#   tools/pg_server.sh url DIR [DBNAME]             the URL of a database on it
#   tools/pg_server.sh with CMD [ARGS...]           a temporary server for CMD, whose
#                                                   environment has GW_TEST_PG (its URL)
# PG_MAX_CONNECTIONS (default 200) is the server's max_connections at start.
set -euo pipefail

bindir=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
url_of() { # DIR [DB]
  local dir=$1 db=${2:-postgres}
  echo "postgresql://gw@127.0.0.1:$(cat "$dir/port")/$db"
}

start() { # DIR
  local dir=$1
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg "$bindir/initdb" -D "$dir/data" -U gw --auth=trust -E UTF8 --locale=C.UTF-8 \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  [ -f "$dir/port" ] || free_port >"$dir/port"
  local port; port=$(cat "$dir/port")
  # Durable as in production (fsync, synchronous_commit on); small enough for CI. After a
  # kill the old server's processes may hold its shared memory for a moment: try again.
  local try
  for try in 1 2 3 4 5 6 7 8 9 10; do
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "$(server_opts "$dir" "$port")" >/dev/null 2>&1 && { url_of "$dir"; return; }
    sleep 1
  done
  tail -n 20 "$dir/server.log" >&2
  exit 1
}

server_opts() { # DIR PORT (PG_MAX_CONNECTIONS: more clients, for pgbench at 1,024)
  echo "-p $2 -k $1 -c listen_addresses=127.0.0.1 -c max_connections=${PG_MAX_CONNECTIONS:-200}" \
       "-c shared_buffers=128MB -c max_wal_size=1GB -c log_min_messages=warning"
}

pgctl() { # DIR ARGS...
  local dir=$1; shift
  as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" "$@" >/dev/null
}

case "${1:-}" in
  start) start "$2" ;;
  stop) pgctl "$2" -w -t 60 -m fast stop ;;
  restart-immediate)
    pgctl "$2" -w -t 60 -m immediate restart -o "$(server_opts "$2" "$(cat "$2/port")")" ;;
  kill)
    pid=$(head -n 1 "$2/data/postmaster.pid")
    kill -KILL "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done ;;
  url) url_of "$2" "${3:-postgres}" ;;
  with)
    shift
    dir=$(mktemp -d /tmp/gw-pg-XXXXXX)
    # The server goes with the command, however it ends.
    trap 'pgctl "$dir" -w -t 60 -m fast stop 2>/dev/null || true; rm -rf "$dir"' EXIT
    GW_TEST_PG=$(start "$dir")
    export GW_TEST_PG
    set +e
    "$@"
    rc=$?
    exit $rc ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
