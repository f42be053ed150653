#!/usr/bin/env bash
# The operator's alerts (deploy/prometheus/alerts.yml) and dashboard
# (deploy/grafana/gw-dashboard.json), checked against the gateway's real /metrics:
#   1. promtool check rules on alerts.yml;
#   2. BUILD_DIR/gw on a PostgreSQL server of the test's own (tools/pg_server.sh; the
#      backend whose database can be unreachable and whose notification queue can fill),
#      on 127.0.0.1 at a free port with a temporary --data folder, scraped once its store
#      and its cluster feed are connected (curl -sk https://.../metrics), then stopped;
#      promtool check metrics on that scrape;
#   3. every metric name used in alerts.yml and in the dashboard's queries is in the
#      scrape (up, which Prometheus adds to every target, aside);
#   4. the dashboard is JSON of the expected shape, each panel with its targets;
#   5. promtool test rules, one file per alert written by tests/deploy/promtool_rules.py
#      in the temporary folder: input series with the scrape's names and label sets (and
#      the job and instance labels Prometheus adds), values that fire each alert (its
#      labels and annotations expected) and values that do not.
# Installs nothing (tools/setup.sh does: prometheus for promtool, python3-yaml,
# python3-prometheus-client, postgresql-15). Every process it starts is stopped on exit,
# every wait is bounded. Prints ok/not ok per check and ends with one line
# "promtool: N passed, N failed"; exits non-zero on any failure.
#
#   tests/deploy/test_promtool.sh BUILD_DIR
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" 2>/dev/null && pwd || echo "${1:-$root/build}")
gw=$build/gw
rules=$root/deploy/prometheus/alerts.yml
dashboard=$root/deploy/grafana/gw-dashboard.json
helper=$root/tests/deploy/promtool_rules.py
py=/usr/bin/python3

suite=promtool fail_mark="not ok" poll=0.2
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$root/tests/deploy/lib.sh"
need_commands promtool curl "$py"
[ -x "$gw" ] || { fail "$gw is missing (tools/setup.sh builds it)"; finish; }
"$py" -c 'import yaml, prometheus_client' 2>/dev/null ||
  { fail "python3-yaml or python3-prometheus-client is missing (tools/setup.sh installs them)"; finish; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gw-promtool-XXXXXX")
pgdir=$(mktemp -d /tmp/gw-promtool-pg-XXXXXX) # where the postgres user can reach it
gw_pid=""
cleanup() {
  if [ -n "$gw_pid" ]; then
    kill -TERM "$gw_pid" 2>/dev/null
    timeout 10 tail --pid="$gw_pid" -f /dev/null 2>/dev/null || kill -KILL "$gw_pid" 2>/dev/null
  fi
  "$root/tools/pg_server.sh" stop "$pgdir" >/dev/null 2>&1
  rm -rf "$tmp" "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1. the rules as Prometheus loads them -----------------------------------------------
if out=$(promtool check rules "$rules" 2>&1); then
  ok "promtool check rules deploy/prometheus/alerts.yml ($(grep -o '[0-9]* rules found' <<<"$out"))"
else
  fail "promtool check rules deploy/prometheus/alerts.yml:"; echo "$out"
fi

# ---- 2. a real scrape ---------------------------------------------------------------------
scrape=$tmp/metrics.txt
if ! url=$(timeout 60 "$root/tools/pg_server.sh" start "$pgdir" | tail -n 1) || [ -z "$url" ]; then
  fail "PostgreSQL did not start (tools/pg_server.sh)"; finish
fi
mkdir -p "$tmp/data"
"$gw" --listen 127.0.0.1 --port 0 --port-file "$tmp/port" --data "$tmp/data" --store "$url" \
  --node promtool-a --threads 1 --log-level 1 >"$tmp/gw.log" 2>&1 &
gw_pid=$!
if ! wait_for 20 test -s "$tmp/port"; then
  fail "gw did not start listening (its log follows)"; cat "$tmp/gw.log"; finish
fi
port=$(cat "$tmp/port")
# Scraped once the database and the cluster feed are connected: the figures a running
# node shows.
scraped() {
  curl -sk --max-time 5 "https://127.0.0.1:$port/metrics" -o "$scrape" &&
    grep -q '^gw_store_connected{[^}]*} 1$' "$scrape" && grep -q '^gw_feed_connected{[^}]*} 1$' "$scrape"
}
if wait_for 20 scraped; then
  ok "gw on PostgreSQL at 127.0.0.1:$port: /metrics scraped ($(grep -vc '^#' "$scrape") samples)"
else
  fail "gw at 127.0.0.1:$port: no /metrics with the store and the feed connected in 20 s"
  tail -n 20 "$tmp/gw.log"; finish
fi
kill -TERM "$gw_pid"
if timeout 15 tail --pid="$gw_pid" -f /dev/null; then
  wait "$gw_pid"; rc=$?
  gw_pid=""
  [ "$rc" -eq 0 ] && ok "gw stopped on SIGTERM (exit 0)" || fail "gw exited $rc on SIGTERM"
else
  fail "gw did not stop within 15 s of SIGTERM"
fi
if out=$(promtool check metrics <"$scrape" 2>&1); then
  ok "promtool check metrics: the scrape parses and passes its lint"
else
  fail "promtool check metrics on the scrape:"; echo "$out"
fi

# ---- 3. every metric name used is in the scrape -------------------------------------------
# Sample names: histogram and summary parts (_sum, _count, _bucket) are their own names.
sed -nE 's/^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ].*/\1/p' "$scrape" | sort -u >"$tmp/scraped-names"
echo up >>"$tmp/scraped-names" # Prometheus' own, one a target
names_in() { # WHAT KIND FILE
  local what=$1 kind=$2 file=$3 used missing
  if ! used=$("$py" "$helper" names "$kind" "$file" 2>&1) || [ -z "$used" ]; then
    fail "$what: no metric names read: $used"; return
  fi
  missing=$(grep -vxF -f "$tmp/scraped-names" <<<"$used")
  if [ -z "$missing" ]; then
    ok "$what: its $(wc -l <<<"$used") metric names are all in the scrape"
  else
    fail "$what: metric names not in the scrape: $(echo $missing)"
  fi
}
names_in deploy/prometheus/alerts.yml rules "$rules"
names_in deploy/grafana/gw-dashboard.json dashboard "$dashboard"

# ---- 4. the dashboard's shape -------------------------------------------------------------
if out=$("$py" "$helper" dashboard "$dashboard" 2>&1); then
  ok "deploy/grafana/gw-dashboard.json parses; its variables and each of its $("$py" -c \
    'import json,sys; print(len(json.load(open(sys.argv[1]))["panels"]))' "$dashboard") panels' targets are in place"
else
  fail "deploy/grafana/gw-dashboard.json:"; echo "$out"
fi

# ---- 5. each alert fires, and does not, in promtool test rules ----------------------------
mkdir -p "$tmp/unit"
if ! files=$("$py" "$helper" unit-tests "$scrape" "$rules" "127.0.0.1:$port" "$tmp/unit" 2>&1); then
  fail "promtool test rules: the test files could not be written: $files"; finish
fi
for f in $files; do
  alert=$(basename "$f" .yml)
  cases=$(grep -c '^- name:' "$f")
  if out=$(timeout 30 promtool test rules "$f" 2>&1); then
    ok "promtool test rules: $alert fires and stays quiet as expected ($cases cases)"
  else
    fail "promtool test rules: $alert:"; echo "$out"
  fi
done
finish
