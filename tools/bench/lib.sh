# Helpers for tools/bench/run.sh: start and stop the gateway and its peer servers on
# 127.0.0.1. Sourced, not run. Every server started here is recorded and stopped by
# bench_cleanup (installed on EXIT, INT and TERM by bench_init), so Ctrl-C leaves nothing.
#
#   bench_init                  temp folder in $BENCH_WORK, traps
#   start_gw NAME [gw flags]    the gateway with a fresh store in $BENCH_WORK/NAME (rate
#                               limits off); GW_BIN: another gw binary (default build/gw);
#                               BENCH_STORE_URL: its store is that PostgreSQL database
#   start_lws                   libwebsockets-test-server (mirror protocol)
#   start_node                  tools/bench/peers/ws-broadcast.mjs (npm ws)
#   start_floor                 build/tools/gw_floor (tools/bench/gw_floor.c): the floor, a
#                               broadcast server that only frames and sends (ws:// only)
#   start_nchan                 nginx + nchan from tools/bench/peers/nchan.conf.in
#   start_bun [TLS]             tools/bench/peers/bun-broadcast.mjs under Bun (the npm
#                               package bun, tools/bench/peers/node_modules); TLS (any
#                               non-empty word) or BENCH_TLS: wss://
#   start_mosquitto NAME        mosquitto with persistence in $BENCH_WORK/NAME
#   start_pg / pg_newdb / pg_dropdb URL / stop_pg
#                               a PostgreSQL 15 server of the run's own (tools/pg_server.sh,
#                               127.0.0.1; stopped by bench_cleanup), a fresh database in it
#   prof_start FILE PID / prof_stop / prof_top FILE
#                               perf record -e cpu-clock -g of PID into FILE, stopped by
#                               SIGINT (bounded; bench_cleanup stops it too); its top symbols
#   sysc_start FILE PID / sysc_stop / sysc_per FILE DELIVERIES
#                               perf stat's count of PID's system calls (tracepoints: all,
#                               the sending ones, the polling ones) into FILE; per delivery
#   bench_install               the Debian packages, npm packages and build run.sh needs,
#                               installed only when missing
# With BENCH_PIN=CPUS every server started runs under taskset -c CPUS (the pid measured is
# still the server's: taskset execs it).
# With BENCH_TLS=1 the gateway, node and nchan serve wss:// (bench_cert makes the peers'
# certificate: P-256, self-signed, like the one the gateway makes for itself).
# Each start_* sets SRV_PID (the process to measure) and SRV_PORT and returns once the
# port answers; stop_srv stops the server (TERM, then KILL after 5 s) and waits for it.
# nginx runs as a master and one worker: SRV_PID is the worker, SRV_STOP the master.

bench_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_PIDS=()
BENCH_WORK=
SRV_PID='' SRV_PORT='' SRV_STOP=''
bench_next_port=$((20000 + RANDOM % 10000))

bench_cleanup() {
  local p
  prof_stop
  sysc_stop
  for p in "${BENCH_PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${BENCH_PIDS[@]}"; do
    bench_reap "$p"
  done
  BENCH_PIDS=()
  stop_pg
  if [ -n "$BENCH_WORK" ] && [ -z "${BENCH_KEEP:-}" ]; then
    rm -rf "$BENCH_WORK"
  fi
}

bench_init() {
  BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/gw-bench-XXXXXX")
  trap 'bench_cleanup' EXIT
  trap 'echo "bench: interrupted" >&2; exit 130' INT TERM
}

# bench_reap PID [TENTHS]: waits (at most TENTHS tenths of a second, default 5 s) for PID
# to end after a signal, then KILLs it.
bench_reap() {
  local p=$1 n=${2:-50} i
  for ((i = 0; i < n; i++)); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}

bench_forget() {
  local p keep=()
  for p in "${BENCH_PIDS[@]}"; do
    [ "$p" = "$1" ] || keep+=("$p")
  done
  BENCH_PIDS=("${keep[@]}")
}

stop_srv() {
  local p=${1:-${SRV_STOP:-$SRV_PID}}
  [ -n "$p" ] || return 0
  kill -TERM "$p" 2>/dev/null || true
  bench_reap "$p"
  bench_forget "$p"
}

