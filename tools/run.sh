#!/usr/bin/env bash
# Runs the gateway on its embedded default: RocksDB in ./data, listening on 127.0.0.1.
# Installs what is missing and builds first (tools/setup.sh). Extra arguments go to gw
# (see build/gw --help). Stop it with Ctrl-C: it closes sessions and flushes acks first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
port=${GW_PORT:-8080}
echo "run: gateway at ws://127.0.0.1:$port/ws (subprotocol gw.v1), health at http://127.0.0.1:$port/healthz"
echo "run: data in $root/data; token secret in $root/data/token-secret; Ctrl-C stops it"
# Plain ws:// on loopback until TLS by default lands (the operations issue).
exec "$root/build/gw" --insecure --listen 127.0.0.1 --port "$port" --data "$root/data" "$@"
