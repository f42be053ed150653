#!/usr/bin/env bash
# shellcheck shell=bash disable=SC2034,SC2119,SC2120,SC2154 # sourced: lib.sh and run.sh set and use these
# XMPP servers as benchmark peers of the gateway: ejabberd (Debian's 23.01) and Prosody
# (Debian's 0.12), each an instance of the run's own in a temporary folder, serving XMPP
# over WebSocket (RFC 7395, no TLS) on 127.0.0.1 at a free port, storing everything
# (accounts, rooms, the archive) in a database of its own on the run's PostgreSQL server
# (lib.sh start_pg: tools/pg_server.sh, synchronous_commit on, fsync on, the server the
# gateway's PostgreSQL rows use). Configurations: tools/bench/peers/ejabberd.yml.in and
# prosody.cfg.lua.in (every setting that matters for fairness is commented there).
# Sourced by tools/bench/run.sh (after lib.sh, bench_init done):
#   xmpp_install            the Debian packages (ejabberd erlang-p1-pgsql prosody
#                           lua-dbi-postgresql), only those missing; the system services
#                           their postinst starts (0.0.0.0:5222, 5280, ...) are stopped
#                           and disabled: the benchmark never uses them
#   start_ejabberd          ejabberd: `erl ... -s ejabberd` run directly (what ejabberdctl
#                           foreground runs, without its switch to the ejabberd user and
#                           without Erlang distribution: no node name, no epmd), as the
#                           caller; its schema: the package's pg.new.sql (new_sql_schema)
#   start_prosody           prosody --config FILE -F (foreground, run_as_root); its schema:
#                           the tables its mod_storage_sql creates (prosodyctl register
#                           of the first user makes them; prosody ships no .sql file)
#       Both set SRV_PID (the server's process: beam.smp, lua5.4), SRV_PORT, XMPP_URL (its
#       ws:// URL), XMPP_DB (its database's URL), XMPP_KIND, and XMPP_PIDS (see xmpp_pids).
#   xmpp_pids [PID]         XMPP_PIDS="PID,POSTMASTER,CHILDREN..." (PID: default SRV_PID):
#                           the server and every PostgreSQL process at that moment, for
#                           gw_load --server-pid (its CPU is the server's own + the
#                           database's); call it again once the server has connected
#   pg_cpu_s                the PostgreSQL server's CPU seconds so far (every process of
#                           it, those that ended too): what run.sh's xmpp workload adds
#                           to each server's own CPU, the same way for all three
#   xmpp_register PREFIX N  accounts PREFIXu0 .. PREFIXu(N-1), password "bench": one SQL
#                           INSERT (ejabberdctl/prosodyctl register run one process a user,
#                           about 1 s each for ejabberdctl); prosody's first user with
#                           prosodyctl register (which makes its tables)
#   xmpp_archived [PREFIX]  messages archived in PostgreSQL for the rooms PREFIX...
#   stop_xmpp               stops the server (TERM, then KILL after 5 s), drops its database
# Run directly: tools/bench/xmpp.sh check: installs what is missing, starts PostgreSQL and
# each server in turn, runs tools/bench/xmpp_check.py against it (SASL PLAIN login over
# WebSocket, MUC join, groupchat reflected and delivered, MAM query of the room) and
# counts the archive rows in PostgreSQL; exit 0 when both pass.

XMPP_DOMAIN=localhost
XMPP_MUC=conference.localhost
XMPP_URL='' XMPP_DB='' XMPP_KIND='' XMPP_PIDS='' XMPP_DIR=''

xmpp_install() {
  local pkgs=(ejabberd erlang-p1-pgsql prosody lua-dbi-postgresql) missing=() p sudo=
  for p in "${pkgs[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "bench: installing ${missing[*]}" >&2
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}" >&2
  # Their postinst starts the system services (ejabberd on 0.0.0.0:5222, 5269, 5280, 5443;
  # prosody on 5222, 5269): stopped and kept from starting at boot. The benchmark runs
  # instances of its own; these would only hold ports and take CPU.
  local s
  for s in ejabberd prosody; do
    [[ " ${missing[*]} " == *" $s "* ]] || continue
    if [ -d /run/systemd/system ]; then
      $sudo systemctl disable --now "$s" >&2 || true
    else
      $sudo service "$s" stop >&2 || true
      $sudo update-rc.d "$s" disable >&2 || true
    fi
  done
  # ejabberdctl started Erlang's port mapper (epmd, 0.0.0.0:4369) for that service: gone
  # with it when no node is left (the benchmark's ejabberd runs without distribution).
  if [[ " ${missing[*]} " == *" ejabberd "* ]] && command -v epmd >/dev/null &&
     ! epmd -names 2>/dev/null | grep -q '^name '; then
    epmd -kill >/dev/null 2>&1 || true
  fi
}

