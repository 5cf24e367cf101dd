#!/bin/bash
# The torn-tail test (issue #7): the last record of musterd's log is cut at every byte offset
# (a power cut mid-write). musterd must start each time, drop the partial record with a
# warning naming the file, keep every record before it, and truncate the file.
. "$(dirname "$0")/../lib.sh"

DATA=$T_DIR/data
PORT=$(t_free_port)
URL=http://127.0.0.1:$PORT

start() { # name: starts musterd on the data dir, waits (polling every 10 ms) for /healthz
  t_spawn "$1" "$MUSTERD" --listen "127.0.0.1:$PORT" --data-dir "$DATA" --fsync always
  MPID=$T_LAST_PID
  local i=0
  while [ "$i" -lt 2000 ]; do
    curl -s -o /dev/null --max-time 1 "$URL/healthz" && return 0
    kill -0 "$MPID" 2>/dev/null || return 1
    sleep 0.01
    i=$((i + 1))
  done
  return 1
}
stop9() { kill -KILL "$MPID"; wait "$MPID" 2>/dev/null; }

start first || { t_fail "musterd did not start"; t_done; }
for k in 1 2 3 4 5; do
  curl -s -o /dev/null -XPUT "$URL/v2/keys/torn/k$k" -d "value=v$k"
done
curl -s -o /dev/null -XPUT "$URL/v2/keys/torn/last" -d value=the-last-write
stop9
LOG=$(ls "$DATA"/wal-*.log | tail -n 1)
cp "$LOG" "$T_DIR/orig.log"
# offset of the last record: walk the frames (u32 length + 8 bytes of checksums + payload) up
# to the zeros musterd writes ahead of its log; SIZE is where the records end
read -r LAST SIZE < <("$PY" - "$T_DIR/orig.log" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
off = last = 0
while off + 12 <= len(d) and d[off:off + 12] != bytes(12):
    n = struct.unpack_from("<I", d, off)[0]
    last, off = off, off + 12 + n
print(last, off)
PY
)
echo "# $LOG: $SIZE bytes, last record at byte offset $LAST"
[ "$LAST" -gt 0 ] || { t_fail "could not find the last record"; t_done; }

bad=0
for cut in $(seq "$LAST" $((SIZE - 1))); do
  head -c "$cut" "$T_DIR/orig.log" >"$LOG"
  if ! start "cut$cut"; then
    t_fail "cut at $cut: musterd did not start"; bad=1; break
  fi
  all=$(curl -s "$URL/v2/keys/torn?recursive=true")
  stop9
  size=$(stat -c %s "$LOG")
  warned=0
  grep -q "torn tail at byte offset $LAST" "$T_DIR/cut$cut.log" && grep -qF "$LOG" "$T_DIR/cut$cut.log" && warned=1
  want_warn=1
  [ "$cut" = "$LAST" ] && want_warn=0 # cut exactly between records: a clean end
  if printf '%s' "$all" | grep -q '/torn/last' || [ "$size" != "$LAST" ] ||
    [ "$warned" != "$want_warn" ] ||
    ! printf '%s' "$all" | grep -q '"key":"/torn/k5","value":"v5","modifiedIndex":5'; then
    t_fail "cut at $cut: file size $size (want $LAST), warning=$warned (want $want_warn), keys: $all"
    sed 's/^/#   /' "$T_DIR/cut$cut.log"
    bad=1
    break
  fi
done
[ "$bad" = 0 ] && t_ok "log cut at each of the $((SIZE - LAST)) offsets of its last record: starts, drops it with a warning, truncates to $LAST bytes"
grep -h "torn tail" "$T_DIR/cut$((SIZE - 1)).log" | sed 's/^/# /'

# a whole log comes back in full, and the server carries on writing after a truncation
cp "$T_DIR/orig.log" "$LOG"
start whole
t_expect_eq "whole log: last write present" \
  "$(curl -s "$URL/v2/keys/torn/last" | grep -o '"value":"the-last-write","modifiedIndex":6')" \
  '"value":"the-last-write","modifiedIndex":6'
stop9
head -c $((SIZE - 3)) "$T_DIR/orig.log" >"$LOG"
start again
t_expect_eq "write after truncation takes index 6" \
  "$(curl -s -XPUT "$URL/v2/keys/torn/new" -d value=n | grep -o '"modifiedIndex":6')" '"modifiedIndex":6'
stop9
start again2
t_expect_eq "and survives the next restart" \
  "$(curl -s "$URL/v2/keys/torn/new" | grep -o '"value":"n","modifiedIndex":6')" '"value":"n","modifiedIndex":6'
t_expect_eq "no warning on a clean log" "$(grep -c 'torn tail' "$T_DIR/again2.log")" 0
stop9

# --fsync batch with pipelined requests: each waits for its own fsync, none is left waiting
# for an unrelated wake-up of the loop (300 writes in well under 30 s)
LOAD=$MU_BUILD_DIR/bench/durable_load
t_need_built "$LOAD"
t_spawn batch "$MUSTERD" --listen "127.0.0.1:$PORT" --data-dir "$T_DIR/batch" --fsync batch
MPID=$T_LAST_PID
t_wait_http "$URL/healthz" 20
t_expect_match "pipelined writes with --fsync batch" "$(timeout 30 "$LOAD" 127.0.0.1 "$PORT" 300 p 2>&1)" \
  "^loaded 300 keys"
stop9
t_done
