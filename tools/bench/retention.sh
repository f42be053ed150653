# shellcheck shell=bash disable=SC2154,SC2016 # run.sh sets load, runs, rawlog, gw_flags; awk
# Retention, sourced by tools/bench/run.sh (retention_bench; workload `retention`, not in
# the default list). On RocksDB, then on PostgreSQL (a server of the run's own, started here
# in a temp folder and stopped after: lib.sh's start_pg):
#   1. disk over time: the gateway with --retain-messages 10000 under a steady durable
#      send load (gw_load --rate R open loop, 20 senders each with a group of its own, so
#      one cycle, the groups' whole kept history, is 20 x 10,000 = 200,000 messages);
#      /stats sampled every 10 s (elapsed, confirmed so far, messages.stored,
#      store.disk_bytes, retention.deleted; on PostgreSQL also pg_database_size read with
#      psql, which the disk figures use there, and gw.msgs' autovacuum count and dead
#      rows); then the same load without retention, shorter (its growth per message is
#      the contrast). A table per run and a verdict: disk at the end against disk after
#      the first cycle (the first sample with 200,000 confirmed).
#   2. W2 with retention on against off: 64 senders, a group each, one send in flight
#      (as run.sh's w2), off/on/off/on... $runs runs each, a warm-up until 96,000 sends
#      (1.5 x 64 x 1,000) and then a measured part of the same length for both; "on" is
#      --retain-messages 1000 (every group is past 1,000 when the measured part begins, so
#      each pass in it deletes: the deletion work per pass is what was sent since the last
#      one, whatever N is, once the groups are full). Median confirmed messages/s of the
#      measured part (the gateway's messages.sends over wall time), on/off.
# Settings (environment): RT_RATE (messages/s, default 6000), RT_SECONDS (the retained
# run, default 150; --quick 40), RT_OFF_SECONDS (the run without retention, default 30;
# --quick 15), RT_EVERY (sampling, default 10 s; --quick 5), RT_W2_KEEP (default 1000),
# RT_W2_WARM / RT_W2_WARM_MAX (the warm-up's least and most, default 3 / 30 s; --quick
# 3 / 10), RT_W2_SECONDS (measured, default 8; --quick 3), RT_BACKENDS (default
# "rocksdb postgres"), RT_PARTS (default "disk w2"); GW_BIN (lib.sh): another gw binary.
# Needs: lib.sh sourced, bench_init done, $load, $runs, $quick, gw_flags, say, stats,
# med, ratio, row, fmt from run.sh. Every wait is bounded; every gw_load runs under timeout.

rt_keep=10000 rt_groups=20
rt_rate=${RT_RATE:-6000}
rt_secs=${RT_SECONDS:-150} rt_off_secs=${RT_OFF_SECONDS:-30} rt_every=${RT_EVERY:-10}
rt_w2_keep=${RT_W2_KEEP:-1000} rt_w2_warm=${RT_W2_WARM:-3} rt_w2_warm_max=${RT_W2_WARM_MAX:-30}
rt_w2_secs=${RT_W2_SECONDS:-8}
if [ -n "$quick" ]; then
  rt_secs=${RT_SECONDS:-40} rt_off_secs=${RT_OFF_SECONDS:-15} rt_every=${RT_EVERY:-5}
  rt_w2_warm_max=${RT_W2_WARM_MAX:-10} rt_w2_secs=${RT_W2_SECONDS:-3}
fi
rt_x=
rt_cycle=$((rt_groups * rt_keep))
rt_url='' # the current PostgreSQL database ("": RocksDB)

