#!/bin/bash
# Disk full and I/O errors (issue 15, part 5). musterd does better than etcd's panic: when its
# data dir cannot be written it keeps serving, refuses writes with an etcd-shaped error (v2:
# errorCode 300 and a 500; /v1: 503 "read_only") and says so in /metrics, turns writable again
# by itself when the disk does, and never acknowledges a write it did not keep: after each case
# a kill -9 and a restart find every acknowledged write.
#   1. a real full disk: a small tmpfs (mounted here, needs root) filled by another file; the
#      log's reserved space makes musterd refuse writes before one fails, so reads go on
#   2. ENOSPC and EIO from pwrite() (the log's writes) and from fdatasync()
#      (tests/faults/faultshim.so), in the three fsync modes: the write that failed is held
#      (never answered) until the fault ends; reads of other keys are answered meanwhile, at
#      the last durable index, and reads that would reveal it wait for it
#   3. a full disk that holds deleted data: musterd compacts its way out of read-only mode
#   4. a write held by ENOSPC, made durable by the snapshot that compacts the log
#   5. a log whose reserve cannot grow: the segment a compaction opens with its reserve ends
#      the refusal
. "$(dirname "$0")/../lib.sh"

t_need_built "$MUSTERD" "$MU_FAULTSHIM"
t_need_cmd curl curl
t_need_cmd jq jq

MNT=$T_DIR/mnt
MOUNTED=0
cleanup() {
  local pid
  for pid in "${T_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  for pid in "${T_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  [ "$MOUNTED" = 1 ] && umount "$MNT"
  t_cleanup
}
trap cleanup EXIT

ACKED=$T_DIR/acked # "key value index", one a line: every write that was answered 200 or 201
: >"$ACKED"
CTL=$T_DIR/faults # the shim's control file
BIG=$T_DIR/big    # a 200 KiB value
head -c 204800 /dev/zero | tr '\0' 'v' >"$BIG"

# acked KEY VALUE: records an answered write with the index musterd gave it (its reply's
# node.modifiedIndex, in $T_DIR/put.out), which a restart must give back with the value.
acked() { echo "$1 $2 $(jq -r .node.modifiedIndex "$T_DIR/put.out" 2>/dev/null)" >>"$ACKED"; }
# put KEY VALUE [MAX_TIME]: prints the HTTP status (000: no answer); body in $T_DIR/put.out;
# an answered write is recorded as acknowledged.
put() {
  local code
  code=$(curl -s -o "$T_DIR/put.out" -w '%{http_code}' --max-time "${3:-5}" -X PUT \
    "$MUSTERD_URL/v2/keys/$1" --data-urlencode "value=$2")
  case "$code" in 200 | 201) acked "$1" "$2" ;; esac
  echo "$code"
}
put_big() { # KEY: a 200 KiB value
  local code
  code=$(curl -s -o "$T_DIR/put.out" -w '%{http_code}' --max-time 5 -X PUT \
    "$MUSTERD_URL/v2/keys/$1" --data-urlencode "value@$BIG")
  case "$code" in 200 | 201) acked "$1" @big ;; esac
  echo "$code"
}
METRICS=""
fetch_metrics() { METRICS=$(curl -s --max-time 2 "$MUSTERD_URL/metrics"); }
metric() { awk -v m="$1" '$1 == m { print $2 }' <<<"$METRICS"; } # from the last fetch_metrics
index_of() { # KEY: the X-Etcd-Index of a GET of KEY (empty when it is not answered in 3 s)
  curl -s -D - -o /dev/null --max-time 3 "$MUSTERD_URL/v2/keys/$1" | tr -d '\r' |
    awk -F': ' 'tolower($1) == "x-etcd-index" { print $2 }'
}
read_only() { # musterd says it refuses writes
  fetch_metrics
  [ "$(metric musterd_disk_read_only)" = 1 ]
}
writable() { # KEY VALUE: a write is answered 200 or 201
  local c
  c=$(put "$1" "$2" 2)
  [ "$c" = 200 ] || [ "$c" = 201 ]
}

