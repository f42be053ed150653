#!/usr/bin/env bash
# The load balancer config deploy/nginx/gw.conf, run for real: a PostgreSQL server of the
# test's own (tools/pg_server.sh), gateway nodes of build/gw on it, and Debian's nginx
# with the config rendered into a temporary folder, all on 127.0.0.1 at free ports.
#   1. plain ws through nginx to two --insecure nodes (the template's plain form), and
#      TLS terminated at nginx (its "#tls#" lines): health, a session that signs in,
#      joins, sends and pulls its messages back, sessions spread over both nodes, the
#      timeouts against the gateway's ping;
#   2. TLS from nginx to two nodes that serve it themselves (its "#node-tls#" lines,
#      nginx verifying the nodes' certificates).
# Installs nothing (tools/setup.sh does: nginx-light). Run as root (nginx's master as
# root, its workers as nobody); needs build/ built. Every process it starts is stopped
# on exit, every wait is bounded. Prints ok/FAIL per check and ends with one line
# "deploy: N passed, N failed"; exits non-zero on any failure.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
gw=$root/build/gw
cli=$root/build/tools/gw_cli
mint=$root/build/tools/gw_token
template=$root/deploy/nginx/gw.conf
nginx=$(command -v nginx || echo /usr/sbin/nginx)