# xmpp_pids [PID]: the server's pid and every PostgreSQL process of the run's server.
xmpp_pids() {
  local pid=${1:-$SRV_PID} pm l
  pm=$(head -1 "$BENCH_PGDIR/data/postmaster.pid" 2>/dev/null || true)
  l=$pid
  if [ -n "$pm" ]; then
    l+=",$pm"
    local c
    for c in $(pgrep -P "$pm" || true); do l+=",$c"; done
  fi
  XMPP_PIDS=$l
}

# pg_cpu_s: CPU seconds of the run's PostgreSQL server so far, every process of it: the
# postmaster's own and those of its children it has reaped (a backend that ended: cutime,
# cstime), and its live children's (backends, WAL writer, checkpointer, autovacuum). Read
# before and after a load, the difference is the database's share of the work, exact
# even when processes come and go (gw_load --server-pid sums at most 8 pids and loses
# one that ends during the run).
pg_cpu_s() {
  local pm c
  pm=$(head -1 "$BENCH_PGDIR/data/postmaster.pid" 2>/dev/null || true)
  [ -n "$pm" ] || { echo 0; return 0; }
  { sed 's/.*) //' "/proc/$pm/stat" | awk '{print $12 + $13 + $14 + $15}'
    for c in $(pgrep -P "$pm" || true); do
      sed 's/.*) //' "/proc/$c/stat" 2>/dev/null | awk '{print $12 + $13}'
    done; } | awk -v t="$(getconf CLK_TCK)" '{s += $1} END {printf "%.3f\n", s / t}'
}

# xmpp_fill TEMPLATE OUT PORT: the template with the run's values.
xmpp_fill() {
  local u=${XMPP_DB#postgresql://} hp db
  hp=${u#*@} hp=${hp%%/*} db=${u##*/}
  sed -e "s#@DIR@#$XMPP_DIR#g" -e "s#@DOMAIN@#$XMPP_DOMAIN#g" -e "s#@PORT@#$3#g" \
    -e "s#@PGHOST@#${hp%:*}#g" -e "s#@PGPORT@#${hp##*:}#g" -e "s#@PGDB@#$db#g" \
    -e "s#@PGUSER@#${u%%@*}#g" "$1" >"$2"
}

# xmpp_prepare KIND: a fresh folder and database for KIND.
xmpp_prepare() {
  start_pg || return 1
  XMPP_KIND=$1
  XMPP_DIR="$BENCH_WORK/$1"
  rm -rf "${XMPP_DIR:?}"
  mkdir -p "$XMPP_DIR"
  XMPP_DB=$(pg_newdb) || return 1
  SRV_PORT=$(free_port) || return 1
}

start_ejabberd() {
  xmpp_prepare ejabberd || return 1
  local d=$XMPP_DIR
  mkdir -p "$d/spool" "$d/logs"
  psql -q -v ON_ERROR_STOP=1 "$XMPP_DB" -f /usr/share/ejabberd/sql/pg.new.sql >/dev/null ||
    { echo "bench: ejabberd's schema did not load" >&2; return 1; }
  xmpp_fill "$bench_root/tools/bench/peers/ejabberd.yml.in" "$d/ejabberd.yml" "$SRV_PORT"
  # What ejabberdctl foreground runs (its defaults: kernel poll, 250,000 processes, 32,000
  # ports), without a node name: no Erlang distribution, no epmd. Its schedulers: one
  # per core (Erlang's default). SIGTERM stops it (init:stop).
  bench_spawn "$BENCH_WORK/ejabberd.log" env EJABBERD_CONFIG_PATH="$d/ejabberd.yml" \
    EJABBERD_LOG_PATH="$d/logs/ejabberd.log" ERL_LIBS=/usr/lib/x86_64-linux-gnu \
    ERL_MAX_PORTS=32000 ERL_CRASH_DUMP="$d/logs/erl_crash.dump" ERL_CRASH_DUMP_BYTES=0 \
    HOME="$d" erl -noinput -noshell +K true +P 250000 -mnesia dir "\"$d/spool\"" -s ejabberd
  # env and erl exec into beam.smp: SRV_PID is the server's own process.
  wait_port "$SRV_PORT" "$SRV_PID" || { tail -5 "$d/logs/ejabberd.log" >&2; return 1; }
  XMPP_URL="ws://127.0.0.1:$SRV_PORT/ws"
  xmpp_pids
}

start_prosody() {
  xmpp_prepare prosody || return 1
  local d=$XMPP_DIR
  mkdir -p "$d/data" "$d/certs"
  xmpp_fill "$bench_root/tools/bench/peers/prosody.cfg.lua.in" "$d/prosody.cfg.lua" "$SRV_PORT"
  bench_spawn "$BENCH_WORK/prosody.log" prosody --config "$d/prosody.cfg.lua" -F
  wait_port "$SRV_PORT" "$SRV_PID" || { tail -5 "$d/prosody.log" >&2; return 1; }
  XMPP_URL="ws://127.0.0.1:$SRV_PORT/xmpp-websocket"
  xmpp_pids
}

xmpp_register() {
  local prefix=$1 n=$2 from=0
  [ "$n" -gt 0 ] || return 0
  case "$XMPP_KIND" in
    ejabberd)
      psql -q -v ON_ERROR_STOP=1 "$XMPP_DB" -c "INSERT INTO users (username, server_host, password)
        SELECT '${prefix}u' || g, '$XMPP_DOMAIN', 'bench' FROM generate_series(0, $((n - 1))) g
        ON CONFLICT DO NOTHING" ;;
    prosody)
      prosodyctl --config "$XMPP_DIR/prosody.cfg.lua" register "${prefix}u0" "$XMPP_DOMAIN" bench \
        >>"$XMPP_DIR/prosodyctl.log" 2>&1 ||
        { echo "bench: prosodyctl register failed:" >&2; tail -3 "$XMPP_DIR/prosodyctl.log" >&2; return 1; }
      from=1
      [ "$n" -gt 1 ] || return 0
      psql -q -v ON_ERROR_STOP=1 "$XMPP_DB" -c "INSERT INTO prosody (host, \"user\", store, key, type, value)
        SELECT '$XMPP_DOMAIN', '${prefix}u' || g, 'accounts', 'password', 'string', 'bench'
        FROM generate_series($from, $((n - 1))) g
        WHERE NOT EXISTS (SELECT 1 FROM prosody p WHERE p.host = '$XMPP_DOMAIN'
                          AND p.\"user\" = '${prefix}u' || g AND p.store = 'accounts')" ;;
    *) echo "bench: xmpp_register: no XMPP server started" >&2; return 1 ;;
  esac
}