# The refusal of a write, in both APIs' shapes.
check_refusal() { # name key
  local code body
  code=$(put "$2" x)
  body=$(cat "$T_DIR/put.out")
  t_expect_eq "$1: v2 write refused with 500" "$code" 500
  t_expect_eq "$1: etcd's errorCode 300" "$(jq -r .errorCode <<<"$body" 2>/dev/null)" 300
  t_expect_match "$1: the cause says why and what to do" "$(jq -r .cause <<<"$body" 2>/dev/null)" \
    "read-only: writing its data dir failed .*free space or fix the disk"
  code=$(curl -s -o "$T_DIR/v1.out" -w '%{http_code}' --max-time 5 -X PUT \
    "$MUSTERD_URL/v1/runs/r1/kv/k" -d '{"value":"x"}')
  t_expect_eq "$1: /v1 write refused with 503" "$code" 503
  t_expect_eq "$1: /v1 error read_only" "$(jq -r .error "$T_DIR/v1.out" 2>/dev/null)" read_only
  fetch_metrics
  t_expect_eq "$1: gauge musterd_disk_read_only" "$(metric musterd_disk_read_only)" 1
  [ "$(metric musterd_disk_writes_refused_total)" -ge 2 ] 2>/dev/null &&
    t_ok "$1: counter musterd_disk_writes_refused_total" ||
    t_fail "$1: musterd_disk_writes_refused_total is '$(metric musterd_disk_writes_refused_total)'"
}

# After a failed check: whether musterd still runs (or how it ended), the tails of its log and
# of the log of the musterd killed before it, and $T_DIR kept with every log (and, by
# check_acked, a copy of the data dir: a tmpfs goes with the test).
explain() {
  if kill -0 "$MUSTERD_PID" 2>/dev/null; then
    echo "# musterd (pid $MUSTERD_PID, $MUSTERD_URL) is running; /healthz:" \
      "$(curl -s -m 5 -w ' %{http_code}' "$MUSTERD_URL/healthz")"
  else
    wait "$MUSTERD_PID" 2>/dev/null
    echo "# musterd (pid $MUSTERD_PID) has exited with status $?"
  fi
  echo "# the tail of its log ($T_DIR/musterd.log):"
  tail -15 "$T_DIR/musterd.log" | cut -c1-300 | sed 's/^/#   /'
  if [ "$NKILL" -gt 0 ]; then
    echo "# the tail of the log of the musterd killed before it ($T_DIR/musterd-killed-$NKILL.log):"
    tail -8 "$T_DIR/musterd-killed-$NKILL.log" | cut -c1-300 | sed 's/^/#   /'
  fi
  echo "# logs kept in $T_DIR"
  T_KEEP=1
}

