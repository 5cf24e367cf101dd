#!/usr/bin/env bash
# Waiting is visible: an agent whose peer never comes says what it waits for within 5 s
# ("waiting for 1 more node (1 of 2 joined) in run 'job8' at HOST:PORT, 3 s"); musterd logs one
# info line per run event (created, joins, round closed, member lost or left, round broken and
# why, run ended) and GET /v1/events returns them, answering a long poll at the next event.
. "$(dirname "$0")/agent_common.bash"
t_start_musterd || t_done
EP=127.0.0.1:$MUSTERD_PORT

# 1. One of two nodes: the waiting line within 5 s of the start.
start=$SECONDS
agent_start a1 --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$EP" --rdzv-id job8 \
  --join-timeout 60 -- "$RING" --count 16
if wait_for_lines "$T_DIR/a1.log" "waiting for 1 more node \(1 of 2 joined\) in run 'job8' at $EP, [0-9]+ s" 1 5; then
  t_ok "waiting line within 5 s ($((SECONDS - start)) s)"
else
  t_fail "no waiting line within 5 s: $(cat "$T_DIR/a1.log")"
fi
grep -q "run 'job8': run created (nodes 2:2" "$T_DIR/musterd.log" && t_ok "musterd: run created" ||
  t_fail "musterd: no 'run created' line"

# 2. A long poll of the events answers at the next event: the second node's join.
ev=$(curl -s "$MUSTERD_URL/v1/events?after=0&timeout_ms=0")
seq=$(printf '%s' "$ev" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
t_expect_match "events so far: created and one join" "$ev" '"kind":"run".*"kind":"join"'
curl -s "$MUSTERD_URL/v1/events?after=$seq&timeout_ms=30000" >"$T_DIR/poll.json" &
poll=$!
agent_start a2 --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$EP" --rdzv-id job8 \
  --join-timeout 60 -- "$RING" --count 16
t_wait_exit "$poll" 20
t_expect_eq "the long poll returned at the next event" "$T_RC" 0
t_expect_match "it holds the second join" "$(cat "$T_DIR/poll.json")" '"kind":"join"'
# muster rdzv: the runs, the round and its members from the command line.
wait_for_lines "$T_DIR/musterd.log" "run 'job8': round 1 closed" 1 20
out=$("$MUSTER" rdzv "$EP" job8 2>&1)
t_expect_match "muster rdzv: the run and its round" "$out" \
  "run job8: (open|closed), round 1 (active|broken), "
n=$("$MUSTER" rdzv --json "$EP" | "$PY" -c 'import json, sys
d = json.load(sys.stdin)
print(len(d["runs"]), [e["kind"] for e in d["events"]][:3])')
t_expect_eq "muster rdzv --json: the run and the events" "$n" "1 ['run', 'join', 'join']"
"$MUSTER" rdzv "$EP" nosuchrun >/dev/null 2>"$T_DIR/rdzv.err"
t_expect_eq "muster rdzv: an unknown run exits 1" "$?" 1
t_expect_match "muster rdzv: says so" "$(cat "$T_DIR/rdzv.err")" "has no run 'nosuchrun'"
agent_wait "$AGENT_PID" 60
t_expect_eq "the run succeeded" "$RC" 0
wait_for_lines "$T_DIR/musterd.log" "run 'job8': run closed: every member left with success" 1 10 &&
  t_ok "musterd: run closed" || t_fail "musterd: no 'run closed' line"
t_expect_match "musterd: the round" "$(cat "$T_DIR/musterd.log")" \
  "INFO run 'job8': round 1 closed with 2 nodes \(world size 2\)"

# 3. A member lost: its agent is killed, its watch's connection closes (at once), the round
#    breaks and says why.
t_spawn watch "$MUSTER" rdzv --watch --json "$EP"
agent_start b1 --nnodes 1:2 --nproc-per-node 1 --rdzv-endpoint "$EP" --rdzv-id job9 \
  --lease-ttl 1 --last-call 0 -- sleep 60
wait_for_lines "$T_DIR/musterd.log" "run 'job9': round 1 closed" 1 20
# A barrier with one of two arrivals, and the member's lease: muster rdzv shows both.
t_spawn barrier curl -s -X POST -H 'Content-Type: application/json' -d '{"count": 2, "id": "rank-0", "timeout_ms": 60000}' \
  "$MUSTERD_URL/v1/runs/job9/barrier/b1"
t_until 10 eval "\"$MUSTER\" rdzv \"$EP\" job9 | grep -q 'barrier b1'"
out=$("$MUSTER" rdzv "$EP" job9 2>&1)
t_expect_match "muster rdzv: the barrier and who arrived" "$out" "barrier b1: 1 of 2 arrived \(rank-0\)"
t_expect_match "muster rdzv: the member's lease" "$out" "node [^ ]+: (live \(its watch holds the lease\)|lease, last seen [0-9.]+ s ago)"
kill -KILL -- "-$AGENT_PID" 2>/dev/null
wait_for_lines "$T_DIR/musterd.log" "run 'job9': node '[^']*' lost: its watch's connection closed" 1 20 &&
  t_ok "musterd: member lost" || t_fail "musterd: no 'lost' line"
t_expect_match "musterd: round broken and why" "$(cat "$T_DIR/musterd.log")" \
  "run 'job9': round 1 broken: node '[^']*' was lost \(its connection closed\)"
wait_for_lines "$T_DIR/watch.log" '"kind":"lost"' 1 10 &&
  t_ok "muster rdzv --watch: printed again at the loss" || t_fail "rdzv --watch: $(cat "$T_DIR/watch.log")"
t_stop_musterd_checked
t_done
