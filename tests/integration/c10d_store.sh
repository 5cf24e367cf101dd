#!/usr/bin/env bash
# musterd's TCPStore listener (--c10d-listen; docs/c10d.md) against real clients, one musterd
# with --data-dir shared by every case:
#   1. PyTorch's own TCPStore client (Debian's torch 1.13, is_master=False): set, get, add,
#      compare_set, wait woken by another client, delete_key, num_keys (c10d_torch_client.py)
#   2. every torch 2.x query Debian's torch cannot send (VALIDATE, PING, APPEND, MULTI_GET,
#      MULTI_SET, CANCEL_WAIT, QUEUE_PUSH/POP/LEN, LIST, CHECK) from tests/fixtures/c10d's C
#      client, its answers compared with the ones docs/c10d.md gives
#   3. torch 1.13's watch_key (legacy numbering): the events a second client's writes cause
#   4. kill -9 of musterd, a restart on the same data dir and port: PyTorch's client finds its
#      keys (and the 2.x client its queue)
#   5. /metrics counts connections, queries by type and closes by reason; /v1/c10d and
#      muster rdzv by run
#   6. (a second musterd, --c10d-run-gc-seconds 2) a torchrun run that stops writing is
#      forgotten, one that writes is kept, keys of no run are kept
#   7. (before 4) muster agent --rdzv-backend c10d on PyTorch's own store fails, saying why
#      (on musterd's port it runs: tests/integration/rdzv_backends.sh)
#   8. (before 6) a musterd with --token-file: TCPStore clients need no token; muster rdzv on
#      its c10d:// endpoint is refused without it, shown with --token or MUSTER_RDZV_TOKEN_FILE
. "$(dirname "$0")/../lib.sh"

MU_C10D_CLIENT=${MU_C10D_CLIENT:-$MU_BUILD_DIR/tests/c10d_client}
t_need_built "$MUSTERD" "$MU_C10D_CLIENT"
t_need_py torch python3-torch
TC="$MU_SOURCE_DIR/tests/integration/c10d_torch_client.py"

CPORT=$(t_free_port)
start() {
  t_start_musterd --c10d-listen "127.0.0.1:$CPORT" --data-dir "$T_DIR/data" "$@" ||
    { t_fail "musterd did not start: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
  t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
  t_expect_eq "the TCPStore listener is bound to the port given" "$C10D_PORT" "$CPORT"
}
start

# tc_lines NAME OUTPUT: a TAP stream of a helper as this test's lines.
tc_lines() {
  local line
  while IFS= read -r line; do
    case $line in
      "ok - "*) t_ok "$1: ${line#ok - }" ;;
      "not ok - "*) t_fail "$1: ${line#not ok - }" ;;
      *) [ -n "$line" ] && echo "# $line" ;;
    esac
  done <<<"$2"
}

# client [--legacy] SCRIPT: the C client's answers to SCRIPT (one query a line).
client() {
  local legacy=""
  [ "$1" = --legacy ] && { legacy=--legacy; shift; }
  printf '%s\n' "$1" | timeout 20 "$MU_C10D_CLIENT" $legacy 127.0.0.1 "$CPORT" 2>&1
}

# --- 1. PyTorch's client ------------------------------------------------------------------------
out=$(timeout 60 "$PY" "$TC" "$CPORT" before 2>&1)
tc_lines "torch 1.13 TCPStore" "$out"
[ $? ] && grep -q "^ok - " <<<"$out" || t_fail "torch client printed nothing: $out"