# kill -9, restart on the same data dir (no faults), and every acknowledged write is there with
# the index it was acknowledged at. The killed musterd's log is kept as musterd-killed-N.log. On
# a failure it prints what it saw: each write that did not come back (written: value and index;
# read back: the HTTP status, value and index), the writes that did, and musterd's logs. A read
# that gets no answer is no loss but a failure of the check itself, and says so.
NKILL=0
check_acked() { # name datadir
  local key want widx code got gidx lost=0 mute=0 n=0 report=$T_DIR/acked-check
  NKILL=$((NKILL + 1))
  kill -KILL "$MUSTERD_PID"
  wait "$MUSTERD_PID" 2>/dev/null
  mv "$T_DIR/musterd.log" "$T_DIR/musterd-killed-$NKILL.log"
  if ! t_start_musterd --data-dir "$2"; then
    t_fail "$1: musterd did not restart"
    explain
    return
  fi
  # the port read from the new log is the new musterd's: it answers, and it is still running
  t_wait_http "$MUSTERD_URL/healthz" 20 "$MUSTERD_PID" ||
    echo "# the restarted musterd (pid $MUSTERD_PID) does not answer on $MUSTERD_URL"
  : >"$report"
  # the last acknowledged write of each key is the one to find
  while read -r key want widx; do
    n=$((n + 1))
    code=$(curl -s -o "$T_DIR/get.out" -w '%{http_code}' --max-time 10 "$MUSTERD_URL/v2/keys/$key")
    got=$(jq -r .node.value "$T_DIR/get.out" 2>/dev/null)
    gidx=$(jq -r .node.modifiedIndex "$T_DIR/get.out" 2>/dev/null)
    [ "$want" = @big ] && want=$(cat "$BIG")
    if [ "$code" = 000 ]; then
      mute=$((mute + 1))
      echo "# no answer: GET $key (written at index $widx)" >>"$report"
    elif [ "$got" != "$want" ] || [ "$gidx" != "$widx" ]; then
      lost=$((lost + 1))
      echo "# lost: $key: written '${want:0:20}' (${#want} bytes) at index $widx; read back:" \
        "HTTP $code, '${got:0:20}' (${#got} bytes) at index $gidx" >>"$report"
    else
      echo "# kept: $key at index $widx" >>"$report"
    fi
  done < <(tac "$ACKED" | awk '!seen[$1]++' | tac)
  if [ "$mute" -gt 0 ]; then
    t_fail "$1: after kill -9 and a restart, $mute of the $n reads of acknowledged writes got no" \
      "answer from the restarted musterd at $MUSTERD_URL (not a loss: the check could not look)"
  fi
  [ "$n" -gt 0 ] || t_fail "$1: no write was acknowledged before the kill: nothing to check"
  t_expect_eq "$1: after kill -9 and a restart, lost of the $n acknowledged writes" "$lost" 0
  if [ "$lost" -gt 0 ] || [ "$mute" -gt 0 ] || [ "$n" = 0 ]; then
    cat "$report"
    cp -a "$2" "$T_DIR/data-kept-$NKILL" 2>/dev/null &&
      echo "# the data dir is copied to $T_DIR/data-kept-$NKILL"
    explain
  fi
  kill -KILL "$MUSTERD_PID"
  wait "$MUSTERD_PID" 2>/dev/null
  mv "$T_DIR/musterd.log" "$T_DIR/musterd-checked-$NKILL.log"
  : >"$ACKED"
}

# --- 1. a real full disk ---------------------------------------------------------------------

if [ "$(id -u)" != 0 ]; then
  t_skip_part "a full tmpfs needs root (mount -t tmpfs)"
else
  mkdir -p "$MNT"
  if mount -t tmpfs -o size=24m tmpfs "$MNT"; then
    MOUNTED=1
    t_start_musterd --data-dir "$MNT/data" --snapshot-every 0 || t_done
    for i in 1 2 3; do put "full/a$i" "v$i" >/dev/null; done
    # everything the log has not reserved yet goes to another file
    dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null
    codes=""
    for i in $(seq 1 60); do
      c=$(put_big "full/big$i")
      codes="$codes $c"
      [ "$c" = 500 ] && break
    done
    t_expect_match "full disk: writes go on into the reserve, then are refused" "$codes" \
      "^( 20[01])* 500$"
    check_refusal "full disk" full/refused
    got=$(curl -s --max-time 2 "$MUSTERD_URL/v2/keys/full/a1" | jq -r .node.value)
    t_expect_eq "full disk: reads are answered at once" "$got" v1
    rm -f "$MNT/filler"
    t_until 5 writable full/after space && t_ok "full disk: writable again once space is back" ||
      t_fail "full disk: still refusing writes 5 s after space came back"
    fetch_metrics
    t_expect_eq "full disk: gauge back to 0" "$(metric musterd_disk_read_only)" 0
    check_acked "full disk" "$MNT/data"
    umount "$MNT" && MOUNTED=0
  else
    t_fail "mount -t tmpfs failed"
  fi
fi