rt_now() { date +%s.%N; }
# rt_sleep_until T PID: until the clock reaches T (date +%s.%N) or PID ends; at most 700 s.
rt_sleep_until() {
  local i
  for ((i = 0; i < 3500; i++)); do
    awk -v t="$1" -v n="$(rt_now)" 'BEGIN{exit !(n < t)}' || return 0
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.2
  done
}
# rt_running ERRFILE PID: until gw_load says it is running (its set-up done), at most 60 s.
rt_running() {
  local i
  for ((i = 0; i < 1200; i++)); do
    grep -q 'running' "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
# rt_start BACKEND TAG [FLAGS...]: the gateway with FLAGS on BACKEND (a fresh database on
# PostgreSQL, in $rt_url).
rt_start() {
  local b=$1 tag=$2
  shift 2
  rt_url=''
  if [ "$b" = postgres ]; then
    rt_url=$(pg_newdb) || return 1
    BENCH_STORE_URL=$rt_url start_gw "$tag" ${gw_flags[@]+"${gw_flags[@]}"} "$@"
  else
    start_gw "$tag" ${gw_flags[@]+"${gw_flags[@]}"} "$@"
  fi
}
rt_stop() {
  stop_srv
  [ -z "$rt_url" ] || pg_dropdb "$rt_url"
  rt_url=''
}

# One sample: "elapsed confirmed stored disk deleted errors dbsize autovacuums dead" (the
# last three "-" on RocksDB): disk is /stats' store.disk_bytes; on PostgreSQL dbsize is
# pg_database_size read here with psql (the gateway refreshes its figure only after ten
# idle seconds of its store thread, so under a steady load /stats keeps the size it had
# at start), autovacuums and dead the gw.msgs table's autovacuum_count and n_dead_tup.
rt_sample() { # ELAPSED CONFIRMED
  local s st pg='- - -'
  s=$(stats 2>/dev/null || true)
  st=$(python3 -c 'import json,sys
try:
    d=json.load(sys.stdin)
    print(d["messages"]["stored"], d["store"]["disk_bytes"], d["retention"]["deleted"], d["retention"]["errors"])
except Exception:
    print("- - - -")' <<<"$s")
  if [ -n "$rt_url" ]; then
    pg=$(timeout 10 psql -X -q -A -t -F ' ' "$rt_url" -c \
      "SELECT pg_database_size(current_database()), autovacuum_count, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'gw' AND relname = 'msgs'" \
      2>/dev/null || true)
    [ -n "$pg" ] || pg='- - -'
  fi
  echo "$1 $2 $st $pg"
}

# rt_disk_run BACKEND KEEP SECONDS OUT: the gateway (--retain-messages KEEP, 0: none)
# under the steady load for SECONDS, sampled into OUT (a line per sample, rt_sample's).
rt_disk_run() {
  local b=$1 keep=$2 d=$3 out=$4 lp t0 i n c flags=()
  : >"$out"
  [ "$keep" -eq 0 ] || flags=(--retain-messages "$keep")
  rt_start "$b" "rt$keep" ${flags[@]+"${flags[@]}"} || { say "retention: the gateway ($b) did not start"; rt_stop; return 1; }
  timeout $((d + 120)) "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 \
    --senders "$rt_groups" --own-groups --rate "$rt_rate" --seconds "$d" --sources 2 \
    --server-pid "$SRV_PID" >"$BENCH_WORK/rt.out" 2>"$BENCH_WORK/rt.err" &
  lp=$!
  BENCH_PIDS+=("$lp")
  rt_running "$BENCH_WORK/rt.err" "$lp" || say "retention: gw_load did not start running ($b)"
  t0=$(rt_now)
  rt_sample 0 0 >>"$out"
  n=$((d / rt_every))
  for ((i = 1; i <= n; i++)); do
    rt_sleep_until "$(awk -v t="$t0" -v s=$((i * rt_every)) 'BEGIN{printf "%.3f", t + s}')" "$lp"
    kill -0 "$lp" 2>/dev/null || break
    c=$(grep -o 'confirmed [0-9]*' "$BENCH_WORK/rt.err" | tail -1 | cut -d' ' -f2)
    rt_sample $((i * rt_every)) "${c:-0}" >>"$out"
  done
  wait "$lp" || say "retention: gw_load exited $? ($b, keep $keep)"
  bench_forget "$lp"
  # The end: one more pass and (PostgreSQL) a refresh of pg_database_size after the load.
  sleep 4
  c=$(grep '^{' "$BENCH_WORK/rt.out" | tail -1 || true)
  [ -n "$c" ] && echo "retention $b keep $keep $c" >>"$rawlog"
  rt_sample "$(awk -v t="$t0" -v n="$(rt_now)" 'BEGIN{printf "%.0f", n - t}')" "$(field "$c" confirmed)" >>"$out"
  say "retention $b keep $keep: $(field "$c" confirmed) confirmed in $d s ($(field "$c" errors) errors), last sample: $(tail -1 "$out")"
  # PostgreSQL: the gateway's largest tables and indexes at the end (where the bytes are).
  : >"$out.rel"
  [ -z "$rt_url" ] || timeout 10 psql -X -q -A -t -F ' ' "$rt_url" -c \
    "SELECT c.relname, round(pg_relation_size(c.oid) / 1048576.0, 1) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'gw' AND c.relkind IN ('r', 'i') ORDER BY pg_relation_size(c.oid) DESC LIMIT 6" \
    2>/dev/null | awk 'NF == 2 {printf "%s%s %s MiB", (NR > 1) ? ", " : "", $1, $2}' >"$out.rel" || true
  rt_stop
}

# The disk figure of a sample line: pg_database_size on PostgreSQL, else store.disk_bytes.
rt_awk_disk='function disk() { return ($7 ~ /^[0-9]+$/) ? $7 : $4 }'
rt_table() { # FILE: the samples as a Markdown table
  local pg=''
  awk '$7 != "-"' "$1" | grep -q . && pg=1
  if [ -n "$pg" ]; then
    echo "| elapsed s | confirmed | cycles | messages.stored | pg_database_size MiB (psql) | bytes per stored message | retention.deleted | gw.msgs autovacuums | gw.msgs dead rows | store.disk_bytes MiB (/stats) |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
  else
    echo "| elapsed s | confirmed | cycles | messages.stored | store.disk_bytes MiB | bytes per stored message | retention.deleted |"
    echo "|---|---|---|---|---|---|---|"
  fi
  awk -v cyc="$rt_cycle" -v pg="$pg" "$rt_awk_disk"'{
    d = disk()
    b = ($3 ~ /^[0-9]+$/ && $3 > 0 && d ~ /^[0-9]+$/) ? sprintf("%.0f", d / $3) : "-"
    m = (d ~ /^[0-9]+$/) ? sprintf("%.1f", d / 1048576) : "-"
    printf "| %s | %s | %.2f | %s | %s | %s | %s |", $1, $2, $2 / cyc, $3, m, b, $5
    if (pg) printf " %s | %s | %s |", $8, $9, ($4 ~ /^[0-9]+$/) ? sprintf("%.1f", $4 / 1048576) : "-"
    printf "\n"
  }' "$1"
}

# The verdict of a retained run: disk at the first sample past one cycle, at the end, the
# highest after the first cycle, the ratios.
rt_verdict() { # NAME FILE
  awk -v cyc="$rt_cycle" -v name="$1" "$rt_awk_disk"'
    disk() ~ /^[0-9]+$/ { d = disk()
                      if (!f && $2 >= cyc) { f = 1; t1 = $1; d1 = d; c1 = $2 }
                      if (f && d > mx) { mx = d; tm = $1 }
                      te = $1; de = d; ce = $2; del = $5; er = $6 }
    END {
      if (!f) { printf "**%s: the load did not reach one cycle (%d messages): no verdict.**\n", name, cyc; exit }
      printf "**%s, --retain-messages '"$rt_keep"': disk after the first cycle (%d confirmed, %s s) %.1f MiB, at the end (%d confirmed, %.1f cycles, %s s) %.1f MiB: end/first-cycle %.2f; highest after the first cycle %.1f MiB (%s s, %.2f); %d deleted, %s retention errors.**\n",
        name, c1, t1, d1 / 1048576, ce, ce / cyc, te, de / 1048576, de / d1, mx / 1048576, tm, mx / d1, del, er
    }' "$2"
}
# Without retention: growth per confirmed message, and where the retained run would be.
rt_growth() { # NAME FILE RETAINED_FILE
  local endc
  endc=$(awk '$2 ~ /^[0-9]+$/ {c = $2} END {print c + 0}' "$3")
  awk -v name="$1" -v endc="$endc" "$rt_awk_disk"'
    disk() ~ /^[0-9]+$/ { d = disk(); if (!s) { s = 1; d0 = d; c0 = $2 } de = d; ce = $2; te = $1 }
    END {
      if (ce <= c0) { printf "%s, no retention: no messages confirmed.\n", name; exit }
      g = (de - d0) / (ce - c0)
      printf "%s, no retention: %.1f MiB after %d messages (%s s): %.0f bytes on disk per message; at that rate the retained run'"'"'s %d messages would take %.1f MiB.\n",
        name, de / 1048576, ce, te, g, endc, (d0 + g * endc) / 1048576
    }' "$2"
}

# ---- W2 with retention on and off ------------------------------------------------------
# rt_w2_once BACKEND KEEP: sets rt_x to "rate deleted stored per_commit warm": confirmed/s
# over the measured part (the gateway's messages.sends over wall time), deleted by
# retention in it, messages.stored at its end, messages per commit (fsync) in it, and the
# warm-up's seconds. The warm-up lasts until the gateway has taken 1.5 x 64 x
# RT_W2_KEEP sends (every group past KEEP: on, each pass of the measured part deletes;
# off and on start it with as many messages sent), at least RT_W2_WARM s and at most
# RT_W2_WARM_MAX s; then RT_W2_SECONDS measured; then gw_load is stopped (TERM).
rt_w2_once() {
  local b=$1 keep=$2 flags=() lp s0 s1 t0 t1 tw i n
  rt_x='- - - - -'
  [ "$keep" -eq 0 ] || flags=(--retain-messages "$keep")
  rt_start "$b" "rtw2" ${flags[@]+"${flags[@]}"} || { say "retention w2: the gateway ($b) did not start"; rt_stop; return 0; }
  timeout 600 "$load" --json --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 0 --senders 64 \
    --own-groups --window 1 --seconds $((rt_w2_warm_max + rt_w2_secs + 30)) --sources 2 \
    --server-pid "$SRV_PID" >"$BENCH_WORK/rtw2.out" 2>"$BENCH_WORK/rtw2.err" &
  lp=$!
  BENCH_PIDS+=("$lp")
  rt_running "$BENCH_WORK/rtw2.err" "$lp" || say "retention w2: gw_load did not start running ($b)"
  tw=$(rt_now)
  rt_sleep_until "$(awk -v t="$tw" -v s="$rt_w2_warm" 'BEGIN{printf "%.3f", t + s}')" "$lp"
  for ((i = 0; i < rt_w2_warm_max * 5; i++)); do
    n=$(stats 2>/dev/null | jget messages.sends 2>/dev/null || echo 0)
    [ "$n" -lt $((96 * rt_w2_keep)) ] || break
    awk -v t="$tw" -v n="$(rt_now)" -v m="$rt_w2_warm_max" 'BEGIN{exit !(n - t < m)}' || break
    kill -0 "$lp" 2>/dev/null || break
    sleep 0.2
  done
  s0=$(stats 2>/dev/null || true) t0=$(rt_now)
  rt_sleep_until "$(awk -v t="$t0" -v s="$rt_w2_secs" 'BEGIN{printf "%.3f", t + s}')" "$lp"
  s1=$(stats 2>/dev/null || true) t1=$(rt_now)
  kill -0 "$lp" 2>/dev/null || say "retention w2: gw_load ended before the measured part did ($b, keep $keep): $(tail -2 "$BENCH_WORK/rtw2.err" | tr '\n' ' ')"
  kill -TERM "$lp" 2>/dev/null || true
  bench_reap "$lp"
  bench_forget "$lp"
  rt_stop
  local d0 d1 st m0 m1 c0 c1
  d0=$(jget retention.deleted <<<"$s0" 2>/dev/null || echo 0)
  d1=$(jget retention.deleted <<<"$s1" 2>/dev/null || echo 0)
  st=$(jget messages.stored <<<"$s1" 2>/dev/null || echo -)
  m0=$(jget messages.sends <<<"$s0" 2>/dev/null || echo 0)
  m1=$(jget messages.sends <<<"$s1" 2>/dev/null || echo 0)
  c0=$(jget store.commits <<<"$s0" 2>/dev/null || echo 0)
  c1=$(jget store.commits <<<"$s1" 2>/dev/null || echo 0)
  [ "$m1" -gt "$m0" ] || return 0
  rt_x="$(awk -v m=$((m1 - m0)) -v a="$t0" -v z="$t1" 'BEGIN{printf "%.1f", m / (z - a)}') $((d1 - d0)) $st"
  rt_x+=" $(awk -v m=$((m1 - m0)) -v c=$((c1 - c0)) 'BEGIN{printf "%.1f", (c > 0) ? m / c : 0}')"
  rt_x+=" $(awk -v a="$tw" -v z="$t0" 'BEGIN{printf "%.1f", z - a}')"
  echo "retention w2 $b keep $keep: $rt_x (sends/s deleted stored per-commit warm-up-s)" >>"$rawlog"
}

rt_w2() { # BACKEND...
  local b r k la
  declare -A R=() D=() S=() P=() W=()
  la=$(cut -d' ' -f1-3 /proc/loadavg)
  for b in "$@"; do
    [ "$b" != postgres ] || start_pg || { say "retention w2: no PostgreSQL"; continue; }
    for ((r = 0; r < runs; r++)); do
      for k in 0 "$rt_w2_keep"; do
        rt_w2_once "$b" "$k"
        local a d s pc w
        read -r a d s pc w <<<"$rt_x"
        [[ $a =~ ^[0-9.]+$ ]] && R[$b,$k]+=" $a" D[$b,$k]+=" $d" S[$b,$k]+=" $s" P[$b,$k]+=" $pc" W[$b,$k]+=" $w"
        say "retention w2 $b, retention $([ "$k" -eq 0 ] && echo off || echo "on ($k)"), run $((r + 1)): $a sends/s, $d deleted in the measured part, $s stored at its end, $pc per commit, warm-up $w s"
      done
    done
  done
  echo
  echo "### W2 durable sends with retention on and off ($runs runs each, alternating off/on, median)"
  echo
  echo "gw_load --sessions 0 --senders 64 --own-groups --window 1 (sync on). A warm-up until the"
  echo "gateway has taken $((96 * rt_w2_keep)) sends (1.5 x 64 x $rt_w2_keep; at least ${rt_w2_warm} s, at most"
  echo "${rt_w2_warm_max} s), then ${rt_w2_secs} s measured: the gateway's messages.sends over the wall time."
  echo "On: \`--retain-messages $rt_w2_keep\`: every group is past $rt_w2_keep messages before the"
  echo "measured part, so each pass in it deletes what was sent since the last one (the same"
  echo "work per pass whatever N is, once the groups are full). A fresh store every run. Load"
  echo "average before: $la; after: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| backend | retention | confirmed sends/s, each run | median | on/off | deleted in the measured part (median) | messages.stored at its end (median) | messages per commit (median) | warm-up s (median) |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for b in "$@"; do
    local off on
    # shellcheck disable=SC2086
    off=$(med ${R[$b,0]:-}) on=$(med ${R[$b,$rt_w2_keep]:-})
    for k in 0 "$rt_w2_keep"; do
      local what=off rr=''
      [ "$k" -eq 0 ] || { what="on, $k"; rr=$(ratio "$on" "$off"); }
      # shellcheck disable=SC2086
      row '| %s | %s | %s | %.0f | %s | %s | %s | %s | %s |\n' "$(rt_names "$b")" "$what" \
        "$(for v in ${R[$b,$k]:-}; do fmt 0 "$v"; echo -n ' '; done | sed 's/ $//; s/ /, /g')" \
        "$(med ${R[$b,$k]:-})" "$rr" \
        "$(fmt 0 "$(med ${D[$b,$k]:-})")" "$(fmt 0 "$(med ${S[$b,$k]:-})")" "$(fmt 1 "$(med ${P[$b,$k]:-})")" \
        "$(fmt 1 "$(med ${W[$b,$k]:-})")"
    done
  done
}

rt_names() { case "$1" in rocksdb) echo RocksDB ;; postgres) echo PostgreSQL ;; esac; }

