#!/usr/bin/env bash
# The gateway's benchmark suite, each peer server measured in the same run.
#   tools/bench/run.sh [--runs N] [--seconds S] [--quick] [--raw FILE] [--profile]
#                      [--sizes "100 1000 10000"] [--idle-sizes "10000 50000"]
#                      [--gw-flags "FLAGS"] [--results DIR] [--base DIR] [--kinds "LIST"]
#                      [WORKLOAD...]
# WORKLOAD: w1 w1big w2 w3 w4 w5 w6 threads storage versus retention xmpp (default: all
# but versus, retention and xmpp). Every figure is the median of N runs (default 3 of 5 s; --quick:
# 1 run of 2 s, small sizes only: a smoke test).
# Server kinds: the gateway (gw1, gw2: --threads 1, 2; gw1ws: 1 thread over ws:// in w4;
# gwns: --no-sync in w3) and the peers: lws (libwebsockets-test-server), node (a Node.js
# `ws` broadcast server, tools/bench/peers/ws-broadcast.mjs), nchan (nginx + nchan), bun
# (Bun's own WebSocket server, uWebSockets, with its pub/sub: bun-broadcast.mjs; bunws: the
# same over ws:// in w4), floor (build/tools/gw_floor, a C epoll relay with nothing but the
# sockets: what a delivery costs at least; ws:// only; skipped with a message when it is
# not built). --kinds "LIST": the peers of w1, w1big, w3 and w4 only those in LIST (the
# gateway's kinds always run; bun brings bunws), e.g. --kinds "bun floor"; default: all.
# Prints Markdown tables for docs/BENCHMARKS.md. Installs what it needs first, only what
# is missing: the Debian packages (libwebsockets-test-server nginx libnginx-mod-nchan
# mosquitto mosquitto-clients rocksdb-tools postgresql-15 postgresql-client-15 linux-perf
# curl; nodejs and npm when there is no node or npm), as root or with sudo; the peers' npm
# packages (npm ci in tools/bench/peers: ws, and bun, pinned, whose package brings its
# binary); the build (tools/setup.sh) when build/gw or build/tools/gw_load is missing.
# w1 keeps its medians in tools/bench/results/w1.tsv (a row per group size and server,
# replaced when measured again) and draws docs/bench-w1.svg; --results DIR: both go to DIR
# instead; --quick writes neither unless --results is given.
# --gw-flags: extra flags for every gateway started (say so beside the figures).
# --profile: the gateway of the first run of w1 (first size, 1 thread), w3 (50%, sync on),
#    w4 (first size, 1 thread) and w5 (pages of 100, 8 pulls in flight) is recorded by
#    `perf record -e cpu-clock -g` while gw_load runs; its top symbols are printed under the
#    table (that run's figures stay among the medians, with perf's cost in them).
# The gateway runs with --threads 1 or 2 where the rows say so, else at its default (one
# service thread per core).
#   w1 fan-out: one sender flat out, groups of 100, 1,000, 10,000: deliveries/s and per
#      server CPU second, the gateway with 1 and with 2 threads. Peers:
#      libwebsockets-test-server (lws-mirror-protocol), a Node.js `ws` broadcast server,
#      nginx + nchan, Bun (uWebSockets pub/sub), the floor; the gateway's (1 thread) server
#      us/delivery over the floor's (gw1 ÷ floor) and over Bun's (gw1/Bun); then one more
#      run each of the gateway (1 thread) and nchan with the system calls per delivery
#      counted (perf stat).
#   w1big W1 with one group of 19,000 members (20,000 would be more sockets than one server
#      process may open: hard limit 20,000), the gateway (1 thread) and Bun taking turns
#      every run; the receivers spread over gw_load processes of at most 9,000 each, all
#      in the one group (a --uid-prefix each; started first, stopped by SIGTERM once every
#      delivery came), the sender in one more: deliveries/s, server us/delivery, gw1/Bun.
#   w2 durable sends (sync on) at 1, 64, 1,024 senders one send in flight, and 1 sender
#      with 8 in flight; messages per fsync; peer db_bench.
#   w3 send-to-deliver latency at 25/50/75% of w1's 1-thread maximum for a group of 100,
#      pinned: the server on core 1 (the gateway with --threads 1, sync on and --no-sync;
#      lws-test-server; Bun, ws://), gw_load on core 0.
#   w4 idle sessions (10,000 and 50,000, wss://): server RSS per session, CPU while idle;
#      the gateway with 1 and 2 threads, node, nchan, Bun; the gateway (1 thread) and Bun
#      over ws:// too.
#   w5 offline pull: 25,000 unread over 40 groups, pages of 100 and 500, 1 and 8 pulls in
#      flight (--pull-window): messages/s.
#   w6 acks: ack frames per delivered message and ack writes/s, batched vs per message.
#   threads: the gateway with --threads 1 and 2 on RocksDB and on PostgreSQL (a server of
#      the run's own, tools/pg_server.sh, a fresh database per gateway): w1 at the sizes
#      up to 1,000 members and w4 at the first idle size; deliveries/s, RSS per session,
#      idle CPU, server CPU per delivery and its ratio 2 threads/1 thread.
#   storage: bytes on disk per message, a group of 500 with 200 offline, vs mosquitto.
#   versus: this build against another build of the gateway (--base DIR: a build folder
#      with its gw, say an older commit's), the two taking turns in every run with the same
#      gw_load: W1 at the sizes up to 1,000 members with 1 and 2 threads, W2 at 64
#      senders (one send in flight each) on RocksDB and on PostgreSQL (a server of the
#      run's own, a fresh database per gateway), and W5 (pages of 100, 8 pulls in flight);
#      each figure beside the base's, and new/base.
#   retention: tools/bench/retention.sh (its header): on RocksDB and on PostgreSQL (a server
#      of the run's own), store.disk_bytes over time under a steady durable send load with
#      --retain-messages 10000 (20 groups at 6,000 messages/s, 150 s; the same load without
#      retention, 30 s, for the contrast), and W2 at 64 senders with retention on against
#      off, taking turns (--runs each). About 11 minutes; --quick 3 to 5. Needs no
#      peers: run alone, it installs nothing (curl, psql and the build must be there).
#   xmpp: the gateway (--threads 1) on PostgreSQL against ejabberd 23.01 and Prosody 0.12
#      (Debian's; tools/bench/xmpp.sh installs them when missing and runs its own instances,
#      configured by tools/bench/peers/ejabberd.yml.in and prosody.cfg.lua.in), all three
#      storing in one PostgreSQL server of the run's own (synchronous_commit on), XMPP over
#      WebSocket, gw_load --xmpp: W2 a room of 100, 10 online each sending (window 1):
#      confirmed messages/s, server CPU (own + PostgreSQL's) per message, send-to-confirm
#      p50/p99; W3 at half each one's W2 maximum: send-to-deliver p50/p99/p99.9; W5 1,000
#      messages in each of 40 rooms caught up after being offline: MAM pages of 100 vs the
#      gateway's pull pages of 100, wall time, bytes, messages. Ratios gateway/peer.
# Servers bind 127.0.0.1 only; everything started (perf too) is stopped on exit and on
# Ctrl-C; every gw_load run is bounded (timeout 600 s).
# shellcheck disable=SC2119 # stop_srv: its argument is optional
set -Eeuo pipefail
# A command that ends the script says so: which, where and its exit code (its own error is
# above). Only the script's own shell speaks: a subshell's failure reaches it as its own.
trap 'err=$?; [ "$BASHPID" != $$ ] ||
  echo "run.sh: failed (exit $err): line $LINENO: $BASH_COMMAND" >&2' ERR

root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tools/bench/lib.sh"

runs=3 secs=5 quick='' rawlog=/dev/null profile='' outdir='' base=''
work=() w1_sizes=() w4_sizes=() gw_flags=() only_kinds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --quick) quick=1 runs=1 secs=2; shift ;;
    --raw) rawlog=$2; shift 2 ;;
    --profile) profile=1; shift ;;
    --results) outdir=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --sizes) read -ra w1_sizes <<<"$2"; shift 2 ;;
    --idle-sizes) read -ra w4_sizes <<<"$2"; shift 2 ;;
    --kinds) read -ra only_kinds <<<"$2"; shift 2 ;;
    w1|w1big|w2|w3|w4|w5|w6|threads|storage|versus|retention|xmpp) work+=("$1"); shift ;;
    --gw-flags) read -ra gw_flags <<<"$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -/{/^#/p}' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#work[@]} -gt 0 ] || work=(w1 w1big w2 w3 w4 w5 w6 threads storage)
want() { local w; for w in "${work[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }
for k in ${only_kinds[@]+"${only_kinds[@]}"}; do
  case "$k" in
    gw*|lws|node|nchan|bun|bunws|floor) ;;
    *) echo "run.sh: --kinds: unknown server kind $k (lws node nchan bun bunws floor)" >&2; exit 2 ;;
  esac
done

load="$root/build/tools/gw_load"
# Only retention asked for: none of the peers (nothing installed), the build and psql.
if [ "${work[*]}" = retention ]; then bench_need run.sh curl psql pg_config; else bench_install; fi

# One socket per session, on both sides: the hard limit is raised as far as root may.
ulimit -Hn 200000 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
export GW_SECRET=${GW_SECRET:-gw-bench-secret-0123456789}
bench_init
say() { echo "run.sh: $*" >&2; }

# gwload TAG ARGS...: one bounded gw_load run; prints its JSON line ("" if it failed).
# LOAD_PIN=CPUS: gw_load runs under taskset -c CPUS. PROF=FILE: the server ($SRV_PID) is
# recorded by perf into FILE while gw_load runs (perf stopped right after it).
gwload() {
  local tag=$1 out rc=0 pin=()
  shift
  [ -z "${LOAD_PIN:-}" ] || pin=(taskset -c "$LOAD_PIN")
  [ -z "${PROF:-}" ] || prof_start "$PROF" "$SRV_PID"
  [ -z "${SYSC:-}" ] || sysc_start "$SYSC" "$SRV_PID"
  out=$(timeout 600 ${pin[@]+"${pin[@]}"} "$load" --json "$@" 2>"$BENCH_WORK/load.err") || rc=$?
  [ -z "${PROF:-}" ] || prof_stop
  [ -z "${SYSC:-}" ] || sysc_stop
  out=$(grep '^{' <<<"$out" | tail -1 || true)
  if [ "$rc" -ne 0 ]; then
    say "$tag: gw_load exited $rc: $(grep -v '^gw_load: [0-9]* s:' "$BENCH_WORK/load.err" | tail -2 | tr '\n' ' ')"
  fi
  [ -n "$out" ] && echo "$tag $out" >>"$rawlog"
  echo "$out"
}

