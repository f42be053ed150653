#!/usr/bin/env bash
# The whole test suite: installs what is missing (tools/setup.sh), builds the normal and the
# sanitizer (ASan + UBSan) builds, checks setup.sh itself on machines that lack packages
# (tests/setup/), runs every Criterion test binary in both, the store and
# gateway suites again on PostgreSQL (a server the suite starts itself; the cluster tests
# run there, and Patroni over etcd fails the database over by itself), the nginx load
# balancer config in front of gateway nodes and the Patroni and etcd configs (tests/deploy/),
# every printed example of the docs and of clients/js/README.md (tests/docs/, beside the
# PostgreSQL passes), then the web demo's browser tests (tests/browser/) against the
# normal build, then a bounded fuzz run.
# Ends with one line "tests: N passed, N failed"; exits non-zero if anything failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
export LC_ALL=C # Criterion's summary lines are parsed by CI

# setup.sh names the step that failed and the command, with the command's own error above.
"$root/tools/setup.sh" --asan || {
  rc=$?
  echo "tests: tools/setup.sh --asan failed (exit $rc): see its last lines above"
  echo "tests: 0 passed, 1 failed"
  exit 1
}

# RocksDB and libstdc++ are not instrumented; their start-up allocations are not leaks of
# ours, but a leak in our code is still reported and fails the run.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

work=$(mktemp -d "${TMPDIR:-/tmp}/gw-tests-XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work"

passed=0 failed=0 status=0
# What failed, one line each, printed again just above the last line: a long run's log is
# often read from its end only.
failures=""
failure() { failures+="tests: FAILED: $*"$'\n'; }
# A section's heading, with when it began (seconds into the run): where the time goes.
section() { echo "== $1 (at ${SECONDS} s)"; }
# One Criterion binary: its output, its summary line parsed into the counts. JOBS tests
# side by side (default 2, one a core).
run_bin() { # NAME BIN [ARGS...]
  local name=$1 bin=$2; shift 2
  section "$name"
  local log="$work/$(echo "$name" | tr '/ ' '__').log"
  # The binary writes its log and tail shows it as it grows, ending with the binary: a
  # pipe to tee would end only once every holder of it did, and a test's stray child (a
  # fork that outlived its test, killed for its timeout) would hold up the whole run.
  "$bin" --jobs "${JOBS:-2}" "$@" >"$log" 2>&1 &
  local pid=$!
  tail -n +1 -f --pid="$pid" "$log"
  wait "$pid"
  local rc=$?
  local line
  line=$(grep -E 'Synthesis: Tested: [0-9]+' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "tests: $name printed no summary (exit $rc)"
    failure "$name printed no summary (exit $rc)"
    failed=$((failed + 1)); status=1
    return
  fi
  # Criterion's failed tests, with the place of each failed assertion, crash or timeout.
  local t
  while IFS= read -r t; do failure "$name: $t"; done \
    < <(grep -E '^\[FAIL\]|^\[----\] .*(: CRASH|Timed out|\.c:[0-9]+: )' "$log" | head -n 40)
  local p f c
  p=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$line")
  c=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f + c))
  # Criterion also exits non-zero on an error logged by a passing test: said and counted,
  # so the last line never reads "0 failed" on a run that fails.
  if [ "$rc" -ne 0 ] && [ $((f + c)) -eq 0 ]; then
    echo "tests: $name exited $rc with every test passing (an error logged above?)"
    failure "$name exited $rc with every test passing"
    failed=$((failed + 1))
  fi
  [ "$rc" -eq 0 ] || status=1
  # A sanitizer report (a leak found at a worker's exit, say) does not change Criterion's
  # counts, nor does an assertion that fails in a suite's teardown (a gateway that did not
  # exit 0 when stopped: under the sanitizers, a leak or an error at its exit), so look
  # for them: any one fails the run.
  if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|gateway did not stop cleanly' "$log"; then
    echo "tests: $name: a sanitizer report or an unclean gateway exit above"
    failure "$name: a sanitizer report or an unclean gateway exit"
    failed=$((failed + 1)); status=1
  fi
}