# A port nobody listens on (tries at most 100), below the ephemeral range (32768-60999):
# thousands of client sockets hold ports there, and a listener cannot bind to them.
free_port() {
  local i
  for ((i = 0; i < 100; i++)); do
    bench_next_port=$((bench_next_port + 1))
    [ "$bench_next_port" -lt 32000 ] || bench_next_port=20001
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$bench_next_port") 2>/dev/null; then
      echo "$bench_next_port"
      return 0
    fi
  done
  echo "bench: no free port" >&2
  return 1
}

# wait_port PORT PID: until 127.0.0.1:PORT accepts (at most 15 s), while PID lives.
wait_port() {
  local i
  for ((i = 0; i < 150; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
      return 0
    fi
    kill -0 "$2" 2>/dev/null || { echo "bench: server $2 exited before listening" >&2; return 1; }
    sleep 0.1
  done
  echo "bench: nothing answers on port $1" >&2
  return 1
}

# bench_spawn LOG CMD...: runs CMD in the background, records its pid in SRV_PID.
bench_spawn() {
  local log=$1
  shift
  [ -z "${BENCH_PIN:-}" ] || set -- taskset -c "$BENCH_PIN" "$@"
  "$@" >"$log" 2>&1 &
  SRV_PID=$!
  SRV_STOP=
  BENCH_PIDS+=("$SRV_PID")
}

# The peers' TLS certificate and key in $BENCH_WORK/tls (made once a run).
bench_cert() {
  [ -s "$BENCH_WORK/tls/key.pem" ] && return 0
  mkdir -p "$BENCH_WORK/tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=127.0.0.1 -keyout "$BENCH_WORK/tls/key.pem" -out "$BENCH_WORK/tls/cert.pem" \
    2>/dev/null
}

start_gw() {
  local name=$1 insecure=--insecure
  shift
  [ -z "${BENCH_TLS:-}" ] || insecure=
  rm -rf "${BENCH_WORK:?}/$name"
  mkdir -p "$BENCH_WORK/$name"
  # The rate limits off: a flat-out sender and thousands of sessions from a few addresses
  # are what the benchmarks measure, and far over the defaults (--gw-flags can set them).
  local store=()
  [ -z "${BENCH_STORE_URL:-}" ] || store=(--store "$BENCH_STORE_URL")
  bench_spawn "$BENCH_WORK/$name.log" "${GW_BIN:-$bench_root/build/gw}" $insecure \
    --listen 127.0.0.1 --port 0 --port-file "$BENCH_WORK/$name/port" \
    --data "$BENCH_WORK/$name/data" --log-level 1 --rate-sends 0 --rate-bytes 0 \
    --rate-conns 0 --conns-per-address 0 ${store[@]+"${store[@]}"} "$@"
  local i
  for ((i = 0; i < 150; i++)); do
    [ -s "$BENCH_WORK/$name/port" ] && break
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.1
  done
  SRV_PORT=$(cat "$BENCH_WORK/$name/port" 2>/dev/null || true)
  [ -n "$SRV_PORT" ] || { echo "bench: the gateway did not start:" >&2; tail -5 "$BENCH_WORK/$name.log" >&2; return 1; }
  wait_port "$SRV_PORT" "$SRV_PID"
}

start_lws() {
  SRV_PORT=$(free_port)
  # -i lo binds 127.0.0.1 (an address given to -i is ignored by this test server).
  bench_spawn "$BENCH_WORK/lws.log" libwebsockets-test-server --port="$SRV_PORT" -i lo -d 1
  wait_port "$SRV_PORT" "$SRV_PID"
}

start_node() {
  local tls=()
  SRV_PORT=$(free_port)
  [ -z "${BENCH_TLS:-}" ] || { bench_cert; tls=("$BENCH_WORK/tls/cert.pem" "$BENCH_WORK/tls/key.pem"); }
  bench_spawn "$BENCH_WORK/node.log" node "$bench_root/tools/bench/peers/ws-broadcast.mjs" \
    "$SRV_PORT" 127.0.0.1 ${tls[@]+"${tls[@]}"}
  wait_port "$SRV_PORT" "$SRV_PID"
}

# ws:// only: the floor has no TLS (BENCH_TLS is not for it). FLOOR_BIN: another binary.
start_floor() {
  SRV_PORT=$(free_port)
  bench_spawn "$BENCH_WORK/floor.log" "${FLOOR_BIN:-$bench_root/build/tools/gw_floor}" \
    --port "$SRV_PORT" --host 127.0.0.1
  wait_port "$SRV_PORT" "$SRV_PID"
}

start_nchan() {
  SRV_PORT=$(free_port)
  local d="$BENCH_WORK/nchan"
  local ssl=
  rm -rf "$d"
  mkdir -p "$d"
  : >"$d/tls.conf"
  if [ -n "${BENCH_TLS:-}" ]; then
    bench_cert
    ssl=ssl
    printf 'ssl_certificate %s;\nssl_certificate_key %s;\nssl_protocols TLSv1.2 TLSv1.3;\n' \
      "$BENCH_WORK/tls/cert.pem" "$BENCH_WORK/tls/key.pem" >"$d/tls.conf"
  fi
  sed -e "s#@PREFIX@#$d#g" -e "s#@PORT@#$SRV_PORT#g" -e "s#@SSL@#$ssl#g" \
    "$bench_root/tools/bench/peers/nchan.conf.in" >"$d/nginx.conf"
  bench_spawn "$BENCH_WORK/nchan.log" nginx -p "$d" -c "$d/nginx.conf" -e "$d/error.log"
  wait_port "$SRV_PORT" "$SRV_PID" || return 1
  local i w=
  for ((i = 0; i < 50; i++)); do
    w=$(pgrep -P "$SRV_PID" | head -1 || true)
    [ -n "$w" ] && break
    sleep 0.1
  done
  [ -n "$w" ] || { echo "bench: no nginx worker" >&2; return 1; }
  SRV_STOP=$SRV_PID SRV_PID=$w
}

# The bun binary npm gave tools/bench/peers (bench_install runs npm ci there): its bin link,
# or the platform package's own binary when bun's postinstall did not run (npm with
# ignore-scripts leaves the link on a placeholder). Prints the path of one that runs.
bench_bun() {
  local b nm="$bench_root/tools/bench/peers/node_modules"
  for b in "$nm/.bin/bun" "$nm/bun/bin/bun.exe" "$nm"/@oven/bun-linux-*/bin/bun; do
    [ -x "$b" ] && "$b" --version >/dev/null 2>&1 && { echo "$b"; return 0; }
  done
  echo "bench: no bun that runs in $nm (npm ci in tools/bench/peers)" >&2
  return 1
}

start_bun() {
  local tls=() bun
  bun=$(bench_bun) || return 1
  SRV_PORT=$(free_port)
  [ -z "${1:-}${BENCH_TLS:-}" ] || { bench_cert; tls=("$BENCH_WORK/tls/cert.pem" "$BENCH_WORK/tls/key.pem"); }
  bench_spawn "$BENCH_WORK/bun.log" "$bun" "$bench_root/tools/bench/peers/bun-broadcast.mjs" \
    "$SRV_PORT" 127.0.0.1 ${tls[@]+"${tls[@]}"}
  wait_port "$SRV_PORT" "$SRV_PID"
}

# ---- PostgreSQL: one server of the run's own, a database per gateway started -------------
BENCH_PGDIR='' BENCH_PG_URL=''
start_pg() {
  [ -z "$BENCH_PGDIR" ] || return 0
  BENCH_PGDIR=$(mktemp -d /tmp/gw-bench-pg-XXXXXX)
  BENCH_PG_URL=$("$bench_root/tools/pg_server.sh" start "$BENCH_PGDIR") || {
    echo "bench: PostgreSQL did not start" >&2; stop_pg; return 1; }
}
stop_pg() {
  [ -n "$BENCH_PGDIR" ] || return 0
  "$bench_root/tools/pg_server.sh" stop "$BENCH_PGDIR" >/dev/null 2>&1 || true
  rm -rf "$BENCH_PGDIR"
  BENCH_PGDIR='' BENCH_PG_URL=''
}
pg_newdb() { # prints the URL of a new, empty database
  local name="bench_${RANDOM}_${RANDOM}"
  psql -q "$BENCH_PG_URL" -c "CREATE DATABASE $name" >&2
  echo "${BENCH_PG_URL%/*}/$name"
}
pg_dropdb() { # URL
  psql -q "$BENCH_PG_URL" -c "DROP DATABASE ${1##*/} WITH (FORCE)" >&2 || true
}

start_mosquitto() {
  local name=$1
  SRV_PORT=$(free_port)
  rm -rf "${BENCH_WORK:?}/$name"
  mkdir -p "$BENCH_WORK/$name"
  cat >"$BENCH_WORK/$name/mosquitto.conf" <<EOF
listener $SRV_PORT 127.0.0.1
allow_anonymous true
# started as root, mosquitto would switch to its own user, who cannot write here
user root
persistence true
persistence_location $BENCH_WORK/$name/
autosave_interval 0
max_queued_messages 0
max_inflight_messages 0
EOF
  bench_spawn "$BENCH_WORK/$name.log" mosquitto -c "$BENCH_WORK/$name/mosquitto.conf"
  wait_port "$SRV_PORT" "$SRV_PID"
}

# ---- Profiles: perf record of one server process ----------------------------------------
# prof_start FILE PID: records PID (every thread) until prof_stop. Its pid is kept in a file,
# not a variable: gwload runs in a command substitution, and bench_cleanup must find it.
prof_start() {
  perf record -q -e cpu-clock -g -p "$2" -o "$1" >"$1.log" 2>&1 &
  echo $! >"$BENCH_WORK/perf.pid"
  sleep 0.3 # attached before the load starts
}
# perf_stop PIDFILE TENTHS: SIGINT to the perf whose pid is in $BENCH_WORK/PIDFILE (perf
# writes its file and exits), at most TENTHS tenths of a second, then KILL.
perf_stop() {
  local p
  [ -n "$BENCH_WORK" ] && [ -s "$BENCH_WORK/$1" ] || return 0
  p=$(cat "$BENCH_WORK/$1")
  rm -f "$BENCH_WORK/$1"
  kill -INT "$p" 2>/dev/null || true
  bench_reap "$p" "$2"
}
# prof_stop: at most 30 s (writing a long recording takes a while).
prof_stop() { perf_stop perf.pid 300; }
# prof_top FILE: the flat top list (share of samples, object, symbol), 1.5% and more.
prof_top() {
  perf report --stdio --no-children -g none -F overhead,dso,sym --percent-limit 1.5 \
    -i "$1" 2>/dev/null | grep -v '^#' | grep '%' | sed -E 's/ +$//; s/^(.{150}).*/\1.../' |
    head -15 || true
}

# sysc_start FILE PID: counts PID's system calls (every thread's) until sysc_stop. Counting
# tracepoints costs little next to perf record; the run it counts is still kept apart from
# the timed ones.
sysc_events=raw_syscalls:sys_enter
for e in sendto sendmsg write writev epoll_wait epoll_ctl; do sysc_events+=",syscalls:sys_enter_$e"; done
sysc_start() {
  perf stat -x, -e "$sysc_events" -p "$2" -o "$1" >"$1.log" 2>&1 &
  echo $! >"$BENCH_WORK/sysc.pid"
  sleep 0.3
}
sysc_stop() { perf_stop sysc.pid 100; }
# sysc_per FILE DELIVERIES: "ALL SENDS POLLS", system calls per delivery (sends: sendto,
# sendmsg, write, writev; polls: epoll_wait, epoll_ctl); "nan nan nan" without figures.
sysc_per() {
  awk -F, -v d="$2" '
    $3 == "raw_syscalls:sys_enter" {all = $1; seen = 1}
    $3 ~ /sys_enter_(sendto|sendmsg|write|writev)$/ {send += $1}
    $3 ~ /sys_enter_epoll_(wait|ctl)$/ {poll += $1}
    END {if (seen && d > 0) printf "%.3f %.3f %.3f\n", all / d, send / d, poll / d
         else print "nan nan nan"}' "$1" 2>/dev/null || echo "nan nan nan"
}

# rss_kib PID
rss_kib() {
  awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

# cpu_s PID: user+system CPU seconds so far.
cpu_s() {
  awk -v t="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); print ($12 + $13) / t}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# jget FIELD[.SUB...] < JSON: one number or string from a JSON object.
jget() {
  python3 -c 'import json,sys
v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(v)' "$1"
}

# What run.sh needs, installed only when missing (tools/setup.sh's way: dpkg-query, then
# apt-get as root or with sudo, non-interactive, no recommends): the peers' and tools'
# Debian packages, the peers' npm packages (npm ci from tools/bench/peers/package-lock.json,
# again whenever the lock file changed: a stamp in node_modules holds its checksum), and
# the build (tools/setup.sh) when build/gw, build/tools/gw_load or build/tools/gw_floor is
# missing.
bench_install() {
  local pkgs=(libwebsockets-test-server nginx libnginx-mod-nchan mosquitto mosquitto-clients
              rocksdb-tools postgresql-15 postgresql-client-15 linux-perf curl)
  # Node.js and npm from Debian only when there are none: another node (NodeSource's
  # carries its own npm) must not be replaced.
  command -v node >/dev/null || pkgs+=(nodejs)
  command -v npm >/dev/null || pkgs+=(npm)
  local missing=() p sudo=
  for p in "${pkgs[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "bench: installing ${missing[*]}" >&2
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    for p in "${missing[@]}"; do
      [[ "$(apt-cache policy "$p" 2>/dev/null || true)" =~ Candidate:\ [^\(] ]] ||
        { echo "bench: no package $p in this system's apt sources" >&2; return 1; }
    done
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${missing[@]}" >&2
  fi
  # npm ci there again also when no bun there runs (ws and bun: Bun's binary comes from
  # its npm package, not from Debian).
  local peers="$bench_root/tools/bench/peers" sum
  sum=$(sha256sum "$peers/package-lock.json" | cut -d' ' -f1)
  if [ ! -d "$peers/node_modules/ws" ] || ! bench_bun 2>/dev/null >&2 ||
     [ "$(cat "$peers/node_modules/.gw-installed-from" 2>/dev/null)" != "$sum" ]; then
    echo "bench: npm ci in tools/bench/peers" >&2
    (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$sum" >"$peers/node_modules/.gw-installed-from"
    bench_bun >/dev/null || return 1
  fi
  if [ ! -x "$bench_root/build/gw" ] || [ ! -x "$bench_root/build/tools/gw_load" ] ||
     [ ! -x "$bench_root/build/tools/gw_floor" ]; then
    echo "bench: building build/ (tools/setup.sh)" >&2
    "$bench_root/tools/setup.sh" >&2
  fi
}

# A script's start: the builds it runs and the commands it needs (NAME: the script's name
# for the messages), every open file the hard limit allows, the token secret.
bench_need() { # NAME CMD...
  local name=$1 c; shift
  if [ ! -x "$bench_root/build/tools/gw_load" ] || [ ! -x "$bench_root/build/gw" ]; then
    echo "$name: build first: tools/setup.sh" >&2; exit 1
  fi
  for c in "$@"; do
    command -v "$c" >/dev/null || { echo "$name: $c missing: tools/setup.sh installs it" >&2; exit 1; }
  done
  ulimit -n "$(ulimit -Hn)"
  export GW_SECRET=${GW_SECRET:-gw-bench-secret-0123456789}
}
# The median of the non-empty arguments; a field of a JSON line ("" if there is none).
med() { printf '%s\n' "$@" | awk 'NF' | median; }
field() { [ -n "$1" ] && jget "$2" <<<"$1" || echo ""; }
# The median of the numbers on stdin; "nan" when there are none (every run failed), which
# row() prints as "failed" instead of a figure that looks measured.
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; else print "nan"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a ~ /^[0-9.eE+-]+$/ && b ~ /^[0-9.eE+-]+$/ && b > 0) printf "%.2f", a/b; else printf "n/a"}'; }
# row FORMAT ARGS...: printf for a table row, with a failed measurement shown as such.
# shellcheck disable=SC2059 # the format is the caller's
row() { printf "$@" | sed -E 's/(^|[| ])-?nan([| ]|$)/\1failed\2/g'; }