suite=deploy fail_mark=FAIL poll=0.1
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$root/tests/deploy/lib.sh"
check() { # DESCRIPTION CMD...: ok when CMD succeeds
  local what=$1; shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

for need in "$gw" "$cli" "$mint" "$nginx"; do
  [ -x "$need" ] || { fail "$need is missing (tools/setup.sh installs and builds it)"; finish; }
done

# Everything lives in one folder; nginx's workers (nobody) may pass through it to their
# own temp folders, nothing more. The database's folder is under /tmp, where the
# postgres user can reach it (tools/pg_server.sh).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gw-deploy-XXXXXX")
chmod 711 "$tmp"
pgdir=$(mktemp -d /tmp/gw-deploy-pg-XXXXXX)
pids=() # gw nodes, nginx instances, clients: stopped in the trap

cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  # gw drains within five seconds; nginx stops at once on TERM.
  for pid in "${pids[@]}"; do
    timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  done
  "$root/tools/pg_server.sh" stop "$pgdir" >/dev/null 2>&1
  rm -rf "$tmp" "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nobody listens on, below the ephemeral range (tools/pg_server.sh says why).
free_port() { "$root/tools/pg_server.sh" free-port; }

# ---- the database and the nodes ---------------------------------------------------------
if ! base=$("$root/tools/pg_server.sh" start "$pgdir"); then
  fail "PostgreSQL did not start"; finish
fi
# One database for every node, as in production.
timeout 30 psql -q "$base" -c 'CREATE DATABASE gw' >/dev/null || { fail "CREATE DATABASE"; finish; }
store=$("$root/tools/pg_server.sh" url "$pgdir" gw)

# One token secret for every node: a token must be good on whichever node nginx picks.
secret=$tmp/secret
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"
chmod 600 "$secret"

# The node's name, where this build has the flag.
node_flag=0
"$gw" --help | grep -q -- '--node' && node_flag=1

# Starts node NAME (extra flags after it); its port ends up in $tmp/NAME/port.
start_node() { # NAME [FLAGS...]
  local name=$1; shift
  mkdir -p "$tmp/$name"
  local extra=()
  ((node_flag)) && extra=(--node "$name")
  # --rate-conns 0 --conns-per-address 0: behind nginx every client has nginx's address (deploy/nginx/gw.conf).
  "$gw" --listen 127.0.0.1 --port 0 --port-file "$tmp/$name/port" --data "$tmp/$name" \
    --store "$store" --secret-file "$secret" --rate-conns 0 --conns-per-address 0 --log-level 1 "${extra[@]}" "$@" \
    >"$tmp/$name/log" 2>&1 &
  pids+=($!)
  if ! wait_for 20 test -s "$tmp/$name/port"; then
    fail "node $name did not start listening (its log follows)"; cat "$tmp/$name/log"; return 1
  fi
}
port_of() { cat "$tmp/$1/port"; }

# ---- nginx --------------------------------------------------------------------------------
# Renders the template: sed expressions from the arguments, then checks that no
# placeholder is left outside the comments.
render() { # OUT SED-ARGS...
  local out=$1; shift
  sed "$@" "$template" >"$out" || return 1
  if grep -v '^[[:space:]]*#' "$out" | grep -qE '@[A-Z0-9_]+@'; then
    echo "placeholders left in $out:"; grep -nE '^[^#]*@[A-Z0-9_]+@' "$out"; return 1
  fi
}
# An nginx of the test's own around a rendered gw.conf, in prefix $tmp/NAME: its pid,
# logs and temp files there, nothing under /var; in the foreground (daemon off) so that
# its pid is ours to stop.
nginx_main() { # NAME: the main config, including gw.conf from the same folder
  local p=$tmp/$1
  cat >"$p/nginx.conf" <<CONF
worker_processes 1;
pid $p/nginx.pid;
error_log $p/error.log warn;
events { worker_connections 1024; }
http {
    access_log $p/access.log;
    client_body_temp_path $p/tmp/body;
    proxy_temp_path $p/tmp/proxy;
    fastcgi_temp_path $p/tmp/fastcgi;
    uwsgi_temp_path $p/tmp/uwsgi;
    scgi_temp_path $p/tmp/scgi;
    include $p/gw.conf;
}
CONF
}
start_nginx() { # NAME PORT...: ports it must be listening on
  local name=$1 p=$tmp/$1; shift
  mkdir -p "$p/tmp"
  chmod 755 "$p" "$p/tmp"
  nginx_main "$name"
  if ! timeout 30 "$nginx" -t -q -p "$p" -e "$p/error.log" -c "$p/nginx.conf"; then
    fail "nginx -t ($name): the rendered config is refused"; cat "$p/error.log"; return 1
  fi
  ok "nginx -t ($name) accepts the rendered config"
  "$nginx" -p "$p" -e "$p/error.log" -c "$p/nginx.conf" -g 'daemon off;' &
  pids+=($!)
  local port
  for port in "$@"; do
    if ! wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$port/" --max-time 1; then
      # A TLS port answers plain HTTP with a 400 page: curl succeeds either way.
      fail "nginx ($name) is not listening on $port"; cat "$p/error.log"; return 1
    fi
  done
}

# ---- what is checked through nginx --------------------------------------------------------
token_of() { "$mint" --user "$1" --ttl 600 --secret-file "$secret"; }
# gw_cli through URL as user, with its flags and command.
cli() { # URL USER ARGS...
  local url=$1 user=$2; shift 2
  local tls=()
  [[ $url == wss:* ]] && tls=(--insecure) # nginx's and the nodes' test certificates
  timeout 30 "$cli" --url "$url" --token "$(token_of "$user")" --timeout 10 --retry 0 \
    "${tls[@]}" "$@"
}
healthz_ok() { # BASE-URL
  local body
  body=$(curl -sk --max-time 5 -w ' %{http_code}' "$1/healthz") && [ "$body" = "ok
 200" ]
}
# A user joins a group, sends three messages, and pulls them back, each step on its own
# connection through URL (so on whichever node nginx picks each time).
session_roundtrip() { # URL USER GID
  local url=$1 user=$2 gid=$3 i out
  cli "$url" "$user" join "$gid" >/dev/null || { echo "join failed"; return 1; }
  for i in 1 2 3; do
    cli "$url" "$user" send "$gid" "message $i via nginx" >/dev/null || { echo "send $i failed"; return 1; }
  done
  out=$(cli "$url" "$user" --json pull "$gid" --after 0) || { echo "pull failed"; return 1; }
  for i in 1 2 3; do
    grep -q "\"body\":\"message $i via nginx\"" <<<"$out" || { echo "pull lacks message $i: $out"; return 1; }
  done
}
# The gateway's figure connections.now (open WebSocket sessions) of one node, directly.
sessions_on() { # NODE
  curl -s --max-time 5 "http://127.0.0.1:$(port_of "$1")/stats" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["connections"]["now"])'
}
sessions_total_is() { # N NODE...
  local want=$1 sum=0 n node; shift
  for node in "$@"; do n=$(sessions_on "$node") || return 1; sum=$((sum + n)); done
  [ "$sum" -eq "$want" ]
}
# An nginx time ("120s", "2m", "90") in seconds.
seconds_of() {
  local v=$1
  case "$v" in
    *ms) echo 0 ;;
    *s) echo "${v%s}" ;;
    *m) echo $((${v%m} * 60)) ;;
    *h) echo $((${v%h} * 3600)) ;;
    *d) echo $((${v%d} * 86400)) ;;
    *) echo "$v" ;;
  esac
}
# An idle session sees a ping every --ping seconds and is dropped by the gateway after
# twice that: nginx must allow more silence than that, or it cuts idle sessions itself.
# (Waiting out the idle time for real would take minutes.)
timeout_above_ping() { # CONF DIRECTIVE
  local ping v
  ping=$("$gw" --help | sed -nE 's/.*--ping S .*\(default ([0-9]+)\).*/\1/p')
  v=$(sed -nE "s/^[[:space:]]*$2[[:space:]]+([0-9]+[a-z]*);.*/\1/p" "$1" | head -n 1)
  [ -n "$ping" ] && [ -n "$v" ] || { echo "no $2 in $1, or no --ping default in gw --help"; return 1; }
  echo "  $2 $v, gateway ping ${ping} s (hang-up after $((2 * ping)) s)"
  [ "$(seconds_of "$v")" -gt $((2 * ping)) ]
}

