#!/usr/bin/env bash
# A PostgreSQL 15 server of the project's own, in a folder, for tests and benchmarks: never
# the machine's cluster. It listens on 127.0.0.1 at a free port and on a unix socket in
# the folder, with one superuser `gw` that connects without a password (trust: loopback
# and the folder's socket only). As root it runs as the `postgres` user (initdb refuses
# root), so the folder is made under /tmp, where that user can reach it.
#
#   tools/pg_server.sh start DIR                   initdb if needed, start; prints the URL
#                                                   (a folder that holds a standby starts
#                                                   as a standby again)
#   tools/pg_server.sh stop DIR                     fast shutdown
#   tools/pg_server.sh restart-immediate DIR        crash-like restart (no checkpoint)
#   tools/pg_server.sh kill DIR                     SIGKILL the postmaster
#   tools/pg_server.sh url DIR [DBNAME]             the URL of a database on it
#   tools/pg_server.sh with CMD [ARGS...]           a temporary server for CMD, whose
#                                                   environment has GW_TEST_PG (its URL)
#   tools/pg_server.sh free-port                    a port nobody listens on, below the
#                                                   ephemeral range (for other servers of
#                                                   a test: tests/deploy/test_nginx.sh)
# High availability (a primary and one synchronous streaming standby, each in its folder):
#   tools/pg_server.sh start-standby PRIMARY_DIR STANDBY_DIR
#                                                   a base backup of the running primary
#                                                   into STANDBY_DIR, started as its
#                                                   standby on a port of its own; the
#                                                   primary then waits for it at every
#                                                   commit (synchronous). Prints its URL
#   tools/pg_server.sh promote DIR                  the standby becomes a primary; returns
#                                                   once it takes writes
#   tools/pg_server.sh rejoin OLD_DIR NEW_PRIMARY_DIR
#                                                   the old primary (killed or stopped)
#                                                   starts over as the synchronous standby
#                                                   of the new one (its data is replaced
#                                                   by a base backup; same port). Prints
#                                                   its URL
#   tools/pg_server.sh multi-url DIR1 DIR2 [DBNAME] a libpq URL naming both servers that
#                                                   connects to whichever takes writes
# Automatic failover (Patroni 3.0 over etcd 3.4, Debian's; synchronous_mode on): three etcd
# members and two PostgreSQL servers, each under a Patroni that a supervisor loop of this
# script's restarts when it dies (as systemd's Restart=always would), all on 127.0.0.1 and
# as the postgres user, in DIR:
#   tools/pg_server.sh ha-up DIR                    starts them, waits for a leader and a
#                                                   streaming synchronous replica, makes
#                                                   the database gw; prints its multi-host
#                                                   URL on its first line
#   tools/pg_server.sh ha-url DIR [DBNAME]          that URL (target_session_attrs=read-write;
#                                                   DBNAME defaults to gw)
#   tools/pg_server.sh ha-status DIR                a line per member: name, role (leader,
#                                                   sync_standby, replica) and state
#   tools/pg_server.sh ha-wait DIR [SECONDS]        until a leader and a sync_standby
#                                                   (default 90 s); prints the status
#   tools/pg_server.sh ha-kill-leader DIR           SIGKILL of the leader's postmaster and of
#   tools/pg_server.sh ha-kill-replica DIR          its Patroni (the replica's); prints its
#                                                   name. Its supervisor starts Patroni again
#                                                   9 s later (the leader key's ttl, 6 s, and
#                                                   more: a machine back after a while; one
#                                                   back sooner would keep the key and its
#                                                   role), which brings it back as a replica
#                                                   (pg_rewind, or a new copy)
#   tools/pg_server.sh ha-down DIR                  stops everything (and removes nothing)
# Shards (store.h, "Shards"): K databases, each the gateway's shard, over one slot map that
# gives each an equal share of the 4,096 slots (docs/DEPLOY.md, "Shards"):
#   tools/pg_server.sh shards-up DIR K              K servers (DIR/s0 ...), each with the
#                                                   database gw; writes DIR/slots.map and
#                                                   prints the store URL shards:DIR/slots.map
#   tools/pg_server.sh shards-up DIR K ha           K Patroni pairs (DIR/s0 ...) over the one
#                                                   etcd of DIR/s0; the map is also put in
#                                                   that etcd under /gw/slots, and the URL
#                                                   printed is etcd://HOSTS/gw/slots
#   tools/pg_server.sh shards-map K URL...          a slot map's text for these URLs
#   tools/pg_server.sh shards-down DIR              stops them all (and removes nothing)
# A primary that was killed and is started again with `start` instead of `rejoin` still
# waits for its old standby at every commit: rejoin it. Every wait is bounded (60 s for
# a server to start, promote or become synchronous; 120 s for a base backup).
# PG_MAX_CONNECTIONS (default 200) is the server's max_connections at start; a standby
# needs at least its primary's.
set -Eeuo pipefail
# A command that ends the script says so: which, where and its exit code (its own error is
# above). Only the script's own shell speaks: a subshell's failure reaches it as its own.
trap 'err=$?; [ "$BASHPID" != $$ ] ||
  echo "pg_server.sh: failed (exit $err): line $LINENO: $BASH_COMMAND" >&2' ERR

