#!/bin/bash
# The adversarial suite's TCPStore cases (docs/c10d.md, "Bounds"): hostile clients against
# musterd's c10d listener, each bounded to seconds (tests/adversarial/c10d_attacks.py: Python
# standard library, raw sockets). Server A: --c10d-max-value-bytes 65536 --body-timeout-ms 1000
# --max-body-bytes-per-address 1048576
#   huge        a 2^62-byte key, a value over the bound, a WAIT of 2^40 keys, an unknown query:
#               closed at once, counted by reason, nothing allocated
#   unfinished  a frame that never ends (closed at the deadline), unfinished frames hoarding
#               bytes from one address (closed past its share)
# Server B: --max-connections-per-address 50 --max-buffer-bytes-per-client 64 MiB (the 120,000
# keys wait_flood waits on hold ~28 MiB: its bound on waited keys is met before the budget), and
# the default deadlines (its big frames take their time under ASan)
#   no_read     2,000 GETs of an 8 KiB value pipelined by a client that does not read: reading
#               stops, memory stays flat, every answer comes once it reads
#   wait_flood  waits from one address: connections past its share, 2,000 WAITs pipelined on
#               one connection, WAITs past 131,072 waited keys
#   wait_repeats  SET b, then 300 WAITs of [a, b, b, b] pipelined (issue 33/1, a heap overflow):
#               each holds a slot for its missing key only; the SET of a wakes the last once
#   share_apart  50 TCPStore connections from one address (its share) leave that address's HTTP
#               client answered, not 503: the TCPStore's connections have a share of their own
# Server C: --max-buffer-bytes-per-client 1048576 --client-prefix-v4 24
#   budget      clients that do not read their answers: the buffers of a client's connections
#               (all its addresses in one /24) count in the memory budget HTTP's connections
#               share; the connection past its share is closed, another client is served
# Server D: --max-output-bytes 65536
#   value_readback  a value whose GET answer would not fit --max-output-bytes is refused by SET
#               (value_too_large); the largest that fits reads back (issue 33, LOW)
#   queue_flood 3,000 QUEUE_POPs in one write against a 200k-item queue (40k under ASan): the
#               pops are O(1) and the flooder yields its turn: /health and another client are
#               answered meanwhile (issue 33/3)
# Server E: --max-connections 60 --header-timeout-ms 3000 --c10d-allow 127.0.0.0/26
#   allow       peers outside --c10d-allow (127.0.0.64, .200) are closed at accept and counted;
#               their SET never lands; the last address inside (.63) is served (issue 33/5)
#   silent      60 connections that send nothing fill the TCPStore listener: a client that
#               speaks is served (a silent one is evicted), the silent ones are closed at the
#               deadline of a request's headers (issue 33/4)
# Server F: --max-buffer-bytes 67108864 (--max-buffer-bytes-per-client 32 MiB by default)
#   wait_budget WAITs of 262 8,000-byte keys of 0xff (~12.6 MiB held each): what a WAIT holds
#               counts in the memory budget with the client's buffers; one client's third is
#               closed (budget), and of 20 clients' those past --max-buffer-bytes (issue 33/2)
#   many_keys   60 connections each send one CHECK of 131,072 keys: the array of spans (2 MiB)
#               is freed after the query and counted in the budget while it lives
# Server G: --c10d-max-store-bytes 16777216
#   store_bytes 24 SETs of 4 MiB: the 3 that fit the bound are stored, the others closed
#               (store_full); at the bound, reads, same-size writes and deletes are served, and
#               a delete makes room (issue 33, MED: 48 8 MiB SETs took RSS to 452 MB)
#   keepalive   musterd's side of an idle TCPStore connection and of an HTTP one (one client
#               address) has a keepalive timer (ss -o): one accept under both listeners
#               (issue 29/3, 30/2)
# After each case another client is still served; musterd exits cleanly at the end.
#   CASES="huge silent"  only these cases (default all; the mutation check runs one at a time)
. "$(dirname "$0")/../lib.sh"