# --- 3. a full disk that holds deleted data: compaction is the way out ------------------------
# PUT then DELETE a 1 MiB /v1 value, 64 times, on a 48 MiB disk: the log fills the disk with
# values deleted since; once it cannot reserve, musterd takes a snapshot (the compactor, which
# fits: the live state is small), the old segments go, and it is writable again by itself; the
# snapshot at shutdown fits too, and after a restart it is writable at once (issue 24, finding 5:
# main stayed read-only for good).
kv_put() { # KEY FILE: the HTTP status of a /v1 KV PUT
  curl -s -o "$T_DIR/kv.out" -w '%{http_code}' --max-time 10 -X PUT \
    "$MUSTERD_URL/v1/runs/r1/kv/$1" --data-binary @"$2"
}
kv_writable() { [ "$(kv_put probe "$T_DIR/one")" = 200 ]; }
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$MNT"
  if mount -t tmpfs -o size=48m tmpfs "$MNT"; then
    MOUNTED=1
    head -c 1048000 /dev/zero | tr '\0' 'd' >"$T_DIR/mib"
    echo 1 >"$T_DIR/one"
    t_start_musterd --data-dir "$MNT/data" || t_done
    curl -s -o /dev/null -X POST -H 'Content-Type: application/json' "$MUSTERD_URL/v1/runs/r1/join" \
      -d '{"node_id":"a","addr":"10.0.0.1","min_nodes":1,"lease_ttl_ms":600000}'
    refused=0 stuck=""
    for i in $(seq 1 64); do
      c=$(kv_put blob "$T_DIR/mib")
      if [ "$c" = 503 ]; then
        refused=$((refused + 1))
        t_until 30 kv_writable || { stuck=$i; break; }
        c=$(kv_put blob "$T_DIR/mib")
      fi
      [ "$c" = 200 ] || { stuck="$i (PUT answered $c)"; break; }
      curl -s -o /dev/null --max-time 10 -X DELETE "$MUSTERD_URL/v1/runs/r1/kv/blob"
    done
    fetch_metrics
    if [ -z "$stuck" ]; then
      t_ok "deleted data on a full disk: 64 PUT+DELETE of 1 MiB on 48 MiB, read-only $refused times, writable again by itself each time"
    else
      t_fail "deleted data on a full disk: still read-only 30 s after PUT $stuck (snapshots $(metric musterd_snapshots_total), failures $(metric musterd_snapshot_failures_total))"
      tail -5 "$T_DIR/musterd.log" | sed 's/^/#   /'
    fi
    t_until 30 kv_writable && t_ok "... writable after the loop" || t_fail "... read-only after the loop"
    [ "$(metric musterd_snapshots_total)" -ge 1 ] 2>/dev/null &&
      t_ok "... by compaction ($(metric musterd_snapshots_total) snapshots)" ||
      t_fail "... no snapshot was taken"
    t_stop_musterd_checked
    if grep -q "final snapshot/sync of the data dir failed" "$T_DIR/musterd.log"; then
      t_fail "... the snapshot at shutdown failed: $(grep -m1 'final snapshot' "$T_DIR/musterd.log")"
    else
      t_ok "... the snapshot at shutdown fits"
    fi
    t_start_musterd --data-dir "$MNT/data" || t_done
    t_expect_eq "... after a restart a write is taken at once" "$(kv_put after "$T_DIR/one")" 200
    t_expect_eq "... and the state is there" \
      "$(curl -s --max-time 5 "$MUSTERD_URL/v1/runs/r1/kv/probe")" 1
    t_stop_musterd_checked
    umount "$MNT" && MOUNTED=0
  else
    t_fail "mount -t tmpfs failed"
  fi
fi

# --- 2. injected ENOSPC and EIO, on pwrite() and on fdatasync() -------------------------------

# musterd with the shim preloaded (ASan wants to come first; it need not here)
FAULTY=$T_DIR/faulty-musterd
cat >"$FAULTY" <<EOF
#!/bin/sh
export LD_PRELOAD="$MU_FAULTSHIM" MU_FAULT_CTL="$CTL" MU_FAULT_DIR="$T_DIR/d"
export ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}verify_asan_link_order=0"
exec "$MUSTERD" "\$@"
EOF
chmod +x "$FAULTY"

