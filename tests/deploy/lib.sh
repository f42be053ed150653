# shellcheck shell=bash
# Sourced by the deploy tests (tests/deploy/test_*.sh): their tally, a line a check
# ("ok - ..." or "$fail_mark - ...") and one closing line "$suite: N passed, N failed" that
# tools/test.sh reads, with the exit status; and a bounded wait. Set suite, fail_mark and
# poll (the wait's step, in seconds) before sourcing.
: "${suite:?}" "${fail_mark:?}" "${poll:?}"

passed=0 failed=0
ok() { echo "ok - $*"; passed=$((passed + 1)); }
fail() { echo "$fail_mark - $*"; failed=$((failed + 1)); }
finish() {
  echo "$suite: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}
# Fails and finishes unless every command is found.
need_commands() { # COMMAND...
  local need
  for need; do
    command -v "$need" >/dev/null || { fail "$need is missing (tools/setup.sh installs it)"; finish; }
  done
}
# Polls CMD every $poll s for at most SECONDS.
wait_for() { # SECONDS CMD...
  local end=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep "$poll"
  done
}
