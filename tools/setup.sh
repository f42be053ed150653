#!/usr/bin/env bash
# Installs the Debian packages the gateway needs (only those missing: apt-get update, then
# apt-get install of exactly those), the npm packages of clients/js, web-demo and
# tests/browser (npm ci, when their lock file changed), then configures and builds.
# Idempotent: a second run installs nothing and rebuilds incrementally.
#
#   tools/setup.sh              everything (the gateway, tools, tests) in build/
#   tools/setup.sh --asan       also the sanitizer build (ASan + UBSan) in build-asan/
#   tools/setup.sh --target T   only target T in build/ (repeatable)
#   tools/setup.sh --run        only what tools/run.sh runs: gw, the CLI tools the README
#                               names (gw_cli, gw_token) and the page's npm packages
#   tools/setup.sh --no-build   only install packages
set -Eeuo pipefail

# A failing step says which, with the command and its exit code; its own error is above
# (apt-get, npm and cmake print theirs on stderr, which is never hidden here). Only the
# script's own shell speaks: in a subshell the failure reaches it as the subshell's.
step="starting"
trap 'err=$?; [ "$BASHPID" != $$ ] ||
  echo "setup: failed while $step (exit $err): line $LINENO: $BASH_COMMAND" >&2' ERR

build_asan=0
do_build=1
targets=()
npm_dirs=(clients/js web-demo tests/browser)
while (($#)); do
  case "$1" in
    --asan) build_asan=1 ;;
    --no-build) do_build=0 ;;
    --target)
      [ -n "${2:-}" ] || { echo "setup: --target needs a target name" >&2; exit 2; }
      targets+=("$2"); shift ;;
    --run) targets+=(gw gw_cli gw_token); npm_dirs=(web-demo) ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0"; exit 0 ;;
    *) echo "setup: unknown option $1 (tools/setup.sh --help)" >&2; exit 2 ;;
  esac
  shift
done

# The repository itself, symbolic links resolved: the build folder is configured for it
# (tests/docs/run_examples.py runs run.sh from a folder of links to it).
root=$(cd -P "$(dirname "$0")/.." && pwd)

# Why each: cmake/gcc/pkg-config build; libwebsockets + OpenSSL the server; RocksDB the
# store; msgpack-c the wire format; Criterion the tests; libjwt tokens; jansson JSON for
# /stats; uthash the gateway's hash tables; rocksdb-tools gives db_bench, the store
# benchmark's peer; curl and python3-prometheus-client (a real Prometheus text parser)
# are used by the tests, and python3-websockets (a WebSocket library that knows nothing
# of the gateway) speaks the JSON subprotocol in them; wslay frames the load generator's lean WebSocket client; libev
# and libwebsockets' libev plugin are the gateway's event loop; libpq (libpq-dev) is the
# PostgreSQL backend's client, and PostgreSQL 15 itself (the server, psql, pgbench) is
# what the tests and benchmarks run it against, in servers of their own; libcurl
# (libcurl4-openssl-dev, the OpenSSL build like the rest) is the unread webhook's client;
# libexpat (libexpat1-dev) reads XMPP stanzas in gw_load --xmpp (the XMPP benchmark peers).
packages=(build-essential cmake pkg-config git
          libwebsockets-dev libssl-dev openssl librocksdb-dev libmsgpack-dev
          libcriterion-dev libjwt-dev libjansson-dev uthash-dev rocksdb-tools libwslay-dev
          libev-dev libwebsockets-evlib-ev libpq-dev postgresql-15 postgresql-client-15
          libcurl4-openssl-dev libexpat1-dev
          curl python3-prometheus-client python3-websockets)
# The web demo and its browser tests: Debian's chromium, driven by playwright-core (no
# browser is ever downloaded); Node.js and npm for their npm packages, only when no node
# or npm is on the PATH (playwright-core wants node >= 20).
packages+=(chromium)
# Fuzzing: clang with its libFuzzer and sanitizer runtimes.
packages+=(clang libclang-rt-14-dev)
# The C style check of the test command (tools/format.sh --check, .clang-format).
packages+=(clang-format-14)
# The TLS scan in tests/gateway/test_tls.c.
packages+=(sslscan)
# The load balancer config deploy/nginx/gw.conf, run for real by tests/deploy/ (Debian's
# nginx 1.22, the version that config is written for; the test starts its own nginx).
packages+=(nginx)
# The local CA and certificate tools/run.sh serves (a certificate clients can trust).
packages+=(mkcert)
# Automatic PostgreSQL failover, run for real by tests/gateway/test_cluster.c and
# tools/pg_server.sh ha-up: Patroni (3.0) over etcd (3.4), the pair deploy/patroni/ is
# written for; Debian's, so that no pip package is needed.
packages+=(patroni etcd-server etcd-client)
# The operator's alerts and dashboard (deploy/prometheus/, deploy/grafana/), checked by
# tests/deploy/test_promtool.sh: Debian's promtool (2.42, in prometheus) and python3-yaml.
packages+=(prometheus python3-yaml)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

step="asking dpkg which packages are installed"
# One dpkg-query for them all (tools/run.sh runs this at every start).
# dpkg-query exits 1 when it knows none or only some of them (a fresh machine), having
# printed those it knows: that is an answer here, not a failure.
installed=$({ dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true; } |
            awk '$NF == "installed" && $(NF-1) == "ok" {print $1}')
missing=()
for p in "${packages[@]}"; do
  grep -qxF "$p" <<<"$installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  step="updating apt's package lists (apt-get update)"
  $sudo apt-get update -q
  step="installing the missing packages (apt-get install)"
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm packages, exactly as each lock file says: the JavaScript client package's own
# (clients/js: its MessagePack library, and ws and typescript for its tests), the page's
# (web-demo/node_modules, served to the browser by the gateway: MessagePack and the
# client package, a link to clients/js) and playwright-core for tests/browser. Skipped when node_modules was installed from this very lock file (a
# stamp holds its checksum: file times are too coarse to tell a fresh clone apart).
for dir in "${npm_dirs[@]}"; do
  lock="$root/$dir/package-lock.json"
  [ -f "$lock" ] || continue
  stamp="$root/$dir/node_modules/.gw-installed-from"
  sum=$(sha256sum "$lock" | cut -d' ' -f1)
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && continue
  echo "setup: npm ci in $dir"
  step="installing $dir's npm packages (npm ci in $root/$dir)"
  (cd "$root/$dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$sum" > "$stamp"
done

((do_build)) || exit 0
jobs=$(nproc)
step="configuring build/ (cmake)"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
step="building ${targets[*]:-everything} in build/"
build_args=()
for t in "${targets[@]}"; do build_args+=(--target "$t"); done
cmake --build "$root/build" -j "$jobs" "${build_args[@]}"
if ((build_asan)); then
  step="configuring build-asan/ (cmake)"
  cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DGW_SANITIZE=ON >/dev/null
  step="building build-asan/"
  cmake --build "$root/build-asan" -j "$jobs"
fi
