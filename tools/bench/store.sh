#!/usr/bin/env bash
# Store micro-benchmark, side by side with RocksDB's own db_bench in the same run.
#   tools/bench/store.sh [--runs N] [--seconds S]
# Durable appends (sync on, 200-byte values) at 1, 8 and 64 concurrent producers, with
# messages per commit (per fsync); pages of 100 and 500 messages read per second. Each
# figure is the median of N runs (default 3). Prints a Markdown table for BENCHMARKS.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
runs=3 secs=5
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "store.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

"$root/tools/setup.sh" >/dev/null
bench="$root/build/tools/store_bench"
command -v db_bench >/dev/null || { echo "store.sh: db_bench missing (rocksdb-tools)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gw-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -E "s/.*[ ^]$1=([0-9.]+).*/\1/"; }
db_ops() { grep -E "^$1 +:" | sed -E 's/.* ([0-9]+) ops\/sec.*/\1/'; }

echo "| workload | gateway store | db_bench (RocksDB alone) | ratio store/db_bench | store msgs per commit |"
echo "|---|---|---|---|---|"
for p in 1 8 64; do
  ours=() commits=() peer=()
  for ((r = 0; r < runs; r++)); do
    rm -rf "$work/st" "$work/db"
    out=$("$bench" append --path "$work/st" --producers "$p" --seconds "$secs")
    ours+=("$(field appends_per_s <<<"$out")")
    commits+=("$(field msgs_per_commit <<<"$out")")
    out=$(db_bench --benchmarks=fillrandom --db="$work/db" --sync=1 --threads="$p" \
          --value_size=200 --duration="$secs" --num=100000000 --disable_auto_compactions=0 2>&1)
    peer+=("$(db_ops fillrandom <<<"$out")")
  done
  o=$(printf '%s\n' "${ours[@]}" | median); d=$(printf '%s\n' "${peer[@]}" | median)
  c=$(printf '%s\n' "${commits[@]}" | median)
  printf '| durable appends/s, %d producers | %.0f | %.0f | %.2f | %.1f |\n' "$p" "$o" "$d" \
    "$(awk -v a="$o" -v b="$d" 'BEGIN{print (b>0)?a/b:0}')" "$c"
done
for l in 100 500; do
  ours=() peer=()
  for ((r = 0; r < runs; r++)); do
    rm -rf "$work/st" "$work/db"
    out=$("$bench" page --path "$work/st" --limit "$l" --messages 200000 --seconds "$secs")
    ours+=("$(field msgs_per_s <<<"$out")")
    # Filled in the same process as the reads, like store_bench, so both read mostly from
    # the memtable. seekrandom with seek_nexts=L-1 is one seek then L-1 nexts: one page.
    out=$(db_bench --benchmarks=fillseq,seekrandom --db="$work/db" --num=200000 \
          --seek_nexts="$((l - 1))" --duration="$secs" --value_size=200 2>&1)
    peer+=("$(( $(db_ops seekrandom <<<"$out") * l ))")
  done
  o=$(printf '%s\n' "${ours[@]}" | median); d=$(printf '%s\n' "${peer[@]}" | median)
  printf '| messages read/s in pages of %d | %.0f | %.0f | %.2f | |\n' "$l" "$o" "$d" \
    "$(awk -v a="$o" -v b="$d" 'BEGIN{print (b>0)?a/b:0}')"
done