bindir=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
# Ports are chosen below the ephemeral range (32768-60999 by default): a port taken from
# that range is free when chosen, but every outgoing connection on the machine may take it
# as its local port before the server binds it (seen: "Address already in use" at start,
# and at a restart on the same port), and a port below it is taken only by a listener.
free_port() { # a port nobody listens on, below the ephemeral range (see the comment above)
  /usr/bin/python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    port = random.randrange(10000, low) if low > 11000 else 0
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        print(s.getsockname()[1])
        break
    except OSError:
        pass
    finally:
        s.close()'
}
url_of() { # DIR [DB]
  local dir=$1 db=${2:-postgres}
  echo "postgresql://gw@127.0.0.1:$(cat "$dir/port")/$db"
}
usage() {
  sed -n '2,/^set /{/^#/p}' "$0"
  exit 2
}
die() {
  echo "pg_server.sh: $*" >&2
  exit 1
}
# The pid of the folder's postmaster while it runs, else nothing. Its pid file outlives a
# kill, and with pids wrapping (pid_max is 32768 on many machines) the number may be another process's
# by now, which pg_ctl stop or kill would signal: the postmaster's working folder is its
# data folder.
running_pid() { # DIR
  local pid
  pid=$(head -n 1 "$1/data/postmaster.pid" 2>/dev/null) || return 0
  if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(readlink -f "$1/data")" ]; then
    echo "$pid"
  fi
}
# A folder this script made (its port file): rejoin removes what is in it.
need_dir() { # DIR
  [ -n "$1" ] && [ -f "$1/port" ] || die "$1: not a server folder of pg_server.sh (no port file)"
}

# synchronous_standby_names lives in DIR/sync_standby.conf, outside the data folder, which
# postgresql.conf includes by a path relative to itself. pg_basebackup copies the data
# folder (postgresql.conf and postgresql.auto.conf with it), not this file: a standby made
# from the primary, once promoted, waits for no standby that does not exist. Set with
# ALTER SYSTEM it would land in postgresql.auto.conf, be copied, and every commit on a
# promoted standby would hang. The file is there, empty, in every folder (a missing one
# is skipped, but logged by every process at every start and reload).
SYNC_CONF=sync_standby.conf
no_sync_standby() { # DIR
  echo "# synchronous_standby_names: none (tools/pg_server.sh)" >"$1/$SYNC_CONF"
}

