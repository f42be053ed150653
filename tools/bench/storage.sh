# Storage per message, sourced by tools/bench/run.sh (storage_bench): a group of 500
# members, 200 of them offline, C messages of 200 bytes (random letters), bytes on disk
# per message for the gateway (stored once per group) and for mosquitto with persistence
# and QoS 1 persistent sessions (a queue per offline client). Each figure is the growth of
# the data folder over the messages, after a clean stop, divided by C.
# Needs: lib.sh sourced, bench_init done, $load, $runs, $quick, gwload/field/med from run.sh.

# Bytes of a RocksDB folder's tables and write-ahead logs (not its info LOG files).
rocks_bytes() {
  find "$1" -maxdepth 1 -type f \( -name '*.sst' -o -name '*.log' -o -name 'MANIFEST-*' \) \
    -printf '%s\n' | awk '{s+=$1} END {print s+0}'
}

# Compacts every column family of a closed store, so overwritten ack rows and the WAL
# are gone: the size the data settles at.
rocks_compact() {
  local cf
  for cf in default groups members user_groups msgs sends; do
    timeout 300 ldb --db="$1" --column_family="$cf" --try_load_options compact >/dev/null 2>&1 ||
      say "storage: ldb compact $cf failed"
  done
}

storage_gw() {
  local n=$1 out b0 b1 c0 c1
  start_gw st
  # 500 members join g0 (u0..u499) and leave: all offline, every ack 0.
  out=$(gwload "storage gw join" --url "ws://127.0.0.1:$SRV_PORT/ws" --idle --sessions 500 \
        --group-size 500 --senders 0 --seconds 1)
  stop_srv
  b0=$(rocks_bytes "$BENCH_WORK/st/data/store")
  cp -a "$BENCH_WORK/st/data" "$BENCH_WORK/st/data0"
  rocks_compact "$BENCH_WORK/st/data0/store"
  c0=$(rocks_bytes "$BENCH_WORK/st/data0/store")
  rm -rf "$BENCH_WORK/st/data0"
  # 300 of them come online (u0..u299) and a sender (s0, member too) sends n messages;
  # u300..u499 stay offline. Same folder.
  bench_spawn "$BENCH_WORK/st.log" "$root/build/gw" --insecure --listen 127.0.0.1 --port 0 \
    --port-file "$BENCH_WORK/st/port2" --data "$BENCH_WORK/st/data" --log-level 1
  local i
  for ((i = 0; i < 150; i++)); do [ -s "$BENCH_WORK/st/port2" ] && break; sleep 0.1; done
  SRV_PORT=$(cat "$BENCH_WORK/st/port2")
  wait_port "$SRV_PORT" "$SRV_PID"
  out=$(gwload "storage gw send" --url "ws://127.0.0.1:$SRV_PORT/ws" --sessions 300 \
        --group-size 300 --senders 1 --count "$n" --seconds 120)
  stop_srv
  [ "$(field "$out" confirmed)" = "$n" ] || say "storage: gateway confirmed $(field "$out" confirmed) of $n"
  b1=$(rocks_bytes "$BENCH_WORK/st/data/store")
  rocks_compact "$BENCH_WORK/st/data/store"
  c1=$(rocks_bytes "$BENCH_WORK/st/data/store")
  echo "$(( (b1 - b0) / n )) $(( (c1 - c0) / n ))"
}

storage_mq() {
  local n=$1 i subs=() b0 b1 d
  start_mosquitto mq
  local port=$SRV_PORT mq=$SRV_PID
  d="$BENCH_WORK/mq"
  # 200 offline members: persistent sessions (clean session off) subscribed at QoS 1,
  # then disconnected; the broker queues every message for each of them.
  for ((i = 0; i < 200; i++)); do
    timeout 10 mosquitto_sub -h 127.0.0.1 -p "$port" -c -i "off$i" -q 1 -t bench/g0 -E ||
      say "storage: mosquitto_sub off$i failed"
  done
  # 300 online members: they receive and acknowledge, so nothing stays queued for them.
  for ((i = 0; i < 300; i++)); do
    mosquitto_sub -h 127.0.0.1 -p "$port" -c -i "on$i" -q 1 -t bench/g0 >/dev/null 2>&1 &
    subs+=($!)
    BENCH_PIDS+=($!)
  done
  sleep 2
  kill -USR1 "$mq" # writes the persistence file now: the size before the messages
  sleep 1
  b0=$(stat -c %s "$d/mosquitto.db" 2>/dev/null || echo 0)
  python3 -c 'import random,sys
r=random.Random(1)
for _ in range(int(sys.argv[1])): print("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(200)))' "$n" |
    timeout 300 mosquitto_pub -h 127.0.0.1 -p "$port" -i pub -q 1 -t bench/g0 -l ||
    say "storage: mosquitto_pub failed"
  sleep 2
  for i in "${subs[@]}"; do kill -TERM "$i" 2>/dev/null || true; done
  for i in "${subs[@]}"; do bench_reap "$i"; bench_forget "$i"; done
  SRV_PID=$mq SRV_STOP=
  stop_srv # saves the persistence file on exit
  b1=$(stat -c %s "$d/mosquitto.db" 2>/dev/null || echo 0)
  echo "$(( (b1 - b0) / n ))"
}

storage_bench() {
  local n=2000 r gw=() gwc=() mq=() x
  [ -z "$quick" ] || n=1000
  command -v mosquitto_sub >/dev/null || { say "storage: mosquitto-clients missing"; return 0; }
  for ((r = 0; r < runs; r++)); do
    x=$(storage_gw "$n")
    gw+=("${x% *}") gwc+=("${x#* }")
    mq+=("$(storage_mq "$n")")
    say "storage run $((r + 1)): gateway ${gw[-1]} B/msg (compacted ${gwc[-1]}), mosquitto ${mq[-1]} B/msg"
  done
  local g gc m
  g=$(med "${gw[@]}") gc=$(med "${gwc[@]}") m=$(med "${mq[@]}")
  echo
  echo "### Storage: a group of 500, 200 offline, $n messages of 200 bytes ($runs runs, median)"
  echo
  echo "| layout | bytes on disk per message | ratio to the gateway (compacted) |"
  echo "|---|---|---|"
  printf '| gateway, after a clean stop (tables + WAL) | %.0f | %s |\n' "$g" "$(ratio "$g" "$gc")"
  printf '| gateway, compacted (ldb compact) | %.0f | 1.00 |\n' "$gc"
  printf '| mosquitto, persistence, QoS 1 persistent sessions | %.0f | %s |\n' "$m" "$(ratio "$m" "$gc")"
}
