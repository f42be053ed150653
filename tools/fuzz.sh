#!/usr/bin/env bash
# Bounded fuzzing with libFuzzer (clang): the request decoder, the server-event decoder,
# the token check, whole requests through the gateway's session path (fuzz_session: a
# real store in a temp folder, no sockets), the cluster's change feed payloads
# (fuzz_announce) and the JSON form of the protocol (fuzz_json). Each target replays
# every saved regression input, then runs for N seconds (default 60) from a seed corpus
# of valid inputs; as many targets run at once as there are cores. Exits non-zero on any
# crash, and keeps the crashing input in tests/fuzz/regressions/<target>/ to be
# committed as a test.
#   tools/fuzz.sh [SECONDS]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
build="$root/build-fuzz"
CC=clang cmake -S "$root" -B "$build" -DGW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null ||
  { echo "fuzz: configure failed"; exit 1; }
cmake --build "$build" -j "$(nproc)" \
  --target fuzz_req fuzz_events fuzz_token fuzz_session fuzz_announce fuzz_json make_seeds >/dev/null || { echo "fuzz: build failed"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gw-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work" # fuzz_session's store goes there, and away with it
"$build/tests/fuzz/make_seeds" "$work/fuzz_req" "$work/fuzz_events" "$work/fuzz_session"
mkdir -p "$work/fuzz_token"
printf 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhIiwiZXhwIjoxODAwMDAwMDAwfQ.c2ln' \
  > "$work/fuzz_token/seed"
mkdir -p "$work/fuzz_announce" # a payload of each kind of change
printf 'gw1 00000000000000ff\nj g1 alice 3\nm g1 4 1700000000000 aGVsbG8=\nh g1 5 1700000000001\na g1 bob 4\nl g1 carol\ns dave\nr' \
  > "$work/fuzz_announce/seed"
printf 'gw1 00000000000000fe\nv g1 bob 3\nt g1 bob\no alice 1\no carol 0 1700000000000\nb 2\nq 0\nO 5 0 1 alice bob' \
  > "$work/fuzz_announce/signals" # reads and the signals (presence, typing)
printf 'gw1 00000000000000fd\ne g1 4 2 1700000000002 0 3 aGk=\nE g1 5 1 1700000000003 1 4\nE g1 6 1 1700000000004 0\nl g1 bob' \
  > "$work/fuzz_announce/versions" # a message's later versions (edit, recall), their cseqs
printf 'gw1 00000000000000fc\nk g1 4 bob 1 2 9 \xf0\x9f\x91\x8d\nk g1 4 bob 0 1 10 a b\nc g1 11\nl g1 bob 12' \
  > "$work/fuzz_announce/changes" # reactions, a group's changes pulled, a deletion's leave

mkdir -p "$work/fuzz_json" # a request of each shape, and a binary body
printf '{"t":"hello","rid":1,"token":"abc"}' > "$work/fuzz_json/hello"
printf '{"t":"send","rid":2,"gid":"g","cid":"c1","body":{"base64":"AAEC/w=="}}' > "$work/fuzz_json/send"
printf '{"t":"ack","acks":{"g":3,"h":4}}' > "$work/fuzz_json/ack"
printf '[{"t":"ping"},{"t":"pull","gid":"g","after":0,"limit":5},null,true,-1,1.5]' > "$work/fuzz_json/batch"
printf '{"t":"watch","rid":3,"gid":"g","mids":[1,2]}' > "$work/fuzz_json/watch"

# fuzz_one TARGET: replays its regressions, then fuzzes it; its lines go to $work/TARGET.out
# and its status is the result (0: passed).
fuzz_one() {
  local t=$1 reg="$root/tests/fuzz/regressions/$1" runs
  exec >"$work/$t.out" 2>&1
  if compgen -G "$reg/*" >/dev/null; then
    if "$build/tests/fuzz/$t" "$reg"/* >"$work/$t-reg.log" 2>&1; then
      echo "fuzz: $t: regressions replayed: ok"
    else
      echo "fuzz: $t: a saved regression input fails again:"; tail -30 "$work/$t-reg.log"
      return 1
    fi
  fi
  mkdir -p "$reg"
  if (cd "$work" && "$build/tests/fuzz/$t" -max_total_time="$secs" -max_len=4096 -timeout=5 \
        -artifact_prefix="$reg/" -print_final_stats=1 "$work/$t" >"$work/$t.log" 2>&1); then
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$work/$t.log" | grep -Eo '[0-9]+$')
    echo "fuzz: $t: ${runs:-?} inputs in ${secs} s, no crash"
  else
    echo "fuzz: $t: CRASH (input saved in $reg/):"; tail -40 "$work/$t.log"
    return 1
  fi
}

# As many targets at once as there are cores (each fuzzer is one process on one core),
# their lines printed in the targets' order.
targets=(fuzz_req fuzz_events fuzz_token fuzz_session fuzz_announce fuzz_json)
at_once=$(nproc)
passed=0 failed=0
for ((i = 0; i < ${#targets[@]}; i += at_once)); do
  pids=()
  for t in "${targets[@]:i:at_once}"; do
    fuzz_one "$t" &
    pids+=($!)
  done
  j=0
  for t in "${targets[@]:i:at_once}"; do
    if wait "${pids[j]}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    cat "$work/$t.out"
    j=$((j + 1))
  done
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