# --- 2. torch 2.x queries (docs/c10d.md, "Answers") -----------------------------------------------
script='ping 3735928559
set /v2/a hex:00ff61
get /v2/a
append /v2/a hex:62
get /v2/a
get /v2/absent
multi_set /v2/x 1 /v2/y two
multi_get /v2/x /v2/y /v2/absent
check /v2/x /v2/y
check /v2/x /v2/absent
add /v2/x 9
cas /v2/y two 2
wait_cancel 300 /v2/never
queue_push /v2/q first
queue_push /v2/q second
queue_len /v2/q
check /v2/q
queue_pop /v2/q
queue_len /v2/q
queue_pop /v2/empty
delete /v2/x
list'
want='u32 3735928559
value \x00\xffa
value \x00\xffab
value 
value 1
value two
value 
u8 0
u8 1
int 10
value 2
canceled u8 1
int 2
u8 0
int 2
value first
int 1
int 0
int 1
keys 7
key /blob
key /counter
key /created
key /greeting
key /persist/a
key /persist/n
key /v2/a
key /v2/y'
got=$(client "$script")
# LIST's order is the store's: compare the keys as a sorted set
sorted() { local t; t=$(cat); grep -v '^key ' <<<"$t"; grep '^key ' <<<"$t" | LC_ALL=C sort; }
t_expect_eq "torch 2.x queries answer as docs/c10d.md says" "$(sorted <<<"$got")" \
  "$(sed 's/^keys 7$/keys 8/' <<<"$want" | sorted)"
t_expect_eq "a WAIT woken by another connection's SET answers STOP_WAITING (0)" \
  "$( (sleep 0.3; client 'set /v2/woken yes' >/dev/null) & client 'wait /v2/woken'; wait)" "u8 0"
t_expect_eq "a second VALIDATE closes the connection (bad_magic)" \
  "$(client 'ping 1
raw 00cef7853c
expect_close')" "u32 1
closed"
t_expect_eq "a first frame 0 without the magic is a legacy SET: its 4-GiB key closes it" \
  "$(client --legacy 'raw 0001020304050000000000
expect_close')" "closed"
t_expect_eq "a legacy GET of a missing key closes the connection (torch 1.13's server does)" \
  "$(client --legacy 'get /legacy/absent')" "closed"
t_expect_eq "the reserved key answers musterd's client URL" \
  "$(client --legacy 'get musterd.http_url')" "value $MUSTERD_URL"

# --- 3. watch_key (torch 1.13) --------------------------------------------------------------------
printf 'watch /w\nevents 4\n' | timeout 20 "$MU_C10D_CLIENT" --legacy 127.0.0.1 "$CPORT" \
  >"$T_DIR/watch.out" 2>&1 &
wpid=$!
t_until 10 grep -q "^u8 3" "$T_DIR/watch.out"
client --legacy 'set /w one
set /w 7
add /w 5
delete /w' >/dev/null
wait "$wpid"
t_expect_eq "watch_key: registered (3), then created (1), updated (0) twice, deleted (2)" \
  "$(cat "$T_DIR/watch.out")" 'u8 3
event 1 /w  one
event 0 /w one 7
event 0 /w 7 12
event 2 /w 12 '

# --- 5. (before the restart clears them) /metrics and /v1/c10d ---------------------------------------
m=$(curl -s --max-time 5 "$MUSTERD_URL/metrics")
t_expect_match "/metrics counts c10d connections" "$m" 'musterd_c10d_connections_accepted_total [1-9]'
t_expect_match "/metrics counts queries by type" "$m" 'musterd_c10d_queries_total\{query="queue_pop"\} 2'
t_expect_match "/metrics counts closes by reason" "$m" 'musterd_c10d_closed_total\{reason="missing_key"\} 1'
t_expect_match "/metrics counts the second VALIDATE" "$m" 'musterd_c10d_closed_total\{reason="bad_magic"\} 1'
t_expect_match "/metrics counts the huge key" "$m" 'musterd_c10d_closed_total\{reason="key_too_long"\} 1'
client 'set /torch.rendezvous.job7 state
set /torch.rendezvous.job7.0/MASTER_ADDR 127.0.0.1
set /torch.rendezvous.job7.1/MASTER_ADDR 127.0.0.1' >/dev/null
v=$(curl -s --max-time 5 "$MUSTERD_URL/v1/c10d")
t_expect_match "/v1/c10d shows the run with its keys and last round" "$v" \
  '"run_id":"job7","keys":3,"bytes":23,"round":1,"state":true'
