#!/usr/bin/env bash
# The gateway's benchmark suite, each peer server measured in the same run.
#   tools/bench/run.sh [--runs N] [--seconds S] [--quick] [--raw FILE]
#                      [--sizes "100 1000 10000"] [--idle-sizes "10000 50000"]
#                      [--gw-flags "FLAGS"] [WORKLOAD...]
# WORKLOAD: w1 w2 w3 w4 w5 w6 storage (default: all). Every figure is the median of N
# runs (default 3; --quick: 1 run of 2 s, small sizes only). Prints Markdown tables for
# docs/BENCHMARKS.md; w1 also keeps its medians in tools/bench/results/w1.tsv (a row per
# group size and server, replaced when measured again) and draws docs/bench-w1.svg.
# --gw-flags: extra flags for every gateway started (say so beside the figures).
#   w1 fan-out: one sender flat out, groups of 100, 1,000, 10,000: deliveries/s and per
#      server CPU second. Peers: libwebsockets-test-server (lws-mirror-protocol), a
#      Node.js `ws` broadcast server, nginx + nchan.
#   w2 durable sends (sync on) at 1, 64, 1,024 senders, messages per fsync; peer db_bench.
#   w3 send-to-deliver latency at 25/50/75% of w1's maximum for a group of 100.
#   w4 idle sessions (10,000 and 50,000): server RSS per session, CPU while idle.
#   w5 offline pull: 25,000 unread over 40 groups, pages of 100 and 500: messages/s.
#   w6 acks: ack frames per delivered message and ack writes/s, batched vs per message.
#   storage: bytes on disk per message, a group of 500 with 200 offline, vs mosquitto.
# Servers bind 127.0.0.1 only; everything started is stopped on exit and on Ctrl-C.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tools/bench/lib.sh"

runs=3 secs=5 quick= rawlog=/dev/null
work=() w1_sizes=() w4_sizes=() gw_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --quick) quick=1 runs=1 secs=2; shift ;;
    --raw) rawlog=$2; shift 2 ;;
    --sizes) read -ra w1_sizes <<<"$2"; shift 2 ;;
    --idle-sizes) read -ra w4_sizes <<<"$2"; shift 2 ;;
    w1|w2|w3|w4|w5|w6|storage) work+=("$1"); shift ;;
    --gw-flags) read -ra gw_flags <<<"$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#work[@]} -gt 0 ] || work=(w1 w2 w3 w4 w5 w6 storage)
want() { local w; for w in "${work[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }

load="$root/build/tools/gw_load"
[ -x "$load" ] && [ -x "$root/build/gw" ] || {
  echo "run.sh: build first: cmake --build $root/build -j2" >&2; exit 1; }
for c in libwebsockets-test-server node nginx db_bench; do
  command -v "$c" >/dev/null || { echo "run.sh: $c missing (see docs/BENCHMARKS.md)" >&2; exit 1; }
done
[ -d "$root/tools/bench/peers/node_modules/ws" ] ||
  (cd "$root/tools/bench/peers" && npm ci --no-audit --no-fund >/dev/null)

# One socket per session, on both sides: the hard limit is raised as far as root may.
ulimit -Hn 200000 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
export GW_SECRET=${GW_SECRET:-gw-bench-secret-0123456789}
bench_init
say() { echo "run.sh: $*" >&2; }

# gwload TAG ARGS...: one bounded gw_load run; prints its JSON line ("" if it failed).
gwload() {
  local tag=$1 out rc=0
  shift
  out=$(timeout 600 "$load" --json "$@" 2>"$BENCH_WORK/load.err") || rc=$?
  out=$(grep '^{' <<<"$out" | tail -1 || true)
  if [ "$rc" -ne 0 ]; then
    say "$tag: gw_load exited $rc: $(grep -v '^gw_load: [0-9]* s:' "$BENCH_WORK/load.err" | tail -2 | tr '\n' ' ')"
  fi
  [ -n "$out" ] && echo "$tag $out" >>"$rawlog"
  echo "$out"
}

# Fan-out target per server kind: the gw_load arguments after the server started.
target() {
  local ws=ws
  [ -z "${BENCH_TLS:-}" ] || ws=wss
  case "$1" in
    gw) echo "--url $ws://127.0.0.1:$SRV_PORT/ws" ;;
    lws) echo "--raw $ws://127.0.0.1:$SRV_PORT/ --raw-protocol lws-mirror-protocol" ;;
    node) echo "--raw $ws://127.0.0.1:$SRV_PORT/" ;;
    nchan) echo "--raw $ws://127.0.0.1:$SRV_PORT/sub --raw-pub $ws://127.0.0.1:$SRV_PORT/pub" ;;
  esac
}
start_kind() {
  case "$1" in
    gw) start_gw gw ${gw_flags[@]+"${gw_flags[@]}"} ;;
    lws) start_lws ;;
    node) start_node ;;
    nchan) start_nchan ;;
  esac
}
sources_for() { echo $(( $1 / 5000 + 1 )); }

