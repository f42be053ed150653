#!/usr/bin/env bash
# What members see of each other, measured (docs/BENCHMARKS.md, "Receipts, presence and
# typing"). Every figure is the median of --runs (default 3).
#   tools/bench/peers.sh [--runs N] [--seconds S] [--members M] [--postgres]
#   receipts  a group of M members (default 100000) with random acks and reads written
#             into a fresh store (peers_bench fill), then receipts of random mids asked
#             one at a time: the first (the roster read from the store), p50, p99, max;
#             the gateway's RSS after. --postgres: on a PostgreSQL of the run's own too.
#   reads     W1's group of 100 flat out, with and without a read frame after every ack
#             (gw_load --reads): deliveries/s and server CPU per delivery.
#   cursors   W6's group of 100 at 50% of that rate: cursor writes to the store per second
#             (store batches and entries) with and without reads.
#   typing    1000 sessions in one group, 20 of them typing in turn: how long until every
#             other session has the push (per receiver p50/p99, last receiver p50/max).
# Everything it starts is stopped on exit. Prints Markdown tables.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
runs=3 secs=10 members=100000 pg=
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --members) members=$2; shift 2 ;;
    --postgres) pg=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "peers.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
"$root/tools/setup.sh" >/dev/null # installs what is missing and builds
. "$root/tools/bench/lib.sh"
bench_need peers.sh curl psql
bench_init
load="$root/build/tools/gw_load"
pb="$root/build/tools/peers_bench"
[ -x "$pb" ] || { echo "peers.sh: $pb missing (cmake --build build)" >&2; exit 1; }

# kv KEY <<< "a=1 b=2": one figure of a peers_bench line.
kv() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
gwload() {
  local out
  out=$(timeout 300 "$load" --json "$@" 2>"$BENCH_WORK/load.err") ||
    { echo "peers.sh: gw_load failed: $(tail -2 "$BENCH_WORK/load.err")" >&2; return 0; }
  grep '^{' <<<"$out" | tail -1 || true
}
stats() { curl -s --max-time 5 "http://127.0.0.1:$SRV_PORT/stats"; }

# ---- receipts at M members ----------------------------------------------------------------
receipts_on() { # BACKEND
  local r out store first=() p50=() p99=() mx=() rss=() fill=()
  for ((r = 0; r < runs; r++)); do
    if [ "$1" = postgres ]; then
      start_pg
      store=$(pg_newdb)
    else
      rm -rf "$BENCH_WORK/gwr"
      mkdir -p "$BENCH_WORK/gwr/data"
      store=$BENCH_WORK/gwr/data/store # where the gateway keeps its store in --data
    fi
    out=$("$pb" fill --store "$store" --members "$members" --msgs 1000 --seed $((23 + r)))
    fill+=("$(kv seconds <<<"$out")")
    if [ "$1" = postgres ]; then
      BENCH_STORE_URL=$store start_gw gwr --threads 1
    else
      start_gw_keep gwr # on the filled store (start_gw would empty its folder)
    fi
    out=$("$pb" receipts --url "ws://127.0.0.1:$SRV_PORT/ws" --queries 2000)
    first+=("$(kv first_us <<<"$out")") p50+=("$(kv p50_us <<<"$out")")
    p99+=("$(kv p99_us <<<"$out")") mx+=("$(kv max_us <<<"$out")")
    rss+=("$(awk -v k="$(rss_kib "$SRV_PID")" 'BEGIN{print k/1024}')")
    stop_srv
    [ "$1" != postgres ] || pg_dropdb "$store"
  done
  row '| %s | %s | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f |\n' "$1" "$members" "$(med "${fill[@]}")" \
    "$(awk -v v="$(med "${first[@]}")" 'BEGIN{print v/1000}')" "$(med "${p50[@]}")" \
    "$(med "${p99[@]}")" "$(med "${mx[@]}")" "$(med "${rss[@]}")"
}
# start_gw_keep NAME: the gateway on NAME's folder as it is (start_gw empties it).
start_gw_keep() {
  local name=$1
  rm -f "$BENCH_WORK/$name/port"
  bench_spawn "$BENCH_WORK/$name.log" "$root/build/gw" --insecure --listen 127.0.0.1 --port 0 \
    --port-file "$BENCH_WORK/$name/port" --data "$BENCH_WORK/$name/data" --log-level 1 \
    --rate-sends 0 --rate-bytes 0 --rate-conns 0 --conns-per-address 0 --threads 1
  local i
  for ((i = 0; i < 300; i++)); do
    [ -s "$BENCH_WORK/$name/port" ] && break
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.1
  done
  SRV_PORT=$(cat "$BENCH_WORK/$name/port" 2>/dev/null || true)
  [ -n "$SRV_PORT" ] || { echo "peers.sh: the gateway did not start" >&2; tail -5 "$BENCH_WORK/$name.log" >&2; return 1; }
  wait_port "$SRV_PORT" "$SRV_PID"
}

receipts() {
  echo
  echo "### Receipts of one message in a group of $members members ($runs runs, 2000 queries each, median)"
  echo
  echo "| store | members | fill (s) | first query, roster read (ms) | p50 (µs) | p99 (µs) | max (µs) | gateway RSS after (MiB) |"
  echo "|---|---|---|---|---|---|---|---|"
  receipts_on rocksdb
  [ -z "$pg" ] || receipts_on postgres
}