v=$(curl -s --max-time 5 "$MUSTERD_URL/v1/c10d/job7")
t_expect_match "/v1/c10d/RUN lists the run's keys" "$v" '"key":"/torch.rendezvous.job7.1/MASTER_ADDR","round":1'
t_need_built "$MUSTER"
t_expect_match "muster rdzv shows the c10d run" "$("$MUSTER" rdzv "127.0.0.1:$MUSTERD_PORT")" \
  'c10d run job7: round 1, 3 keys \(23 bytes\)'
t_expect_match "muster rdzv RUN lists a run found only on the TCPStore listener" \
  "$("$MUSTER" rdzv "127.0.0.1:$MUSTERD_PORT" job7)" \
  '/torch.rendezvous.job7.1/MASTER_ADDR  9 bytes, round 1'
t_expect_eq "/v1/c10d/RUN of an unknown run is 404" \
  "$(curl -s -o /dev/null -w '%{http_code}' "$MUSTERD_URL/v1/c10d/nope")" 404

# --- 7. muster agent --rdzv-backend c10d on PyTorch's own store (on musterd's: rdzv_backends.sh) --
t_spawn torchstore "$PY" "$TC" host
t_until 60 grep -q "listening on" "$T_DIR/torchstore.log" ||
  t_fail "PyTorch's store did not start: $(tail -3 "$T_DIR/torchstore.log")"
tport=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T_DIR/torchstore.log")
out=$(timeout 60 "$MUSTER" agent --nnodes 1 --nproc-per-node 1 --rdzv-backend c10d \
  --rdzv-endpoint "127.0.0.1:$tport" --rdzv-id other -- true 2>&1)
rc=$?
t_expect_eq "muster agent on PyTorch's own TCPStore fails" "$([ "$rc" != 0 ] && echo failed)" failed
t_expect_match "... saying it is not a musterd and what to use" "$out" \
  'not a musterd.*--c10d-listen.*--rdzv-backend muster.*static'

# --- 4. kill -9 and restart ------------------------------------------------------------------------
nkeys=$(client 'num_keys')
kill -9 "$MUSTERD_PID"
t_wait_exit "$MUSTERD_PID" 10
mv "$T_DIR/musterd.log" "$T_DIR/musterd-1.log"
start
out=$(timeout 60 "$PY" "$TC" "$CPORT" after "${nkeys#int }" 2>&1)
tc_lines "torch 1.13 TCPStore" "$out"
t_expect_eq "after kill -9: the 2.x client's queue and appended value are back" \
  "$(client 'queue_len /v2/q
get /v2/a')" 'int 1
value \x00\xffab'
t_stop_musterd_checked

# --- 8. a private musterd (--token-file): its TCPStore port has no credentials to ask, the
# native API it hands a c10d:// client over to still asks for the token -------------------------
mv "$T_DIR/musterd.log" "$T_DIR/musterd-2.log"
printf '%s\n' 0123456789abcdef0123456789abcdef >"$T_DIR/tok" && chmod 600 "$T_DIR/tok"
t_start_musterd --c10d-listen 127.0.0.1:0 --token-file "$T_DIR/tok" ||
  { t_fail "musterd (token) did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line"; t_done; }
printf 'set /torch.rendezvous.priv state\n' |
  timeout 20 "$MU_C10D_CLIENT" --legacy 127.0.0.1 "$C10D_PORT" >/dev/null 2>&1
t_expect_eq "a token-protected musterd: TCPStore clients need none (the protocol has none)" \
  "$(printf 'get /torch.rendezvous.priv\n' | timeout 20 "$MU_C10D_CLIENT" --legacy 127.0.0.1 "$C10D_PORT" 2>&1)" \
  'value state'
out=$(MUSTER_RDZV_TOKEN= MUSTER_RDZV_TOKEN_FILE= "$MUSTER" rdzv "c10d://127.0.0.1:$C10D_PORT" 2>&1)
t_expect_match "muster rdzv c10d:// without the token: refused by the HTTP port it resolves to" \
  "$out" 'refused|401|unauthorized'