peers=(gw lws node nchan)
declare -A name=([gw]="gateway" [lws]="lws-test-server" [node]="node ws" [nchan]="nginx+nchan")

# ---- W1: fan-out ----------------------------------------------------------------------
declare -A W1_D W1_C W1_LU W1_SU
if [ ${#w1_sizes[@]} -eq 0 ]; then
  w1_sizes=(100 1000 10000)
  [ -z "$quick" ] || w1_sizes=(100 1000)
fi
if [ ${#w4_sizes[@]} -eq 0 ]; then
  # 50,000 sessions need 50,000 sockets in one server process (and as many in gw_load).
  # Where the open-files hard limit is lower and cannot be raised (no CAP_SYS_RESOURCE),
  # the largest size is what the limit allows, with room for the process's other files.
  w4_max=$(( $(ulimit -Hn) - 500 ))
  [ "$w4_max" -lt 50000 ] || w4_max=50000
  w4_sizes=(10000 "$w4_max")
  [ "$w4_max" -gt 10000 ] || w4_sizes=("$w4_max")
  [ -z "$quick" ] || w4_sizes=(10000)
  [ "$w4_max" -ge 50000 ] || ! want w4 ||
    say "w4: open-files hard limit $(ulimit -Hn): largest size $w4_max, not 50000"
fi
results="$root/tools/bench/results"
w1() {
  local m k r d c lu su out
  for m in "${w1_sizes[@]}"; do
    declare -A dl=() cl=() lul=() sul=()
    for ((r = 0; r < runs; r++)); do
      for k in "${peers[@]}"; do
        start_kind "$k" || { say "w1 $m members, $k: did not start"; stop_srv; continue; }
        # shellcheck disable=SC2046
        out=$(gwload "w1 $k $m" $(target "$k") --sessions "$m" --group-size "$m" --senders 1 \
              --seconds "$secs" --sources "$(sources_for "$m")" --server-pid "$SRV_PID")
        stop_srv
        # Per second of delivering: up to the last delivery, not the drain after it.
        d=$(field "$out" deliveries_per_active_s) c=$(field "$out" server_cpu_s)
        if [ -n "$d" ]; then
          dl[$k]+=" $d"
          cl[$k]+=" $(awk -v d="$(field "$out" deliveries)" -v c="$c" 'BEGIN{print (c>0)?d/c:0}')"
          lul[$k]+=" $(field "$out" load_cpu_us_per_delivery)"
          sul[$k]+=" $(field "$out" server_cpu_us_per_delivery)"
        fi
        say "w1 $m members, $k, run $((r + 1)): ${d:-failed} deliveries/s"
      done
    done
    for k in "${peers[@]}"; do
      # shellcheck disable=SC2086
      W1_D[$k,$m]=$(med ${dl[$k]:-}) W1_C[$k,$m]=$(med ${cl[$k]:-})
      # shellcheck disable=SC2086
      W1_LU[$k,$m]=$(med ${lul[$k]:-}) W1_SU[$k,$m]=$(med ${sul[$k]:-})
    done
    unset dl cl lul sul
  done
  echo
  echo "### W1 fan-out ($runs runs of ${secs} s, median)"
  echo
  echo "| members | server | deliveries/s | deliveries per server CPU s | gw/peer deliveries/s | gw/peer per CPU s | server us/delivery | gw_load us/delivery |"
  echo "|---|---|---|---|---|---|---|---|"
  for m in "${w1_sizes[@]}"; do
    for k in "${peers[@]}"; do
      local rd="" rc=""
      [ "$k" = gw ] || { rd=$(ratio "${W1_D[gw,$m]}" "${W1_D[$k,$m]}"); rc=$(ratio "${W1_C[gw,$m]}" "${W1_C[$k,$m]}"); }
      row '| %d | %s | %.0f | %.0f | %s | %s | %.2f | %.2f |\n' "$m" "${name[$k]}" \
        "${W1_D[$k,$m]}" "${W1_C[$k,$m]}" "$rd" "$rc" "${W1_SU[$k,$m]}" "${W1_LU[$k,$m]}"
    done
  done
  # Keep the medians (other group sizes measured before stay), then draw them all.
  mkdir -p "$results"
  touch "$results/w1.tsv"
  {
    for m in "${w1_sizes[@]}"; do
      for k in "${peers[@]}"; do
        printf '%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\n' "$m" "$k" "${W1_D[$k,$m]}" "${W1_C[$k,$m]}" \
          "${W1_SU[$k,$m]}" "${W1_LU[$k,$m]}" "$(date -u +%Y-%m-%d)"
      done
    done
    awk -v s=" ${w1_sizes[*]} " 'index(s, " " $1 " ") == 0' "$results/w1.tsv"
  } | sort -n -k1,1 -s >"$BENCH_WORK/w1.tsv"
  { echo "# members server deliveries_per_s deliveries_per_server_cpu_s server_us_per_delivery load_us_per_delivery date"
    grep -v '^#' "$BENCH_WORK/w1.tsv"; } >"$results/w1.tsv"
  w1_plot <"$results/w1.tsv" >"$root/docs/bench-w1.svg"
  say "wrote tools/bench/results/w1.tsv and docs/bench-w1.svg"
}

# The plot, from results/w1.tsv on stdin: two panels (deliveries/s; deliveries per server
# CPU second), bars grouped by group size, one bar per server, linear axes from 0.
w1_plot() {
  python3 -c '
import sys
rows = [l.split() for l in sys.stdin if l.strip() and not l.startswith("#")]
names = {"gw": "gateway", "lws": "lws-test-server", "node": "node ws", "nchan": "nginx+nchan"}
colors = {"gw": "#1f77b4", "lws": "#7f7f7f", "node": "#2ca02c", "nchan": "#d62728"}
sizes = sorted({int(r[0]) for r in rows})
kinds = []
for r in rows:
    if r[1] not in kinds: kinds.append(r[1])
val = {(int(r[0]), r[1]): (float(r[2]), float(r[3])) for r in rows}
W, H, pad, top = 760, 380, 60, 50
panels = [("deliveries per second", 0), ("deliveries per server CPU second", 1)]
pw = (W - pad * 2) / len(panels)
out = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"11\">",
       f"<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>",
       f"<text x=\"{W/2}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">W1 fan-out, one sender, 200-byte bodies (median; tools/bench/run.sh)</text>"]
for pi, (title, idx) in enumerate(panels):
    x0 = pad + pi * pw
    ymax = max([v[idx] for v in val.values()] + [1])
    ph = H - top - 70
    out.append(f"<text x=\"{x0 + pw/2 - 20}\" y=\"{top - 8}\" text-anchor=\"middle\" font-size=\"12\">{title}</text>")
    out.append(f"<line x1=\"{x0}\" y1=\"{top+ph}\" x2=\"{x0+pw-40}\" y2=\"{top+ph}\" stroke=\"black\"/>")
    for t in range(5):
        y = top + ph - ph * t / 4
        out.append(f"<line x1=\"{x0}\" y1=\"{y}\" x2=\"{x0+pw-40}\" y2=\"{y}\" stroke=\"#ddd\"/>")
        out.append(f"<text x=\"{x0-4}\" y=\"{y+4}\" text-anchor=\"end\">{ymax*t/4/1000:.0f}k</text>")
    gw = (pw - 40) / len(sizes)
    bw = (gw - 16) / len(kinds)
    for si, m in enumerate(sizes):
        gx = x0 + si * gw + 8
        for ki, k in enumerate(kinds):
            v = val.get((m, k), (0, 0))[idx]
            h = ph * v / ymax
            col, nm = colors.get(k, "#999"), names.get(k, k)
            out.append(f"<rect x=\"{gx+ki*bw:.1f}\" y=\"{top+ph-h:.1f}\" width=\"{bw-2:.1f}\" height=\"{h:.1f}\" fill=\"{col}\"><title>{nm}, {m} members: {v:.0f}</title></rect>")
        out.append(f"<text x=\"{gx + (gw-16)/2}\" y=\"{top+ph+14}\" text-anchor=\"middle\">{m} members</text>")
lx = pad
for k in kinds:
    col, nm = colors.get(k, "#999"), names.get(k, k)
    out.append(f"<rect x=\"{lx}\" y=\"{H-28}\" width=\"12\" height=\"12\" fill=\"{col}\"/>")
    out.append(f"<text x=\"{lx+16}\" y=\"{H-18}\">{nm}</text>")
    lx += 150
out.append("</svg>")
print("\n".join(out))
'
}

# The gateway's W1 maximum for a group of 100 (measured here if w1 did not run).
w1_max100() {
  if [ -z "${W1_D[gw,100]:-}" ]; then
    local r out l=()
    for ((r = 0; r < runs; r++)); do
      start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
      out=$(gwload "w1max gw 100" --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 100 \
            --group-size 100 --seconds "$secs" --server-pid "$SRV_PID")
      stop_srv
      l+=("$(field "$out" deliveries_per_s)")
    done
    W1_D[gw,100]=$(med "${l[@]}")
  fi
  echo "${W1_D[gw,100]}"
}

# ---- W2: durable sends ----------------------------------------------------------------
stats() { curl -s --max-time 5 "http://127.0.0.1:$SRV_PORT/stats"; }
w2() {
  local n r out o=() f=() p=() e m0 c0 m1 c1 i
  echo
  echo "### W2 durable sends, sync on ($runs runs of ${secs} s, median)"
  echo
  echo "| senders | gateway confirmed sends/s | messages per fsync | db_bench fillrandom --sync=1 ops/s | ratio gateway/db_bench | gw_load CPU s per server CPU s |"
  echo "|---|---|---|---|---|---|"
  for n in 1 64 1024; do
    o=() f=() p=() e=()
    local lc=()
    for ((r = 0; r < runs; r++)); do
      start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
      # Every sender has a group of its own (no fan-out) and one send in flight: a
      # sender waits for its `sent` (written and fsynced) before the next, like a
      # db_bench thread waits for its synced Put.
      timeout 600 "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 \
        --senders "$n" --own-groups --window 1 --seconds "$secs" --sources 2 \
        --server-pid "$SRV_PID" >"$BENCH_WORK/w2.out" 2>"$BENCH_WORK/w2.err" &
      local lp=$!
      for ((i = 0; i < 1200; i++)); do
        grep -q 'running' "$BENCH_WORK/w2.err" 2>/dev/null && break
        kill -0 "$lp" 2>/dev/null || break
        sleep 0.05
      done
      local s0 s1
      s0=$(stats)
      wait "$lp" || say "w2 $n: gw_load exited $?"
      s1=$(stats)
      stop_srv
      out=$(grep '^{' "$BENCH_WORK/w2.out" | tail -1 || true)
      [ -n "$out" ] && echo "w2 gw $n $out" >>"$rawlog"
      m0=$(jget messages.stored <<<"$s0") c0=$(jget store.commits <<<"$s0")
      m1=$(jget messages.stored <<<"$s1") c1=$(jget store.commits <<<"$s1")
      o+=("$(field "$out" confirmed_per_s)")
      f+=("$(awk -v m=$((m1 - m0)) -v c=$((c1 - c0)) 'BEGIN{print (c>0)?m/c:0}')")
      lc+=("$(awk -v a="$(field "$out" load_cpu_s)" -v b="$(field "$out" server_cpu_s)" 'BEGIN{print (b>0)?a/b:0}')")
      rm -rf "$BENCH_WORK/db"
      e=$(db_bench --benchmarks=fillrandom --db="$BENCH_WORK/db" --sync=1 --threads="$n" \
          --value_size=200 --duration="$secs" --num=100000000 2>&1 |
          grep -E '^fillrandom +:' | sed -E 's/.* ([0-9]+) ops\/sec.*/\1/')
      p+=("$e")
      say "w2 $n senders, run $((r + 1)): gateway ${o[-1]}/s (${f[-1]} per fsync), db_bench ${e:-failed}/s"
    done
    local om pm
    om=$(med "${o[@]}") pm=$(med "${p[@]}")
    row '| %d | %.0f | %.1f | %.0f | %s | %.2f |\n' "$n" "$om" "$(med "${f[@]}")" "$pm" \
      "$(ratio "$om" "$pm")" "$(med "${lc[@]}")"
  done
}

# ---- W3: latency ----------------------------------------------------------------------
w3() {
  local max frac rate r out a b c d
  max=$(w1_max100)
  echo
  echo "### W3 send-to-deliver latency, group of 100 ($runs runs of ${secs} s, median)"
  echo
  echo "W1 maximum for 100 members: $(printf '%.0f' "$max") deliveries/s ($(awk -v m="$max" 'BEGIN{printf "%.0f", m/100}') sends/s)."
  echo
  echo "The same open-loop rate is also offered to libwebsockets-test-server (no storage, no"
  echo "acks, one frame per message): the latency of the stack and the load generator alone."
  echo
  echo "| load | server | sends/s | deliveries/s | p50 ms | p99 ms | p99.9 ms |"
  echo "|---|---|---|---|---|---|---|"
  local k
  for frac in 25 50 75; do
    rate=$(awk -v m="$max" -v f="$frac" 'BEGIN{printf "%.0f", m / 100 * f / 100}')
    for k in gw lws; do
      a=() b=() c=() d=()
      for ((r = 0; r < runs; r++)); do
        start_kind "$k"
        # shellcheck disable=SC2046
        out=$(gwload "w3 $k $frac" $(target "$k") --sessions 100 --group-size 100 \
              --rate "$rate" --seconds "$secs" --server-pid "$SRV_PID")
        stop_srv
        a+=("$(field "$out" deliveries_per_s)") b+=("$(field "$out" latency_us.p50)")
        c+=("$(field "$out" latency_us.p99)") d+=("$(field "$out" latency_us.p999)")
      done
      row '| %d%% | %s | %d | %.0f | %.2f | %.2f | %.2f |\n' "$frac" "${name[$k]}" "$rate" \
        "$(med "${a[@]}")" "$(awk -v v="$(med "${b[@]}")" 'BEGIN{print v/1000}')" \
        "$(awk -v v="$(med "${c[@]}")" 'BEGIN{print v/1000}')" \
        "$(awk -v v="$(med "${d[@]}")" 'BEGIN{print v/1000}')"
    done
  done
}

# ---- W6: acks -------------------------------------------------------------------------
w6() {
  local max rate mode r out s a b c e g
  max=$(w1_max100)
  rate=$(awk -v m="$max" 'BEGIN{printf "%.0f", m / 100 / 2}')
  echo
  echo "### W6 acks, group of 100 at $rate sends/s (50% of W1's maximum; $runs runs of ${secs} s, median)"
  echo
  echo "| client acks | deliveries/s | ack frames per delivered message | ack frames/s received | ack writes/s (store batches) | ack entries written/s | server us/delivery |"
  echo "|---|---|---|---|---|---|---|"
  for mode in batched per-message; do
    a=() b=() c=() e=() g=() s=()
    for ((r = 0; r < runs; r++)); do
      start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
      local extra=()
      [ "$mode" = batched ] || extra=(--ack-every 1)
      out=$(gwload "w6 gw $mode" --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 100 \
            --group-size 100 --rate "$rate" --seconds "$secs" --server-pid "$SRV_PID" "${extra[@]}")
      sleep 0.5 # the coalescer's last flush
      local st1 t
      st1=$(stats)
      stop_srv
      t=$(field "$out" seconds)
      a+=("$(field "$out" deliveries_per_s)")
      b+=("$(awk -v f="$(field "$out" ack_frames)" -v d="$(field "$out" deliveries)" 'BEGIN{print (d>0)?f/d:0}')")
      c+=("$(awk -v f="$(field "$out" ack_frames)" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')")
      e+=("$(awk -v f="$(jget acks.writes <<<"$st1")" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')")
      g+=("$(awk -v f="$(jget acks.entries_written <<<"$st1")" -v t="$t" 'BEGIN{print (t>0)?f/t:0}')")
      s+=("$(field "$out" server_cpu_us_per_delivery)")
    done
    row '| %s | %.0f | %.4f | %.0f | %.1f | %.0f | %.2f |\n' \
      "$([ "$mode" = batched ] && echo "batched (ack_every 50, ack_delay 1 s)" || echo "one per message")" \
      "$(med "${a[@]}")" "$(med "${b[@]}")" "$(med "${c[@]}")" "$(med "${e[@]}")" \
      "$(med "${g[@]}")" "$(med "${s[@]}")"
  done
}

# ---- W4: idle sessions ----------------------------------------------------------------
w4() {
  local m k r out base rss cpu t sizes=("${w4_sizes[@]}") idle=$((secs * 2))
  echo
  echo "### W4 idle sessions (wss://, held ${idle} s after set-up; $runs runs, median)"
  echo
  echo "| sessions | server | RSS per session (bytes) | server RSS (MiB) | CPU while idle (% of a core) | gw/peer RSS per session |"
  echo "|---|---|---|---|---|---|"
  declare -A R=() C=() M=()
  for m in "${sizes[@]}"; do
    for k in gw node nchan; do
      local rl=() cl=() ml=()
      for ((r = 0; r < runs; r++)); do
        BENCH_TLS=1 start_kind "$k" || { say "w4 $m $k: did not start"; stop_srv; continue; }
        base=$(rss_kib "$SRV_PID")
        # shellcheck disable=SC2046
        out=$(gwload "w4 $k $m" $(BENCH_TLS=1 target "$k") --idle --sessions "$m" --group-size 100 \
              --senders 0 --seconds "$idle" --sources "$(sources_for "$m")" --server-pid "$SRV_PID")
        stop_srv
        rss=$(field "$out" server_rss_kib) cpu=$(field "$out" server_cpu_s) t=$(field "$out" seconds)
        [ -n "$rss" ] || { say "w4 $k $m failed"; continue; }
        rl+=("$(awk -v a="$rss" -v b="$base" -v m="$m" 'BEGIN{print (a-b)*1024/m}')")
        ml+=("$(awk -v a="$rss" 'BEGIN{print a/1024}')")
        cl+=("$(awk -v c="$cpu" -v t="$t" 'BEGIN{print (t>0)?100*c/t:0}')")
        say "w4 $m $k run $((r + 1)): rss $rss KiB (base $base), cpu $cpu s"
      done
      R[$k]=$(med "${rl[@]}") C[$k]=$(med "${cl[@]}") M[$k]=$(med "${ml[@]}")
    done
    for k in gw node nchan; do
      row '| %d | %s | %.0f | %.1f | %.2f | %s |\n' "$m" "${name[$k]}" "${R[$k]}" "${M[$k]}" \
        "${C[$k]}" "$([ "$k" = gw ] || ratio "${R[gw]}" "${R[$k]}")"
    done
  done
}

# ---- W5: offline pull -----------------------------------------------------------------
w5() {
  local l r out a=() b=()
  echo
  echo "### W5 offline pull: 25,000 unread over 40 groups ($runs runs, median)"
  echo
  echo "| page size | messages pulled/s | pages/s | time to pull all (s) |"
  echo "|---|---|---|---|"
  for l in 100 500; do
    a=() b=()
    local c=()
    for ((r = 0; r < runs; r++)); do
      start_gw gw ${gw_flags[@]+"${gw_flags[@]}"}
      out=$(gwload "w5 gw $l" --url "ws://127.0.0.1:$SRV_PORT/ws" --pull "$l" --pull-groups 40 \
            --count 25000 --server-pid "$SRV_PID")
      stop_srv
      a+=("$(field "$out" pull.messages_per_s)") b+=("$(field "$out" pull.pages_per_s)")
      c+=("$(field "$out" pull.seconds)")
    done
    row '| %d | %.0f | %.0f | %.3f |\n' "$l" "$(med "${a[@]}")" "$(med "${b[@]}")" "$(med "${c[@]}")"
  done
}

# ---- Storage --------------------------------------------------------------------------
storage() { . "$root/tools/bench/storage.sh"; storage_bench; }

echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))," \
  "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME")," \
  "$(date -u '+%Y-%m-%d %H:%M UTC'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
for w in w1 w2 w3 w6 w4 w5 storage; do
  want "$w" && "$w"
done
