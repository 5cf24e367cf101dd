#!/bin/bash
# Native rendezvous runs survive a restart of musterd --data-dir (issue #7): a closed round
# keeps its number, members and ranks; members re-attach by heartbeating within their lease
# (the round stays active); a member that never comes back breaks the round when its lease
# runs out; run KV, ended runs and their reasons come back too. Each member's session (issue 33
# item 7) comes back with it: only its own speaks for it, after a SIGKILL (the log replayed)
# and a snapshot, and no log line ever shows one.
. "$(dirname "$0")/../lib.sh"

DATA=$T_DIR/data
PORT=$(t_free_port)
URL=http://127.0.0.1:$PORT

start() {
  t_spawn "$1" "$MUSTERD" --listen "127.0.0.1:$PORT" --data-dir "$DATA" --fsync batch
  MPID=$T_LAST_PID
  t_wait_http "$URL/healthz" 20 || { t_fail "$1: musterd did not start"; sed 's/^/#   /' "$T_DIR/$1.log"; t_done; }
}
stop9() { kill -KILL "$MPID"; wait "$MPID" 2>/dev/null; }
post() { curl -s -X POST -H 'Content-Type: application/json' "$URL$1" -d "$2"; }
# as post, as the node whose session is $1
post_as() { curl -s -X POST -H 'Content-Type: application/json' -H "X-Muster-Session: $1" "$URL$2" -d "$3"; }
code_as() {
  curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -H "X-Muster-Session: $1" "$URL$2" -d "$3"
}
field() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d.get(sys.argv[1]))' "$1"; }
wal_has() { grep -qaF -- "$1" "$DATA"/wal-*.log 2>/dev/null; }
# Waits until every rendezvous change made so far is in the write-ahead log, so that a SIGKILL
# cannot lose it: /v1 replies are not held for the sync, but each change appends the whole
# rendezvous state as one record, in order. So a KV value of its own, once found in the log,
# proves that the records before it are there too (the v2 index does not move).
durable() {
  local m="sync-$$-$RANDOM$RANDOM"
  curl -s -X PUT "$URL/v1/runs/job/kv/_sync" --data-binary "$m" >/dev/null
  t_until 10 wal_has "$m" || t_fail "the rendezvous state did not reach the log within 10 s"
}

start first
J='"addr":"127.0.0.1","local_world_size":2,"master_port":29500,"min_nodes":2,"max_nodes":2,"lease_ttl_ms":8000'
post /v1/runs/job/join "{\"node_id\":\"a\",$J}" >"$T_DIR/ja" &
JA=$!
post /v1/runs/job/join "{\"node_id\":\"b\",$J}" >"$T_DIR/jb" &
JB=$!
wait "$JA" "$JB"
t_expect_eq "round 1 closes before the restart" "$(field round <"$T_DIR/ja")" 1
RANK_B=$(field node_rank <"$T_DIR/jb")
SA=$(field session <"$T_DIR/ja")
SB=$(field session <"$T_DIR/jb")
t_expect_match "a's join answer carries its session" "$SA" '^[0-9a-f]{32}$'
[ "$SA" != "$SB" ] && t_ok "each node has its own session" || t_fail "a and b got one session: $SA"
curl -s -X PUT "$URL/v1/runs/job/kv/master" --data-binary 'tcp://10.0.0.1:29500' >/dev/null
post /v1/runs/done/join "{\"node_id\":\"x\",\"addr\":\"h\",\"local_world_size\":1,\"master_port\":1,\"min_nodes\":1,\"max_nodes\":1}" >/dev/null
post /v1/runs/done/shutdown '{"reason":"operator said so"}' >/dev/null
durable
stop9