# Fan-out target per server kind: the gw_load arguments after the server started.
target() {
  local ws=ws
  [ -z "${BENCH_TLS:-}" ] || ws=wss
  case "$1" in
    gw*) echo "--url $ws://127.0.0.1:$SRV_PORT/ws" ;;
    lws) echo "--raw $ws://127.0.0.1:$SRV_PORT/ --raw-protocol lws-mirror-protocol" ;;
    node|bun) echo "--raw $ws://127.0.0.1:$SRV_PORT/" ;;
    bunws) echo "--raw ws://127.0.0.1:$SRV_PORT/" ;;
    floor) echo "--raw ws://127.0.0.1:$SRV_PORT/" ;; # ws:// only: the floor has no TLS
    nchan) echo "--raw $ws://127.0.0.1:$SRV_PORT/sub --raw-pub $ws://127.0.0.1:$SRV_PORT/pub" ;;
  esac
}
# Server kinds: gw (the gateway at its default threads), gw1 and gw2 (--threads 1 and 2),
# gwns (--threads 1 --no-sync), and the peers.
start_kind() {
  case "$1" in
    gw) start_gw gw ${gw_flags[@]+"${gw_flags[@]}"} ;;
    gw1) start_gwt 1 ;;
    gw2) start_gwt 2 ;;
    gw1ws) BENCH_TLS= start_gwt 1 ;; # W4 over ws:// (no TLS)
    gwns) start_gwt 1 --no-sync ;;
    lws) start_lws ;;
    node) start_node ;;
    nchan) start_nchan ;;
    bun) start_bun ;;
    bunws) BENCH_TLS='' start_bun ;; # W4 over ws:// (like gw1ws)
    floor) start_floor_kind ;;
  esac
}
# The floor (tools/bench/gw_floor.c, lib.sh's start_floor): skipped with a message, never
# an abort, when build/tools/gw_floor (or start_floor) is not there; its rows say failed.
start_floor_kind() {
  if [ ! -x "${FLOOR_BIN:-$root/build/tools/gw_floor}" ] || ! declare -F start_floor >/dev/null; then
    say "floor: build/tools/gw_floor or lib.sh's start_floor missing: skipped (cmake --build build --target gw_floor)"
    return 1
  fi
  start_floor
}
# The server kinds of w1, w3, w4 and w1big: the gateway's always, the peers only those in
# --kinds (all without it; bun brings bunws along). Prints them in the order given.
kinds_of() {
  local k o
  for k in "$@"; do
    case "$k" in
      gw*) echo "$k" ;;
      *) if [ ${#only_kinds[@]} -eq 0 ]; then echo "$k"; else
           # bunws is bun's ws:// variant: asked for with bun too
           for o in "${only_kinds[@]}"; do
             if [ "$o" = "$k" ] || [ "$o bunws" = "bun $k" ]; then echo "$k"; break; fi
           done
         fi ;;
    esac
  done
}
# plain KIND: true for the kinds that serve ws:// in W4 (the others serve wss:// there).
plain() { case "$1" in gw1ws|bunws|floor) return 0 ;; *) return 1 ;; esac; }
stats() {
  local s=http
  [ -z "${BENCH_TLS:-}" ] || s=https
  curl -sk --max-time 5 "$s://127.0.0.1:$SRV_PORT/stats"
}
metrics() {
  local s=http
  [ -z "${BENCH_TLS:-}" ] || s=https
  curl -sk --max-time 5 "$s://127.0.0.1:$SRV_PORT/metrics"
}
# loop_window BEFORE < AFTER: from two scrapes of the gateway's gw_loop_iteration_seconds,
# the iterations between them: "LONGEST_MS PERCENT_OVER_1MS", the longest as the upper
# bound of the highest bucket that grew (inf past the last).
loop_window() {
  python3 -c '
import re, sys
def hist(text):
    h = {}
    for m in re.finditer(r"^gw_loop_iteration_seconds_bucket\{[^}]*le=\"([^\"]+)\"\} (\S+)$", text, re.M):
        h[m.group(1)] = float(m.group(2))
    return h
a, b = hist(open(sys.argv[1]).read()), hist(sys.stdin.read())
les = sorted(b, key=lambda le: float(le))
d = {le: b[le] - a.get(le, 0) for le in les}
total = d["+Inf"]
longest = next((le for le, prev in zip(reversed(les), list(reversed(les))[1:] + [None])
                if d[le] > (d[prev] if prev else 0)), None)
over = total - d.get("0.001", 0)
print(("inf" if longest == "+Inf" else "%g" % (float(longest) * 1000)) if longest else "0",
      "%.3f" % (100.0 * over / total if total else 0))' "$1"
}
# start_gwt THREADS [FLAGS...]: the gateway with --threads THREADS (what /stats says is
# checked) and FLAGS; BENCH_STORE_URL, BENCH_TLS, BENCH_PIN as for start_gw.
start_gwt() {
  local t=$1 n
  shift
  start_gw gw ${gw_flags[@]+"${gw_flags[@]}"} "$@" --threads "$t" || return 1
  n=$(stats | jget threads 2>/dev/null || true)
  [ "$n" = "$t" ] || say "the gateway started with --threads $t reports ${n:-no} threads in /stats"
}
sources_for() { echo $(( $1 / 5000 + 1 )); }
# fmt DIGITS VALUE: VALUE with DIGITS decimals, "" stays "", nan stays nan (row: "failed").
fmt() { awk -v d="$1" -v v="$2" 'BEGIN{if (v ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) printf "%.*f", d, v; else printf "%s", v}'; }

declare -A name=([gw]="gateway" [gw1]="gateway, 1 thread" [gw2]="gateway, 2 threads" [gw1ws]="gateway, 1 thread, ws://"
                 [gwns]="gateway, --no-sync" [lws]="lws-test-server" [node]="node ws"
                 [nchan]="nginx+nchan" [bun]="Bun (uWebSockets)" [bunws]="Bun, ws://"
                 [floor]="floor (C, epoll)")

