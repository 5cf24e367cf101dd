#!/bin/bash
# Snapshots never on the loop, and triggered by the log's size too (issue 15, "No stalls"):
#  1. only /v1 changes since the last snapshot (the v2 index stands still): the next snapshot is
#     still the compactor's (musterd_snapshots_on_loop_total stays 0), in a segment numbered
#     after the current one; after kill -9 every v2 key and the /v1 state are back;
#  2. --snapshot-every 0 and 1 MiB /v1 KV overwrites: --snapshot-bytes takes snapshots and the
#     log on disk stays under the bound; after kill -9 the last value is back.
. "$(dirname "$0")/../lib.sh"

metric() { grep -m1 "^$1 " "$T_DIR/metrics" | awk '{print $2}'; }
fetch_metrics() { curl -s -o "$T_DIR/metrics" "$MUSTERD_URL/metrics"; }
# kill -9, and the log kept under its own name (the next start writes musterd.log anew)
NLOG=0
stop9() {
  kill -KILL "$MUSTERD_PID"
  wait "$MUSTERD_PID" 2>/dev/null
  NLOG=$((NLOG + 1))
  mv "$T_DIR/musterd.log" "$T_DIR/musterd-$NLOG.log"
}
# After a failed check: says whether musterd still runs (or how it ended), shows its log's tail
# and keeps $T_DIR with every musterd's log.
explain() {
  if kill -0 "$MUSTERD_PID" 2>/dev/null; then
    echo "# musterd (pid $MUSTERD_PID) is running; /healthz: $(curl -s -m 5 -w ' %{http_code}' \
      "$MUSTERD_URL/healthz")"
  else
    wait "$MUSTERD_PID" 2>/dev/null
    echo "# musterd (pid $MUSTERD_PID) has exited with status $?"
  fi
  tail -20 "$T_DIR/musterd.log" | sed 's/^/#   /'
  echo "# logs kept in $T_DIR"
  T_KEEP=1
}
# Reads URL (10 s at most): the body, or nothing.
get() { curl -s -m 10 "$1"; }
# Succeeds once musterd_snapshots_total >= $1 and no snapshot is in progress.
snapshots_done() {
  fetch_metrics
  [ "$(metric musterd_snapshots_total)" -ge "$1" ] 2>/dev/null &&
    [ "$(metric musterd_snapshot_in_progress)" = 0 ]
}
# Sends the requests of stdin ("METHOD PATH [BODY]" per line) on one keep-alive connection.
requests() {
  "$PY" -c '
import http.client, sys
c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=30)
for line in sys.stdin:
    m, path, *body = line.rstrip("\n").split(" ", 2)
    c.request(m, path, body=body[0].encode() if body else None,
              headers={"Content-Type": "application/x-www-form-urlencoded"})
    r = c.getresponse()
    r.read()
    if r.status >= 300:
        sys.exit("%s %s: %d" % (m, path, r.status))
' 127.0.0.1 "$MUSTERD_PORT"
}
J='"addr":"127.0.0.1","local_world_size":1,"master_port":29500,"min_nodes":1,"max_nodes":1,"lease_ttl_ms":60000'

# ---- 1. /v1 changes alone since the last snapshot ----
DATA=$T_DIR/v1only
EVERY=100
t_start_musterd --data-dir "$DATA" --snapshot-every $EVERY || t_done
for i in $(seq 1 $EVERY); do echo "PUT /v2/keys/k/$i value=v$i"; done | requests ||
  t_fail "v2 PUTs failed"
t_until 20 snapshots_done 1 || t_fail "no snapshot after $EVERY v2 writes"
curl -s -X POST -H 'Content-Type: application/json' "$MUSTERD_URL/v1/runs/job/join" \
  -d "{\"node_id\":\"a\",$J}" >/dev/null
for i in $(seq 1 $EVERY); do echo "PUT /v1/runs/job/kv/key$((i % 7)) value-$i"; done | requests ||
  t_fail "/v1 KV PUTs failed"
t_until 20 snapshots_done 2 && t_ok "a snapshot after /v1 changes alone" ||
  t_fail "no second snapshot (metrics: $(grep snapshot "$T_DIR/metrics" | tr '\n' ' '))"
t_expect_eq "... written by the compactor, not on the loop" \
  "$(metric musterd_snapshots_on_loop_total)" 0
ms=$(metric musterd_snapshot_start_ms)
awk -v m="$ms" 'BEGIN { exit !(m < 500) }' && t_ok "... the loop's part took $ms ms" ||
  t_fail "... the loop's part took $ms ms"
snap=$(printf 'snap-%020d.snap' $EVERY)
seg=$(printf 'wal-%020d-%020d.log' 3 $((EVERY + 1)))
t_expect_eq "... at the same index ($snap), segment 3 after it ($seg)" \
  "$(cd "$DATA" && ls snap-*.snap wal-*.log | tr '\n' ' ')" "$snap $seg "
