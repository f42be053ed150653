#!/usr/bin/env bash
# tools/setup.sh on machines it cannot be run on here: a fresh Debian 12 that has none of
# its packages, one that has some of them, one that has them all, and one where apt-get
# fails. CI's machine has every package already, so only this sees the fresh path.
#
#   tests/setup/test_setup.sh [SETUP_SH]     (default: tools/setup.sh of this repository)
#
# Each machine is a temporary folder holding a copy of SETUP_SH and the npm lock files it
# reads, and a PATH on which dpkg-query, apt-get, npm and node are stand-ins (every other
# command is the real one): dpkg-query knows the packages the machine has, as the real
# one answers (exit 1 and "no packages found" for the others), apt-get records what it is
# asked and, once it has installed them, puts npm and node on the PATH, and npm records
# its calls and makes node_modules. setup.sh runs with --no-build. Ends with
# "setup-test: N passed, N failed".
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
setup=${1:-$root/tools/setup.sh}
work=$(mktemp -d "${TMPDIR:-/tmp}/gw-setup-test-XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
passed=0 failed=0

ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
# The words of a file, one a line, sorted: sets to compare.
words() { tr ' ' '\n' <"$1" | grep -v '^$' | sort -u; }

# The real commands, less those a machine's stand-ins replace (and node and npm, which a
# fresh machine lacks until apt-get installs them).
sysbin="$work/sysbin"
mkdir -p "$sysbin"
for d in /usr/local/bin /usr/bin /bin /usr/sbin /sbin; do
  for f in "$d"/*; do
    n=${f##*/}
    case "$n" in dpkg-query|apt-get|sudo|node|nodejs|npm|npx) continue ;; esac
    [ -x "$f" ] && [ ! -e "$sysbin/$n" ] && ln -s "$f" "$sysbin/$n"
  done
done

# A machine: MODE is what dpkg knows (none, some, all) or apt-fails (knows none, and
# apt-get install fails as it does for a package it cannot find).
machine() { # NAME MODE
  local m="$work/$1" mode=$2
  mkdir -p "$m/bin" "$m/repo/tools"
  cp "$setup" "$m/repo/tools/setup.sh"
  for d in clients/js web-demo tests/browser; do
    mkdir -p "$m/repo/$d" && cp "$root/$d/package-lock.json" "$m/repo/$d/"
  done
  : >"$m/asked" ; : >"$m/known"; : >"$m/apt.log"; : >"$m/npm.log"
  # dpkg-query -W -f=FORMAT PKG...: a line per package it knows; "no packages found
  # matching" on stderr and exit 1 when any is unknown, as Debian's does. "some" knows
  # every other one, and one more only as removed (config files left): that one is
  # still missing.
  cat >"$m/bin/dpkg-query" <<EOF
#!/bin/bash
rc=0 i=0
for a in "\$@"; do
  case "\$a" in -*) continue ;; esac
  echo "\$a" >>"$m/asked"
  i=\$((i + 1))
  case "$mode" in
    all) state="install ok installed" ;;
    some) if ((i % 2)); then state="install ok installed"; elif ((i == 2)); then state="deinstall ok config-files"; else state=""; fi ;;
    *) state="" ;;
  esac
  if [ -n "\$state" ]; then
    echo "\$a \$state"
    [ "\$state" = "install ok installed" ] && echo "\$a" >>"$m/known"
  else
    echo "dpkg-query: no packages found matching \$a" >&2; rc=1
  fi
done
exit \$rc
EOF
  cat >"$m/bin/apt-get" <<EOF
#!/bin/bash
echo "\$*" >>"$m/apt.log"
if [ "\$1" = install ]; then
  if [ "$mode" = apt-fails ]; then echo "E: Unable to locate package libwebsockets-dev" >&2; exit 100; fi
  for a in "\$@"; do
    case "\$a" in
      npm) printf '#!/bin/bash\\necho "\$PWD \$*" >>"$m/npm.log"\\nmkdir -p node_modules\\n' >"$m/bin/npm"; chmod +x "$m/bin/npm" ;;
      nodejs) printf '#!/bin/sh\\necho v18.19.0\\n' >"$m/bin/node"; chmod +x "$m/bin/node" ;;
    esac
  done