# ---- 1. plain nodes: nginx in plain HTTP and with TLS terminated -------------------------
echo "== nginx in front of two plain (--insecure) nodes"
start_node a --insecure && start_node b --insecure || finish
lb=$(free_port) lbtls=$(free_port)
mkdir -p "$tmp/lb"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$tmp/lb/tls.key" -out "$tmp/lb/tls.crt" >/dev/null 2>&1 || fail "openssl: a test certificate"
if render "$tmp/lb/gw.conf" -e 's/#tls# //' -e "s/@LISTEN@/127.0.0.1:$lb/" \
     -e "s/@TLS_LISTEN@/127.0.0.1:$lbtls/" -e "s|@TLS_CERT@|$tmp/lb/tls.crt|" \
     -e "s|@TLS_KEY@|$tmp/lb/tls.key|" -e "s/@NODE1@/127.0.0.1:$(port_of a)/" \
     -e "s/@NODE2@/127.0.0.1:$(port_of b)/" -e 's/@NODE_SCHEME@/http/'; then
  ok "the template renders with no placeholder left (plain nodes, TLS at nginx)"
else
  fail "the template renders with no placeholder left (plain nodes, TLS at nginx)"
fi
start_nginx lb "$lb" "$lbtls" || finish

check "proxy_read_timeout is above twice the gateway's ping interval" \
  timeout_above_ping "$tmp/lb/gw.conf" proxy_read_timeout
check "proxy_send_timeout is above twice the gateway's ping interval" \
  timeout_above_ping "$tmp/lb/gw.conf" proxy_send_timeout
check "GET /healthz through nginx is 200 ok" healthz_ok "http://127.0.0.1:$lb"
check "GET /healthz through nginx over TLS is 200 ok" healthz_ok "https://127.0.0.1:$lbtls"
check "GET /metrics through nginx is refused (403): figures are scraped per node" \
  test "$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://127.0.0.1:$lb/metrics")" = 403