stop_xmpp() {
  stop_srv
  [ -z "$XMPP_DB" ] || pg_dropdb "$XMPP_DB"
  [ -z "$XMPP_DIR" ] || [ -n "${BENCH_KEEP:-}" ] || rm -rf "$XMPP_DIR"
  XMPP_URL='' XMPP_DB='' XMPP_KIND='' XMPP_PIDS='' XMPP_DIR='' SRV_PID='' SRV_PORT=''
}

# xmpp_archived [ROOM_PREFIX]: the number of archived messages of the current server's
# rooms (those whose name starts with ROOM_PREFIX), from PostgreSQL.
xmpp_archived() {
  case "$XMPP_KIND" in
    ejabberd) psql -Atq "$XMPP_DB" -c "SELECT count(*) FROM archive WHERE username LIKE '${1:-}%@$XMPP_MUC'" ;;
    prosody) psql -Atq "$XMPP_DB" -c "SELECT count(*) FROM prosodyarchive WHERE host = '$XMPP_MUC'
                                      AND store = 'muc_log' AND \"user\" LIKE '${1:-}%'" ;;
  esac
}

xmpp_check() {
  local k ok=0 n
  for k in ejabberd prosody; do
    "start_$k" || { echo "xmpp.sh: $k did not start" >&2; ok=1; stop_xmpp; continue; }
    xmpp_register chk 2
    if timeout 60 /usr/bin/python3 "$bench_root/tools/bench/xmpp_check.py" "$XMPP_URL" \
         "$XMPP_DOMAIN" "$XMPP_MUC" chku0 chku1 check 5; then
      n=$(xmpp_archived)
      echo "xmpp.sh: $k: $n archived messages in PostgreSQL ($XMPP_DB)"
      [ "$n" = 5 ] || { echo "xmpp.sh: $k: expected 5" >&2; ok=1; }
    else
      ok=1
    fi
    stop_xmpp
  done
  return $ok
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -Eeuo pipefail
  case "${1:-}" in
    check) ;;
    *) sed -n '2,/^$/{/^#/p}' "$0"; exit 2 ;;
  esac
  . "$(dirname "$0")/lib.sh"
  command -v psql >/dev/null || { echo "xmpp.sh: psql missing: tools/setup.sh installs it" >&2; exit 1; }
  xmpp_install
  bench_init
  xmpp_check
fi
