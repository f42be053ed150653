#!/usr/bin/env bash
# The store's two backends side by side, each beside its own peer in the same run.
#   tools/bench/backends.sh [--runs N] [--seconds S] [--baseline GW] [--raw FILE] [w2] [w5]
#   w2 durable sends (sync on) at 1, 64 and 1,024 senders, a group each and one send in
#      flight: the gateway on RocksDB beside db_bench fillrandom --sync=1, and on
#      PostgreSQL beside pgbench running the same work as one transaction per message
#      (update the group's last mid, insert the message and the send row;
#      synchronous_commit on), at the same concurrency; messages per commit.
#   w5 offline pull: 25,000 unread over 40 groups, pages of 100 and 500, on both backends;
#      with --baseline GW also the RocksDB rows of that gw binary (an earlier commit's
#      build), in the same run, alternating with this build's.
# Every figure is the median of N runs (default 3 of 5 s). PostgreSQL 15 runs in a server
# of this script's own (tools/pg_server.sh, 127.0.0.1), a fresh database for each run;
# everything started is stopped on exit. Prints Markdown tables for docs/BENCHMARKS.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tools/bench/lib.sh"

runs=3 secs=5 baseline= rawlog=/dev/null work=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --raw) rawlog=$2; shift 2 ;;
    w2|w5) work+=("$1"); shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "backends.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#work[@]} -gt 0 ] || work=(w2 w5)
load="$root/build/tools/gw_load"
bench_need backends.sh db_bench pgbench psql
say() { echo "backends.sh: $*" >&2; }
stats() { curl -s --max-time 5 "http://127.0.0.1:$SRV_PORT/stats"; }

bench_init
# pgbench at 1,024 clients needs as many server connections.
pgdir=$(mktemp -d /tmp/gw-bench-pg-XXXXXX)
trap 'bench_cleanup; "$root/tools/pg_server.sh" stop "$pgdir" >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
pg_url=$(PG_MAX_CONNECTIONS=1100 "$root/tools/pg_server.sh" start "$pgdir")
newdb() {
  local name="bench_${RANDOM}_${RANDOM}"
  psql -q "$pg_url" -c "CREATE DATABASE $name"
  echo "${pg_url%/*}/$name"
}

# gw_load's durable-send run against the gateway started last: prints its JSON line, and
# writes the messages per commit over the run to $BENCH_WORK/per_commit.
w2_load() { # SENDERS TAG
  timeout 600 "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 \
    --senders "$1" --own-groups --window 1 --seconds "$secs" --sources 2 \
    --server-pid "$SRV_PID" >"$BENCH_WORK/w2.out" 2>"$BENCH_WORK/w2.err" &
  local lp=$! i s0 s1
  for ((i = 0; i < 1200; i++)); do
    grep -q 'running' "$BENCH_WORK/w2.err" 2>/dev/null && break
    kill -0 "$lp" 2>/dev/null || break
    sleep 0.05
  done
  s0=$(stats)
  wait "$lp" || say "w2 $2 $1: gw_load exited $?"
  s1=$(stats)
  local out
  out=$(grep '^{' "$BENCH_WORK/w2.out" | tail -1 || true)
  [ -n "$out" ] && echo "w2 $2 $1 $out" >>"$rawlog"
  awk -v m="$(( $(jget messages.stored <<<"$s1") - $(jget messages.stored <<<"$s0") ))" \
    -v c="$(( $(jget store.commits <<<"$s1") - $(jget store.commits <<<"$s0") ))" \
    'BEGIN{print (c>0)?m/c:0}' >"$BENCH_WORK/per_commit"
  echo "$out"
}

# The same work as a gateway's durable send, for pgbench: one transaction per message.
cat >"$BENCH_WORK/w2.sql" <<'SQL'
BEGIN;
UPDATE gw.groups SET last_mid = last_mid + 1 WHERE gid = 'pb' || :client_id RETURNING last_mid AS mid \gset
INSERT INTO gw.msgs (gid, mid, ts, record) VALUES ('pb' || :client_id, :mid, 0, convert_to(repeat('x', 220), 'UTF8'));
INSERT INTO gw.sends (uid, cid, gid, mid, ts) VALUES ('u' || :client_id, :mid::text, 'pb' || :client_id, :mid, 0);
END;
SQL