# ---- Profiles (--profile) -------------------------------------------------------------
# prof_for TAG TITLE: sets prof_file to the file to record into ("" when --profile is
# off) and keeps TITLE for prof_print. Called for the one run to record.
profs=() prof_file=''
prof_for() {
  prof_file=''
  [ -n "$profile" ] || return 0
  prof_file="$BENCH_WORK/prof-$1.data"
  profs+=("$2|$prof_file")
}
# The profiles taken since the last call, as fenced blocks (under a workload's table).
prof_print() {
  local e t p
  for e in ${profs[@]+"${profs[@]}"}; do
    t=${e%%|*} p=${e#*|}
    echo
    echo "Profile of the gateway, $t, first run: perf record -e cpu-clock -g for the"
    echo "whole gw_load run; share of samples by object and symbol, 1.5% and more:"
    echo
    echo '```'
    if [ -s "$p" ]; then prof_top "$p"; else echo "(no profile: $(tail -1 "$p.log" 2>/dev/null || true))"; fi
    echo '```'
  done
  profs=()
}

# ---- W1: fan-out ----------------------------------------------------------------------
declare -A W1_D W1_C W1_LU W1_SU W1_SYS
if [ ${#w1_sizes[@]} -eq 0 ]; then
  w1_sizes=(100 1000 10000)
  [ -z "$quick" ] || w1_sizes=(100 1000)
fi
if [ ${#w4_sizes[@]} -eq 0 ]; then
  # 50,000 sessions need 50,000 sockets in one server process (and as many in gw_load).
  # Where the open-files hard limit is lower and cannot be raised (no CAP_SYS_RESOURCE),
  # the largest size is what the limit allows, with room for the process's other files.
  w4_max=$(( $(ulimit -Hn) - 500 ))
  [ "$w4_max" -lt 50000 ] || w4_max=50000
  w4_sizes=(10000 "$w4_max")
  [ "$w4_max" -gt 10000 ] || w4_sizes=("$w4_max")
  [ -z "$quick" ] || w4_sizes=("${w4_sizes[0]}")
  [ "$w4_max" -ge 50000 ] || ! want w4 ||
    say "w4: open-files hard limit $(ulimit -Hn): largest size $w4_max, not 50000"
fi
results="${outdir:-$root/tools/bench/results}"
w1_svg="$root/docs/bench-w1.svg"
[ -z "$outdir" ] || w1_svg="$outdir/bench-w1.svg"
mapfile -t w1_kinds < <(kinds_of gw1 gw2 lws node nchan bun floor)
w1() {
  local m k r d c out p
  for m in "${w1_sizes[@]}"; do
    declare -A dl=() cl=() lul=() sul=()
    for ((r = 0; r < runs; r++)); do
      for k in "${w1_kinds[@]}"; do
        start_kind "$k" || { say "w1 $m members, $k: did not start"; stop_srv; continue; }
        p=
        [ "$r $k $m" != "0 gw1 ${w1_sizes[0]}" ] || { prof_for w1 "W1, $m members, 1 thread"; p=$prof_file; }
        # shellcheck disable=SC2046
        out=$(PROF=$p gwload "w1 $k $m" $(target "$k") --sessions "$m" --group-size "$m" --senders 1 \
              --seconds "$secs" --sources "$(sources_for "$m")" --server-pid "$SRV_PID")
        stop_srv
        # Per second of delivering: up to the last delivery, not the drain after it.
        d=$(field "$out" deliveries_per_active_s) c=$(field "$out" server_cpu_s)
        if [ -n "$d" ]; then
          dl[$k]+=" $d"
          cl[$k]+=" $(awk -v d="$(field "$out" deliveries)" -v c="$c" 'BEGIN{print (c>0)?d/c:0}')"
          lul[$k]+=" $(field "$out" load_cpu_us_per_delivery)"
          sul[$k]+=" $(field "$out" server_cpu_us_per_delivery)"
        fi
        say "w1 $m members, $k, run $((r + 1)): ${d:-failed} deliveries/s"
      done
    done
    # One more run each of the gateway (1 thread) and nchan with their system calls
    # counted, apart from the timed runs: what a delivery costs the kernel.
    local sysk
    mapfile -t sysk < <(kinds_of gw1 nchan)
    for k in "${sysk[@]}"; do
      start_kind "$k" || { say "w1 $m members, $k: did not start"; stop_srv; continue; }
      # shellcheck disable=SC2046
      out=$(SYSC="$BENCH_WORK/sysc" gwload "w1sys $k $m" $(target "$k") --sessions "$m" \
            --group-size "$m" --senders 1 --seconds "$secs" --sources "$(sources_for "$m")")
      stop_srv
      W1_SYS[$k,$m]=$(sysc_per "$BENCH_WORK/sysc" "$(field "$out" deliveries)")
      say "w1 $m members, $k, system calls per delivery (all, sends, polls): ${W1_SYS[$k,$m]}"
    done
    for k in "${w1_kinds[@]}"; do
      # shellcheck disable=SC2086
      W1_D[$k,$m]=$(med ${dl[$k]:-}) W1_C[$k,$m]=$(med ${cl[$k]:-})
      # shellcheck disable=SC2086
      W1_LU[$k,$m]=$(med ${lul[$k]:-}) W1_SU[$k,$m]=$(med ${sul[$k]:-})
    done
    unset dl cl lul sul
  done
  echo
  echo "### W1 fan-out ($runs runs of ${secs} s, median)"
  echo
  echo "gw1, gw2: the gateway with --threads 1, with --threads 2 (the peers: one thread each,"
  echo "nginx one worker; Bun's server on its one JavaScript thread, its GC helpers' CPU counted"
  echo "with it, as every thread's is for every server). The floor: a"
  echo "C epoll server that only relays frames (tools/bench/gw_floor.c), what a delivery costs"
  echo "with nothing but the sockets. On the gateway's rows: gw1 ÷ floor, the gateway's (1"
  echo "thread) server us/delivery over the floor's; gw1/Bun, over Bun's."
  echo
  echo "| members | server | deliveries/s | deliveries per server CPU s | gw1/peer deliveries/s | gw1/peer per CPU s | gw2/peer deliveries/s | server us/delivery | gw_load us/delivery | gw1 ÷ floor server us/delivery | gw1/Bun server us/delivery |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for m in "${w1_sizes[@]}"; do
    for k in "${w1_kinds[@]}"; do
      local rd="" rc="" r2="" rf="" rb=""
      case "$k" in
        gw1) rf=$(ratio "${W1_SU[gw1,$m]}" "${W1_SU[floor,$m]:-}") rb=$(ratio "${W1_SU[gw1,$m]}" "${W1_SU[bun,$m]:-}") ;;
        gw*) ;;
        *) rd=$(ratio "${W1_D[gw1,$m]}" "${W1_D[$k,$m]}") rc=$(ratio "${W1_C[gw1,$m]}" "${W1_C[$k,$m]}")
           r2=$(ratio "${W1_D[gw2,$m]}" "${W1_D[$k,$m]}") ;;
      esac
      row '| %d | %s | %.0f | %.0f | %s | %s | %s | %.2f | %.2f | %s | %s |\n' "$m" "${name[$k]}" \
        "${W1_D[$k,$m]}" "${W1_C[$k,$m]}" "$rd" "$rc" "$r2" "${W1_SU[$k,$m]}" "${W1_LU[$k,$m]}" "$rf" "$rb"
    done
  done
  echo
  echo "System calls per delivery, the server's (every thread), counted by perf stat in one more"
  echo "run of each (sends: sendto, sendmsg, write, writev; polls: epoll_wait, epoll_ctl):"
  echo
  echo "| members | server | system calls per delivery | sends per delivery | polls per delivery |"
  echo "|---|---|---|---|---|"
  local sysk
  mapfile -t sysk < <(kinds_of gw1 nchan)
  for m in "${w1_sizes[@]}"; do
    for k in "${sysk[@]}"; do
      local a b c
      read -r a b c <<<"${W1_SYS[$k,$m]:-nan nan nan}"
      row '| %d | %s | %s | %s | %s |\n' "$m" "${name[$k]}" "$a" "$b" "$c"
    done
  done
  prof_print
  if [ -n "$quick" ] && [ -z "$outdir" ]; then
    say "--quick: tools/bench/results/w1.tsv and docs/bench-w1.svg left as they are (--results DIR writes them there)"
    return 0
  fi
  # Keep the medians (other group sizes measured before stay), then draw them all.
  mkdir -p "$results" "$(dirname "$w1_svg")"
  touch "$results/w1.tsv"
  # A row per size and server that ran replaces its old one; one that failed (nan) leaves
  # no row (no old figure beside new ones); servers not run this time (--kinds) keep theirs.
  local ran=" "
  for m in "${w1_sizes[@]}"; do
    for k in "${w1_kinds[@]}"; do ran+="$m,$k "; done
  done
  {
    for m in "${w1_sizes[@]}"; do
      for k in "${w1_kinds[@]}"; do
        [ "${W1_D[$k,$m]}" != nan ] || continue
        printf '%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\n' "$m" "$k" "${W1_D[$k,$m]}" "${W1_C[$k,$m]}" \
          "${W1_SU[$k,$m]}" "${W1_LU[$k,$m]}" "$(date -u +%Y-%m-%d)"
      done
    done
    awk -v s="$ran" '!/^#/ && NF && index(s, " " $1 "," $2 " ") == 0' "$results/w1.tsv"
  } | sort -n -k1,1 -s >"$BENCH_WORK/w1.tsv"
  { echo "# members server deliveries_per_s deliveries_per_server_cpu_s server_us_per_delivery load_us_per_delivery date"
    cat "$BENCH_WORK/w1.tsv"; } >"$results/w1.tsv"
  w1_plot <"$results/w1.tsv" >"$w1_svg"
  say "wrote $results/w1.tsv and $w1_svg"
}

# The plot, from results/w1.tsv on stdin: two panels (deliveries/s; deliveries per server
# CPU second), bars grouped by group size, one bar per server, linear axes from 0.
w1_plot() {
  python3 -c '
import sys
rows = [l.split() for l in sys.stdin if l.strip() and not l.startswith("#")]
names = {"gw": "gateway", "gw1": "gateway, 1 thread", "gw2": "gateway, 2 threads",
         "lws": "lws-test-server", "node": "node ws", "nchan": "nginx+nchan",
         "bun": "Bun (uWebSockets)", "floor": "floor (C, epoll)"}
colors = {"gw": "#9ecae1", "gw1": "#1f77b4", "gw2": "#08306b", "lws": "#7f7f7f",
          "node": "#2ca02c", "nchan": "#d62728", "bun": "#ff7f0e", "floor": "#000000"}
sizes = sorted({int(r[0]) for r in rows})
order = ["gw", "gw1", "gw2", "lws", "node", "nchan", "bun", "floor"]
kinds = sorted({r[1] for r in rows}, key=lambda k: (order.index(k) if k in order else len(order), k))
val = {(int(r[0]), r[1]): (float(r[2]), float(r[3])) for r in rows}
W, pad, top, step = 760, 60, 50, 140
per_line = max(1, (W - pad) // step)
lines = (len(kinds) + per_line - 1) // per_line
H = 380 + 18 * (max(lines, 1) - 1)
panels = [("deliveries per second", 0), ("deliveries per server CPU second", 1)]
pw = (W - pad * 2) / len(panels)
out = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"11\">",
       f"<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>",
       f"<text x=\"{W/2}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">W1 fan-out, one sender, 200-byte bodies (median; tools/bench/run.sh)</text>"]
for pi, (title, idx) in enumerate(panels):
    x0 = pad + pi * pw
    ymax = max([v[idx] for v in val.values()] + [1])
    ph = 380 - top - 70
    out.append(f"<text x=\"{x0 + pw/2 - 20}\" y=\"{top - 8}\" text-anchor=\"middle\" font-size=\"12\">{title}</text>")
    out.append(f"<line x1=\"{x0}\" y1=\"{top+ph}\" x2=\"{x0+pw-40}\" y2=\"{top+ph}\" stroke=\"black\"/>")
    for t in range(5):
        y = top + ph - ph * t / 4
        out.append(f"<line x1=\"{x0}\" y1=\"{y}\" x2=\"{x0+pw-40}\" y2=\"{y}\" stroke=\"#ddd\"/>")
        out.append(f"<text x=\"{x0-4}\" y=\"{y+4}\" text-anchor=\"end\">{ymax*t/4/1000:.0f}k</text>")
    gw = (pw - 40) / len(sizes)
    bw = (gw - 16) / len(kinds)
    for si, m in enumerate(sizes):
        gx = x0 + si * gw + 8
        for ki, k in enumerate(kinds):
            v = val.get((m, k), (0, 0))[idx]
            h = ph * v / ymax
            col, nm = colors.get(k, "#999"), names.get(k, k)
            out.append(f"<rect x=\"{gx+ki*bw:.1f}\" y=\"{top+ph-h:.1f}\" width=\"{bw-2:.1f}\" height=\"{h:.1f}\" fill=\"{col}\"><title>{nm}, {m} members: {v:.0f}</title></rect>")
        out.append(f"<text x=\"{gx + (gw-16)/2}\" y=\"{top+ph+14}\" text-anchor=\"middle\">{m} members</text>")
for i, k in enumerate(kinds):
    col, nm = colors.get(k, "#999"), names.get(k, k)
    lx, ly = pad + (i % per_line) * step, 380 - 28 + 18 * (i // per_line)
    out.append(f"<rect x=\"{lx}\" y=\"{ly}\" width=\"12\" height=\"12\" fill=\"{col}\"/>")
    out.append(f"<text x=\"{lx+16}\" y=\"{ly+10}\">{nm}</text>")
out.append("</svg>")
print("\n".join(out))
'
}

# ---- W1 big: one group of 19,000 -------------------------------------------------------
# 20,000 members would be more sockets than one server process may open here (the
# open-files hard limit is 20,000 and cannot be raised without CAP_SYS_RESOURCE): 19,000
# leaves the server room for its other files. The receivers are spread over gw_load
# processes of at most 9,000 each. gw_load's group names do not depend on --uid-prefix
# (receivers of a group of G are in g0 when there are at most G of them), so with a
# prefix each, all processes' receivers are members of the one group g0 (for a peer:
# subscribers of its one topic). The receivers-only processes (--senders 0) start first;
# once each is running, one more process with the sender and a single receiver (a peer's
# window is counted at a receiver of the sender's process) runs the timed part; once
# every process's deliveries have stopped, the receivers-only ones get SIGTERM (gw_load
# ends its run early and reports, every delivery counted however late it came). The
# server's CPU is read from the sender's start (set-up excluded: nothing is sent before
# it) to the moment the deliveries stopped; deliveries are all processes' together.
w1big_members=19000
# Source addresses 127.0.0.1 .. 50 for every gw_load process: each socket binds an address
# before it connects, and the ports of the runs before stay taken (TIME_WAIT, the client
# closed first) for a minute: over 50 addresses a run takes under 400 ports of each.
w1big_sources=50
if [ "$(ulimit -Hn)" -lt $((w1big_members + 500)) ]; then
  w1big_members=$(( $(ulimit -Hn) - 1000 ))
  ! want w1big || say "w1big: open-files hard limit $(ulimit -Hn): $w1big_members members, not 19000"
fi
# w1big_running FILE PID: waits until gw_load's stderr FILE says it is running (its
# sessions set up; at most 300 s) while PID lives; false if not.
w1big_running() {
  local j
  for ((j = 0; j < 6000; j++)); do
    grep -q 'running' "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
  grep -q 'running' "$1" 2>/dev/null
}
# w1big_delivered: the receivers-only processes' deliveries so far, from their progress
# lines (one a second).
w1big_delivered() {
  local i t=0 v
  for ((i = 1; i < $1; i++)); do
    v=$(grep -o 'delivered [0-9]*' "$BENCH_WORK/big$i.err" 2>/dev/null | tail -1 | cut -d' ' -f2)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
# w1big_once KIND MEMBERS TAG: one run against the server started; prints "DELIVERIES_PER_S
# SERVER_US_PER_DELIVERY PROCESSES" (nothing when it failed). The server's CPU is read by
# this script from the moment the sender's process runs (every process set up) until the
# deliveries have stopped in every process (the slowest reader's last frames included);
# deliveries/s is every delivery over the time from that moment to the last delivery any
# process saw.
w1big_once() {
  local k=$1 m=$2 tag=$3 n share i pids=() t0s=() o d c0 c1 t0 last a b ok=1 mp
  # Processes 1..n-1: the receivers but one, in shares of at most 9,000; process 0: the
  # sender and one receiver (for a peer, the window is what that one has received).
  n=$(( (m - 1 + 8999) / 9000 + 1 ))
  share=$(( (m - 1) / (n - 1) ))
  # The last run's files gone first: a stale "running" must not be read as this one's (the
  # redirections below happen in the background, after this shell may have looked).
  rm -f "$BENCH_WORK"/big[0-9]*.out "$BENCH_WORK"/big[0-9]*.err
  for ((i = 1; i < n; i++)); do
    [ "$i" -lt $((n - 1)) ] || share=$(( m - 1 - share * (n - 2) ))
    # shellcheck disable=SC2046
    timeout 600 "$load" --json $(target "$k") --sessions "$share" --group-size "$m" --senders 0 \
      --seconds 590 --sources "$w1big_sources" --uid-prefix "big$i-" \
      >"$BENCH_WORK/big$i.out" 2>"$BENCH_WORK/big$i.err" &
    pids+=($!)
  done
  for ((i = 1; i < n; i++)); do
    if w1big_running "$BENCH_WORK/big$i.err" "${pids[i - 1]}"; then
      t0s+=("$(date +%s.%N)")
    else
      say "$tag: receivers $i did not set up: $(tail -2 "$BENCH_WORK/big$i.err" | tr '\n' ' ')"
      ok=
    fi
  done
  if [ -n "$ok" ]; then
    # shellcheck disable=SC2046
    timeout 600 "$load" --json $(target "$k") --sessions 1 --group-size "$m" --senders 1 \
      --seconds "$secs" --sources "$w1big_sources" --uid-prefix big0- \
      --server-pid "$SRV_PID" >"$BENCH_WORK/big0.out" 2>"$BENCH_WORK/big0.err" &
    mp=$!
    if w1big_running "$BENCH_WORK/big0.err" "$mp"; then
      t0=$(date +%s.%N) c0=$(cpu_s "$SRV_PID")
    else
      say "$tag: the sender's process did not set up: $(tail -2 "$BENCH_WORK/big0.err" | tr '\n' ' ')"
      ok=
    fi
    wait "$mp" || say "$tag: gw_load exited $?: $(grep -v '^gw_load: [0-9]* s:' "$BENCH_WORK/big0.err" | tail -2 | tr '\n' ' ')"
  fi
  # Until the others' deliveries stop growing (two progress lines alike; at most 20 s).
  a=-1
  for ((i = 0; ok && i < 20; i++)); do
    sleep 1.1
    b=$(w1big_delivered "$n")
    [ "$b" != "$a" ] || break
    a=$b
  done
  [ -z "$ok" ] || c1=$(cpu_s "$SRV_PID")
  o=$(grep '^{' "$BENCH_WORK/big0.out" 2>/dev/null | tail -1 || true)
  [ -n "$o" ] && echo "$tag sender $o" >>"$rawlog"
  d=$(field "$o" deliveries) last=$(awk -v t="${t0:-0}" -v a="$(field "$o" active_s)" 'BEGIN{printf "%.3f", t + a}')
  for ((i = 1; i < n; i++)); do
    kill -TERM "${pids[i - 1]}" 2>/dev/null || true
    wait "${pids[i - 1]}" || say "$tag: receivers $i: gw_load exited $?"
    o=$(grep '^{"seconds"' "$BENCH_WORK/big$i.out" | tail -1 || true)
    [ -n "$o" ] && echo "$tag receivers $i $o" >>"$rawlog"
    if [ -n "$o" ] && [ -n "$d" ] && [ -n "$ok" ]; then
      d=$((d + $(field "$o" deliveries)))
      last=$(awk -v l="$last" -v t="${t0s[i - 1]}" -v a="$(field "$o" active_s)" 'BEGIN{printf "%.3f", (t + a > l) ? t + a : l}')
    else
      d=
    fi
  done
  [ -n "$ok" ] && [ -n "$d" ] || return 0
  awk -v d="$d" -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN{print b - a}')" -v s="$(awk -v a="$t0" -v b="$last" 'BEGIN{print b - a}')" -v n="$n" \
    'BEGIN{if (d > 0 && s > 0) printf "%.1f %.3f %d\n", d / s, c * 1e6 / d, n}'
}
w1big() {
  local m=$w1big_members k r v a b n=1 kinds
  mapfile -t kinds < <(kinds_of gw1 bun)
  declare -A D=() U=()
  for ((r = 0; r < runs; r++)); do
    for k in "${kinds[@]}"; do
      start_kind "$k" || { say "w1big $m members, $k: did not start"; stop_srv; continue; }
      v=$(w1big_once "$k" "$m" "w1big $k $m")
      stop_srv
      [ -n "$v" ] || { say "w1big $m members, $k, run $((r + 1)): failed"; continue; }
      read -r a b n <<<"$v"
      D[$k]+=" $a" U[$k]+=" $b"
      say "w1big $m members, $k, run $((r + 1)): $(fmt 0 "$a") deliveries/s, $b us/delivery ($n gw_load processes)"
    done
  done
  echo
  echo "### W1 big: one group of $m members ($runs runs of ${secs} s, taking turns, median)"
  echo
  echo "One sender flat out, as W1, to one group of $m (20,000 is more than one server process"
  echo "may open here: open-files hard limit $(ulimit -Hn)). The sessions are spread over"
  echo "$(( (m - 1 + 8999) / 9000 )) gw_load processes (at most 9,000 each) and one more with the sender and"
  echo "one receiver, every receiver a member of the same group (Bun: subscribed to the one"
  echo "topic), the receivers-only ones set up first and stopped when every delivery came."
  echo "Deliveries are all processes' together; the server's CPU is read from the start of the"
  echo "sender's timed run until every process's deliveries stopped (set-up excluded), and"
  echo "deliveries/s is over the time from that start to the last delivery any process saw."
  echo "gw1: the gateway with --threads 1; Bun over ws://. gw1/Bun: the gateway's server"
  echo "us/delivery over Bun's."
  echo
  echo "| members | server | deliveries/s | server us/delivery | gw1/Bun server us/delivery |"
  echo "|---|---|---|---|---|"
  local u1
  # shellcheck disable=SC2086
  u1=$(med ${U[gw1]:-})
  for k in "${kinds[@]}"; do
    local u
    # shellcheck disable=SC2086
    u=$(med ${U[$k]:-})
    # shellcheck disable=SC2086
    row '| %d | %s | %s | %s | %s |\n' "$m" "${name[$k]}" "$(fmt 0 "$(med ${D[$k]:-})")" \
      "$(fmt 2 "$u")" "$(if [ "$k" = gw1 ]; then ratio "$u1" "$(med ${U[bun]:-})"; fi)"
  done
}

# The gateway's W1 maximum with 1 thread for a group of 100 (measured here, the same
# load, if w1 did not run).
w1_max100() {
  if [ -z "${W1_D[gw1,100]:-}" ]; then
    local r out l=()
    for ((r = 0; r < runs; r++)); do
      start_kind gw1
      out=$(gwload "w1max gw1 100" --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 100 \
            --group-size 100 --senders 1 --seconds "$secs" --server-pid "$SRV_PID")
      stop_srv
      l+=("$(field "$out" deliveries_per_active_s)")
    done
    W1_D[gw1,100]=$(med "${l[@]}")
  fi
  echo "${W1_D[gw1,100]}"
}

# ---- W2: durable sends ----------------------------------------------------------------
w2() {
  local n win spec r out o=() f=() p=() e m0 c0 m1 c1 i
  echo
  echo "### W2 durable sends, sync on ($runs runs of ${secs} s, median)"
  echo
  echo "window: sends a sender keeps in flight (gw_load --window). db_bench runs as many threads"
  echo "as there are senders."
  echo
  echo "| senders | window | gateway confirmed sends/s | messages per fsync | db_bench fillrandom --sync=1 ops/s | ratio gateway/db_bench | gw_load CPU s per server CPU s |"
  echo "|---|---|---|---|---|---|---|"
  for spec in "1 1" "64 1" "1024 1" "1 8"; do
    read -r n win <<<"$spec"
    o=() f=() p=()
    local lc=()
    for ((r = 0; r < runs; r++)); do
      start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
      # Every sender has a group of its own (no fan-out) and WINDOW sends in flight: with
      # 1, a sender waits for its `sent` (written and fsynced) before the next, like a
      # db_bench thread waits for its synced Put.
      timeout 600 "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 \
        --senders "$n" --own-groups --window "$win" --seconds "$secs" --sources 2 \
        --server-pid "$SRV_PID" >"$BENCH_WORK/w2.out" 2>"$BENCH_WORK/w2.err" &
      local lp=$!
      for ((i = 0; i < 1200; i++)); do
        grep -q 'running' "$BENCH_WORK/w2.err" 2>/dev/null && break
        kill -0 "$lp" 2>/dev/null || break
        sleep 0.05
      done
      local s0 s1
      s0=$(stats)
      wait "$lp" || say "w2 $n x $win: gw_load exited $?"
      s1=$(stats)
      stop_srv
      out=$(grep '^{' "$BENCH_WORK/w2.out" | tail -1 || true)
      [ -n "$out" ] && echo "w2 gw $n window $win $out" >>"$rawlog"
      m0=$(jget messages.stored <<<"$s0") c0=$(jget store.commits <<<"$s0")
      m1=$(jget messages.stored <<<"$s1") c1=$(jget store.commits <<<"$s1")
      o+=("$(field "$out" confirmed_per_s)")
      f+=("$(awk -v m=$((m1 - m0)) -v c=$((c1 - c0)) 'BEGIN{print (c>0)?m/c:0}')")
      lc+=("$(awk -v a="$(field "$out" load_cpu_s)" -v b="$(field "$out" server_cpu_s)" 'BEGIN{print (b>0)?a/b:0}')")
      rm -rf "$BENCH_WORK/db"
      e=$(db_bench --benchmarks=fillrandom --db="$BENCH_WORK/db" --sync=1 --threads="$n" \
          --value_size=200 --duration="$secs" --num=100000000 2>&1 |
          grep -E '^fillrandom +:' | sed -E 's/.* ([0-9]+) ops\/sec.*/\1/' || true)
      p+=("$e")
      say "w2 $n senders, window $win, run $((r + 1)): gateway ${o[-1]}/s (${f[-1]} per fsync), db_bench ${e:-failed}/s"
    done
    local om pm
    om=$(med "${o[@]}") pm=$(med "${p[@]}")
    row '| %d | %d | %.0f | %.1f | %.0f | %s | %.2f |\n' "$n" "$win" "$om" "$(med "${f[@]}")" "$pm" \
      "$(ratio "$om" "$pm")" "$(med "${lc[@]}")"
  done
}

# ---- W3: latency ----------------------------------------------------------------------
# Pinned: the server on core 1 (the gateway with --threads 1), gw_load on core 0, so the
# two never share a core and the server has one to itself.
w3() {
  local max frac rate r out k p
  max=$(w1_max100)
  echo
  echo "### W3 send-to-deliver latency, group of 100, pinned: server on core 1, gw_load on core 0 ($runs runs of ${secs} s, median)"
  echo
  echo "W1 maximum for 100 members, the gateway with 1 thread: $(printf '%.0f' "$max") deliveries/s ($(awk -v m="$max" 'BEGIN{printf "%.0f", m/100}') sends/s)."
  echo "The server runs under taskset -c 1 (the gateway with --threads 1, its store's threads"
  echo "on that core too), gw_load under taskset -c 0. The same open-loop rate is also offered"
  echo "to libwebsockets-test-server (no storage, no acks, one frame per message) and to Bun's"
  echo "pub/sub broadcast (ws://; every thread Bun starts on core 1 too), pinned the same way:"
  echo "the latency of the stack and the load generator alone."
  echo
  echo "The gateway's own loop (its histogram gw_loop_iteration_seconds, read 2 s into the run,"
  echo "after the sessions' set-up, and at its end): the longest iteration between the two, as"
  echo "the upper bound of its bucket (poll to poll), and the share of iterations of 1 ms or more."
  echo
  echo "| load | server | sends/s | deliveries/s | p50 ms | p99 ms | p99.9 ms | longest iteration, ms (up to) | iterations >= 1 ms |"
  echo "|---|---|---|---|---|---|---|---|---|"
  declare -A w3name=([gw1]="gateway, sync on" [gwns]="gateway, --no-sync" [lws]="lws-test-server"
                     [bun]="Bun (uWebSockets)")
  local w3k
  mapfile -t w3k < <(kinds_of gw1 gwns lws bun)
  for frac in 25 50 75; do
    rate=$(awk -v m="$max" -v f="$frac" 'BEGIN{printf "%.0f", m / 100 * f / 100}')
    declare -A w3a=() w3b=() w3c=() w3d=() w3e=() w3f=()
    for ((r = 0; r < runs; r++)); do
      for k in "${w3k[@]}"; do
        BENCH_PIN=1 start_kind "$k" || { say "w3 $frac% $k: did not start"; stop_srv; continue; }
        p=
        [ "$r $k $frac" != "0 gw1 50" ] || { prof_for w3 "W3, 50% load, sync on, 1 thread, pinned"; p=$prof_file; }
        # The loop's histogram once the sessions are set up (2 s in), and at the end.
        local snap=
        if [[ "$k" == gw* ]]; then
          { sleep 2; metrics > "$BENCH_WORK/lag0" 2>/dev/null; } &
          snap=$!
        fi
        # shellcheck disable=SC2046
        out=$(PROF=$p LOAD_PIN=0 gwload "w3 $k $frac" $(target "$k") --sessions 100 \
              --group-size 100 --rate "$rate" --seconds "$secs" --server-pid "$SRV_PID")
        [ -z "$snap" ] || wait "$snap" # that one only: the server is a child too
        if [[ "$k" == gw* ]]; then
          local lag
          lag=$(metrics | loop_window "$BENCH_WORK/lag0" 2>/dev/null || echo "nan nan")
          w3e[$k]+=" ${lag% *}" w3f[$k]+=" ${lag#* }"
        fi
        stop_srv
        w3a[$k]+=" $(field "$out" deliveries_per_s)" w3b[$k]+=" $(field "$out" latency_us.p50)"
        w3c[$k]+=" $(field "$out" latency_us.p99)" w3d[$k]+=" $(field "$out" latency_us.p999)"
        say "w3 $frac% ($rate sends/s), $k, run $((r + 1)): p99 $(field "$out" latency_us.p99) us"
      done
    done
    for k in "${w3k[@]}"; do
      local gwk=''
      [[ "$k" != gw* ]] || gwk=1
      # shellcheck disable=SC2086
      row '| %d%% | %s | %d | %.0f | %.2f | %.2f | %.2f | %s | %s |\n' "$frac" "${w3name[$k]}" "$rate" \
        "$(med ${w3a[$k]:-})" "$(awk -v v="$(med ${w3b[$k]:-})" 'BEGIN{print v/1000}')" \
        "$(awk -v v="$(med ${w3c[$k]:-})" 'BEGIN{print v/1000}')" \
        "$(awk -v v="$(med ${w3d[$k]:-})" 'BEGIN{print v/1000}')" \
        "$([ -z "$gwk" ] && echo - || fmt 2 "$(med ${w3e[$k]:-})")" \
        "$([ -z "$gwk" ] && echo - || echo "$(fmt 3 "$(med ${w3f[$k]:-})")%")"
    done
    unset w3a w3b w3c w3d w3e w3f
  done
  prof_print
}

# ---- W6: acks -------------------------------------------------------------------------
w6() {
  local max rate mode r out s a b c e g
  max=$(w1_max100)
  rate=$(awk -v m="$max" 'BEGIN{printf "%.0f", m / 100 / 2}')
  echo
  echo "### W6 acks, group of 100 at $rate sends/s (50% of W1's 1-thread maximum; $runs runs of ${secs} s, median)"
  echo
  echo "| client acks | deliveries/s | ack frames per delivered message | ack frames/s received | ack writes/s (store batches) | ack entries written/s | server us/delivery |"
  echo "|---|---|---|---|---|---|---|"
  for mode in batched per-message; do
    a=() b=() c=() e=() g=() s=()
    for ((r = 0; r < runs; r++)); do
      start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
      local extra=()
      [ "$mode" = batched ] || extra=(--ack-every 1)
      out=$(gwload "w6 gw $mode" --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 100 \
            --group-size 100 --rate "$rate" --seconds "$secs" --server-pid "$SRV_PID" "${extra[@]}")
      sleep 0.5 # the coalescer's last flush
      local st1 t
      st1=$(stats)
      stop_srv
      t=$(field "$out" seconds)
      a+=("$(field "$out" deliveries_per_s)")
      b+=("$(awk -v f="$(field "$out" ack_frames)" -v d="$(field "$out" deliveries)" 'BEGIN{print (d>0)?f/d:0}')")
      c+=("$(awk -v f="$(field "$out" ack_frames)" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')")
      e+=("$(awk -v f="$(jget acks.writes <<<"$st1")" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')")
      g+=("$(awk -v f="$(jget acks.entries_written <<<"$st1")" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')")
      s+=("$(field "$out" server_cpu_us_per_delivery)")
    done
    row '| %s | %.0f | %.4f | %.0f | %.1f | %.0f | %.2f |\n' \
      "$([ "$mode" = batched ] && echo "batched (ack_every 50, ack_delay 1 s)" || echo "one per message")" \
      "$(med "${a[@]}")" "$(med "${b[@]}")" "$(med "${c[@]}")" "$(med "${e[@]}")" \
      "$(med "${g[@]}")" "$(med "${s[@]}")"
  done
}

# ---- W4: idle sessions ----------------------------------------------------------------
# w4_once KIND SESSIONS TAG [PROF]: one idle run (wss://) against a server started by the
# caller; prints "RSS_PER_SESSION_BYTES RSS_MIB CPU_PERCENT" or nothing if it failed.
w4_once() {
  local k=$1 m=$2 base out rss cpu t idle=$((secs * 2)) tls=1
  ! plain "$k" || tls=
  base=$(rss_kib "$SRV_PID")
  # shellcheck disable=SC2046
  out=$(PROF=${4:-} gwload "$3" $(BENCH_TLS=$tls target "$k") --idle --sessions "$m" --group-size 100 \
        --senders 0 --seconds "$idle" --sources "$(sources_for "$m")" --server-pid "$SRV_PID")
  rss=$(field "$out" server_rss_kib) cpu=$(field "$out" server_cpu_s) t=$(field "$out" seconds)
  [ -n "$rss" ] || return 0
  awk -v a="$rss" -v b="$base" -v m="$m" -v c="$cpu" -v t="$t" \
    'BEGIN{printf "%s %s %s\n", (a-b)*1024/m, a/1024, (t>0)?100*c/t:0}'
}
w4() {
  local m k r v p a b c sizes=("${w4_sizes[@]}") idle=$((secs * 2))
  local kinds
  mapfile -t kinds < <(kinds_of gw1 gw2 gw1ws node nchan bun bunws)
  echo
  echo "### W4 idle sessions (wss://, and the gateway and Bun over ws:// too; held ${idle} s after set-up; $runs runs, median)"
  echo
  echo "The last column: gw1/peer, and on Bun's ws:// row the gateway's ws:// row over Bun's."
  echo
  echo "| sessions | server | RSS per session (bytes) | server RSS (MiB) | CPU while idle (% of a core) | gw1/peer RSS per session |"
  echo "|---|---|---|---|---|---|"
  for m in "${sizes[@]}"; do
    declare -A rl=() ml=() cl=() R=() M=() C=()
    for ((r = 0; r < runs; r++)); do
      for k in "${kinds[@]}"; do
        local tls=1
        ! plain "$k" || tls=
        BENCH_TLS=$tls start_kind "$k" || { say "w4 $m $k: did not start"; stop_srv; continue; }
        p=
        [ "$r $k $m" != "0 gw1 ${sizes[0]}" ] || { prof_for w4 "W4, $m idle wss:// sessions, 1 thread"; p=$prof_file; }
        v=$(w4_once "$k" "$m" "w4 $k $m" "$p")
        stop_srv
        [ -n "$v" ] || { say "w4 $m $k run $((r + 1)) failed"; continue; }
        read -r a b c <<<"$v"
        rl[$k]+=" $a" ml[$k]+=" $b" cl[$k]+=" $c"
        say "w4 $m $k run $((r + 1)): $(fmt 0 "$a") bytes a session, $(fmt 2 "$c")% CPU idle"
      done
    done
    for k in "${kinds[@]}"; do
      # shellcheck disable=SC2086
      R[$k]=$(med ${rl[$k]:-}) M[$k]=$(med ${ml[$k]:-}) C[$k]=$(med ${cl[$k]:-})
    done
    for k in "${kinds[@]}"; do
      row '| %d | %s | %.0f | %.1f | %.2f | %s |\n' "$m" "${name[$k]}" "${R[$k]}" "${M[$k]}" \
        "${C[$k]}" "$(case "$k" in gw*) ;; bunws) ratio "${R[gw1ws]}" "${R[$k]}" ;; *) ratio "${R[gw1]}" "${R[$k]}" ;; esac)"
    done
    unset rl ml cl R M C
  done
  prof_print
}

# ---- W5: offline pull -----------------------------------------------------------------
w5() {
  local l w r out p
  echo
  echo "### W5 offline pull: 25,000 unread over 40 groups ($runs runs, median)"
  echo
  echo "pull window: pulls in flight at once, one group each (gw_load --pull-window)."
  echo
  echo "| page size | pull window | messages pulled/s | pages/s | time to pull all (s) |"
  echo "|---|---|---|---|---|"
  for l in 100 500; do
    declare -A w5a=() w5b=() w5c=()
    for ((r = 0; r < runs; r++)); do
      for w in 1 8; do
        start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
        p=
        [ "$r $l $w" != "0 100 8" ] || { prof_for w5 "W5, pages of 100, 8 pulls in flight (storing the 25,000, then the pull)"; p=$prof_file; }
        out=$(PROF=$p gwload "w5 gw $l window $w" --url "ws://127.0.0.1:$SRV_PORT/ws" --pull "$l" \
              --pull-groups 40 --pull-window "$w" --count 25000 --server-pid "$SRV_PID")
        stop_srv
        [ -z "$out" ] || [ "$(field "$out" pull_window)" = "$w" ] ||
          say "w5: gw_load reports pull_window $(field "$out" pull_window), not $w"
        w5a[$w]+=" $(field "$out" pull.messages_per_s)" w5b[$w]+=" $(field "$out" pull.pages_per_s)"
        w5c[$w]+=" $(field "$out" pull.seconds)"
        say "w5 pages of $l, window $w, run $((r + 1)): $(field "$out" pull.messages_per_s) messages/s"
      done
    done
    for w in 1 8; do
      # shellcheck disable=SC2086
      row '| %d | %d | %.0f | %.0f | %.3f |\n' "$l" "$w" "$(med ${w5a[$w]:-})" "$(med ${w5b[$w]:-})" "$(med ${w5c[$w]:-})"
    done
    unset w5a w5b w5c
  done
  prof_print
}

# ---- Threads: 1 and 2 service threads, both backends ----------------------------------
# W1 at the sizes asked for up to 1,000 members (10,000 takes long to set up; 100 if none),
# and W4 at the first idle size, with --threads 1 and --threads 2, on RocksDB and on
# PostgreSQL (one server for the workload, a fresh database for every gateway started).
# Interleaved run by run: backend and thread count alternate within each run.
threads() {
  local sizes=() m r bk t out url v key
  for m in "${w1_sizes[@]}"; do
    [ "$m" -gt 1000 ] || sizes+=("$m")
  done
  [ ${#sizes[@]} -gt 0 ] || sizes=(100)
  local im=${w4_sizes[0]} idle=$((secs * 2))
  start_pg || { say "threads: no PostgreSQL server"; return 1; }
  declare -A D=() U=() R=() C=()
  for m in "${sizes[@]}" idle; do
    for ((r = 0; r < runs; r++)); do
      for bk in rocksdb postgres; do
        for t in 1 2; do
          url=
          [ "$bk" = rocksdb ] || url=$(pg_newdb)
          key="$bk,$m,$t"
          if [ "$m" = idle ]; then
            if BENCH_TLS=1 BENCH_STORE_URL=$url start_gwt "$t"; then
              v=$(w4_once gw "$im" "threads w4 $bk $im threads $t")
              [ -z "$v" ] || { R[$key]+=" ${v%% *}" C[$key]+=" ${v##* }"; }
              say "threads: w4 $im, $bk, $t threads, run $((r + 1)): ${v:-failed}"
            else
              say "threads: $bk, $t threads: the gateway did not start"
            fi
          elif BENCH_STORE_URL=$url start_gwt "$t"; then
            out=$(gwload "threads w1 $bk $m threads $t" --url "ws://127.0.0.1:$SRV_PORT/ws" \
                  --sessions "$m" --group-size "$m" --senders 1 --seconds "$secs" \
                  --sources "$(sources_for "$m")" --server-pid "$SRV_PID")
            D[$key]+=" $(field "$out" deliveries_per_active_s)"
            U[$key]+=" $(field "$out" server_cpu_us_per_delivery)"
            say "threads: w1 $m, $bk, $t threads, run $((r + 1)): $(field "$out" deliveries_per_active_s) deliveries/s, $(field "$out" server_cpu_us_per_delivery) us/delivery"
          else
            say "threads: $bk, $t threads: the gateway did not start"
          fi
          stop_srv
          [ -z "$url" ] || pg_dropdb "$url"
        done
      done
    done
  done
  stop_pg
  echo
  echo "### Service threads: the gateway with --threads 1 and 2, both backends ($runs runs of ${secs} s, median)"
  echo
  echo "W1 as above (one sender flat out, ws://); W4 as above (wss://, idle ${idle} s). PostgreSQL:"
  echo "tools/pg_server.sh's server on 127.0.0.1, a fresh database for every gateway; the server"
  echo "CPU is the gateway's process only (not PostgreSQL's). Goal: with 2 threads, server CPU"
  echo "per delivery at most 10% above 1 thread (ratio <= 1.10)."
  echo
  echo "| backend | workload | threads | deliveries/s | RSS per session (bytes) | CPU while idle (% of a core) | server us/delivery | us/delivery 2 threads/1 thread |"
  echo "|---|---|---|---|---|---|---|---|"
  local bn u1
  for bk in rocksdb postgres; do
    bn=RocksDB
    [ "$bk" = rocksdb ] || bn=PostgreSQL
    for m in "${sizes[@]}"; do
      # shellcheck disable=SC2086
      u1=$(med ${U[$bk,$m,1]:-})
      for t in 1 2; do
        local u
        # shellcheck disable=SC2086
        u=$(med ${U[$bk,$m,$t]:-})
        # shellcheck disable=SC2086
        row '| %s | W1, %d members | %d | %s |  |  | %s | %s |\n' "$bn" "$m" "$t" \
          "$(fmt 0 "$(med ${D[$bk,$m,$t]:-})")" "$(fmt 2 "$u")" "$([ "$t" = 1 ] || ratio "$u" "$u1")"
      done
    done
    for t in 1 2; do
      # shellcheck disable=SC2086
      row '| %s | W4, %d idle sessions | %d |  | %s | %s |  |  |\n' "$bn" "$im" "$t" \
        "$(fmt 0 "$(med ${R[$bk,idle,$t]:-})")" "$(fmt 2 "$(med ${C[$bk,idle,$t]:-})")"
    done
  done
}

# ---- Storage --------------------------------------------------------------------------
storage() { . "$root/tools/bench/storage.sh"; storage_bench; }
retention() { . "$root/tools/bench/retention.sh"; retention_bench; }

# ---- Versus: this build against another (--base DIR) ----------------------------------
# start_as WHO [THREADS]: the gateway of this build (new) or of --base (base), with
# --threads THREADS (none: its default, a thread per core, as in W2).
start_as() {
  if [ -n "${2:-}" ]; then
    if [ "$1" = base ]; then GW_BIN="$base/gw" start_gwt "$2"; else start_gwt "$2"; fi
  elif [ "$1" = base ]; then
    GW_BIN="$base/gw" start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
  else
    start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
  fi
}
versus() {
  [ -n "$base" ] && [ -x "$base/gw" ] || { say "versus: --base DIR, a build folder with its gw"; return 1; }
  local m k r t who out sizes=()
  declare -A VD=() VC=() VS=() VP=()
  for m in "${w1_sizes[@]}"; do [ "$m" -gt 1000 ] || sizes+=("$m"); done
  for m in "${sizes[@]}"; do
    for ((r = 0; r < runs; r++)); do
      for k in base1 new1 base2 new2; do
        who=${k%?} t=${k: -1}
        start_as "$who" "$t" || { say "versus w1 $m, $k: did not start"; stop_srv; continue; }
        out=$(gwload "versus w1 $k $m" --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions "$m" \
              --group-size "$m" --senders 1 --seconds "$secs" --sources "$(sources_for "$m")" \
              --server-pid "$SRV_PID")
        stop_srv
        VD[$k,$m]+=" $(field "$out" deliveries_per_active_s)"
        VC[$k,$m]+=" $(awk -v d="$(field "$out" deliveries)" -v c="$(field "$out" server_cpu_s)" 'BEGIN{print (c>0)?d/c:""}')"
        say "versus w1 $m members, $k, run $((r + 1)): $(field "$out" deliveries_per_active_s) deliveries/s"
      done
    done
  done
  # W2 on both backends (PostgreSQL: a server of the run's own, a fresh database for every
  # gateway started, as in threads), then W5 (pages of 100, 8 pulls in flight: RocksDB).
  local bk url
  start_pg || say "versus: no PostgreSQL server: W2 on RocksDB only"
  for ((r = 0; r < runs; r++)); do
    for bk in rocksdb postgres; do
      [ "$bk" = rocksdb ] || [ -n "$BENCH_PG_URL" ] || continue
      for who in base new; do
        url=
        [ "$bk" = rocksdb ] || url=$(pg_newdb)
        if BENCH_STORE_URL=$url start_as "$who"; then
          out=$(gwload "versus w2 $bk $who" --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 \
                --senders 64 --own-groups --window 1 --seconds "$secs" --sources 2 --server-pid "$SRV_PID")
          VS[$bk,$who]+=" $(field "$out" confirmed_per_s)"
          say "versus w2 64 senders, $bk, $who, run $((r + 1)): $(field "$out" confirmed_per_s) sends/s"
        else
          say "versus w2, $bk, $who: did not start"
        fi
        stop_srv
        [ -z "$url" ] || pg_dropdb "$url"
      done
    done
    for who in base new; do
      start_as "$who" || { say "versus w5, $who: did not start"; stop_srv; continue; }
      out=$(gwload "versus w5 $who" --url "ws://127.0.0.1:$SRV_PORT/ws" --pull 100 --pull-groups 40 \
            --pull-window 8 --count 25000 --server-pid "$SRV_PID")
      stop_srv
      VP[$who]+=" $(field "$out" pull.messages_per_s)"
      say "versus w5 pages of 100, window 8, $who, run $((r + 1)): $(field "$out" pull.messages_per_s) messages/s"
    done
  done
  stop_pg
  echo
  echo "### This build against $base/gw ($runs runs of ${secs} s each, taking turns, median)"
  echo
  echo "| workload | threads | base | new | new/base | base per server CPU s | new per server CPU s | new/base per CPU s |"
  echo "|---|---|---|---|---|---|---|---|"
  local b n bc nc
  for m in "${sizes[@]}"; do
    for t in 1 2; do
      # shellcheck disable=SC2086
      b=$(med ${VD[base$t,$m]:-}) n=$(med ${VD[new$t,$m]:-}) bc=$(med ${VC[base$t,$m]:-}) nc=$(med ${VC[new$t,$m]:-})
      row '| W1, %d members, deliveries/s | %d | %.0f | %.0f | %s | %.0f | %.0f | %s |\n' "$m" "$t" \
        "$b" "$n" "$(ratio "$n" "$b")" "$bc" "$nc" "$(ratio "$nc" "$bc")"
    done
  done
  for bk in rocksdb postgres; do
    # shellcheck disable=SC2086
    b=$(med ${VS[$bk,base]:-}) n=$(med ${VS[$bk,new]:-})
    [ -n "$b$n" ] || continue
    row '| W2, 64 senders, confirmed sends/s (sync on), %s | %d | %.0f | %.0f | %s |  |  |  |\n' \
      "$([ "$bk" = rocksdb ] && echo RocksDB || echo PostgreSQL)" "$(nproc)" "$b" "$n" "$(ratio "$n" "$b")"
  done
  # shellcheck disable=SC2086
  b=$(med ${VP[base]:-}) n=$(med ${VP[new]:-})
  row '| W5, 25,000 unread over 40 groups, pages of 100, 8 in flight, messages pulled/s | %d | %.0f | %.0f | %s |  |  |  |\n' \
    "$(nproc)" "$b" "$n" "$(ratio "$n" "$b")"
}

# ---- XMPP: the gateway on PostgreSQL against ejabberd and Prosody ----------------------
# tools/bench/xmpp.sh starts the XMPP servers (configurations in tools/bench/peers/); one
# PostgreSQL server of the workload's own, a fresh database for every server started.
# xmpp_kinds: xgw (the gateway, --threads 1, on PostgreSQL), ejabberd, prosody.
xmpp_kinds=(xgw ejabberd prosody)
declare -A xname=([xgw]="gateway, 1 thread, PostgreSQL" [ejabberd]="ejabberd 23.01" [prosody]="Prosody 0.12")
xmpp_start() {
  XMPP_TARGET=()
  case "$1" in
    xgw)
      XMPP_DB=$(pg_newdb) || return 1
      BENCH_STORE_URL=$XMPP_DB start_gwt 1 || return 1
      XMPP_TARGET=(--url "ws://127.0.0.1:$SRV_PORT/ws") ;;
    *)
      "start_$1" || return 1
      # Every user the driver may use: PREFIX u0..u199 (W2's 100 members and more).
      xmpp_register x 200 || return 1
      # A warm-up, unmeasured, in rooms of their own (users w...): W2's shape for 1 s at
      # 100 messages/s, then tools/bench/xmpp_check.py (a login, a join, 5 messages, a MAM
      # query). Erlang loads a module on its first call: a fresh ejabberd's first run
      # stalls 0.2-0.4 s at its start (measured; not the second run, nor a new room then),
      # a cost a running deployment paid long ago. The gateway (compiled, nothing loaded
      # lazily) needs none.
      XMPP_TARGET=(--xmpp "$XMPP_URL" --xmpp-domain "$XMPP_DOMAIN" --xmpp-muc "$XMPP_MUC"
                   --xmpp-password bench)
      xmpp_register w 100 || return 1
      timeout 60 "$load" "${XMPP_TARGET[@]}" --uid-prefix w --sessions 0 --group-size 100 \
        --senders 10 --xmpp-members 100 --rate 100 --seconds 1 >/dev/null 2>"$BENCH_WORK/x.err" ||
        say "xmpp: $1's warm-up load failed: $(tail -1 "$BENCH_WORK/x.err")"
      timeout 60 /usr/bin/python3 "$root/tools/bench/xmpp_check.py" "$XMPP_URL" "$XMPP_DOMAIN" \
        "$XMPP_MUC" wu98 wu99 wcheck 5 >/dev/null || say "xmpp: $1's warm-up check failed"
      XMPP_TARGET+=(--uid-prefix x) ;;
  esac
}
xmpp_stop() {
  if [ "$1" = xgw ]; then
    stop_srv
    [ -z "$XMPP_DB" ] || pg_dropdb "$XMPP_DB"
    XMPP_DB=''
  else
    stop_xmpp
  fi
}
# xmpp_room KIND: W2's and W3's room (group) of 100 members, 10 of them online and
# sending; sets XMPP_ROOM to gw_load's arguments for it. The gateway: 90 members join g0
# first and go offline (u0..u89, as storage.sh's), then gw_load's 10 senders (s0..s9) join
# it and send to it, each receiving the others' (no receivers besides: --sessions 0).
# XMPP: the same shape, gw_load's 10 senders (u0..u9; the first, the owner, makes the
# room) and u0..u99 members by affiliation (--xmpp-members), u10..u99 never online.
xmpp_room() {
  if [ "$1" = xgw ]; then
    timeout 120 "$load" "${XMPP_TARGET[@]}" --idle --sessions 90 --group-size 90 --senders 0 \
      --seconds 1 >/dev/null 2>"$BENCH_WORK/x.err" ||
      say "xmpp: the 90 offline members did not join: $(tail -1 "$BENCH_WORK/x.err")"
    XMPP_ROOM=(--sessions 0 --group-size 100 --senders 10)
  else
    XMPP_ROOM=(--sessions 0 --group-size 100 --senders 10 --xmpp-members 100)
  fi
}
# xf FIELD: a field of the last run's JSON line ("" if it has none).
xf() { field "$XOUT" "$1" 2>/dev/null || true; }
# xmpp_load TAG ARGS...: one bounded gw_load run against the server started (its own CPU
# through --server-pid), PostgreSQL's CPU read around the measured part (from gw_load's
# "running" line, once sessions are set up, to its end); sets XOUT (its JSON line, "" if
# it failed) and XPG (PostgreSQL's CPU seconds).
xmpp_load() {
  local tag=$1 lp i p0 rc=0
  shift
  timeout 600 "$load" --json "$@" --server-pid "$SRV_PID" >"$BENCH_WORK/x.out" 2>"$BENCH_WORK/x.err" &
  lp=$!
  p0=$(pg_cpu_s)
  for ((i = 0; i < 2400; i++)); do
    grep -q 'running' "$BENCH_WORK/x.err" 2>/dev/null && break
    kill -0 "$lp" 2>/dev/null || break
    sleep 0.05
  done
  grep -q 'running' "$BENCH_WORK/x.err" 2>/dev/null && p0=$(pg_cpu_s)
  wait "$lp" || rc=$?
  XPG=$(awk -v a="$p0" -v b="$(pg_cpu_s)" 'BEGIN{printf "%.3f", b - a}')
  XOUT=$(grep '^{' "$BENCH_WORK/x.out" | tail -1 || true)
  [ "$rc" -eq 0 ] || say "$tag: gw_load exited $rc: $(grep -v '^gw_load: [0-9]* s:' "$BENCH_WORK/x.err" | tail -2 | tr '\n' ' ')"
  [ -z "$XOUT" ] || echo "$tag $XOUT pg_cpu_s=$XPG" >>"$rawlog"
}
# The send-to-confirm latency (confirm: the room's reflection to the sender, the
# gateway's `sent`): whichever name gw_load gives it.
xmpp_sendlat() {
  local n v
  for n in send_latency_us confirm_latency_us; do
    v=$(xf "$n.$1")
    [ -z "$v" ] || { echo "$v"; return 0; }
  done
  echo nan
}
ms() { awk -v v="$1" 'BEGIN{if (v ~ /^[0-9.eE+-]+$/) printf "%.2f", v / 1000; else printf "nan"}'; }
xmpp() {
  . "$root/tools/bench/xmpp.sh"
  xmpp_install || { say "xmpp: the XMPP servers could not be installed"; return 1; }
  start_pg || { say "xmpp: no PostgreSQL server"; return 1; }
  local r k out c cpu
  declare -A M=() U=() UP=() S50=() S99=() L50=() L99=() L999=() LD=() RT=()
  declare -A PM=() PP=() PB=() PS=() PR=()
  # W2: a room of 100 members, 10 of them online, each sending flat out one message at a
  # time (window 1: the next once the last is confirmed).
  for ((r = 0; r < runs; r++)); do
    for k in "${xmpp_kinds[@]}"; do
      xmpp_start "$k" || { say "xmpp w2 $k: did not start"; xmpp_stop "$k"; continue; }
      xmpp_room "$k"
      xmpp_load "xmpp w2 $k" "${XMPP_TARGET[@]}" "${XMPP_ROOM[@]}" --window 1 --seconds "$secs"
      c=$(xf confirmed)
      # Every message confirmed is in PostgreSQL (the XMPP servers' archive tables).
      if [ "$k" != xgw ] && [ -n "$c" ]; then
        local a
        a=$(xmpp_archived xroom || echo 0)
        [ "$a" -ge "$c" ] || say "xmpp w2 $k: $c confirmed but $a archived in PostgreSQL"
        say "xmpp w2 $k: $a messages archived in PostgreSQL for $c confirmed"
      fi
      xmpp_stop "$k"
      if [ -n "$c" ] && [ "$c" != 0 ]; then
        M[$k]+=" $(xf confirmed_per_s)"
        cpu=$(awk -v a="$(xf server_cpu_s)" -v b="$XPG" 'BEGIN{print a + b}')
        U[$k]+=" $(awk -v t="$cpu" -v c="$c" 'BEGIN{print t * 1e6 / c}')"
        UP[$k]+=" $(awk -v t="$XPG" -v c="$c" 'BEGIN{print t * 1e6 / c}')"
        S50[$k]+=" $(xmpp_sendlat p50)" S99[$k]+=" $(xmpp_sendlat p99)"
      fi
      say "xmpp w2 $k, run $((r + 1)): $(xf confirmed_per_s) confirmed/s, PostgreSQL ${XPG} CPU s"
    done
  done
  for k in "${xmpp_kinds[@]}"; do
    # shellcheck disable=SC2086
    M[$k]=$(med ${M[$k]:-}) U[$k]=$(med ${U[$k]:-}) UP[$k]=$(med ${UP[$k]:-})
    # shellcheck disable=SC2086
    S50[$k]=$(med ${S50[$k]:-}) S99[$k]=$(med ${S99[$k]:-})
  done
  # W3: each server at half its own W2 maximum, open loop.
  for ((r = 0; r < runs; r++)); do
    for k in "${xmpp_kinds[@]}"; do
      RT[$k]=$(awk -v m="${M[$k]}" 'BEGIN{if (m ~ /^[0-9.eE+-]+$/ && m > 0) printf "%.0f", m / 2; else print 0}')
      [ "${RT[$k]}" -gt 0 ] || continue
      xmpp_start "$k" || { say "xmpp w3 $k: did not start"; xmpp_stop "$k"; continue; }
      xmpp_room "$k"
      xmpp_load "xmpp w3 $k" "${XMPP_TARGET[@]}" "${XMPP_ROOM[@]}" --rate "${RT[$k]}" --seconds "$secs"
      xmpp_stop "$k"
      LD[$k]+=" $(xf deliveries_per_s)" L50[$k]+=" $(xf latency_us.p50)"
      L99[$k]+=" $(xf latency_us.p99)" L999[$k]+=" $(xf latency_us.p999)"
      say "xmpp w3 $k at ${RT[$k]} messages/s, run $((r + 1)): p99 $(xf latency_us.p99) us"
    done
  done
  # W5: 1,000 messages in each of 40 rooms while a member is offline, then its catch-up:
  # MAM queries of 100 per page, one room at a time; the gateway's pull, pages of 100.
  for ((r = 0; r < runs; r++)); do
    for k in "${xmpp_kinds[@]}"; do
      xmpp_start "$k" || { say "xmpp w5 $k: did not start"; xmpp_stop "$k"; continue; }
      xmpp_load "xmpp w5 $k" "${XMPP_TARGET[@]}" --pull 100 --pull-groups 40 --pull-window 1 \
        --count 40000
      xmpp_stop "$k"
      PM[$k]+=" $(xf pull.messages)" PP[$k]+=" $(xf pull.pages)"
      PB[$k]+=" $(xf pull.bytes)" PS[$k]+=" $(xf pull.seconds)"
      PR[$k]+=" $(xf pull.messages_per_s)"
      say "xmpp w5 $k, run $((r + 1)): $(xf pull.messages) messages in $(xf pull.seconds) s"
    done
  done
  stop_pg
  echo
  echo "### XMPP: the gateway on PostgreSQL, ejabberd and Prosody ($runs runs of ${secs} s, median)"
  echo
  echo "All three store in databases of one PostgreSQL 15 server of the run's own (tools/pg_server.sh:"
  echo "synchronous_commit on, fsync on), speak WebSocket on 127.0.0.1 without TLS (XMPP: RFC 7395,"
  echo "SASL PLAIN, MUC rooms archived by MAM; tools/bench/xmpp.sh and tools/bench/peers/), with"
  echo "rate limits off. The gateway runs with --threads 1; ejabberd with Erlang's default"
  echo "schedulers (one per core), Prosody in its one thread. Server CPU is the server's own"
  echo "process plus every PostgreSQL process's (backends, WAL writer, ...) over the measured part."
  echo "A message is confirmed when the sender has the gateway's \`sent\` (stored) or the room's"
  echo "reflection of it (both XMPP servers archive it before they broadcast it). Each XMPP server"
  echo "first gets an unmeasured warm-up (1 s of W2's shape in other rooms; Erlang loads code on"
  echo "first use); the gateway none."
  echo
  echo "W2: a room (group) of 100 members, 10 online (90 members by affiliation, never online), each"
  echo "of the 10 sending flat out with one message in flight; sender latency is send-to-confirm."
  echo
  echo "| server | confirmed messages/s | server CPU us/message (own + PostgreSQL) | of which PostgreSQL | sender p50 ms | sender p99 ms | gateway/peer messages/s | peer/gateway CPU per message |"
  echo "|---|---|---|---|---|---|---|---|"
  for k in "${xmpp_kinds[@]}"; do
    local a="" b=""
    [ "$k" = xgw ] || { a=$(ratio "${M[xgw]}" "${M[$k]}"); b=$(ratio "${U[$k]}" "${U[xgw]}"); }
    row '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "${xname[$k]}" "$(fmt 0 "${M[$k]}")" \
      "$(fmt 1 "${U[$k]}")" "$(fmt 1 "${UP[$k]}")" "$(ms "${S50[$k]}")" "$(ms "${S99[$k]}")" "$a" "$b"
  done
  echo
  echo "W3: the same room at half of each server's own W2 maximum (open loop, the 10 senders in"
  echo "turn); latency is send-to-deliver at the 9 other online members."
  echo
  echo "| server | messages/s offered | deliveries/s | p50 ms | p99 ms | p99.9 ms | peer/gateway p99 |"
  echo "|---|---|---|---|---|---|---|"
  for k in "${xmpp_kinds[@]}"; do
    local p99
    # shellcheck disable=SC2086
    p99=$(med ${L99[$k]:-})
    # shellcheck disable=SC2086
    row '| %s | %s | %s | %s | %s | %s | %s |\n' "${xname[$k]}" "${RT[$k]:-0}" "$(fmt 0 "$(med ${LD[$k]:-})")" \
      "$(ms "$(med ${L50[$k]:-})")" "$(ms "$p99")" "$(ms "$(med ${L999[$k]:-})")" \
      "$([ "$k" = xgw ] || ratio "$p99" "$(med ${L99[xgw]:-})")"
  done
  echo
  echo "W5: 1,000 messages stored in each of 40 rooms (groups) while a member is offline; then its"
  echo "catch-up, one room at a time: MAM queries of 100 per page after the last message it had"
  echo "seen (XMPP), pulls of 100 per page after its stored ack (the gateway)."
  echo
  echo "| server | messages caught up | pages | bytes received | bytes/message | catch-up s | messages/s | peer/gateway catch-up time |"
  echo "|---|---|---|---|---|---|---|---|"
  for k in "${xmpp_kinds[@]}"; do
    local pm pb ps
    # shellcheck disable=SC2086
    pm=$(med ${PM[$k]:-}) pb=$(med ${PB[$k]:-}) ps=$(med ${PS[$k]:-})
    # shellcheck disable=SC2086
    row '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "${xname[$k]}" "$(fmt 0 "$pm")" \
      "$(fmt 0 "$(med ${PP[$k]:-})")" "$(fmt 0 "$pb")" "$(ratio "$pb" "$pm" | sed 's/n\/a/nan/')" \
      "$(fmt 3 "$ps")" "$(fmt 0 "$(med ${PR[$k]:-})")" \
      "$([ "$k" = xgw ] || ratio "$ps" "$(med ${PS[xgw]:-})")"
  done
}

echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))," \
  "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME")," \
  "$(date -u '+%Y-%m-%d %H:%M UTC'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
echo "The gateway's default --threads here: $(nproc) (one per core)."
# Each one asked for, in this order; the exit status is 0 when they all ran (a loop ending
# on one not asked for must not make it 1).
for w in w1 w1big w2 w3 w6 w4 w5 threads storage versus retention xmpp; do
  if want "$w"; then "$w"; fi
done