curl -s -X PUT "$MUSTERD_URL/v1/runs/job/kv/after" --data-binary last >/dev/null
stop9
t_start_musterd --data-dir "$DATA" --snapshot-every $EVERY || t_done
f=$T_FAILS
n=$(get "$MUSTERD_URL/v2/keys/k?recursive=true" | jq '.node.nodes | length')
t_expect_eq "after kill -9: every v2 key is back" "$n" $EVERY
t_expect_eq "... and the /v1 KV (the snapshot's)" \
  "$(get "$MUSTERD_URL/v1/runs/job/kv/key2")" value-100
t_expect_eq "... and the /v1 change after it" "$(get "$MUSTERD_URL/v1/runs/job/kv/after")" last
t_expect_eq "... and the run" "$(get "$MUSTERD_URL/v1/runs/job" | jq -r '.round')" 1
[ "$T_FAILS" = "$f" ] || explain
stop9

# ---- 2. the size trigger ----
DATA=$T_DIR/size
LIMIT=$((4 << 20))
PUTS=24
[ "$MU_SANITIZED" = 1 ] && PUTS=16
t_start_musterd --data-dir "$DATA" --snapshot-every 0 --snapshot-bytes $LIMIT || t_done
curl -s -X POST -H 'Content-Type: application/json' "$MUSTERD_URL/v1/runs/big/join" \
  -d "{\"node_id\":\"a\",$J}" >/dev/null
most=0 # the largest log seen on disk while writing (a compactor may run meanwhile)
for i in $(seq 1 $PUTS); do
  head -c $((1 << 20)) /dev/zero | tr '\0' "$(printf "\\x$(printf %x $((96 + i % 26)))")" >"$T_DIR/v"
  curl -s -o /dev/null -X PUT "$MUSTERD_URL/v1/runs/big/kv/blob" --data-binary @"$T_DIR/v"
  b=$(t_wal_bytes "$DATA")
  [ "$b" -gt "$most" ] && most=$b
done
# at most the bound, the segment the loop went on with while the compactor ran, and slack for
# a slow compactor: without the trigger it is all $PUTS MiB
[ "$most" -le $((2 * LIMIT + (2 << 20))) ] && t_ok "while writing the log was at most $most bytes" ||
  t_fail "while writing the log reached $most bytes"
# once none is in progress and no other is due, the log is what came after the last one
settled() {
  snapshots_done 1 && [ "$(metric musterd_wal_bytes_since_snapshot)" -le $LIMIT ] 2>/dev/null
}
t_until 30 settled || t_fail "snapshots did not settle: $(grep -E 'snapshot|wal_bytes' "$T_DIR/metrics" | tr '\n' ' ')"
taken=$(metric musterd_snapshots_total)
[ "$taken" -ge $((PUTS / 5)) ] 2>/dev/null &&
  t_ok "$PUTS MiB of /v1 KV with --snapshot-every 0: $taken snapshots by size" ||
  t_fail "$PUTS MiB of /v1 KV with --snapshot-every 0: $taken snapshots"
logb=$(t_wal_bytes "$DATA")
[ "$logb" -le $((LIMIT + (64 << 10))) ] &&
  t_ok "... the log's records on disk are $logb bytes (bound $LIMIT)" ||
  t_fail "... the log's records on disk are $logb bytes, over $LIMIT"
stop9
t_start_musterd --data-dir "$DATA" --snapshot-every 0 --snapshot-bytes $LIMIT || t_done
f=$T_FAILS
got=$(get "$MUSTERD_URL/v1/runs/big/kv/blob" | od -An -c -N1 | tr -d ' ')
t_expect_eq "after kill -9: the last value is back" \
  "$got$(get "$MUSTERD_URL/v1/runs/big/kv/blob" | wc -c)" \
  "$(printf "\\x$(printf %x $((96 + PUTS % 26)))")$((1 << 20))"
[ "$T_FAILS" = "$f" ] || explain
stop9

# ---- the option's errors ----
out=$("$MUSTERD" --snapshot-bytes 1000 2>&1); rc=$?
t_expect_eq "--snapshot-bytes without --data-dir: exit 2" "$rc" 2
t_expect_match "... names --data-dir" "$out" "snapshot-bytes need --data-dir"
out=$("$MUSTERD" --data-dir "$T_DIR/x" --snapshot-bytes -5 2>&1); rc=$?
t_expect_eq "negative --snapshot-bytes: exit 2" "$rc" 2
t_expect_match "... names the option" "$out" "snapshot-bytes"
out=$("$MUSTERD" --data-dir "$T_DIR/x" --snapshot-byte 5 2>&1); rc=$?
t_expect_match "a misspelt --snapshot-bytes: did you mean" "$out" "did you mean.*--snapshot-bytes"
t_expect_match "musterd --help lists --snapshot-bytes" "$("$MUSTERD" --help 2>&1)" "--snapshot-bytes N"

t_done