check "a session through nginx (ws://) signs in, joins, sends and pulls its messages" \
  session_roundtrip "ws://127.0.0.1:$lb/ws" alice g-plain
check "a session through nginx (wss://, TLS at nginx) signs in, joins, sends and pulls" \
  session_roundtrip "wss://127.0.0.1:$lbtls/ws" bob g-tls

# Sessions that stay open (tail), opened one after the other: least_conn puts them on
# both nodes. Counted on each node directly.
for i in 1 2 3 4 5 6; do
  cli "ws://127.0.0.1:$lb/ws" "carol$i" join g-plain >/dev/null
  # Not through cli(): the pid kept must be the client's own (timeout's), for the trap.
  timeout 30 "$cli" --url "ws://127.0.0.1:$lb/ws" --token "$(token_of "carol$i")" --retry 0 \
    tail g-plain --seconds 25 >"$tmp/tail$i.log" 2>&1 &
  pids+=($!)
  sleep 0.2
done
if wait_for 15 sessions_total_is 6 a b; then
  na=$(sessions_on a) nb=$(sessions_on b)
  echo "  open sessions: node a $na, node b $nb"
  if [ "$na" -gt 0 ] && [ "$nb" -gt 0 ]; then
    ok "6 sessions through nginx are spread over both nodes"
  else
    fail "6 sessions through nginx are spread over both nodes"
  fi
else
  fail "6 sessions through nginx are open on the nodes (a: $(sessions_on a), b: $(sessions_on b))"
  tail -n 3 "$tmp"/tail*.log
fi

# ---- 2. nodes that serve TLS themselves, verified by nginx -------------------------------
echo "== nginx in front of two TLS nodes (gw's default), verifying their certificates"
start_node c && start_node d || finish
lb2=$(free_port)
mkdir -p "$tmp/lb2"
# Each node made a self-signed certificate for localhost at its first start: nginx trusts
# those two.
cat "$tmp/c/tls/cert.pem" "$tmp/d/tls/cert.pem" >"$tmp/lb2/nodes-ca.pem"
if render "$tmp/lb2/gw.conf" -e 's/#node-tls# //' -e "s/@LISTEN@/127.0.0.1:$lb2/" \
     -e "s/@NODE1@/127.0.0.1:$(port_of c)/" -e "s/@NODE2@/127.0.0.1:$(port_of d)/" \
     -e 's/@NODE_SCHEME@/https/' -e "s|@NODE_CA@|$tmp/lb2/nodes-ca.pem|"; then
  ok "the template renders with no placeholder left (TLS to the nodes)"
else
  fail "the template renders with no placeholder left (TLS to the nodes)"
fi
if start_nginx lb2 "$lb2"; then
  check "GET /healthz through nginx to a TLS node is 200 ok" healthz_ok "http://127.0.0.1:$lb2"
  check "a session through nginx to the TLS nodes signs in, joins, sends and pulls" \
    session_roundtrip "ws://127.0.0.1:$lb2/ws" dave g-node-tls
fi
# The same with a CA that did not sign the nodes' certificates: nginx must refuse them
# (502), or it was not verifying at all.
lb3=$(free_port)
mkdir -p "$tmp/lb3"
render "$tmp/lb3/gw.conf" -e 's/#node-tls# //' -e "s/@LISTEN@/127.0.0.1:$lb3/" \
  -e "s/@NODE1@/127.0.0.1:$(port_of c)/" -e "s/@NODE2@/127.0.0.1:$(port_of d)/" \
  -e 's/@NODE_SCHEME@/https/' -e "s|@NODE_CA@|$tmp/lb/tls.crt|" || fail "render (wrong CA)"
if start_nginx lb3 "$lb3"; then
  code=$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' "http://127.0.0.1:$lb3/healthz")
  if [ "$code" = 502 ]; then
    ok "nginx refuses nodes whose certificate its CA did not sign (502)"
  else
    fail "nginx refuses nodes whose certificate its CA did not sign (got $code, not 502)"
  fi
fi

finish