CASES=("batch pwrite ENOSPC" "batch fdatasync EIO" "always fdatasync ENOSPC" "off pwrite EIO")
# the sanitizer build runs two: the paths are the same, each case costs seconds there
[ "$MU_SANITIZED" = 1 ] && CASES=("batch fdatasync EIO" "always pwrite ENOSPC")
n=0
for c in "${CASES[@]}"; do
  set -- $c
  mode=$1 op=$2 err=$3 n=$((n + 1))
  name="--fsync $mode, $op $err"
  data=$T_DIR/d/$n
  mkdir -p "$T_DIR/d"
  : >"$CTL"
  MUSTERD=$FAULTY t_start_musterd --data-dir "$data" --fsync "$mode" --snapshot-every 0 || t_done
  for i in 1 2 3; do put "c$n/k$i" "v$i" >/dev/null; done
  idx=$(index_of "c$n/k3")
  echo "$op $err" >"$CTL"
  sleep 0.05 # the shim reads its control file every 10 ms
  # the write the disk fails: never answered while it is not durable
  code=$(put "c$n/lost" lost 0.5)
  t_expect_eq "$name: the failed write is not acknowledged" "$code" 000
  # curl gave up after 0.5 s; under load the sync thread may not have met the fault yet: a write
  # sent before musterd knows would be held (not refused) until the disk works
  t_until 10 read_only || t_fail "$name: /metrics never showed musterd_disk_read_only 1"
  check_refusal "$name" "c$n/refused"
  # reads go on: one the held write does not touch is answered at once, at the index before it
  t_expect_eq "$name: a read of another key is answered" \
    "$(curl -s --max-time 3 "$MUSTERD_URL/v2/keys/c$n/k1" | jq -r .node.value)" v1
  t_expect_eq "$name: ... at the last durable index" "$(index_of "c$n/k2")" "$idx"
  # a read it touches waits rather than reveal it; it is answered once the disk works again
  t_expect_eq "$name: a read of the held write's dir waits" \
    "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$MUSTERD_URL/v2/keys/c$n")" 000
  t_expect_eq "$name: a read of the held write's key waits" \
    "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$MUSTERD_URL/v2/keys/c$n/lost")" 000
  curl -s -o "$T_DIR/read.out" --max-time 10 "$MUSTERD_URL/v2/keys/c$n/lost" &
  rpid=$!
  : >"$CTL"
  t_until 5 writable "c$n/after" ok && t_ok "$name: writable again once the fault ends" ||
    t_fail "$name: still refusing writes 5 s after the fault ended"
  wait "$rpid"
  t_expect_eq "$name: the held read is answered, with the write" \
    "$(jq -r .node.value "$T_DIR/read.out")" lost
  fetch_metrics
  [ "$(metric musterd_disk_errors_total)" -ge 1 ] 2>/dev/null &&
    t_ok "$name: counter musterd_disk_errors_total" ||
    t_fail "$name: musterd_disk_errors_total is '$(metric musterd_disk_errors_total)'"
  t_expect_match "$name: logged" "$(cat "$T_DIR/musterd.log")" "failed: .*refusing writes"
  check_acked "$name" "$data"
done

# --- 4. a write held by ENOSPC, made durable by compaction -----------------------------------
# The log's pwrite() fails with ENOSPC while the snapshot's write() works (a disk whose free space
# a snapshot of the live state fits in): the held write becomes durable in the snapshot that
# compacts the log, and is answered while the log still cannot grow (issue 24, finding 5).
: >"$CTL"
data=$T_DIR/d/compact
MUSTERD=$FAULTY t_start_musterd --data-dir "$data" --snapshot-every 0 || t_done
for i in 1 2 3; do # 600 KiB of log since the snapshot, all of it deleted since
  put_big "gone/k$i" >/dev/null
  curl -s -o /dev/null --max-time 5 -X DELETE "$MUSTERD_URL/v2/keys/gone/k$i"
