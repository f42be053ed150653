#!/usr/bin/env bash
# Runs the gateway on its embedded default: RocksDB in $GW_HOME/data, TLS with a
# certificate signed by a local CA of its own (made in DATA/tls on first start, below),
# demo mode (POST /demo/login issues tokens: for trying the product only), the demo page at
# https://localhost:8443/ and the server API at /api/v1/ (docs/API.md) with a key made in
# DATA/api-key on first start (and a secret for the unread webhook in
# DATA/webhook-secret, for --webhook-url).
# Installs what is missing and builds first (tools/setup.sh --run): only what it runs and
# what the README has a user run beside it (gw, gw_cli, gw_token, the page's npm
# packages); tools/test.sh builds and installs the rest.
#
#   tools/run.sh [--install-ca] [GW FLAGS...]
#
#   --install-ca   also add the local CA to this machine's trust stores (mkcert -install:
#                  the system's, and the browsers' NSS stores when certutil is there)
#   GW FLAGS       go to gw as they are (build/gw --help), e.g. --retain-messages 1000
#   GW_PORT        the port (default 8443; --port in GW FLAGS wins)
#   GW_DATA        the data folder (default $GW_HOME/data, GW_HOME being this repository)
#
# Stop it with Ctrl-C or SIGTERM: it confirms what is in flight, flushes acks, then exits.
set -Eeuo pipefail
# A failing step says which command failed and how; the command's own error is above it.
trap 'err=$?; [ "$BASHPID" != $$ ] || echo "run: failed (exit $err): line $LINENO: $BASH_COMMAND" >&2' ERR
root=$(cd "$(dirname "$0")/.." && pwd)
install_ca=0
if [ "${1:-}" = "--install-ca" ]; then
  install_ca=1
  shift
elif [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set /{/^#/p}' "$0"
  exit 0
fi
"$root/tools/setup.sh" --run
port=${GW_PORT:-8443}
data=${GW_DATA:-$root/data}
# The port and the data folder the gateway will really use: a --port or --data among the
# flags wins over GW_PORT and GW_DATA (gw takes the last of each).
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --port) port=${args[i + 1]:-$port} ;;
    --port=*) port=${args[i]#--port=} ;;
    --data) data=${args[i + 1]:-$data} ;;
    --data=*) data=${args[i]#--data=} ;;
  esac
done
mkdir -p "$data"
data=$(cd "$data" && pwd)
# The server API's key: random, made once, readable by this user only.
if [ ! -s "$data/api-key" ]; then
  (umask 077 && openssl rand -hex 24 > "$data/api-key")
fi
# The unread webhook's signing secret, for --webhook-url ... --webhook-secret-file it.
if [ ! -s "$data/webhook-secret" ]; then
  (umask 077 && openssl rand -hex 32 > "$data/webhook-secret")
fi
# TLS that clients can trust: a local CA (DATA/tls/ca.pem, its key beside it, 0600) and
# the server's certificate for localhost, 127.0.0.1 and ::1 signed by it, made with
# Debian's mkcert. A client trusts the one CA file (--ca, NODE_EXTRA_CA_CERTS, .ca_file)
# instead of being told to skip verification, and `--install-ca` puts the same CA in the
# system's and browsers' stores; mkcert does both, with keys and lifetimes browsers
# accept, where openssl would need a page of extension settings. Made again when the
# certificate is missing, not signed by the CA (a data folder from before: gw's own
# self-signed one) or within 30 days of its end.
tls=$data/tls
mkdir -p "$tls"
if ! openssl verify -CAfile "$tls/ca.pem" "$tls/cert.pem" >/dev/null 2>&1 ||
   ! openssl x509 -checkend $((30 * 86400)) -noout -in "$tls/cert.pem" >/dev/null 2>&1; then
  export CAROOT="$tls/ca"
  (umask 077 && mkdir -p "$CAROOT")
  # mkcert makes the CA in $CAROOT the first time it is asked for a certificate (without
  # installing it anywhere), then signs with it.
  if ! out=$(umask 077 && mkcert -ecdsa -cert-file "$tls/cert.pem" -key-file "$tls/key.pem" \
               localhost 127.0.0.1 ::1 2>&1) || [ ! -s "$CAROOT/rootCA.pem" ]; then
    echo "run: mkcert could not make the local CA and certificate in $tls:" >&2
    echo "$out" >&2
    exit 1
  fi
  cp "$CAROOT/rootCA.pem" "$tls/ca.pem"
  chmod 644 "$tls/ca.pem" "$tls/cert.pem" # public; the keys stay 0600
  echo "run: made a local CA ($tls/ca.pem) and a certificate for localhost signed by it"
fi
if ((install_ca)); then
  CAROOT="$tls/ca" mkcert -install
fi
cat <<MSG
run: open https://localhost:$port/ (trust $tls/ca.pem, or run tools/run.sh --install-ca once)
run: WebSocket endpoint wss://localhost:$port/ws, figures at /stats and /metrics
run: clients trust the local CA with one line each:
run:   gw_cli --url wss://localhost:$port/ws --ca $tls/ca.pem ...
run:   NODE_EXTRA_CA_CERTS=$tls/ca.pem node app.mjs
run:   gwc_options o = {.ca_file = "$tls/ca.pem"};   (C, clients/c/gwc.h)
run:   curl --cacert $tls/ca.pem https://localhost:$port/healthz
run: demo mode: anyone can sign in as anyone; data in $data; Ctrl-C stops it
run: server API at https://localhost:$port/api/v1/ (docs/API.md), key in $data/api-key
MSG
exec "$root/build/gw" --listen 127.0.0.1 --port "$port" --data "$data" --demo \
  --web-root "$root/web-demo" --api-key-file "$data/api-key" \
  --cert "$tls/cert.pem" --key "$tls/key.pem" "$@"