# A suite that is not Criterion: its log's pass and fail counts (sed expressions that
# print each) join the counts; no summary at all counts as a failure.
count_summary() { # NAME LOG RC PASS_SED FAIL_SED
  local name=$1 log=$2 rc=$3 p f
  p=$(sed -nE "$4" "$log" | tail -n 1)
  f=$(sed -nE "$5" "$log" | tail -n 1)
  if [ -z "$p" ] || [ -z "$f" ]; then
    echo "tests: $name printed no summary (exit $rc)"
    failure "$name printed no summary (exit $rc)"
    failed=$((failed + 1)); status=1
  else
    passed=$((passed + p)); failed=$((failed + f))
    # TAP names its failures (not ok N - ...); the others' own lines above say which.
    if [ "$f" -gt 0 ]; then
      local t
      while IFS= read -r t; do failure "$name: $t"; done < <(grep -E '^not ok' "$log")
      grep -qE '^not ok' "$log" || failure "$name: $f failed (see its lines above)"
    fi
    [ "$rc" -eq 0 ] || status=1
  fi
}

# The style: every tracked C file as .clang-format says (tools/format.sh applies it).
section "format"
# One test: passes when no file differs.
if "$root/tools/format.sh" --check; then passed=$((passed + 1)); else failure format; failed=$((failed + 1)); status=1; fi
# The layering of gateway/, store/ and tools/ checked on a build, from the gw_folder
# declarations (FACE, DEPENDS): no call into a folder not linked (above or beside), loops
# inside one folder of at most 4 files, includes of own folder and linked faces only;
# figures per tree; --graph (tools/layers.py).
section "layers"
if python3 "$root/tools/layers.py" "$root/build"; then passed=$((passed + 1)); else failure layers; failed=$((failed + 1)); status=1; fi

# tools/setup.sh on the machines CI is not: one with none of its packages, some, all,
# and one where apt-get fails (stand-ins for dpkg-query, apt-get and npm on the PATH).
section "tests/setup/test_setup.sh"
log="$work/setup-test.log"
timeout -k 10 120 "$root/tests/setup/test_setup.sh" 2>&1 | tee "$log"
count_summary tests/setup "$log" "${PIPESTATUS[0]}" \
  's/^setup-test: ([0-9]+) passed, [0-9]+ failed$/\1/p' 's/^setup-test: [0-9]+ passed, ([0-9]+) failed$/\1/p'

for build in build build-asan; do
  for bin in "$root/$build"/tests/test_*; do
    [ -x "$bin" ] || continue
    run_bin "$build/tests/$(basename "$bin")" "$bin"
  done
done

# Every printed example of README.md, docs/ (API, CLIENT, DEPLOY, PROTOCOL's JSON
# transcript) and clients/js/README.md, run as printed against a fresh tools/run.sh (port 8443) in a temporary
# home, from a folder outside the repository (tests/docs/run_examples.py): beside the
# PostgreSQL passes below, which mostly wait (failovers, restarts, kills) with the cores
# idle, as it mostly waits too (a gateway's start, curl, node). Its log is shown and
# counted after those passes. (The fuzz run, which keeps a core busy, is not run beside
# them: their timing-bound tests would pay for it.)
timeout -k 10 600 /usr/bin/python3 "$root/tests/docs/run_examples.py" "$root" \
  > "$work/doc-examples.log" 2>&1 &
docs_pid=$!

