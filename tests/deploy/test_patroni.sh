#!/usr/bin/env bash
# The failover configs in deploy/patroni/, checked for real on this machine:
#   1. 15-main.yml, made into each of the three members (pg1..pg3: its name and
#      addresses, moved to 127.0.0.21-23), passes Patroni's own validation
#      (patroni --validate-config: every key known, types, ports free to bind);
#   2. etcd.env, made into the three etcd members (e1..e3 on 127.0.0.11-13) and given to
#      Debian's etcd as its environment, forms a healthy cluster of three that stores and
#      returns a key, and keeps its quorum with one member stopped.
# (tools/pg_server.sh ha-up runs Patroni over etcd with the same settings and shorter
# timings, killed and restarted, in tests/gateway/test_cluster.c.) Installs nothing
# (tools/setup.sh does: patroni, etcd-server, etcd-client). Every process it starts is
# stopped on exit, every wait is bounded. Prints ok/FAIL per check and ends with one line
# "deploy: N passed, N failed"; exits non-zero on any failure.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$root/deploy/patroni
suite=deploy fail_mark=FAIL poll=0.1 # (no waits of lib.sh's here)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$root/tests/deploy/lib.sh"
need_commands patroni etcd etcdctl

work=$(mktemp -d /tmp/gw-deploy-patroni-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do timeout 10 tail --pid="$p" -f /dev/null 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# 1. Patroni's validation of each member.
for i in 1 2 3; do
  sed -e "s/^name: pg1 /name: pg$i /" -e "s/10\.0\.2\.11:/127.0.0.2$i:/g" \
    "$dir/15-main.yml" >"$work/pg$i.yml"
  if out=$(patroni --validate-config "$work/pg$i.yml" 2>&1); then
    ok "15-main.yml as member pg$i passes patroni --validate-config"
  else
    fail "15-main.yml as member pg$i: $out"
  fi
done

# 2. The three etcd members from etcd.env.
member_env() { # I: etcd.env as member eI on 127.0.0.1I, its data in the work folder
  sed -e "s/^ETCD_NAME=e1$/ETCD_NAME=e$1/" \
    -e "/^ETCD_INITIAL_CLUSTER=/!s/10\.0\.3\.11:/127.0.0.1$1:/g" \
    -e "/^ETCD_INITIAL_CLUSTER=/s/10\.0\.3\.1\([123]\):/127.0.0.1\1:/g" \
    -e "s|^ETCD_DATA_DIR=.*|ETCD_DATA_DIR=$work/etcd$1|" \
    -e "s|,http://127\.0\.0\.1:2379||" "$dir/etcd.env" | grep -E '^ETCD_[A-Z0-9_]+='
}
for i in 1 2 3; do
  member_env "$i" >"$work/etcd$i.env"
  env -i PATH="$PATH" $(cat "$work/etcd$i.env") ETCD_LOG_LEVEL=warn ETCD_LOGGER=zap \
    etcd >"$work/etcd$i.log" 2>&1 </dev/null &
  pids+=($!)
done
endpoints=http://127.0.0.11:2379,http://127.0.0.12:2379,http://127.0.0.13:2379
healthy() { ETCDCTL_API=3 etcdctl --endpoints="$1" --dial-timeout=2s endpoint health >/dev/null 2>&1; }
end=$((SECONDS + 60))
until healthy "$endpoints" || [ "$SECONDS" -ge "$end" ]; do sleep 0.3; done
if healthy "$endpoints"; then
  ok "etcd.env makes three members that form a healthy cluster"
else
  fail "etcd.env: no healthy cluster of three in 60 s: $(tail -n 3 "$work"/etcd*.log)"
  finish
fi
members=$(ETCDCTL_API=3 etcdctl --endpoints="$endpoints" member list 2>&1 | grep -c started)
[ "$members" = 3 ] && ok "etcd: three members started" || fail "etcd: $members members started"
ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.11:2379 put /service/gw/check ok >/dev/null 2>&1
kill -TERM "${pids[0]}"; timeout 10 tail --pid="${pids[0]}" -f /dev/null
got=$(ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.12:2379 --command-timeout=5s \
  put /service/gw/after ok 2>&1 && ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.13:2379 \
  get --print-value-only /service/gw/check 2>&1)
if [ "$got" = "$(printf 'OK\nok')" ]; then
  ok "etcd: with e1 stopped, the other two still take writes and return e1's key"
else
  fail "etcd: with e1 stopped: $got"
fi
finish
