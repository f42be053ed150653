#!/usr/bin/env bash
# The C client library as a user installs it (docs/CLIENT.md): cmake --install into a
# temporary prefix, then docs/CLIENT.md's example program, taken from the page as
# printed, built with pkg-config against what was installed and run against the
# installed gw. Prints "install: N passed, M failed" last; exits 1 if anything failed.
#   tests/clients/test_install.sh [BUILD_DIR]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
tmp=$(mktemp -d /tmp/gw-install-XXXXXX)
gw_pid=
cleanup() { [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; failed=$((failed + 1)); }
finish() { echo "install: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

prefix=$tmp/prefix
if cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1; then
  ok "cmake --install into a prefix"
else
  cat "$tmp/install.log"; fail "cmake --install into a prefix"; finish
fi
missing=""
for f in lib/libgwc.a lib/libgw_proto.a include/gw/gwc.h include/gw/proto.h \
         lib/pkgconfig/gwc.pc bin/gw bin/gw_cli bin/gw_token bin/gw_load bin/gw_crash; do
  [ -e "$prefix/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "it installs the library, headers, gwc.pc and the programs" \
                  || fail "installed files missing:$missing"

# The example exactly as docs/CLIENT.md prints it.
sed -n '/^<!-- example: file hello_gw.c/,/^<!-- end of example -->/p' "$root/docs/CLIENT.md" |
  sed '1,2d;$d' | sed '$d' > "$tmp/hello_gw.c"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
if [ -s "$tmp/hello_gw.c" ] &&
   cc -std=c11 -Wall -Werror "$tmp/hello_gw.c" $(pkg-config --cflags --libs gwc) \
      -o "$tmp/hello_gw" 2> "$tmp/cc.log"; then
  ok "docs/CLIENT.md's example builds with pkg-config --cflags --libs gwc"
else
  cat "$tmp/cc.log"; fail "docs/CLIENT.md's example builds with pkg-config"; finish
fi

"$prefix/bin/gw" --insecure --listen 127.0.0.1 --port 0 --port-file "$tmp/port" \
  --data "$tmp/data" > "$tmp/gw.log" 2>&1 &
gw_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
token=$("$prefix/bin/gw_token" --user alice --secret-file "$tmp/data/token-secret")
out=$(timeout 30 "$tmp/hello_gw" "ws://127.0.0.1:$(cat "$tmp/port")/ws" "$token" lobby)
rc=$?
echo "$out"
if [ $rc -eq 0 ] && grep -q '^welcome alice$' <<<"$out" && grep -q '^joined, last mid 0$' <<<"$out" &&
   grep -q '^sent mid 1$' <<<"$out"; then
  ok "the example signs in, joins and sends against the installed gw"
else
  fail "the example against the installed gw (exit $rc)"
fi
finish