w2() {
  local n r out
  echo
  echo "### W2 durable sends, sync on, both backends ($runs runs of ${secs} s, median)"
  echo
  echo "| senders | RocksDB: gateway sends/s | per fsync | db_bench --sync=1 ops/s | ratio | PostgreSQL: gateway sends/s | per commit | pgbench tps | ratio |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for n in 1 64 1024; do
    local ro=() rf=() rd=() po=() pf=() pb=()
    for ((r = 0; r < runs; r++)); do
      start_gw gw
      out=$(w2_load "$n" rocksdb)
      stop_srv
      ro+=("$(field "$out" confirmed_per_s)") rf+=("$(cat "$BENCH_WORK/per_commit")")
      rm -rf "$BENCH_WORK/db"
      rd+=("$(db_bench --benchmarks=fillrandom --db="$BENCH_WORK/db" --sync=1 --threads="$n" \
          --value_size=200 --duration="$secs" --num=100000000 2>&1 |
          grep -E '^fillrandom +:' | sed -E 's/.* ([0-9]+) ops\/sec.*/\1/' || true)")
      local url
      url=$(newdb)
      BENCH_STORE_URL=$url start_gw gwpg
      out=$(w2_load "$n" postgres)
      stop_srv
      po+=("$(field "$out" confirmed_per_s)") pf+=("$(cat "$BENCH_WORK/per_commit")")
      # pgbench on the schema the gateway made, with groups of its own.
      psql -q "$url" -c "INSERT INTO gw.groups SELECT 'pb' || i, 0, 0 FROM generate_series(0, $n - 1) i"
      pb+=("$(pgbench -n -M prepared -f "$BENCH_WORK/w2.sql" -c "$n" -j 2 -T "$secs" "$url" 2>&1 |
          sed -nE 's/^tps = ([0-9.]+) \(without initial connection time\)/\1/p' || true)")
      psql -q "$pg_url" -c "DROP DATABASE ${url##*/} WITH (FORCE)"
      say "w2 $n, run $((r + 1)): RocksDB ${ro[-1]}/s (db_bench ${rd[-1]:-failed}), PostgreSQL ${po[-1]}/s (${pf[-1]} per commit; pgbench ${pb[-1]:-failed})"
    done
    local a b c d
    a=$(med "${ro[@]}") b=$(med "${rd[@]}") c=$(med "${po[@]}") d=$(med "${pb[@]}")
    row '| %d | %.0f | %.1f | %.0f | %s | %.0f | %.1f | %.0f | %s |\n' "$n" "$a" "$(med "${rf[@]}")" \
      "$b" "$(ratio "$a" "$b")" "$c" "$(med "${pf[@]}")" "$d" "$(ratio "$c" "$d")"
  done
}

w5_once() { # TAG PAGE [GW_BIN] [STORE_URL]
  GW_BIN=${3:-} BENCH_STORE_URL=${4:-} start_gw "w5$1"
  local out
  out=$(timeout 600 "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --pull "$2" \
        --pull-groups 40 --count 25000 --server-pid "$SRV_PID" 2>"$BENCH_WORK/w5.err" |
        grep '^{' | tail -1 || true)
  stop_srv
  [ -n "$out" ] && echo "w5 $1 $2 $out" >>"$rawlog"
  field "$out" pull.messages_per_s
}

w5() {
  local l r
  echo
  echo "### W5 offline pull: 25,000 unread over 40 groups, both backends ($runs runs, median)"
  echo
  echo "| page size | RocksDB messages/s | RocksDB, baseline build | ratio this/baseline | PostgreSQL messages/s |"
  echo "|---|---|---|---|---|"
  for l in 100 500; do
    local a=() b=() c=()
    for ((r = 0; r < runs; r++)); do
      a+=("$(w5_once rocksdb "$l")")
      [ -z "$baseline" ] || b+=("$(w5_once baseline "$l" "$baseline")")
      local url
      url=$(newdb)
      c+=("$(w5_once postgres "$l" "" "$url")")
      psql -q "$pg_url" -c "DROP DATABASE ${url##*/} WITH (FORCE)"
      say "w5 $l, run $((r + 1)): RocksDB ${a[-1]}/s${baseline:+ (baseline ${b[-1]}/s)}, PostgreSQL ${c[-1]}/s"
    done
    local x y
    x=$(med "${a[@]}") y=$(med ${b[@]+"${b[@]}"})
    row '| %d | %.0f | %s | %s | %.0f |\n' "$l" "$x" "$([ -n "$baseline" ] && printf '%.0f' "$y" || echo n/a)" \
      "$(ratio "$x" "$y")" "$(med "${c[@]}")"
  done
}

echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
for w in "${work[@]}"; do
  "$w"
done