# The store suite and the gateway suite again, on PostgreSQL: a server of the suite's own
# (tools/pg_server.sh: a folder under /tmp, 127.0.0.1 and a unix socket, stopped at the
# end), a new database for each test. Tests that stop or kill the database start their
# own server besides.
pgdir=$(mktemp -d /tmp/gw-pg-suite-XXXXXX)
trap 'rm -rf "$work"; "$root/tools/pg_server.sh" stop "$pgdir" >/dev/null 2>&1; rm -rf "$pgdir"' EXIT
if GW_TEST_PG=$("$root/tools/pg_server.sh" start "$pgdir"); then
  export GW_TEST_PG GW_TEST_STORE=postgres
  run_bin "build/tests/test_store (PostgreSQL)" "$root/build/tests/test_store"
  # Four side by side: most of this pass waits (failovers, restarts, kills), with the cores
  # two thirds idle at two.
  JOBS=4 run_bin "build/tests/test_gateway (PostgreSQL)" "$root/build/tests/test_gateway"
  run_bin "build-asan/tests/test_store (PostgreSQL)" "$root/build-asan/tests/test_store"
  # Under the sanitizers, the gateway suites whose code paths differ on PostgreSQL: the
  # change feed between nodes (cluster, peers' presence, service threads), the API's jobs
  # (its reads complete later, not at once as on RocksDB), the database going away, and
  # what a client on the internet can make the gateway hold (exposed) and revoked tokens
  # (revoke: the not-before is read with the user's groups, a store job on both).
  # The rest runs the same gateway code as on RocksDB, where the sanitizer pass above ran
  # it (the webhook's store requests complete later on both backends; its PostgreSQL
  # bookkeeping ran under the sanitizers in the store suite just before); the kill soaks
  # (crash/*) ran in the normal build's pass.
  run_bin "build-asan/tests/test_gateway (PostgreSQL)" "$root/build-asan/tests/test_gateway" \
    --filter '@(cluster|database|peers|api|threads|exposed|revoke)/*'
  # Shards (store.h, "Shards"): each test's store is 2 databases of the suite's server under
  # a slot map (GW_TEST_SHARDS; tests/common/pgfx.c). The store suites of what the router
  # splits or merges, or places by user, and of the passes over every shard (their tests
  # that read one database's own tables skip); the ops of one group go whole to its
  # shard's core, which the passes above ran (test_shards.c checks where they land). And the
  # gateway's suites of several nodes and service threads, of a user's groups (sign-in,
  # revocation) and of acks, over 2 shards: 2 shards and 2 nodes and more. The shards' own
  # tests (tests/store/test_shards.c, test_slots.c: failures, fences, moves; the crash
  # suite's shard failover and moves) ran in the passes above, on shards of their own.
  export GW_TEST_SHARDS=2
  run_bin "build/tests/test_store (PostgreSQL, 2 shards)" "$root/build/tests/test_store" \
    --filter '@(acks|changes|members|reads|retain|revoke|unread|user_groups)/*'
  JOBS=4 run_bin "build/tests/test_gateway (PostgreSQL, 2 shards)" "$root/build/tests/test_gateway" \
    --filter '@(cluster|peers|threads|revoke|acks|api|changes)/*'
  unset GW_TEST_SHARDS
  unset GW_TEST_STORE
else
  echo "tests: could not start PostgreSQL for the suite's second pass"
  failure "could not start PostgreSQL for the suite's second pass"
  failed=$((failed + 1)); status=1
fi
# What ran beside them: its "doc-examples: N ran, N passed, N failed, N skipped" line
# joins the counts above.
wait "$docs_pid"
rc=$?
section "tests/docs/run_examples.py (ran beside the PostgreSQL passes)"
cat "$work/doc-examples.log"
count_summary tests/docs "$work/doc-examples.log" "$rc" \
  's/^doc-examples: [0-9]+ ran, ([0-9]+) passed, [0-9]+ failed, [0-9]+ skipped$/\1/p' \
  's/^doc-examples: [0-9]+ ran, [0-9]+ passed, ([0-9]+) failed, [0-9]+ skipped$/\1/p'
# The load balancer config (deploy/nginx/gw.conf) for real: Debian's nginx in front of
# gateway nodes on one PostgreSQL, every one of them the script's own, stopped at its end
# (tests/deploy/). Its "deploy: N passed, N failed" line joins the counts above.
section "tests/deploy/test_nginx.sh"
log="$work/deploy.log"
timeout -k 10 180 "$root/tests/deploy/test_nginx.sh" 2>&1 | tee "$log"
count_summary tests/deploy "$log" "${PIPESTATUS[0]}" \
  's/^deploy: ([0-9]+) passed, [0-9]+ failed$/\1/p' 's/^deploy: [0-9]+ passed, ([0-9]+) failed$/\1/p'
# The failover configs (deploy/patroni/): Patroni's validation of each member, and the
# three etcd members made from etcd.env, for real (tests/deploy/test_patroni.sh).
section "tests/deploy/test_patroni.sh"
log="$work/deploy-patroni.log"
timeout -k 10 120 "$root/tests/deploy/test_patroni.sh" 2>&1 | tee "$log"
count_summary tests/deploy/patroni "$log" "${PIPESTATUS[0]}" \
  's/^deploy: ([0-9]+) passed, [0-9]+ failed$/\1/p' 's/^deploy: [0-9]+ passed, ([0-9]+) failed$/\1/p'