# ---- reads on W1 and W6 -------------------------------------------------------------------
declare -A W1
# group_of_100 MODE ARGS...: gw_load on the gateway just started, 100 sessions in one group
# for $secs s, the client acking only (MODE acks) or each ack followed by a read (reads).
group_of_100() {
  local extra=()
  [ "$1" = acks ] || extra=(--reads)
  shift
  gwload --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 100 --group-size 100 "$@" \
    --seconds "$secs" --server-pid "$SRV_PID" ${extra[@]+"${extra[@]}"}
}

reads() {
  local mode r out
  echo
  echo "### Reads in a group of 100, one sender flat out ($runs runs of ${secs} s, median)"
  echo
  echo "| client sends | deliveries/s | server CPU µs per delivery |"
  echo "|---|---|---|"
  # alternated, run by run: the machine's drift falls on both alike
  declare -A dl sv
  for ((r = 0; r < runs; r++)); do
    for mode in acks reads; do
      start_gw gw --threads 1
      out=$(group_of_100 "$mode" --senders 1)
      stop_srv
      dl[$mode]+=" $(field "$out" deliveries_per_active_s)"
      sv[$mode]+=" $(field "$out" server_cpu_us_per_delivery)"
    done
  done
  for mode in acks reads; do
    # shellcheck disable=SC2086 # the lists are words
    row '| %s | %.0f | %.2f |\n' "$([ $mode = acks ] && echo "acks only" || echo "acks, each followed by a read")" \
      "$(med ${dl[$mode]})" "$(med ${sv[$mode]})"
  done
  # shellcheck disable=SC2086
  W1[acks]=$(med ${dl[acks]})
}

cursors() {
  local rate mode r out st t
  rate=$(awk -v m="${W1[acks]:-20000}" 'BEGIN{printf "%.0f", m / 100 / 2}')
  echo
  echo "### Cursor writes, group of 100 at $rate sends/s (50% of the rate above; $runs runs of ${secs} s, median)"
  echo
  echo "| client sends | deliveries/s | cursor frames per delivered message | store batches/s | cursor entries written/s | server µs/delivery |"
  echo "|---|---|---|---|---|---|"
  declare -A dl fr wr en sv
  for ((r = 0; r < runs; r++)); do
    for mode in acks reads; do
      start_gw gw --threads 1
      out=$(group_of_100 "$mode" --rate "$rate")
      sleep 0.5 # the coalescer's last flush
      st=$(stats)
      stop_srv
      t=$(field "$out" seconds)
      dl[$mode]+=" $(field "$out" deliveries_per_s)"
      fr[$mode]+=" $(awk -v a="$(field "$out" ack_frames)" -v b="$(field "$out" read_frames)" \
        -v d="$(field "$out" deliveries)" 'BEGIN{print (d>0)?(a+b)/d:0}')"
      wr[$mode]+=" $(awk -v f="$(jget acks.writes <<<"$st")" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')"
      en[$mode]+=" $(awk -v f="$(jget acks.entries_written <<<"$st")" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')"
      sv[$mode]+=" $(field "$out" server_cpu_us_per_delivery)"
    done
  done
  for mode in acks reads; do
    # shellcheck disable=SC2086
    row '| %s | %.0f | %.4f | %.1f | %.0f | %.2f |\n' \
      "$([ $mode = acks ] && echo "acks only" || echo "acks, each followed by a read")" \
      "$(med ${dl[$mode]})" "$(med ${fr[$mode]})" "$(med ${wr[$mode]})" "$(med ${en[$mode]})" \
      "$(med ${sv[$mode]})"
  done
}

# ---- typing fan-out -----------------------------------------------------------------------
typing() {
  local r out p50=() p99=() l50=() lmx=()
  echo
  echo "### Typing to 1000 sessions in one group (20 typists in turn; $runs runs, median)"
  echo
  echo "| sessions | per receiver p50 (ms) | per receiver p99 (ms) | last receiver p50 (ms) | last receiver max (ms) |"
  echo "|---|---|---|---|---|"
  for ((r = 0; r < runs; r++)); do
    start_gw gwt --threads 1
    out=$("$pb" typing --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 1000 --rounds 20)
    stop_srv
    p50+=("$(kv p50_us <<<"$out")") p99+=("$(kv p99_us <<<"$out")")
    l50+=("$(kv last_p50_us <<<"$out")") lmx+=("$(kv last_max_us <<<"$out")")
  done
  row '| 1000 | %.1f | %.1f | %.1f | %.1f |\n' "$(awk -v v="$(med "${p50[@]}")" 'BEGIN{print v/1000}')" \
    "$(awk -v v="$(med "${p99[@]}")" 'BEGIN{print v/1000}')" \
    "$(awk -v v="$(med "${l50[@]}")" 'BEGIN{print v/1000}')" \
    "$(awk -v v="$(med "${lmx[@]}")" 'BEGIN{print v/1000}')"
}

receipts
reads
cursors
typing