t_expect_match "muster rdzv --token T c10d://: the token survives the hand-over to musterd's API" \
  "$(MUSTER_RDZV_TOKEN= "$MUSTER" rdzv --token 0123456789abcdef0123456789abcdef \
    "c10d://127.0.0.1:$C10D_PORT" 2>&1)" 'c10d run priv: 1 keys \(5 bytes\)'
t_expect_match "MUSTER_RDZV_TOKEN_FILE c10d://: so does the environment's" \
  "$(MUSTER_RDZV_TOKEN_FILE=$T_DIR/tok "$MUSTER" rdzv "c10d://127.0.0.1:$C10D_PORT" 2>&1)" \
  'c10d run priv: 1 keys \(5 bytes\)'
t_stop_musterd_checked

# --- 6. torchrun runs that stop writing are forgotten (--c10d-run-gc-seconds) ----------------------
mv "$T_DIR/musterd.log" "$T_DIR/musterd-3.log"
t_start_musterd --c10d-listen 127.0.0.1:0 --c10d-run-gc-seconds 3 ||
  { t_fail "musterd (gc) did not start"; t_done; }
t_c10d_port || { t_fail "no c10d start line"; t_done; }
gc() { printf '%s\n' "$1" | timeout 20 "$MU_C10D_CLIENT" --legacy 127.0.0.1 "$C10D_PORT" 2>&1; }
# the live run writes its state first, then every 0.3 s on one connection (torchrun's agents:
# every 5 s), until every check below has read what it needs: it stops only after /metrics. (A
# writer that stopped first was itself forgotten 3 s later, before the /metrics read, when the
# test's clients took seconds each at a load of 10 under ASan: CI of stop 43.)
rm -f "$T_DIR/gc-stop"
t_spawn gc-writer bash -c 'while [ ! -e "$1" ]; do echo "set /torch.rendezvous.alive state"; sleep 0.3; done |
  timeout 120 "$2" --legacy 127.0.0.1 "$3"' _ "$T_DIR/gc-stop" "$MU_C10D_CLIENT" "$C10D_PORT"
gc_writer=$T_LAST_PID
alive_set() { [ "$(gc 'check /torch.rendezvous.alive')" = "u8 0" ]; }
t_until 60 alive_set || t_fail "the live run's writer wrote nothing within 60 s"
gc 'set /torch.rendezvous.idle state
set /torch.rendezvous.idle.0/MASTER_ADDR h
set /mine v' >/dev/null
# the event: the idle run forgotten (3 s after its last write, at the next 0.75 s sweep)
idle_gone() { [ "$(gc 'check /torch.rendezvous.idle')" = "u8 1" ]; }
t_until 60 idle_gone || t_fail "the idle run was not forgotten within 60 s"
v=$(curl -s --max-time 5 "$MUSTERD_URL/v1/c10d")
m=$(curl -s --max-time 5 "$MUSTERD_URL/metrics")
touch "$T_DIR/gc-stop"
t_wait_exit "$gc_writer" 30 || t_fail "the live run's writer did not stop"
t_expect_match "an idle run's keys are deleted after --c10d-run-gc-seconds" "$v" '"keys":2,'
t_expect_match "a run that keeps writing is kept" "$v" '"run_id":"alive","keys":1'
t_expect_match "keys of no torchrun run are kept" "$v" '"other_keys":1'
t_expect_eq "the idle run's keys are gone from the store" "$(gc 'check /torch.rendezvous.idle')" "u8 1"
t_expect_eq "/metrics counts the forgotten run" "$(grep '^musterd_c10d_runs_forgotten_total ' <<<"$m")" \
  'musterd_c10d_runs_forgotten_total 1'
t_expect_eq "/metrics counts its keys" "$(grep '^musterd_c10d_keys_forgotten_total ' <<<"$m")" \
  'musterd_c10d_keys_forgotten_total 2'
t_stop_musterd_checked
t_done