# The operator's alerts and dashboard (deploy/prometheus/, deploy/grafana/): promtool's
# check of the rules, every metric name in both against a real scrape of build/gw, and
# promtool test rules firing each alert on the scrape's series (tests/deploy/test_promtool.sh).
section "tests/deploy/test_promtool.sh"
log="$work/deploy-promtool.log"
timeout -k 10 120 "$root/tests/deploy/test_promtool.sh" "$root/build" 2>&1 | tee "$log"
count_summary tests/deploy/promtool "$log" "${PIPESTATUS[0]}" \
  's/^promtool: ([0-9]+) passed, [0-9]+ failed$/\1/p' 's/^promtool: [0-9]+ passed, ([0-9]+) failed$/\1/p'
# The JSON subprotocol from a WebSocket library that knows nothing of the gateway
# (Debian's python3-websockets; tests/clients/json_tool.py starts its own gw). Its
# "json-tool: N passed, N failed" line joins the counts above.
section "tests/clients/json_tool.py"
log="$work/json-tool.log"
timeout -k 10 120 /usr/bin/python3 "$root/tests/clients/json_tool.py" "$root/build" 2>&1 | tee "$log"
count_summary tests/clients "$log" "${PIPESTATUS[0]}" \
  's/^json-tool: ([0-9]+) passed, [0-9]+ failed$/\1/p' 's/^json-tool: [0-9]+ passed, ([0-9]+) failed$/\1/p'
# The C client library as a user installs it: cmake --install into a temporary prefix,
# and docs/CLIENT.md's example built with pkg-config and run against the installed gw.
section "tests/clients/test_install.sh"
log="$work/install.log"
timeout -k 10 180 "$root/tests/clients/test_install.sh" "$root/build" 2>&1 | tee "$log"
count_summary tests/clients "$log" "${PIPESTATUS[0]}" \
  's/^install: ([0-9]+) passed, [0-9]+ failed$/\1/p' 's/^install: [0-9]+ passed, ([0-9]+) failed$/\1/p'
# The JavaScript client package (clients/js): its pure parts, the client against a
# scripted socket, its declarations under tsc --strict, and the package against the real
# build/gw. Its "# pass N" and "# fail N" lines join the counts above.
section "clients/js (node --test)"
log="$work/js.log"
(cd "$root/clients/js" && GW_BUILD="$root/build" timeout -k 10 180 node --test \
   --test-reporter=tap test/) 2>&1 | tee "$log"
count_summary clients/js "$log" "${PIPESTATUS[0]}" \
  's/^# pass ([0-9]+)$/\1/p' 's/^# fail ([0-9]+)$/\1/p'
# The web demo in a real browser (tests/browser/): Debian's chromium driven by
# playwright-core against build/gw, with node's test runner, one file at a time and
# bounded in time. Its "# pass N" and "# fail N" lines join the counts above.
section "tests/browser (node --test)"
log="$work/browser.log"
(cd "$root/tests/browser" && timeout -k 10 480 node --test --test-reporter=tap \
   --test-concurrency=1 --test-timeout=240000 ./*.test.js) 2>&1 | tee "$log"
count_summary tests/browser "$log" "${PIPESTATUS[0]}" \
  's/^# pass ([0-9]+)$/\1/p' 's/^# fail ([0-9]+)$/\1/p'
echo "tests: browser screenshots in tests/browser/screenshots/"

# Bounded fuzzing of the decoders and the token check (tests/fuzz/, libFuzzer): each
# target counts as one test. 10 s each (fuzz_session, the slowest, still runs thousands of
# inputs after its seeds); a longer run is `tools/fuzz.sh SECONDS` (docs/RELIABILITY.md).
section "tools/fuzz.sh (10 s per target)"
"$root/tools/fuzz.sh" 10 2>&1 | tee "$work/fuzz.log"
count_summary tools/fuzz.sh "$work/fuzz.log" "${PIPESTATUS[0]}" \
  's/^fuzz: ([0-9]+) passed, [0-9]+ failed$/\1/p' 's/^fuzz: [0-9]+ passed, ([0-9]+) failed$/\1/p'

[ "$failed" -eq 0 ] || status=1
printf '%s' "$failures"
echo "tests: the run took ${SECONDS} s"
echo "tests: $passed passed, $failed failed"
exit $status