start() { # DIR
  local dir=$1
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg "$bindir/initdb" -D "$dir/data" -U gw --auth=trust -E UTF8 --locale=C.UTF-8 \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # Also in folders made before the standby commands existed (a standby's copy has it).
  grep -q "$SYNC_CONF" "$dir/data/postgresql.conf" ||
    echo "include_if_exists = '../$SYNC_CONF' # see tools/pg_server.sh" \
      >>"$dir/data/postgresql.conf"
  [ -f "$dir/$SYNC_CONF" ] || no_sync_standby "$dir"
  # max_connections comes from the command line (server_opts); initdb's line in the file,
  # another value, would make every reload log that the file "contains errors".
  if grep -q '^max_connections' "$dir/data/postgresql.conf"; then
    as_pg sed -i 's/^max_connections/#&/' "$dir/data/postgresql.conf"
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

server_opts() { # DIR PORT (PG_MAX_CONNECTIONS: more clients, for pgbench at 1,024;
              # PG_EXTRA_OPTS: more -c settings, for benchmarks)
  echo "-p $2 -k $1 -c listen_addresses=127.0.0.1 -c max_connections=${PG_MAX_CONNECTIONS:-200}" \
       "-c shared_buffers=128MB -c max_wal_size=1GB -c log_min_messages=warning ${PG_EXTRA_OPTS:-}"
}

pgctl() { # DIR ARGS...
  local dir=$1; shift
  as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" "$@" >/dev/null
}

psql_on() { # DIR SQL: one statement on its `postgres` database, unaligned output
  PGCONNECT_TIMEOUT=5 "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 \
    -h 127.0.0.1 -p "$(cat "$1/port")" -U gw -d postgres -c "$2"
}

wait_sql() { # DIR SQL SECONDS: until SQL answers 1 (true when it did)
  local end=$((SECONDS + $3))
  while [ "$SECONDS" -lt "$end" ]; do
    [ "$(psql_on "$1" "$2" 2>/dev/null)" = 1 ] && return 0
    sleep 0.2
  done
  return 1
}

# The standby's name for the primary (application_name, synchronous_standby_names): from
# its port, which stays with the folder across rejoins, and a plain identifier, so that
# synchronous_standby_names needs no quoting.
standby_name() { # DIR
  echo "gw_standby_$(cat "$1/port")"
}

# A copy of the running primary into DIR/data, set up to stream from it (-R writes
# standby.signal and primary_conninfo, with our application_name in it). -c fast: the
# default spread checkpoint could take minutes.
base_backup() { # PRIMARY_DIR DIR
  local primary=$1 dir=$2
  [ ! -e "$dir/data" ] || die "$dir/data exists"
  as_pg timeout 120 "$bindir/pg_basebackup" -D "$dir/data" -R -c fast -X stream \
    -d "host=127.0.0.1 port=$(cat "$primary/port") user=gw application_name=$(standby_name "$dir")" \
    >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
}

# The primary waits for the standby at every commit (synchronous_commit is on, the
# default), from once this returns.
require_sync() { # PRIMARY_DIR STANDBY_DIR
  local primary=$1 name; name=$(standby_name "$2")
  echo "synchronous_standby_names = '$name' # tools/pg_server.sh" >"$primary/$SYNC_CONF"
  pgctl "$primary" reload
  wait_sql "$primary" "SELECT count(*) FROM pg_stat_replication
                       WHERE application_name = '$name' AND sync_state = 'sync'" 60 ||
    { tail -n 20 "$2/server.log" >&2; die "$name is not a synchronous standby of $primary after 60 s"; }
}

start_standby() { # PRIMARY_DIR STANDBY_DIR
  local primary=$1 dir=$2
  need_dir "$primary"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  [ -f "$dir/port" ] || free_port >"$dir/port"
  base_backup "$primary" "$dir"
  start "$dir" >/dev/null
  require_sync "$primary" "$dir"
  url_of "$dir"
}

promote() { # DIR
  local dir=$1
  need_dir "$dir"
  [ -f "$dir/data/standby.signal" ] || die "$dir is not a standby"
  # A standby made by this script names none; a name left from the folder's time as a
  # primary would make the promoted server wait for a standby at every commit.
  if grep -q '^synchronous_standby_names' "$dir/$SYNC_CONF" 2>/dev/null; then
    no_sync_standby "$dir"
    pgctl "$dir" reload
  fi
  pgctl "$dir" -w -t 60 promote
  wait_sql "$dir" "SELECT (NOT pg_is_in_recovery())::int" 60 ||
    die "$dir still in recovery 60 s after promote"
  # Its primary_conninfo (from -R) is ignored now, but a base backup taken from it later
  # (rejoin) would copy it beside the new one that -R adds: keep the copy to one.
  psql_on "$dir" "ALTER SYSTEM RESET primary_conninfo" >/dev/null
}

rejoin() { # OLD_DIR NEW_PRIMARY_DIR
  local old=$1 new=$2
  need_dir "$old"
  need_dir "$new"
  # Whatever is left of it goes: it may hold WAL its successor never had (written but not
  # confirmed when it died), so it cannot follow it as it is (pg_rewind could; a new copy
  # is simpler and as quick for test-sized data).
  [ -z "$(running_pid "$old")" ] || pgctl "$old" -w -t 60 -m immediate stop
  rm -rf "${old:?}/data"
  no_sync_standby "$old"
  base_backup "$new" "$old"
  start "$old" >/dev/null
  require_sync "$new" "$old"
  url_of "$old"
}

# ---- automatic failover: Patroni over etcd ------------------------------------------------

# Patroni: loop_wait + 2 * retry_timeout <= ttl. A dead leader's key lapses 5-6 s after its
# kill (it is renewed every loop_wait), and etcd's watch wakes the replica at once; on
# loopback, 2 s without an answer from etcd or PostgreSQL is trouble, not a slow network
# (deploy/patroni/15-main.yml weighs real machines).
HA_TTL=6 HA_LOOP=1 HA_RETRY=2
HA_RESTART=$((HA_TTL + 3))     # a killed member's Patroni starts again after this

ha_env() { # DIR: the ports and names ha-up chose
  [ -f "$1/ha.env" ] || die "$1: not an HA folder of pg_server.sh (no ha.env)"
  # shellcheck disable=SC1091
  . "$1/ha.env"
}

# pgrep -f patterns for one member's processes.
ha_patroni_pid() { pgrep -f "patroni $1/patroni.yml" | head -n 1 || true; }

ha_yaml() { # DIR I: member pgI's Patroni configuration
  local dir=$1 i=$2 pg rest
  eval "pg=\$PG_PORT$i rest=\$REST_PORT$i"
  cat <<YAML
# Member pg$i of tools/pg_server.sh's HA test cluster (deploy/patroni/ has the commented
# one for real machines).
scope: $SCOPE
name: pg$i
restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest
etcd3:
  hosts: $ETCD_HOSTS
bootstrap:
  dcs:
    ttl: $HA_TTL
    loop_wait: $HA_LOOP
    retry_timeout: $HA_RETRY
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_log_hints: 'on'
        max_connections: ${PG_MAX_CONNECTIONS:-200}
        shared_buffers: 128MB
        max_wal_size: 1GB
        wal_keep_size: 2GB  # a killed leader rejoins by streaming what it missed (its slot went with it)
        log_min_messages: warning
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
postgresql:
  listen: 127.0.0.1:$pg
  connect_address: 127.0.0.1:$pg
  data_dir: $dir/pg$i/data
  bin_dir: $bindir
  pgpass: $dir/pg$i/pgpass
  authentication:
    superuser:
      username: gw
    replication:
      username: gw
    rewind:
      username: gw
  parameters:
    unix_socket_directories: $dir/pg$i
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
YAML
}

ha_up() { # DIR [ETCD_HOSTS]: with ETCD_HOSTS, over that etcd (not started here, nor stopped)
  local dir=$1 own_etcd=${2:-} i
  [ ! -e "$dir/ha.env" ] || die "$dir: an HA cluster is there already (ha-down it, or use another folder)"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  {
    echo "SCOPE=gw-ha-$$-$RANDOM"
    for i in 1 2 3; do echo "ETCD_CLIENT$i=$(free_port)"; echo "ETCD_PEER$i=$(free_port)"; done
    for i in 1 2; do echo "PG_PORT$i=$(free_port)"; echo "REST_PORT$i=$(free_port)"; done
  } >"$dir/ha.env"
  ha_env "$dir"
  local cluster="" hosts=""
  for i in 1 2 3; do
    eval "cluster=\$cluster\${cluster:+,}e$i=http://127.0.0.1:\$ETCD_PEER$i"
    eval "hosts=\$hosts\${hosts:+,}127.0.0.1:\$ETCD_CLIENT$i"
  done
  [ -z "$own_etcd" ] || { hosts=$own_etcd; echo "ETCD_SHARED=1" >>"$dir/ha.env"; }
  echo "ETCD_HOSTS=$hosts" >>"$dir/ha.env"
  ETCD_HOSTS=$hosts
  rm -f "$dir/ha-down"
  for i in 1 2 3; do
    [ -z "$own_etcd" ] || break
    mkdir -p "$dir/etcd$i"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/etcd$i"
    local c p
    eval "c=\$ETCD_CLIENT$i p=\$ETCD_PEER$i"
    as_pg setsid etcd --name "e$i" --data-dir "$dir/etcd$i/data" \
      --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
      --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
      --initial-cluster "$cluster" --initial-cluster-token "$SCOPE" --initial-cluster-state new \
      --log-level warn --logger zap >"$dir/etcd$i.log" 2>&1 </dev/null &
    echo $! >"$dir/etcd$i/pid"
  done
  local end=$((SECONDS + 60))
  until ETCDCTL_API=3 etcdctl --endpoints="$hosts" --dial-timeout=2s endpoint health >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || { tail -n 5 "$dir"/etcd*.log >&2; die "etcd did not become healthy in 60 s"; }
    sleep 0.3
  done
  for i in 1 2; do
    mkdir -p "$dir/pg$i"
    ha_yaml "$dir" "$i" >"$dir/pg$i/patroni.yml"
    [ "$(id -u)" -eq 0 ] && chown -R postgres: "$dir/pg$i"
    # The supervisor: Patroni again HA_RESTART seconds after it ends, until ha-down (or
    # until its folder is gone). It leads its own process group, which ha-down kills.
    as_pg setsid bash -c "echo \$\$ >'$dir/pg$i/supervisor.pid'
      while [ ! -e '$dir/ha-down' ] && [ -f '$dir/pg$i/patroni.yml' ]; do
        patroni '$dir/pg$i/patroni.yml' >>'$dir/pg$i/patroni.log' 2>&1; sleep $HA_RESTART
      done" </dev/null >/dev/null 2>&1 &
    [ "$i" = 1 ] && sleep 2 # the first bootstraps; the second then copies it
  done
  ha_wait "$dir" 120 >/dev/null || { ha_status "$dir" >&2; tail -n 20 "$dir"/pg*/patroni.log >&2; exit 1; }
  # The gateway's database, as deploy/'s connection string names it (Patroni's initdb
  # makes only `postgres`); the commit waits for the synchronous standby, up by now.
  PGCONNECT_TIMEOUT=5 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -d "$(ha_url "$dir" postgres)" \
    -c "CREATE DATABASE gw" >/dev/null
  ha_url "$dir"
}

ha_url() { # DIR [DB]: DB defaults to gw, the database ha-up makes
  ha_env "$1"
  echo "postgresql://gw@127.0.0.1:$PG_PORT1,127.0.0.1:$PG_PORT2/${2:-gw}?target_session_attrs=read-write"
}

# The cluster as Patroni's DCS has it (GET /cluster of whichever member answers): a line
# per member, "NAME ROLE STATE" (role: leader, sync_standby, replica; a member absent is
# "down"). sync_standby is the one the /sync key names: the only one Patroni lets take
# over, so the one a failover needs.
ha_status() { # DIR
  ha_env "$1"
  local i rest json=""
  for i in 1 2; do
    eval "rest=\$REST_PORT$i"
    json=$(curl -s --max-time 2 "http://127.0.0.1:$rest/cluster" 2>/dev/null) && [ -n "$json" ] && break
  done
  /usr/bin/python3 -c 'import json,sys
try:
    m={x["name"]: x for x in json.loads(sys.argv[1]).get("members", [])}
except Exception:
    m={}
for n in ("pg1", "pg2"):
    x=m.get(n)
    print(n, x.get("role", "?"), x.get("state", "?")) if x else print(n, "down")' "$json"
}

# A leader, and a running replica that the /sync key names (ready to take over).
ha_ready() { # DIR
  local st; st=$(ha_status "$1")
  grep -q ' leader running' <<<"$st" && grep -q ' sync_standby running' <<<"$st"
}

ha_wait() { # DIR [SECONDS]
  local end=$((SECONDS + ${2:-90}))
  until ha_ready "$1"; do
    [ "$SECONDS" -lt "$end" ] || { ha_status "$1"; return 1; }
    sleep 0.5
  done
  ha_status "$1"
}

ha_role() { # DIR leader|replica: the name of the member in that role now (fails if none)
  local line
  line=$(ha_status "$1" | grep -E "$([ "$2" = leader ] && echo ' leader ' || echo ' (sync_standby|replica) ')" | head -n 1)
  [ -n "$line" ] || return 1
  echo "${line%% *}"
}

ha_kill() { # DIR leader|replica
  local dir=$1 name pid
  name=$(ha_role "$dir" "$2") || die "$dir: no $2 now"$'\n'"$(ha_status "$dir")"
  pid=$(ha_patroni_pid "$dir/$name")
  [ -z "$pid" ] || kill -KILL "$pid"
  pid=$(running_pid "$dir/$name")
  [ -z "$pid" ] || kill -KILL "$pid"
  for _ in $(seq 100); do [ -n "$(running_pid "$dir/$name")" ] || break; sleep 0.1; done
  echo "$name"
}

ha_down() { # DIR
  local dir=$1 i pid
  ha_env "$dir"
  as_pg touch "$dir/ha-down" 2>/dev/null || touch "$dir/ha-down"
  for i in 1 2; do
    pid=$(cat "$dir/pg$i/supervisor.pid" 2>/dev/null || true)
    [ -z "$pid" ] || kill -KILL -- "-$pid" 2>/dev/null || true # its loop, sleep and Patroni
    pid=$(ha_patroni_pid "$dir/pg$i")
    [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
    pid=$(running_pid "$dir/pg$i")
    [ -z "$pid" ] || as_pg "$bindir/pg_ctl" -D "$dir/pg$i/data" -w -t 30 -m immediate stop >/dev/null 2>&1 ||
      kill -KILL "$pid" 2>/dev/null || true
  done
  [ -z "${ETCD_SHARED:-}" ] || return 0 # another folder's etcd: its own ha-down stops it
  for i in 1 2 3; do
    pid=$(cat "$dir/etcd$i/pid" 2>/dev/null || true)
    [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    pgrep -f "etcd --name e[123] --data-dir $dir/" >/dev/null || break
    sleep 0.1
  done
  pkill -KILL -f "etcd --name e[123] --data-dir $dir/" 2>/dev/null || true
}

# ---- shards -------------------------------------------------------------------------------

shards_map() { # K URL...: a slot map giving each of the K an equal share of the 4,096 slots
  local k=$1 i lo hi; shift
  local urls=("$@")
  [ "$#" -eq "$k" ] || die "shards-map: $k URLs wanted, $# given"
  echo "# The slot map of $k shards (store.h, \"Shards\"), made by tools/pg_server.sh."
  echo "version 1"
  for ((i = 0; i < k; i++)); do echo "shard $i ${urls[$i]}"; done
  for ((i = 0; i < k; i++)); do
    lo=$((4096 * i / k)) hi=$((4096 * (i + 1) / k - 1))
    echo "slots $lo-$hi $i"
  done
}

shards_up() { # DIR K [ha]
  local dir=$1 k=$2 ha=${3:-} i urls=() hosts=""
  [[ "$k" =~ ^[1-9][0-9]?$ ]] && [ "$k" -le 64 ] || die "shards-up: K is 1 to 64"
  [ ! -e "$dir/shards" ] || die "$dir: shards are there already (shards-down them, or use another folder)"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  echo "$k${ha:+ ha}" >"$dir/shards"
  for ((i = 0; i < k; i++)); do
    if [ -n "$ha" ]; then
      urls+=("$(ha_up "$dir/s$i" "$hosts" | head -n 1)")
      [ -n "$hosts" ] || { ha_env "$dir/s0"; hosts=$ETCD_HOSTS; }
    else
      mkdir -p "$dir/s$i"
      start "$dir/s$i" >/dev/null
      PGCONNECT_TIMEOUT=5 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -d "$(url_of "$dir/s$i")" \
        -c "CREATE DATABASE gw" >/dev/null
      urls+=("$(url_of "$dir/s$i" gw)")
    fi
  done
  shards_map "$k" "${urls[@]}" >"$dir/slots.map"
  if [ -n "$ha" ]; then
    ETCDCTL_API=3 etcdctl --endpoints="$hosts" --dial-timeout=2s put /gw/slots <"$dir/slots.map" >/dev/null
    echo "etcd://$hosts/gw/slots"
  else
    echo "shards:$dir/slots.map"
  fi
}

shards_down() { # DIR
  local dir=$1 k i
  [ -f "$dir/shards" ] || die "$dir: not a shards folder of pg_server.sh (no shards file)"
  read -r k ha <"$dir/shards"
  for ((i = k - 1; i >= 0; i--)); do # s0 last: its etcd is the others' too
    if [ -n "${ha:-}" ]; then (ha_down "$dir/s$i") || true; else pgctl "$dir/s$i" -w -t 60 -m fast stop >/dev/null 2>&1 || true; fi
  done
}

case "${1:-}" in
  start) start "$2" ;;
  stop)
    [ -n "$(running_pid "$2")" ] || die "$2: no server running"
    pgctl "$2" -w -t 60 -m fast stop ;;
  restart-immediate)
    pgctl "$2" -w -t 60 -m immediate restart -o "$(server_opts "$2" "$(cat "$2/port")")" ;;
  kill)
    pid=$(running_pid "$2")
    [ -n "$pid" ] || die "$2: no server running"
    kill -KILL "$pid"
    # Until it is dead; a zombie counts: it holds no memory or socket, and where PID 1
    # reaps slowly (a container's init) it stays one for a second or more. Its pid in the
    # lock files makes a `start` meanwhile retry.
    for _ in $(seq 100); do [ -n "$(running_pid "$2")" ] || break; sleep 0.1; done ;;
  url) url_of "$2" "${3:-postgres}" ;;
  free-port) free_port ;;
  start-standby) [ $# -eq 3 ] || usage; start_standby "$2" "$3" ;;
  promote) [ $# -eq 2 ] || usage; promote "$2" ;;
  rejoin) [ $# -eq 3 ] || usage; rejoin "$2" "$3" ;;
  ha-up) [ $# -eq 2 ] || usage; ha_up "$2" ;;
  ha-url) [ $# -ge 2 ] || usage; ha_url "$2" "${3:-}" ;;
  ha-status) [ $# -eq 2 ] || usage; ha_status "$2" ;;
  ha-wait) [ $# -ge 2 ] || usage; ha_wait "$2" "${3:-90}" ;;
  ha-kill-leader) [ $# -eq 2 ] || usage; ha_kill "$2" leader ;;
  ha-kill-replica) [ $# -eq 2 ] || usage; ha_kill "$2" replica ;;
  ha-down) [ $# -eq 2 ] || usage; ha_down "$2" ;;
  shards-up) [ $# -ge 3 ] && [ $# -le 4 ] || usage; shards_up "$2" "$3" "${4:-}" ;;
  shards-map) [ $# -ge 3 ] || usage; shift; shards_map "$@" ;;
  shards-down) [ $# -eq 2 ] || usage; shards_down "$2" ;;
  multi-url)
    [ $# -ge 3 ] || usage
    echo "postgresql://gw@127.0.0.1:$(cat "$2/port"),127.0.0.1:$(cat "$3/port")/${4:-postgres}?target_session_attrs=read-write" ;;
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
  *) usage ;;
esac
