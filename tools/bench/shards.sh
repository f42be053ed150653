#!/usr/bin/env bash
# Shards (store.h, "Shards"): what spreading the groups over several PostgreSQL databases
# costs and gives on this machine.
#   tools/bench/shards.sh [--runs N] [--seconds S] [w2] [welcome]
#   w2      durable sends (sync on), 64 senders with a group each and one send in flight,
#           on one database (no map), and over a map of 1 and of 2 shards (each its own
#           server): confirmed sends/s and CPU per confirmed message, the gateway's and the
#           databases' (every process named postgres). On 2 cores the rate is bounded by
#           the cores: the CPU per message is the figure that carries to bigger machines.
#   welcome the read of a user's groups at sign-in, for a user in 200 groups, over 1, 2
#           and 4 shards (build/tools/shards_bench: latency one at a time, rate from 8
#           threads, CPU per read of the store's process and of the databases).
# Every figure is the median of N runs (default 3; w2 runs of S seconds, default 5). The
# servers are this script's own (tools/pg_server.sh shards-up, 127.0.0.1), new for each
# run and stopped on exit. Prints Markdown tables for docs/BENCHMARKS.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tools/bench/lib.sh"

runs=3 secs=5 work=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    w2|welcome) work+=("$1"); shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "shards.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#work[@]} -gt 0 ] || work=(w2 welcome)
load="$root/build/tools/gw_load"
bench_need shards.sh psql
say() { echo "shards.sh: $*" >&2; }
pg="$root/tools/pg_server.sh"

bench_init
dirs=()
trap 'bench_cleanup; for d in "${dirs[@]}"; do "$pg" shards-down "$d" >/dev/null 2>&1 || true; rm -rf "$d"; done' EXIT

# shards_up K: K servers of their own; SH_URL is the store URL (a plain URL for K = 0).
shards_up() {
  local d
  d=$(mktemp -d /tmp/gw-bench-shards-XXXXXX)
  dirs+=("$d")
  if [ "$1" = 0 ]; then
    "$pg" shards-up "$d" 1 >/dev/null
    SH_URL=$(sed -n 's/^shard 0 //p' "$d/slots.map")
  else
    SH_URL=$("$pg" shards-up "$d" "$1")
  fi
}
shards_down() {
  local d=${dirs[-1]}
  "$pg" shards-down "$d" >/dev/null 2>&1 || true
  rm -rf "$d"
  unset 'dirs[-1]'
}
pg_cpu() { # CPU seconds of every process named postgres now
  local s=0 p
  for p in $(pgrep -x postgres || true); do
    s=$(awk -v s="$s" '{print s + $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo "$s")
  done
  awk -v s="$s" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.3f", s/hz}'
}

w2() {
  local k r
  echo
  echo "### W2 over shards: 64 senders, sync on ($runs runs of ${secs} s, median)"
  echo
  echo "| store | confirmed sends/s | gateway CPU µs per message | databases' CPU µs per message | both |"
  echo "|---|---|---|---|---|"
  for k in 0 1 2; do
    local rate=() gwc=() dbc=() all=()
    for ((r = 0; r < runs; r++)); do
      local url out d0 d1 n
      shards_up "$k"
      url=$SH_URL
      BENCH_STORE_URL=$url start_gw "w2s$k"
      timeout 600 "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 --senders 64 \
        --own-groups --window 1 --seconds 2 --sources 2 >/dev/null 2>&1 || true # warm
      d0=$(pg_cpu)
      out=$(timeout 600 "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 \
        --senders 64 --own-groups --window 1 --seconds "$secs" --sources 2 \
        --server-pid "$SRV_PID" 2>/dev/null | grep '^{' | tail -1 || true)
      d1=$(pg_cpu)
      stop_srv
      shards_down
      n=$(field "$out" confirmed)
      rate+=("$(field "$out" confirmed_per_s)")
      gwc+=("$(awk -v c="$(field "$out" server_cpu_s)" -v n="$n" 'BEGIN{print (n>0)?c*1e6/n:"nan"}')")
      dbc+=("$(awk -v a="$d0" -v b="$d1" -v n="$n" 'BEGIN{print (n>0)?(b-a)*1e6/n:"nan"}')")
      all+=("$(awk -v x="${gwc[-1]}" -v y="${dbc[-1]}" 'BEGIN{print x+y}')")
      say "w2, $k shards, run $((r + 1)): ${rate[-1]}/s, gateway ${gwc[-1]} µs, databases ${dbc[-1]} µs a message"
    done
    local name="one database (no map)"
    [ "$k" = 0 ] || name="$k shard$([ "$k" = 1 ] || echo s) (a map)"
    row '| %s | %.0f | %.0f | %.0f | %.0f |\n' "$name" "$(med "${rate[@]}")" "$(med "${gwc[@]}")" \
      "$(med "${dbc[@]}")" "$(med "${all[@]}")"
  done
}

welcome() {
  local k r
  echo
  echo "### A user's groups at sign-in, 200 groups, over shards ($runs runs of 2,000 reads, median)"
  echo
  echo "| shards | p50 µs | p99 µs | one at a time /s | 8 threads /s | store CPU µs per read | databases' CPU µs per read |"
  echo "|---|---|---|---|---|---|---|"
  for k in 1 2 4; do
    local p50=() p99=() one=() many=() sc=() dc=()
    for ((r = 0; r < runs; r++)); do
      local url out
      shards_up "$k"
      url=$SH_URL
      out=$(timeout 600 "$root/build/tools/shards_bench" --store "$url" --groups 200 --reads 2000 \
        --threads 8 2>&1 | grep '^{' | tail -1 || true)
      shards_down
      p50+=("$(field "$out" latency_us.p50)") p99+=("$(field "$out" latency_us.p99)")
      one+=("$(field "$out" one_at_a_time_per_s)") many+=("$(field "$out" concurrent_per_s)")
      sc+=("$(awk -v v="$(field "$out" store_cpu_ms_per_read)" 'BEGIN{print v*1000}')")
      dc+=("$(awk -v v="$(field "$out" db_cpu_ms_per_read)" 'BEGIN{print v*1000}')")
      say "welcome, $k shards, run $((r + 1)): p50 ${p50[-1]} µs, p99 ${p99[-1]} µs, ${many[-1]}/s from 8 threads"
    done
    row '| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n' "$k" "$(med "${p50[@]}")" \
      "$(med "${p99[@]}")" "$(med "${one[@]}")" "$(med "${many[@]}")" "$(med "${sc[@]}")" \
      "$(med "${dc[@]}")"
  done
}

for w in "${work[@]}"; do "$w"; done
