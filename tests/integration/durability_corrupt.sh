#!/bin/bash
# The corruption test (issue #7): a byte flipped in the middle of musterd's log (or anywhere in
# a snapshot) makes musterd refuse to start, naming the file and the byte offset; plus the
# clear errors for bad --data-dir/--fsync/--snapshot-every use.
. "$(dirname "$0")/../lib.sh"

DATA=$T_DIR/data
PORT=$(t_free_port)
URL=http://127.0.0.1:$PORT

start() { # name [options]
  local name=$1; shift
  t_spawn "$name" "$MUSTERD" --listen "127.0.0.1:$PORT" --data-dir "$DATA" "$@"
  MPID=$T_LAST_PID
  t_wait_http "$URL/healthz" 20
}
stop9() { kill -KILL "$MPID"; wait "$MPID" 2>/dev/null; }
# runs musterd expecting it to exit; sets RC and OUT
run_fail() {
  OUT=$(timeout 20 "$MUSTERD" --listen "127.0.0.1:$PORT" "$@" 2>&1); RC=$?
}
frames() { # file -> "offset" per record
  "$PY" - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
off = 0
while off + 12 <= len(d) and d[off:off + 12] != bytes(12):  # up to the zeros written ahead
    print(off)
    off += 12 + struct.unpack_from("<I", d, off)[0]
PY
}
flip() { # file offset
  "$PY" - "$1" "$2" <<'PY'
import sys
p, at = sys.argv[1], int(sys.argv[2])
d = bytearray(open(p, "rb").read())
d[at] ^= 0x20
open(p, "wb").write(bytes(d))
PY
}

start first --fsync always || { t_fail "musterd did not start"; t_done; }
for k in $(seq 1 10); do curl -s -o /dev/null -XPUT "$URL/v2/keys/c/k$k" -d "value=v$k"; done
stop9
LOG=$(ls "$DATA"/wal-*.log | tail -n 1)
cp "$LOG" "$T_DIR/orig.log"
mapfile -t OFFS < <(frames "$LOG")
t_expect_eq "10 records in the log" "${#OFFS[@]}" 10

# a flipped byte in the payload of record 5 of 10
AT=${OFFS[4]}
flip "$LOG" $((AT + 20))
run_fail --data-dir "$DATA"
t_expect_eq "corrupt middle: exit 1" "$RC" 1
t_expect_match "corrupt middle: names file and offset" "$OUT" \
  "log '$LOG' is corrupt at byte offset $AT: a checksum mismatch followed by more records"
t_expect_eq "corrupt middle: file left alone" "$(cmp -s "$LOG" "$T_DIR/orig.log"; echo $?)" 1
echo "# $OUT"

# a flipped byte in the length field of record 2: the header checksum catches it
cp "$T_DIR/orig.log" "$LOG"
flip "$LOG" $((OFFS[1] + 1))
run_fail --data-dir "$DATA"
t_expect_eq "damaged header: exit 1" "$RC" 1
t_expect_match "damaged header: names file and offset" "$OUT" \
  "log '$LOG' is corrupt at byte offset ${OFFS[1]}: a damaged record header"

# the original log still starts and has all 10 keys
cp "$T_DIR/orig.log" "$LOG"
start clean --fsync always --snapshot-every 4 || t_fail "clean log did not start"
t_expect_eq "clean log: k10 back" "$(curl -s "$URL/v2/keys/c/k10" | grep -o '"value":"v10"')" '"value":"v10"'
for k in $(seq 11 15); do curl -s -o /dev/null -XPUT "$URL/v2/keys/c/k$k" -d "value=v$k"; done
stop9
SNAP=$(ls "$DATA"/snap-*.snap | tail -n 1)
t_expect_match "a snapshot was written" "$SNAP" "snap-0+1[0-9].snap"
mapfile -t SOFFS < <(frames "$SNAP")
flip "$SNAP" $((SOFFS[3] + 15))
run_fail --data-dir "$DATA"
t_expect_eq "corrupt snapshot: exit 1" "$RC" 1
t_expect_match "corrupt snapshot: names file and offset" "$OUT" \
  "snapshot '$SNAP' is damaged at byte offset ${SOFFS[3]}"

# usage errors
run_fail --fsync sometimes --data-dir "$T_DIR/x"
t_expect_eq "bad --fsync: exit 2" "$RC" 2
t_expect_match "bad --fsync: message" "$OUT" "invalid --fsync 'sometimes': use always, batch or off"
run_fail --fsync batch
t_expect_eq "--fsync without --data-dir: exit 2" "$RC" 2
t_expect_match "--fsync without --data-dir: message" "$OUT" "need --data-dir"
run_fail --data-dir "$T_DIR/x" --snapshot-every -1
t_expect_eq "negative --snapshot-every: exit 2" "$RC" 2
: >"$T_DIR/afile"
run_fail --data-dir "$T_DIR/afile"
t_expect_eq "data dir is a file: exit 1" "$RC" 1
t_expect_match "data dir is a file: message" "$OUT" "is not a directory"
P2=$(t_free_port)
t_spawn holder "$MUSTERD" --listen "127.0.0.1:$P2" --data-dir "$T_DIR/d2"
t_wait_http "http://127.0.0.1:$P2/healthz" 20 || t_fail "musterd on a fresh data dir did not start"
run_fail --data-dir "$T_DIR/d2"
t_expect_eq "data dir in use: exit 1" "$RC" 1
t_expect_match "data dir in use: message" "$OUT" "in use by another musterd"
t_done