start second
# b heart-beats from now on, every 200 ms, in one process (a curl per beat can lag behind a
# lease on a loaded machine); it writes the state of each answer to hb-b.states.
t_spawn hb-b "$PY" -c '
import json, sys, time, urllib.request, urllib.error
url, out, session = sys.argv[1], sys.argv[2], sys.argv[3]
while True:
    req = urllib.request.Request(url + "/v1/runs/job/heartbeat", data=b"{\"node_id\":\"b\"}",
                                 headers={"Content-Type": "application/json",
                                          "X-Muster-Session": session}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            state = json.load(r).get("state")
    except urllib.error.HTTPError as e:
        state = "http-%d" % e.code
    except OSError as e:
        state = "error"
    with open(out, "a") as f:
        f.write("%s\n" % state)
    time.sleep(0.2)
' "$URL" "$T_DIR/hb-b.states" "$SB"
HB_B=$T_LAST_PID
grep -q "2 rendezvous runs" "$T_DIR/second.log" && t_ok "recovery report counts 2 runs" ||
  t_fail "recovery report: $(grep recovered "$T_DIR/second.log")"
t_expect_eq "after the SIGKILL, b's session does not speak for a (403)" \
  "$(code_as "$SB" /v1/runs/job/heartbeat '{"node_id":"a"}')" 403
t_expect_eq "nor does none" "$(code_as "" /v1/runs/job/report '{"node_id":"a","round":1,"event":"failed"}')" 403
hb=$(post_as "$SA" /v1/runs/job/heartbeat '{"node_id":"a"}')
t_expect_eq "member a re-attaches: round" "$(printf '%s' "$hb" | field round)" 1
t_expect_eq "member a re-attaches: state" "$(printf '%s' "$hb" | field state)" active
hb=$(post_as "$SB" /v1/runs/job/heartbeat '{"node_id":"b"}')
t_expect_eq "member b re-attaches: state" "$(printf '%s' "$hb" | field state)" active
run=$(curl -s "$URL/v1/runs/job")
t_expect_eq "run keeps its round state" "$(printf '%s' "$run" | field round_state)" active
t_expect_eq "run keeps nnodes" "$(printf '%s' "$run" | field nnodes)" 2
t_expect_eq "member b keeps its rank" "$("$PY" -c 'import json,sys; d=json.load(sys.stdin); print([m["node_rank"] for m in d["members"] if m["node_id"]=="b"][0])' <<<"$run")" "$RANK_B"
t_expect_eq "run KV survives" "$(curl -s "$URL/v1/runs/job/kv/master")" 'tcp://10.0.0.1:29500'
done_run=$(curl -s "$URL/v1/runs/done")
t_expect_eq "a shut run stays shut" "$(printf '%s' "$done_run" | field state)" shut
t_expect_eq "with its reason" "$(printf '%s' "$done_run" | field reason)" "operator said so"
t_expect_eq "joining a shut run is still 410" \
  "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Content-Type: application/json" "$URL/v1/runs/done/join" -d '{"node_id":"y","addr":"h","local_world_size":1,"master_port":1,"min_nodes":1,"max_nodes":1}')" 410
# b keeps heartbeating, a never does: after a's lease (8 s from the restart; long enough for
# a loaded machine to send the first heartbeats in time) the round breaks
t_until 30 t_has_lines "$T_DIR/hb-b.states" '^broken$'
kill "$HB_B"
t_expect_eq "a member that does not come back breaks the round" \
  "$(grep -vx active "$T_DIR/hb-b.states" | sort -u | tr '\n' ' ')" "broken "
t_expect_eq "a lost its lease" \
  "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Content-Type: application/json" "$URL/v1/runs/job/heartbeat" -d '{"node_id":"a"}')" 404
durable
stop9
start third
t_expect_eq "after another restart, a's session does not speak for b (403)" \
  "$(code_as "$SA" /v1/runs/job/heartbeat '{"node_id":"b"}')" 403
hb=$(post_as "$SB" /v1/runs/job/heartbeat '{"node_id":"b"}')
t_expect_eq "the broken round is still broken after another restart" "$(printf '%s' "$hb" | field state)" broken

# rendezvous changes only (the v2 index never moved): a graceful stop snapshots them, and
# neither that snapshot nor the log written after it rolls the state back
curl -s -X PUT "$URL/v1/runs/job/kv/master" --data-binary 'second' >/dev/null
kill -TERM "$MPID"
wait "$MPID" 2>/dev/null
start fourth
t_expect_eq "KV after a graceful stop" "$(curl -s "$URL/v1/runs/job/kv/master")" second
curl -s -X PUT "$URL/v1/runs/job/kv/master" --data-binary 'third' >/dev/null
durable
stop9
start fifth
t_expect_eq "KV after a snapshot and a crash" "$(curl -s "$URL/v1/runs/job/kv/master")" third
kill -TERM "$MPID"
wait "$MPID" 2>/dev/null
start sixth
t_expect_eq "KV after two graceful stops" "$(curl -s "$URL/v1/runs/job/kv/master")" third
t_expect_eq "after snapshots, b's own session still speaks for b" \
  "$(code_as "$SB" /v1/runs/job/heartbeat '{"node_id":"b"}')" 200
t_expect_eq "and a's does not" "$(code_as "$SA" /v1/runs/job/heartbeat '{"node_id":"b"}')" 403
for f in first second third fourth fifth sixth; do
  if grep -qF -e "$SA" -e "$SB" "$T_DIR/$f.log"; then t_fail "musterd's log ($f) shows a session"; fi
done
t_ok "no log line shows a session"
t_done
