#!/usr/bin/env bash
# Runs the gateway on its embedded default: RocksDB in ./data, demo mode, the demo page.
# Installs what is missing and builds first (tools/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
gw="$root/build/gateway/gw"
if [ ! -x "$gw" ]; then
  echo "run: the gateway binary is not part of this version yet: the store and wire-format"
  echo "run: modules are built and tested (tools/test.sh); the server itself comes next."
  exit 3
fi
exec "$gw" --data "$root/data" --demo "$@"
