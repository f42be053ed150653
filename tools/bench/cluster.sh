#!/usr/bin/env bash
# The gateway as a cluster: N nodes (build/gw, each its own --port, --data and --node) on
# one PostgreSQL database, every node's commits announced to the others with NOTIFY, all
# on this machine.
#   tools/bench/cluster.sh [--runs N] [--seconds S] [--quick] [--raw FILE] [--nodes "1 2 3"]
#                          [--members M] [--senders "3 64"] [--idle-sessions N]
#                          [--idle-window S] [--before BIN] [w1] [w2] [w4] [w7]
#   w1 fan-out: one group of M members (default 1,000) whose sessions are spread evenly
#      over 1, 2 and 3 nodes, one sender flat out on node 1: deliveries/s, server CPU per
#      delivery (every node's process summed; the database server's beside it),
#      send-to-deliver latency p50/p99 of the receivers on the sender's node and on the
#      other nodes; then the same group at a fixed open-loop rate (a quarter of the
#      1-node maximum), the latency without the queues of a flat-out run.
#   w2 durable sends (sync on), a group each, one send in flight: N senders (default 3,
#      one per node, and 64) on 1 node and spread over 3 nodes, into one database:
#      messages stored and confirmed per second, messages per commit (all nodes), and
#      what the nodes' store connections waited on (pg_stat_activity sampled); with
#      --before BIN that build's runs take turns with this one's.
#   w4 idle wss:// sessions (default 50,000) over 3 nodes, one load generator process
#      per node (the open-files limit is per process), set up one node after the other:
#      each node's RSS per session and open files, idle CPU over --idle-window seconds
#      (default 30: a whole ping period); beside 1 node holding one node's share.
#   w7 catch-up after a failover: the idle sessions of W4 (plain ws://) over 3 nodes,
#      settled 45 s, then the database restarted at once (every node's connections
#      drop, as at a failover): per node, the seconds until it had caught up and the
#      statements and rows that took; with --before BIN (an older build's gw) the same
#      for it, side by side (a build that rereads every online user).
# Every figure is the median of N runs (default 3 of 5 s; --quick: 1 run of 2 s and W4 at
# 6,000 sessions). PostgreSQL 15 runs in a server of this script's own (tools/pg_server.sh,
# 127.0.0.1), with a fresh database for each run; everything started is stopped on exit
# and on Ctrl-C. Prints Markdown tables for docs/BENCHMARKS.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tools/bench/lib.sh"

runs=3 secs=5 rawlog=/dev/null members=1000 idle_n=50000 idle_win=30 work=() before=
node_counts=(1 2 3) w2_senders=(3 64)
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --quick) runs=1 secs=2 idle_n=6000 idle_win=5; shift ;;
    --raw) rawlog=$2; shift 2 ;;
    --nodes) read -ra node_counts <<<"$2"; shift 2 ;;
    --members) members=$2; shift 2 ;;
    --senders) read -ra w2_senders <<<"$2"; shift 2 ;;
    --idle-sessions) idle_n=$2; shift 2 ;;
    --idle-window) idle_win=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    w1|w2|w4|w7) work+=("$1"); shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#work[@]} -gt 0 ] || work=(w1 w2 w4)
load="$root/build/tools/gw_load"
bench_need cluster.sh psql curl
say() { echo "cluster.sh: $*" >&2; }
ms() { awk -v v="$1" 'BEGIN{if (v ~ /^[0-9.eE+-]+$/) printf "%.2f", v/1000; else print "n/a"}'; }

bench_init
pgdir=$(mktemp -d /tmp/gw-bench-pg-XXXXXX)
trap 'bench_cleanup; "$root/tools/pg_server.sh" stop "$pgdir" >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
pg_url=$("$root/tools/pg_server.sh" start "$pgdir")