fi
exit 0
EOF
  printf '#!/bin/sh\nexec "$@"\n' >"$m/bin/sudo"
  if [ "$mode" = some ] || [ "$mode" = all ]; then # node and npm are there already
    printf '#!/bin/bash\necho "$PWD $*" >>"%s/npm.log"\nmkdir -p node_modules\n' "$m" >"$m/bin/npm"
    printf '#!/bin/sh\necho v18.19.0\n' >"$m/bin/node"
  fi
  chmod +x "$m"/bin/*
}

run_setup() { # NAME: its output in NAME/out, its exit code returned
  local m="$work/$1"
  (cd "$m" && PATH="$m/bin:$sysbin" timeout 60 bash repo/tools/setup.sh --no-build) \
    >"$m/out" 2>&1
}

# The packages apt-get was asked to install (its words after "install" less options).
apt_installed() { # NAME
  grep '^install ' "$work/$1/apt.log" | tr ' ' '\n' | grep -v -e '^-' -e '^install$' -e '^$' | sort -u
}

show() { sed 's/^/    /' "$work/$1/out" | tail -n 8; }

# ---- a fresh machine: dpkg knows none of the packages ----------------------------------
machine fresh none
run_setup fresh; rc=$?
if [ $rc -eq 0 ]; then ok "fresh machine: setup.sh exits 0"; else bad "fresh machine: setup.sh exits $rc"; show fresh; fi
if [ "$(words "$work/fresh/asked" | wc -l)" -ge 20 ] && grep -qx libwebsockets-dev "$work/fresh/asked"; then
  ok "fresh machine: dpkg was asked about $(words "$work/fresh/asked" | wc -l) packages"
else
  bad "fresh machine: dpkg was asked about $(words "$work/fresh/asked" | tr '\n' ' ')"
fi
grep -q '^update' "$work/fresh/apt.log" && ok "fresh machine: apt-get update" ||
  bad "fresh machine: no apt-get update (apt-get was asked: $(tr '\n' ';' <"$work/fresh/apt.log"))"
if diff <(words "$work/fresh/asked") <(apt_installed fresh) >/dev/null &&
   apt_installed fresh | grep -qx nodejs && apt_installed fresh | grep -qx npm; then
  ok "fresh machine: apt-get install of every package, node and npm among them"
else
  bad "fresh machine: apt-get install asked for a set other than all the packages:"
  diff <(words "$work/fresh/asked") <(apt_installed fresh) | sed 's/^/    /'
fi
if [ "$(cut -d' ' -f2 "$work/fresh/npm.log" | sort | uniq -c | awk '$2 == "ci" {print $1}')" = 3 ]; then
  ok "fresh machine: npm ci in clients/js, web-demo and tests/browser"
else
  bad "fresh machine: npm was asked: $(tr '\n' ';' <"$work/fresh/npm.log")"
fi
# And again: nothing more to install, no npm ci (the lock files did not change).
: >"$work/fresh/apt.log"; : >"$work/fresh/npm.log"
printf '#!/bin/bash\nfor a in "$@"; do case "$a" in -*) ;; *) echo "$a install ok installed";; esac; done\n' \
  >"$work/fresh/bin/dpkg-query"
run_setup fresh; rc=$?
if [ $rc -eq 0 ] && [ ! -s "$work/fresh/apt.log" ] && [ ! -s "$work/fresh/npm.log" ]; then
  ok "fresh machine, second run: exits 0, asks apt-get and npm nothing"
else
  bad "fresh machine, second run: exit $rc, apt-get: $(tr '\n' ';' <"$work/fresh/apt.log") npm: $(tr '\n' ';' <"$work/fresh/npm.log")"
fi

# ---- dpkg knows some of them -----------------------------------------------------------
machine some some
run_setup some; rc=$?
if [ $rc -eq 0 ]; then ok "partial machine: setup.sh exits 0"; else bad "partial machine: setup.sh exits $rc"; show some; fi
want=$(comm -23 <(words "$work/some/asked") <(words "$work/some/known"))
if [ -n "$want" ] && [ -s "$work/some/known" ] && [ "$want" = "$(apt_installed some)" ]; then
  ok "partial machine: apt-get install of exactly the $(wc -l <<<"$want") missing packages"
else
  bad "partial machine: apt-get install asked for other packages than the missing ones:"
  diff <(echo "$want") <(apt_installed some) | sed 's/^/    /'
fi

# ---- dpkg knows all of them ------------------------------------------------------------
machine all all
for d in clients/js web-demo tests/browser; do # installed from these very lock files
  mkdir -p "$work/all/repo/$d/node_modules"
  sha256sum "$work/all/repo/$d/package-lock.json" | cut -d' ' -f1 \
    >"$work/all/repo/$d/node_modules/.gw-installed-from"
done
run_setup all; rc=$?
if [ $rc -eq 0 ]; then ok "complete machine: setup.sh exits 0"; else bad "complete machine: setup.sh exits $rc"; show all; fi
if [ -s "$work/all/asked" ] && [ ! -s "$work/all/apt.log" ] && [ ! -s "$work/all/npm.log" ]; then
  ok "complete machine: apt-get and npm asked nothing"
else
  bad "complete machine: apt-get was asked: $(tr '\n' ';' <"$work/all/apt.log") npm: $(tr '\n' ';' <"$work/all/npm.log")"
fi

# ---- apt-get fails: setup.sh says which step, with apt-get's own error -----------------
machine broken apt-fails
run_setup broken; rc=$?
if [ $rc -ne 0 ] && grep -q 'E: Unable to locate package' "$work/broken/out" &&
   grep -q '^setup: failed while installing .*apt-get install' "$work/broken/out"; then
  ok "apt-get failing: setup.sh exits $rc, names the step and shows apt-get's error"
else
  bad "apt-get failing: exit $rc, and it printed:"; show broken
fi

echo "setup-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