retention_bench() {
  local b backends parts
  read -ra backends <<<"${RT_BACKENDS:-rocksdb postgres}"
  read -ra parts <<<"${RT_PARTS:-disk w2}"
  if [[ " ${parts[*]} " == *" disk "* ]]; then
    for b in "${backends[@]}"; do
      if [ "$b" = postgres ]; then start_pg || { say "retention: no PostgreSQL, skipped"; continue; }; fi
      local la
      la=$(cut -d' ' -f1-3 /proc/loadavg)
      rt_disk_run "$b" "$rt_keep" "$rt_secs" "$BENCH_WORK/rt-$b-keep.txt" || true
      rt_disk_run "$b" 0 "$rt_off_secs" "$BENCH_WORK/rt-$b-none.txt" || true
      echo
      echo "### Retention, $(rt_names "$b"): disk over time at $rt_rate messages/s"
      echo
      echo "gw_load --sessions 0 --senders $rt_groups --own-groups --rate $rt_rate (open loop, sync on,"
      echo "200-byte bodies): $rt_groups groups, one cycle = $rt_groups x $rt_keep = $rt_cycle messages."
      echo "/stats every $rt_every s; the last row 4 s after the load stopped. A fresh store. Load"
      echo "average before: $la; after: $(cut -d' ' -f1-3 /proc/loadavg)."
      echo
      echo "With \`--retain-messages $rt_keep\`, $rt_secs s:"
      echo
      rt_table "$BENCH_WORK/rt-$b-keep.txt"
      echo
      rt_verdict "$(rt_names "$b")" "$BENCH_WORK/rt-$b-keep.txt"
      if [ -s "$BENCH_WORK/rt-$b-keep.txt.rel" ]; then
        echo
        echo "Largest relations at the end: $(cat "$BENCH_WORK/rt-$b-keep.txt.rel")."
      fi
      echo
      echo "Without retention, the same load, $rt_off_secs s:"
      echo
      rt_table "$BENCH_WORK/rt-$b-none.txt"
      echo
      rt_growth "$(rt_names "$b")" "$BENCH_WORK/rt-$b-none.txt" "$BENCH_WORK/rt-$b-keep.txt"
      [ "$b" != postgres ] || stop_pg
    done
  fi
  if [[ " ${parts[*]} " == *" w2 "* ]]; then
    rt_w2 "${backends[@]}"
    stop_pg
  fi
}