done
for i in 1 2 3 4 5 6; do put_big "gone/k$i" >/dev/null; done
curl -s -o /dev/null --max-time 5 -X DELETE "$MUSTERD_URL/v2/keys/gone?recursive=true"
: >"$ACKED" # deleted since: not what check_acked looks for
echo "pwrite ENOSPC" >"$CTL"
sleep 0.05 # the shim reads its control file every 10 ms
code=$(put held/k v 15)
t_expect_match "ENOSPC on the log: the held write is answered once a snapshot compacts the log" \
  "$code" '^20[01]$'
t_expect_match "... logged" "$(cat "$T_DIR/musterd.log")" "compacting it \(a snapshot of the state in memory\)"
t_expect_eq "... the next write is held again (the log still cannot grow)" "$(put held/k2 v 1)" 000
t_until 5 read_only && t_ok "... and musterd is read-only" || t_fail "... writes are still taken"
: >"$CTL"
t_until 5 writable held/after ok && t_ok "... writable once the fault ends" ||
  t_fail "... still read-only after the fault ended"
check_acked "ENOSPC, compacted" "$data"

# --- 5. space back when a compaction opens the next segment ---------------------------------
# The log's reserve cannot grow (fallocate() past a segment's start fails with ENOSPC: "grow" in
# the shim) while a new segment's first reserve works: the disk had room again just when the
# compaction opened the next segment. That segment has its reserve: musterd takes writes again
# by itself. Main stayed read-only for good, even once the fault ended: only a failed reserve
# re-armed the retry, and the new segment's reserve skipped the check that ends the refusal
# (case 1 met it under load: the compaction's retry came before the reserve's).
# The compaction is held (the shim's "hold": no new file, so no new segment) until the test has
# seen the refusal, then let go: musterd refuses for as long as the test looks, however slow the
# machine, and the refusal must end by itself once the compaction's retry opens its segment with
# the reserve (issue 33, item 8; the refusal lasted 0.25 s and sixty PUTs could miss it).
: >"$CTL"
data=$T_DIR/d/grow
MUSTERD=$FAULTY t_start_musterd --data-dir "$data" --snapshot-every 0 || t_done
echo "grow,hold ENOSPC" >"$CTL"
sleep 0.05 # the shim reads its control file every 10 ms
codes=""
for i in $(seq 1 60); do # the reserve grows after 4 MiB of log (20 of these)
  c=$(put_big "grow/big$i")
  codes="$codes $c"
  [ "$c" = 500 ] && break
done
t_expect_match "reserve cannot grow: writes are taken, then refused" "$codes" "^( 20[01])+ 500$"
t_expect_eq "... and refused again while the compaction is held" "$(put grow/held v)" 500
fetch_metrics
t_expect_eq "... the gauge says read-only" "$(metric musterd_disk_read_only)" 1
t_expect_match "... the compaction could not start" "$(cat "$T_DIR/musterd.log")" \
  "writing a snapshot failed"
echo "grow ENOSPC" >"$CTL" # the compaction's retry goes on; the reserve still cannot grow
# its retry backs off (1 s, then twice as long each time the test kept it from starting)
t_until 40 writable grow/after ok &&
  t_ok "... writable again once a compaction opened a segment with its reserve" ||
  t_fail "... still read-only 40 s after the compaction was let go (snapshots: $(fetch_metrics;
    metric musterd_snapshots_total))"
t_expect_match "... logged" "$(cat "$T_DIR/musterd.log")" "space is back after"
: >"$CTL"
fetch_metrics
t_expect_eq "... gauge back to 0" "$(metric musterd_disk_read_only)" 0
check_acked "reserve that cannot grow, compacted" "$data"

[ "$T_FAILS" = 0 ] || [ "${T_KEEP:-0}" = 1 ] || explain
t_done