ATT=$MU_SOURCE_DIR/tests/adversarial/c10d_attacks.py
t_need_built "$MUSTERD"
t_need_cmd ss iproute2
t_start_musterd --c10d-listen 127.0.0.1:0 --c10d-max-value-bytes 65536 --body-timeout-ms 1000 \
  --max-body-bytes-per-address 1048576 || { t_fail "musterd A did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
A="$MUSTERD_URL $C10D_PORT $MUSTERD_PID"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-a.log"
A_PID=$MUSTERD_PID
t_start_musterd --c10d-listen 127.0.0.1:0 --max-connections-per-address 50 \
  --max-buffer-bytes-per-client 67108864 ||
  { t_fail "musterd B did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
B="$MUSTERD_URL $C10D_PORT $MUSTERD_PID"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-b.log"
B_PID=$MUSTERD_PID
t_start_musterd --c10d-listen 127.0.0.1:0 --max-buffer-bytes-per-client 1048576 \
  --client-prefix-v4 24 || { t_fail "musterd C did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
C="$MUSTERD_URL $C10D_PORT $MUSTERD_PID"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-c.log"
C_PID=$MUSTERD_PID
t_start_musterd --c10d-listen 127.0.0.1:0 --max-output-bytes 65536 ||
  { t_fail "musterd D did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
D="$MUSTERD_URL $C10D_PORT $MUSTERD_PID"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-d.log"
D_PID=$MUSTERD_PID
t_start_musterd --c10d-listen 127.0.0.1:0 --max-connections 60 --header-timeout-ms 3000 \
  --c10d-allow 127.0.0.0/26 ||
  { t_fail "musterd E did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
E="$MUSTERD_URL $C10D_PORT $MUSTERD_PID"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-e.log"
E_PID=$MUSTERD_PID
t_start_musterd --c10d-listen 127.0.0.1:0 --max-buffer-bytes 67108864 ||
  { t_fail "musterd F did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
F="$MUSTERD_URL $C10D_PORT $MUSTERD_PID"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-f.log"
F_PID=$MUSTERD_PID
t_start_musterd --c10d-listen 127.0.0.1:0 --c10d-max-store-bytes 16777216 ||
  { t_fail "musterd G did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
G="$MUSTERD_URL $C10D_PORT $MUSTERD_PID"

for c in huge:A unfinished:A keepalive:A no_read:B wait_flood:B wait_repeats:B share_apart:B budget:C value_readback:D queue_flood:D allow:E silent:E wait_budget:F many_keys:F store_bytes:G; do
  start=$SECONDS
  srv=${c#*:}
  c=${c%:*}
  case " ${CASES:-$c} " in *" $c "*) ;; *) continue ;; esac
  case $srv in A) set -- $A ;; B) set -- $B ;; C) set -- $C ;; D) set -- $D ;; E) set -- $E ;; F) set -- $F ;; *) set -- $G ;; esac
  out=$(timeout 90 "$PY" "$ATT" "$c" "$@" 2>&1)
  rc=$?
  while IFS= read -r line; do
    case $line in
      "ok - "*) t_ok "${line#ok - }" ;;
      "not ok - "*) t_fail "${line#not ok - }" ;;
      *) [ -n "$line" ] && echo "# $line" ;;
    esac
  done <<<"$out"
  [ "$rc" = 0 ] || t_fail "case $c exited $rc"
  echo "# case $c: $((SECONDS - start)) s"
done
case " ${CASES:-wait_budget} " in
  *" wait_budget "*)
    if grep -q 'a WAIT of 127.0.5.1 (.*) would pass --max-buffer-bytes-per-client' "$T_DIR/musterd-f.log"; then
      t_ok "wait_budget: the refusal is logged, naming the limit"
    else
      t_fail "wait_budget: no log line naming the limit: $(grep -m3 'c10d:' "$T_DIR/musterd-f.log")"
    fi
    ;;
esac
case " ${CASES:-store_bytes} " in
  *" store_bytes "*)
    if grep -q 'a set of 127.0.7.4 (.*) would take the store past --c10d-max-store-bytes' "$T_DIR/musterd.log"; then
      t_ok "store_bytes: the refusal is logged, naming the bound"
    else
      t_fail "store_bytes: no log line naming the bound: $(grep -m3 'c10d:' "$T_DIR/musterd.log")"
    fi
    ;;
esac
t_stop_musterd_checked "$A_PID" "$T_DIR/musterd-a.log"
t_stop_musterd_checked "$B_PID" "$T_DIR/musterd-b.log"
t_stop_musterd_checked "$C_PID" "$T_DIR/musterd-c.log"
t_stop_musterd_checked "$D_PID" "$T_DIR/musterd-d.log"
t_stop_musterd_checked "$E_PID" "$T_DIR/musterd-e.log"
t_stop_musterd_checked "$F_PID" "$T_DIR/musterd-f.log"
t_stop_musterd_checked
t_done
