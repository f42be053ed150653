#!/usr/bin/env bash
# The unread webhook: one group of M members who are never online (default "1000
# 5000"), one message posted through the server API, and the events for every member
# but the sender delivered to a receiver on 127.0.0.1 (tests/gateway/webhook_receiver.py,
# which checks each signature). Per size, the median of --runs (default 3): the time from
# the end of --webhook-delay to the last event in, the batches, and the gateway's CPU
# time for the whole pass (members read, events made, signed and POSTed).
#   tools/bench/webhook.sh [--runs N] [--sizes "1000 5000"]
# Everything it starts is stopped on exit. Prints a Markdown table for docs/BENCHMARKS.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
runs=3 sizes="1000 5000" delay=1000
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "webhook.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
"$root/tools/setup.sh" >/dev/null # installs what is missing and builds

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM
key=bench-api-key-0123456789abcdef
echo "$key" > "$work/keys"
openssl rand -hex 32 > "$work/secret"

# Events delivered (answered 200) so far in a receiver's log.
delivered() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
n = 0
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r["answered"] == 200:
            n += len(json.loads(r["body"])["events"])
except FileNotFoundError:
    pass
print(n)
PY
}

cpu_ms() { awk '{print ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"'}' "/proc/$1/stat"; }

one_run() { # members -> "ms_after_delay batches cpu_ms"
  local m=$1 d
  d=$(mktemp -d -p "$work")
  python3 "$root/tests/gateway/webhook_receiver.py" --secret-file "$work/secret" \
    --port-file "$d/rx.port" --log "$d/rx.log" & pids+=($!)
  local rx=$!
  for _ in $(seq 100); do [ -s "$d/rx.port" ] && break; sleep 0.05; done
  "$root/build/gw" --insecure --listen 127.0.0.1 --port 0 --port-file "$d/gw.port" \
    --data "$d/data" --api-key-file "$work/keys" --api-rate 0 --log-level 1 \
    --webhook-url "http://127.0.0.1:$(cat "$d/rx.port")/hook" \
    --webhook-secret-file "$work/secret" --webhook-delay $delay > "$d/gw.log" 2>&1 & pids+=($!)
  local gw=$!
  for _ in $(seq 100); do [ -s "$d/gw.port" ] && break; sleep 0.05; done
  local api="http://127.0.0.1:$(cat "$d/gw.port")/api/v1"
  seq 1 "$m" | xargs -P 8 -I{} curl -s -o /dev/null -X PUT -d '' \
    -H "Authorization: Bearer $key" "$api/groups/big/members/u{}"
  local c0 t0 t1
  c0=$(cpu_ms $gw)
  t0=$(date +%s%N)
  curl -s -o /dev/null -H "Authorization: Bearer $key" \
    -d '{"from":"bot","cid":"c1","body":"hello"}' "$api/groups/big/messages"
  for _ in $(seq 600); do # at most 60 s
    [ "$(delivered "$d/rx.log")" -ge "$m" ] && break
    sleep 0.1
  done
  t1=$(date +%s%N)
  local n batches
  n=$(delivered "$d/rx.log")
  batches=$(wc -l < "$d/rx.log")
  [ "$n" -ge "$m" ] || { echo "webhook.sh: only $n of $m events came" >&2; exit 1; }
  echo "$(( (t1 - t0) / 1000000 - delay )) $batches $(awk "BEGIN{print $(cpu_ms $gw) - $c0}")"
  kill $gw $rx; wait $gw $rx 2>/dev/null || true
}

median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "| members told | batches | last event in, after the delay (ms) | gateway CPU for the pass (ms) | CPU per event (µs) |"
echo "|---|---|---|---|---|"
for m in $sizes; do
  rows=()
  for _ in $(seq "$runs"); do rows+=("$(one_run "$m")"); done
  lat=$(printf '%s\n' "${rows[@]}" | awk '{print $1}' | median)
  bat=$(printf '%s\n' "${rows[@]}" | awk '{print $2}' | median)
  cpu=$(printf '%s\n' "${rows[@]}" | awk '{print $3}' | median)
  echo "| $m | $bat | $lat | $cpu | $(awk "BEGIN{printf \"%.1f\", $cpu * 1000 / $m}") |"
done
