#!/usr/bin/env bash
# Runs the gateway on its embedded default: RocksDB in ./data, TLS with a self-signed
# certificate made in ./data/tls on first start, demo mode (POST /demo/login issues
# tokens: for trying the product only), the demo page at https://localhost:8443/ and the
# server API at /api/v1/ (docs/API.md) with a key made in ./data/api-key on first start
# (and a secret for the unread webhook in ./data/webhook-secret, for --webhook-url).
# Installs what is missing and builds first (tools/setup.sh). Extra arguments go to gw
# (see build/gw --help); GW_PORT and GW_DATA change the port and the data folder.
# Stop it with Ctrl-C or SIGTERM: it confirms what is in flight, flushes acks, then exits.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
port=${GW_PORT:-8443}
data=${GW_DATA:-$root/data}
# The server API's key: random, made once, readable by this user only.
mkdir -p "$data"
if [ ! -s "$data/api-key" ]; then
  (umask 077 && openssl rand -hex 24 > "$data/api-key")
fi
# The unread webhook's signing secret, for --webhook-url ... --webhook-secret-file it.
if [ ! -s "$data/webhook-secret" ]; then
  (umask 077 && openssl rand -hex 32 > "$data/webhook-secret")
fi
cat <<MSG
run: open https://localhost:$port/ (a self-signed certificate: the browser asks you to accept it)
run: WebSocket endpoint wss://localhost:$port/ws, figures at /stats and /metrics
run: demo mode: anyone can sign in as anyone; data in $data; Ctrl-C stops it
run: server API at https://localhost:$port/api/v1/ (docs/API.md), key in $data/api-key
MSG
exec "$root/build/gw" --listen 127.0.0.1 --port "$port" --data "$data" --demo \
  --web-root "$root/web-demo" --api-key-file "$data/api-key" "$@"