# ---- the nodes -------------------------------------------------------------------------
# start_nodes K [gw flags]: K nodes n1..nK on a new database. Sets NODE_PID, NODE_PORT,
# NODE_DB, URLS (the nodes' /ws, comma-separated, n1 first) and PIDS (the same for
# --server-pid). Node 1 starts alone and makes the schema before the others connect.
NODE_PID=() NODE_PORT=() NODE_DB= URLS= PIDS=
scheme() { [ -n "${BENCH_TLS:-}" ] && echo "$1s" || echo "$1"; }
# healthy PORT: until the node's store takes writes and its listener for the other nodes'
# announcements is connected (at most 15 s): a message committed before it would reach
# that node's members only by a resync.
healthy() {
  local i
  for ((i = 0; i < 150; i++)); do
    [ "$(curl -sk --max-time 2 -o /dev/null -w '%{http_code}' "$(scheme http)://127.0.0.1:$1/healthz")" = 200 ] &&
      [ "$(stats "$1" | jget cluster.feed_connected 2>/dev/null)" = 1 ] && return 0
    sleep 0.1
  done
  say "node on port $1 not ready after 15 s"
  return 1
}
start_nodes() {
  local n=$1 k
  shift
  NODE_PID=() NODE_PORT=() URLS= PIDS=
  NODE_DB="bench_${RANDOM}_${RANDOM}"
  psql -q "$pg_url" -c "CREATE DATABASE $NODE_DB"
  for ((k = 1; k <= n; k++)); do
    BENCH_STORE_URL="${pg_url%/*}/$NODE_DB" start_gw "n$k" --node "n$k" "$@" || return 1
    NODE_PID+=("$SRV_PID") NODE_PORT+=("$SRV_PORT")
    healthy "$SRV_PORT" || return 1
    URLS+="${URLS:+,}$(scheme ws)://127.0.0.1:$SRV_PORT/ws" PIDS+="${PIDS:+,}$SRV_PID"
  done
}
stop_nodes() {
  local p
  for p in ${NODE_PID[@]+"${NODE_PID[@]}"}; do
    stop_srv "$p"
  done
  NODE_PID=() NODE_PORT=()
  [ -z "$NODE_DB" ] || psql -q "$pg_url" -c "DROP DATABASE $NODE_DB WITH (FORCE)"
  NODE_DB=
}
stats() { curl -sk --max-time 5 "$(scheme http)://127.0.0.1:$1/stats"; }
# sum_stats FIELD: FIELD of /stats summed over the nodes.
sum_stats() {
  local p t=0
  for p in "${NODE_PORT[@]}"; do
    t=$((t + $(stats "$p" | jget "$1")))
  done
  echo "$t"
}

# by_url OUT FIELD: FIELD (p50, p99) of the receivers on node 1, and the larger of the
# other nodes' (they are alike: both hear of node 1's commits by NOTIFY), as "same other".
by_url() {
  [ -n "$1" ] || { echo "nan nan"; return; }
  /usr/bin/python3 -c 'import json,sys
o=json.loads(sys.argv[1]); b=o.get("by_url")
if not b: print(o["latency_us"][sys.argv[2]], "nan")
else: print(b[0][sys.argv[2]], max(u[sys.argv[2]] for u in b[1:]))' "$1" "$2"
}
# The figures of the feed on the nodes that only hear of the messages (2..K).
feed_note() {
  local k s out=
  for ((k = 1; k < ${#NODE_PORT[@]}; k++)); do
    s=$(stats "${NODE_PORT[$k]}")
    out+=" n$((k + 1)): notifications $(jget cluster.feed_notifications <<<"$s"), changes $(jget cluster.feed_changes <<<"$s"), held $(jget cluster.held <<<"$s"), hole reads $(jget cluster.hole_reads <<<"$s"), dropped $(jget cluster.feed_dropped <<<"$s"), resyncs $(jget cluster.resyncs <<<"$s");"
  done
  echo "${out:- (one node)}"
}

# The database server's CPU seconds so far: the postmaster and its children (the nodes'
# backends among them, which live as long as the nodes).
pg_cpu() {
  local pm p
  pm=$(head -1 "$pgdir/data/postmaster.pid")
  for p in "$pm" $(pgrep -P "$pm"); do cpu_s "$p"; done | awk '{s += $1} END {print s + 0}'
}
# wait_running FILE PID: until gw_load (PID) has every session set up (at most 600 s).
wait_running() {
  local i
  for ((i = 0; i < 6000; i++)); do
    grep -q 'running' "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { say "gw_load $2 ended during set-up: $(tail -2 "$1" | tr '\n' ' ')"; return 1; }
    sleep 0.1
  done
  say "gw_load $2 not set up after 600 s"
  return 1
}

# ---- W1: fan-out over 1, 2 and 3 nodes -------------------------------------------------
# The runs below start servers in this shell, never in a $(...) subshell, so that the
# EXIT trap knows every process to stop; they leave their results in globals.
#
# run_load TAG HOOK ARGS...: gw_load with ARGS in the background (recorded for the trap);
# waits for its set-up, runs HOOK (a function: the figures before the measured part), waits
# for its end. Sets OUT (its JSON line, "" if it failed).
run_load() {
  local tag=$1 hook=$2 lp
  shift 2
  timeout 600 "$load" --json "$@" >"$BENCH_WORK/load.out" 2>"$BENCH_WORK/load.err" &
  lp=$!
  BENCH_PIDS+=("$lp")
  wait_running "$BENCH_WORK/load.err" "$lp" || true
  "$hook"
  wait "$lp" || say "$tag: gw_load exited $?: $(grep -v '^gw_load: [0-9]* s:' "$BENCH_WORK/load.err" | tail -2 | tr '\n' ' ')"
  bench_forget "$lp"
  OUT=$(grep '^{' "$BENCH_WORK/load.out" | tail -1 || true)
  [ -n "$OUT" ] && echo "$tag $OUT" >>"$rawlog"
  return 0
}

# w1_run TAG NODES [gw_load flags]: one run. Sets OUT (gw_load's JSON line) and DBU (the
# database's CPU microseconds per delivery, from set-up done to gw_load's exit).
w1_mark() { P0=$(pg_cpu); }
w1_run() {
  local tag=$1 n=$2
  shift 2
  OUT= DBU=nan
  start_nodes "$n" || { stop_nodes; return 0; }
  run_load "$tag $n" w1_mark --url "$URLS" --sessions "$members" --group-size "$members" \
    --senders 1 --seconds "$secs" --server-pid "$PIDS" "$@"
  DBU=$(awk -v a="$P0" -v b="$(pg_cpu)" -v d="$(field "$OUT" deliveries)" \
    'BEGIN{if (d > 0) printf "%.3f", (b-a)*1e6/d; else print "nan"}')
  echo "$tag $n feed:$(feed_note)" >>"$rawlog"
  say "$tag, $n nodes, run $r: $(field "$OUT" deliveries_per_active_s) deliveries/s;$(feed_note)"
  stop_nodes
}

w1() {
  local n r out one
  declare -A D=() U=() L=() P=() S50=() S99=() O50=() O99=() RD=() R50=() R99=() RO50=() RO99=()
  for n in "${node_counts[@]}"; do
    local d=() u=() l=() p=() s50=() s99=() o50=() o99=() a b
    for ((r = 1; r <= runs; r++)); do
      w1_run w1 "$n"
      out=$OUT
      p+=("$DBU")
      d+=("$(field "$out" deliveries_per_active_s)") u+=("$(field "$out" server_cpu_us_per_delivery)")
      l+=("$(field "$out" load_cpu_us_per_delivery)")
      read -r a b <<<"$(by_url "$out" p50)"; s50+=("$a") o50+=("$b")
      read -r a b <<<"$(by_url "$out" p99)"; s99+=("$a") o99+=("$b")
    done
    D[$n]=$(med "${d[@]}") U[$n]=$(med "${u[@]}") L[$n]=$(med "${l[@]}") P[$n]=$(med "${p[@]}")
    S50[$n]=$(med "${s50[@]}") S99[$n]=$(med "${s99[@]}") O50[$n]=$(med "${o50[@]}") O99[$n]=$(med "${o99[@]}")
  done
  one=${D[${node_counts[0]}]}
  # The latency runs at one rate for every node count: a quarter of the first count's
  # maximum, in sends/s (one send is M deliveries).
  local rate
  rate=$(awk -v d="$one" -v m="$members" 'BEGIN{r = d / m / 4; printf "%.0f", (r >= 1) ? r : 1}')
  for n in "${node_counts[@]}"; do
    local d=() s50=() s99=() o50=() o99=() a b
    for ((r = 1; r <= runs; r++)); do
      w1_run w1rate "$n" --rate "$rate"
      out=$OUT
      d+=("$(field "$out" deliveries_per_s)")
      read -r a b <<<"$(by_url "$out" p50)"; s50+=("$a") o50+=("$b")
      read -r a b <<<"$(by_url "$out" p99)"; s99+=("$a") o99+=("$b")
    done
    RD[$n]=$(med "${d[@]}") R50[$n]=$(med "${s50[@]}") R99[$n]=$(med "${s99[@]}")
    RO50[$n]=$(med "${o50[@]}") RO99[$n]=$(med "${o99[@]}")
  done
  echo
  echo "### W1 fan-out, one group of $members over 1-3 nodes ($runs runs of ${secs} s, median)"
  echo
  echo "Flat out (one sender on n1, 64 sends in flight). Latency: receivers on n1 (the"
  echo "sender's node) and on the other nodes (the larger of their figures)."
  echo
  echo "| nodes | deliveries/s | ratio to 1 node | server us/delivery (all nodes) | ratio to 1 node | database us/delivery | gw_load us/delivery | same node p50 ms | p99 ms | other nodes p50 ms | p99 ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for n in "${node_counts[@]}"; do
    row '| %d | %.0f | %s | %.2f | %s | %.2f | %.2f | %s | %s | %s | %s |\n' "$n" "${D[$n]}" \
      "$(ratio "${D[$n]}" "$one")" "${U[$n]}" "$(ratio "${U[$n]}" "${U[${node_counts[0]}]}")" "${P[$n]}" "${L[$n]}" \
      "$(ms "${S50[$n]}")" "$(ms "${S99[$n]}")" "$(ms "${O50[$n]}")" "$(ms "${O99[$n]}")"
  done
  echo
  echo "At a fixed $rate sends/s ($(awk -v r="$rate" -v m="$members" 'BEGIN{printf "%.0f", r*m}') deliveries/s offered, open loop):"
  echo
  echo "| nodes | deliveries/s | same node p50 ms | p99 ms | other nodes p50 ms | p99 ms | other minus same, p50 ms |"
  echo "|---|---|---|---|---|---|---|"
  for n in "${node_counts[@]}"; do
    row '| %d | %.0f | %s | %s | %s | %s | %s |\n' "$n" "${RD[$n]}" "$(ms "${R50[$n]}")" \
      "$(ms "${R99[$n]}")" "$(ms "${RO50[$n]}")" "$(ms "${RO99[$n]}")" \
      "$(awk -v a="${RO50[$n]}" -v b="${R50[$n]}" 'BEGIN{if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/) printf "%.2f", (a-b)/1000; else print "n/a"}')"
  done
}

# ---- W2: durable sends from senders on 1 or 3 nodes ------------------------------------
# w2_once SENDERS NODES: one run. Sets W2_RATE (confirmed sends/s) and W2_PER (messages
# per commit over the sending phase, all nodes: the deltas of /stats).
# What the nodes' store connections wait on: pg_stat_activity sampled every 10 ms over one
# psql connection for the measured part (bounded: SECONDS*100 samples), one line a sample
# and connection busy with a statement ("CPU" when it waits on nothing); the listeners
# (gw-feed) and idle connections are left out. PostgreSQL's notify lock shows as
# Lock:object, the WAL flush as IO:WALSync or LWLock:WALWrite, the standby as IPC:SyncRep.
WAITS_PID=
waits_start() { # OUT
  local i
  for ((i = 0; i < secs * 100; i++)); do
    echo "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity"
    echo " WHERE application_name LIKE 'gw %' AND state NOT IN ('idle') AND pid <> pg_backend_pid();"
    echo "SELECT pg_sleep(0.01);" # prints an empty line, left out when counted
  done | psql -qAt "${pg_url%/*}/$NODE_DB" -o "$1" >/dev/null 2>&1 &
  WAITS_PID=$!
  BENCH_PIDS+=("$WAITS_PID")
}
waits_stop() {
  [ -n "$WAITS_PID" ] || return 0
  kill "$WAITS_PID" 2>/dev/null || true
  wait "$WAITS_PID" 2>/dev/null || true
  bench_forget "$WAITS_PID"
  WAITS_PID=
}
# waits_of SENDERS NODES: the wait events of every run of that case, as the mean number of
# busy connections per sample, most first ("Lock:object 1.9, CPU 0.6, ...").
waits_of() {
  cat "$BENCH_WORK"/waits."$1.$2".* 2>/dev/null | awk '
    $0 == "" { n++; next } { c[$0]++ }
    END { if (!n) { print "n/a"; exit } for (e in c) printf "%.2f %s\n", c[e] / n, e }' |
    sort -rn | head -6 | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1} END {print ""}'
}
w2_mark() {
  S0=$(sum_stats messages.sends) C0=$(sum_stats store.commits)
  waits_start "$BENCH_WORK/waits.$W2_TAG"
}
w2_once() {
  local n=$1 k=$2 s1 c1
  W2_RATE=nan W2_PER=nan W2_TAG="${W2_BUILD:-this}.$n.$k.$RANDOM"
  start_nodes "$k" || { stop_nodes; return 0; }
  run_load "w2 $n $k" w2_mark --url "$URLS" --sessions 0 --senders "$n" --own-groups \
    --window 1 --seconds "$secs" --sources 2 --server-pid "$PIDS"
  waits_stop
  s1=$(sum_stats messages.sends) c1=$(sum_stats store.commits)
  stop_nodes
  W2_RATE=$(field "$OUT" confirmed_per_s)
  W2_PER=$(awk -v m=$((s1 - S0)) -v c=$((c1 - C0)) 'BEGIN{print (c>0)?m/c:0}')
}

w2() {
  local n k r a bi
  local multi=${node_counts[-1]}
  # With --before, that build and this one take turns, run by run, on the same server.
  local builds=("$root/build/gw") names=(this)
  [ -z "$before" ] || { builds=("$before" "$root/build/gw"); names=(before this); }
  echo
  echo "### W2 durable sends, sync on, senders on 1 node and over $multi nodes ($runs runs of ${secs} s, median)"
  echo
  echo "| build | senders | nodes | sends stored and confirmed/s | messages per commit (all nodes) | ratio to 1 node |"
  echo "|---|---|---|---|---|---|"
  for n in "${w2_senders[@]}"; do
    declare -A O=() F=()
    for ((r = 1; r <= runs; r++)); do
      for k in 1 "$multi"; do
        for bi in "${!builds[@]}"; do
          GW_BIN=${builds[$bi]} W2_BUILD=${names[$bi]} w2_once "$n" "$k"
          O[$bi.$k]+=" $W2_RATE" F[$bi.$k]+=" $W2_PER"
          say "w2 ${names[$bi]}: $n senders on $k nodes, run $r: $W2_RATE/s ($W2_PER per commit)"
        done
      done
    done
    for bi in "${!builds[@]}"; do
      local base=
      for k in 1 "$multi"; do
        # shellcheck disable=SC2086
        a=$(med ${O[$bi.$k]})
        [ -n "$base" ] || base=$a
        # shellcheck disable=SC2086
        row '| %s | %d | %d | %.0f | %.1f | %s |\n' "${names[$bi]}" "$n" "$k" "$a" "$(med ${F[$bi.$k]})" \
          "$(ratio "$a" "$base")"
      done
    done
    unset O F
  done
  echo
  echo "What the nodes' store connections waited on (pg_stat_activity every 10 ms over the sending"
  echo "phase of every run: the mean number of connections in each wait per sample, most first):"
  echo
  echo "| build | senders | nodes | wait events |"
  echo "|---|---|---|---|"
  for n in "${w2_senders[@]}"; do
    for bi in "${!builds[@]}"; do
      for k in 1 "$multi"; do
        echo "| ${names[$bi]} | $n | $k | $(waits_of "${names[$bi]}.$n" "$k") |"
      done
    done
  done
}

# ---- W4: idle wss:// sessions over the nodes, a gw_load process per node ---------------
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

# w4_once NODES SESSIONS_PER_NODE: one run; writes to $BENCH_WORK/w4.lines a line per
# node, "rss_per_session rss_mib cpu_pct fds", then "load rss_mib" (the load generators'
# RSS summed). False if a node or a load generator failed.
w4_once() {
  local n=$1 per=$2 k lp=() lg=() base=() c0=() hold ok=1 BENCH_TLS=1
  : >"$BENCH_WORK/w4.lines"
  start_nodes "$n" || ok=
  [ -z "$ok" ] || w4_hold "$n" "$per" || ok=
  for ((k = 0; k < ${#lp[@]}; k++)); do
    stop_srv "${lp[$k]}"
  done
  stop_nodes
  [ -n "$ok" ]
}
# The part of w4_once with the nodes up (its locals are w4_once's).
w4_hold() {
  local n=$1 per=$2 k
  for ((k = 0; k < n; k++)); do base+=("$(rss_kib "${NODE_PID[$k]}")"); done
  # Set up one node after the other (TLS handshakes on 2 cores: all at once, the last
  # sessions would outlast gw_load's set-up timeouts); each holds long enough for the
  # others' set-up and the window, and is stopped once it is measured.
  hold=$((n * 300 + idle_win + 60))
  for ((k = 0; k < n; k++)); do
    local url
    url=$(cut -d, -f$((k + 1)) <<<"$URLS")
    timeout $((hold + 900)) "$load" --json --url "$url" --idle --sessions "$per" \
      --group-size 100 --senders 0 --seconds "$hold" --sources 4 --uid-prefix "p$((k + 1))-" \
      --server-pid "${NODE_PID[$k]}" >"$BENCH_WORK/w4.$k.out" 2>"$BENCH_WORK/w4.$k.err" &
    lp+=($!)
    BENCH_PIDS+=($!)
    wait_running "$BENCH_WORK/w4.$k.err" "${lp[$k]}" || return 1
    lg+=("$(pgrep -P "${lp[$k]}" | head -1)") # gw_load itself, under timeout
    say "w4 $n nodes: node $((k + 1)) holds $per sessions ($(stats "${NODE_PORT[$k]}" | jget connections.now) open)"
  done
  sleep 2 # the last joins' commits and their announcements
  for ((k = 0; k < n; k++)); do c0+=("$(cpu_s "${NODE_PID[$k]}")"); done
  sleep "$idle_win"
  local lrss=0
  for ((k = 0; k < n; k++)); do
    local rss open
    kill -0 "${lp[$k]}" 2>/dev/null || { say "w4: gw_load of node $((k + 1)) ended early"; ok=; }
    open=$(stats "${NODE_PORT[$k]}" | jget sessions.authenticated)
    [ "$open" -eq "$per" ] || { say "w4: node $((k + 1)) holds $open sessions, not $per"; ok=; }
    rss=$(rss_kib "${NODE_PID[$k]}")
    lrss=$((lrss + $(rss_kib "${lg[$k]}")))
    awk -v a="$rss" -v b="${base[$k]}" -v m="$per" -v c0="${c0[$k]}" -v c1="$(cpu_s "${NODE_PID[$k]}")" \
      -v w="$idle_win" -v f="$(fds "${NODE_PID[$k]}")" \
      'BEGIN{printf "%.0f %.1f %.2f %d\n", (a-b)*1024/m, a/1024, 100*(c1-c0)/w, f}' \
      >>"$BENCH_WORK/w4.lines"
  done
  echo "load $(awk -v r="$lrss" 'BEGIN{printf "%.0f", r/1024}')" >>"$BENCH_WORK/w4.lines"
  [ -n "$ok" ]
}

w4() {
  local multi=${node_counts[-1]} per r k n a b c d
  per=$(( (idle_n + multi - 1) / multi ))
  [ $((per + 500)) -le "$(ulimit -Hn)" ] || {
    say "w4: $per sessions a node do not fit the open-files limit $(ulimit -Hn) of a process"; return 1; }
  echo
  echo "### W4 idle wss:// sessions: $((per * multi)) over $multi nodes, $per a node ($runs runs, idle window ${idle_win} s, median)"
  echo
  echo "| nodes | sessions | node | RSS per session (bytes) | node RSS (MiB) | open files | idle CPU (% of a core) | load generators' RSS (MiB) |"
  echo "|---|---|---|---|---|---|---|---|"
  for n in 1 "$multi"; do
    declare -A R=() M=() C=() F=()
    local lr=() ar=() am=() ac=()
    for ((r = 1; r <= runs; r++)); do
      local lines
      w4_once "$n" "$per" || { say "w4 $n nodes, run $r failed"; continue; }
      lines=$(cat "$BENCH_WORK/w4.lines")
      echo "w4 $n $per $lines" | tr '\n' ';' >>"$rawlog"; echo >>"$rawlog"
      k=0
      local sr=0 sm=0 sc=0
      while read -r a b c d; do
        if [ "$a" = load ]; then lr+=("$b"); continue; fi
        R[$k]+=" $a" M[$k]+=" $b" C[$k]+=" $c" F[$k]+=" $d"
        read -r sr sm sc <<<"$(awk -v a="$a" -v b="$b" -v c="$c" -v r="$sr" -v m="$sm" -v s="$sc" \
          'BEGIN{print r+a, m+b, s+c}')"
        k=$((k + 1))
      done <<<"$lines"
      # The whole cluster: RSS per session over all nodes, RSS and idle CPU summed.
      ar+=("$(awk -v r="$sr" -v n="$n" 'BEGIN{print r/n}')") am+=("$sm") ac+=("$sc")
      say "w4 $n nodes, run $r: $(tr '\n' ';' <<<"$lines")"
    done
    for ((k = 0; k < n; k++)); do
      # shellcheck disable=SC2086
      row '| %d | %d | n%d | %.0f | %.1f | %.0f | %.2f | |\n' "$n" "$((per * n))" "$((k + 1))" \
        "$(med ${R[$k]:-})" "$(med ${M[$k]:-})" "$(med ${F[$k]:-})" "$(med ${C[$k]:-})"
    done
    [ "$n" -eq 1 ] ||
      row '| %d | %d | all | %.0f | %.1f | | %.2f | |\n' "$n" "$((per * n))" \
        "$(med ${ar[@]+"${ar[@]}"})" "$(med ${am[@]+"${am[@]}"})" "$(med ${ac[@]+"${ac[@]}"})"
    row '| %d | %d | load generators (gw_load x %d) | | | | | %.0f |\n' "$n" "$((per * n))" "$n" \
      "$(med ${lr[@]+"${lr[@]}"})"
    unset R M C F
  done
}

# ---- W7: catch-up after a failover at idle sessions over 3 nodes -----------------------
# w7_once BIN: writes $BENCH_WORK/w7.lines, a line per node: "seconds statements rows
# catch_ups resyncs" (from the restart to the last read it made for it). False on failure.
w7_once() {
  local n=3 per=$((idle_n / 3)) k lp=() lg=() base=() c0=() hold ok=1 BENCH_TLS= GW_BIN=$1
  local idle_win=45 # positions become usable 30 s after they are taken
  : >"$BENCH_WORK/w7.lines"
  start_nodes "$n" || ok=
  [ -z "$ok" ] || w4_hold "$n" "$per" || ok=
  if [ -n "$ok" ]; then
    local r0=() k0=() s0=() w0=() last=() done_at=() prev=() t0 now i
    for ((k = 0; k < n; k++)); do
      local st
      st=$(stats "${NODE_PORT[$k]}")
      r0+=("$(jget store.reads <<<"$st")") s0+=("$(jget cluster.resyncs <<<"$st")")
      k0+=("$(jget cluster.catch_ups <<<"$st" 2>/dev/null || echo 0)")
      w0+=("$(jget cluster.catch_up_rows <<<"$st" 2>/dev/null || echo 0)")
      prev+=("${r0[$k]}") done_at+=("") last+=("")
    done
    t0=$(date +%s.%N)
    "$root/tools/pg_server.sh" restart-immediate "$pgdir" >/dev/null
    # Each node: done once its listener is back, it caught up or resynced, and its
    # reads have not moved for 2 s; its time is that of its last read (or the catch-up).
    for ((i = 0; i < 1200; i++)); do
      local all=1
      now=$(date +%s.%N)
      for ((k = 0; k < n; k++)); do
        [ -z "${done_at[$k]}" ] || continue
        local st rd kc rs fc
        st=$(stats "${NODE_PORT[$k]}")
        rd=$(jget store.reads <<<"$st") rs=$(jget cluster.resyncs <<<"$st")
        kc=$(jget cluster.catch_ups <<<"$st" 2>/dev/null || echo 0)
        fc=$(jget cluster.feed_connected <<<"$st")
        if [ "$rd" != "${prev[$k]}" ] || { [ -z "${last[$k]}" ] && [ "$fc" = 1 ] &&
          { [ "$kc" -gt "${k0[$k]}" ] || [ "$rs" -gt "${s0[$k]}" ]; }; }; then
          prev[$k]=$rd last[$k]=$now
        fi
        if [ -n "${last[$k]}" ] && [ "$fc" = 1 ] && awk -v a="$now" -v b="${last[$k]}" 'BEGIN{exit !(a-b>=2)}'; then
          done_at[$k]=${last[$k]}
          awk -v t0="$t0" -v t="${last[$k]}" -v r="$((rd - r0[k]))" -v c="$((kc - k0[k]))"             -v w="$(($(jget cluster.catch_up_rows <<<"$st" 2>/dev/null || echo 0) - w0[k]))"             -v s="$((rs - s0[k]))" 'BEGIN{printf "%.2f %d %d %d %d\n", t-t0, r+c, w, c, s}'             >>"$BENCH_WORK/w7.lines"
        else
          all=
        fi
      done
      [ -z "$all" ] || break
      sleep 0.1
    done
    [ "$(wc -l <"$BENCH_WORK/w7.lines")" -eq "$n" ] || { say "w7: not every node caught up in 120 s"; ok=; }
  fi
  for ((k = 0; k < ${#lp[@]}; k++)); do
    stop_srv "${lp[$k]}"
  done
  stop_nodes
  [ -n "$ok" ]
}

w7() {
  local b r k a c d e f
  echo
  echo "### W7 catch-up after a failover: $idle_n idle sessions over 3 nodes, the database restarted at once ($runs runs, median)"
  echo
  echo "Statements: what the node read to catch up (store reads and catch-up statements); rows: change log rows read."
  echo
  echo "| build | node | seconds from the restart to caught up | statements | change log rows | catch-ups by position | resyncs |"
  echo "|---|---|---|---|---|---|---|"
  local builds=("$root/build/gw")
  [ -z "$before" ] || builds=("$before" "$root/build/gw")
  for b in "${builds[@]}"; do
    declare -A T=() S=() W=() C=() R=()
    for ((r = 1; r <= runs; r++)); do
      w7_once "$b" || { say "w7 $b, run $r failed"; continue; }
      say "w7 $b, run $r: $(tr '\n' ';' <"$BENCH_WORK/w7.lines")"
      echo "w7 $b $(tr '\n' ';' <"$BENCH_WORK/w7.lines")" >>"$rawlog"
      k=0
      while read -r a c d e f; do
        T[$k]+=" $a" S[$k]+=" $c" W[$k]+=" $d" C[$k]+=" $e" R[$k]+=" $f"
        k=$((k + 1))
      done <"$BENCH_WORK/w7.lines"
    done
    for ((k = 0; k < 3; k++)); do
      # shellcheck disable=SC2086
      row '| %s | n%d | %.2f | %.0f | %.0f | %.0f | %.0f |\n' "$([ "$b" = "$before" ] && echo before || echo this)" \
        "$((k + 1))" "$(med ${T[$k]:-})" "$(med ${S[$k]:-})" "$(med ${W[$k]:-})" "$(med ${C[$k]:-})" "$(med ${R[$k]:-})"
    done
    unset T S W C R
  done
}

echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
for w in "${work[@]}"; do
  "$w"
done
