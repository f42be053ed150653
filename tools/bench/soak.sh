#!/usr/bin/env bash
# Soak: many sessions in many groups with steady traffic for a long time, to show that
# the gateway's memory and latency stay flat (docs/RELIABILITY.md). A benchmark, not a
# test: it takes minutes and its figures depend on the machine.
#   tools/bench/soak.sh [--minutes M] [--sessions N] [--group-size G] [--senders S]
#                       [--rate R] [--interval S] [--plain] [--out FILE]
# Defaults: 10 minutes, 10,000 sessions in groups of 10 (1,000 groups), 10 senders (each
# a member of every group) sending 1,000 messages/s in all, over wss://, a line every
# 30 s. Prints the interval lines, then a Markdown summary; --out keeps the JSON lines.
# The gateway binds 127.0.0.1 and is stopped on exit; gw_load stops by itself.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tools/bench/lib.sh"

minutes=10 sessions=10000 group=10 senders=10 rate=1000 interval=30 out=
BENCH_TLS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --group-size) group=$2; shift 2 ;;
    --senders) senders=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --plain) BENCH_TLS=; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export BENCH_TLS
[ -x "$root/build/tools/gw_load" ] && [ -x "$root/build/gw" ] || {
  echo "soak.sh: build first: cmake --build $root/build -j2" >&2; exit 1; }

ulimit -n "$(ulimit -Hn)"
export GW_SECRET=${GW_SECRET:-gw-soak-secret-0123456789abcdef}
bench_init
start_gw soak
scheme=ws
[ -z "$BENCH_TLS" ] || scheme=wss
base=$(rss_kib "$SRV_PID")
lines="$BENCH_WORK/soak.jsonl"
echo "soak: $sessions sessions in groups of $group, $senders senders at $rate msg/s, " \
     "$minutes min over $scheme://, gateway pid $SRV_PID (RSS $base KiB before)" >&2
rc=0
timeout $((minutes * 60 + 900)) "$root/build/tools/gw_load" --json \
  --url "$scheme://127.0.0.1:$SRV_PORT/ws" --sessions "$sessions" --group-size "$group" \
  --senders "$senders" --rate "$rate" --seconds $((minutes * 60)) --interval "$interval" \
  --sources "$((sessions / 5000 + 1))" --server-pid "$SRV_PID" \
  2> >(grep --line-buffered -v '^gw_load: [0-9]* s:' >&2) | tee "$lines" || rc=$?
[ -z "$out" ] || cp "$lines" "$out"
stats=$(curl -sk "${scheme/ws/http}://127.0.0.1:$SRV_PORT/stats" || true)
stop_srv

/usr/bin/python3 - "$lines" "$base" "$rc" "$stats" <<'EOF'
import json, sys
path, base, rc, stats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
iv, final = [], None
for line in open(path):
    if not line.startswith('{'):
        continue
    d = json.loads(line)
    if 'interval' in d:
        iv.append(d['interval'])
    else:
        final = d
if not iv or not final:
    print(f"soak: no result (gw_load exit {rc})")
    sys.exit(1)
rss = [i['server_rss_kib'] for i in iv]
p99 = [i['latency_us']['p99'] / 1000 for i in iv]
dps = [i['deliveries_per_s'] for i in iv]
cpu = [100 * i['server_cpu_s'] / i['seconds'] for i in iv]
# Growth after warm-up: from the second interval (the store's memtable and caches fill
# in the first) to the last.
warm = rss[1] if len(rss) > 1 else rss[0]
print()
print(f"| figure | value |")
print(f"|---|---|")
print(f"| run | {final['seconds']:.0f} s, {final['sessions']} sessions, {len(iv)} intervals |")
print(f"| messages confirmed | {final['confirmed']:,} ({final['confirmed_per_s']:.0f}/s) |")
print(f"| deliveries | {final['deliveries']:,} ({min(dps):,.0f} to {max(dps):,.0f}/s per interval) |")
print(f"| latency p50 / p99 / p99.9 (whole run) | {final['latency_us']['p50']/1000:.2f} / {final['latency_us']['p99']/1000:.2f} / {final['latency_us']['p999']/1000:.2f} ms |")
print(f"| p99 per interval | {min(p99):.2f} to {max(p99):.2f} ms (first {p99[0]:.2f}, last {p99[-1]:.2f}) |")
print(f"| server RSS | {base/1024:.0f} MiB before, {rss[0]/1024:.0f} after the first interval, {warm/1024:.0f} after the second, {rss[-1]/1024:.0f} at the end (max {max(rss)/1024:.0f}) |")
print(f"| RSS growth after warm-up | {(rss[-1]-warm)/1024:+.1f} MiB ({100*(rss[-1]-warm)/warm:+.1f}%) |")
print(f"| server CPU | {min(cpu):.0f} to {max(cpu):.0f}% of a core per interval |")
print(f"| errors, gaps, notifies | {final['errors']}, {final['gaps']}, {final['notifies']} |")
try:
    s = json.loads(stats)
    m = s.get('messages', {})
    print(f"| server /stats at the end | {m.get('stored')} messages stored, {m.get('sends')} sends, {m.get('deliveries')} deliveries, connections {s.get('connections', {})} |")
except Exception:
    pass
sys.exit(rc)
EOF
