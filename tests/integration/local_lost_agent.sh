#!/usr/bin/env bash
# A lost agent on the local scheduler (issue 31 item 4; docs/cli.md, "Lost processes"), on both
# rendezvous backends: the job's embedded musterd, and a 3-member etcd 3.4 cluster (-cfg
# rdzv=etcd-v3://...). `muster run dist.ddp -j 2x1` with default runopts (fail_fast=true), real
# agents, real PyTorch gloo workers (tests/integration/goodput_worker.py, 40 steps of 0.25 s);
# once an active node's worker made a step, kill -9 of that node's agent:
#   spare    --spares 1: the standby takes its place; the job ends SUCCEEDED (muster run exits
#            0), and its message says the agent was killed by SIGKILL and a standby took its
#            place; the last round ran at world 2
#   retry    --max_retries 1, no spare: the agent is restarted and joins again; SUCCEEDED, the
#            message says "restarted (retry 1 of 1)", the replica's log says it too
#   budget   --max_retries 0, no spare: nothing covers it: FAILED (exit 1) with the root cause
#            (muster run and muster status) naming the node, SIGKILL, and no retry left
#   BACKENDS="muster etcd-v3"  CASES="spare retry budget"  (default all)
. "$(dirname "$0")/agent_common.bash"
. "$(dirname "$0")/etcd3_cluster.bash"
t_need_py torch.distributed python3-torch
t_need_cmd etcd etcd-server
export GLOO_SOCKET_IFNAME=lo
W=$MU_SOURCE_DIR/tests/integration/goodput_worker.py
ROLE=goodput_worker
slow=1
[ "$MU_SANITIZED" = 1 ] && slow=2
t_torch_lock
t_local_jobs

# The replica of the job under log dir $1 whose worker made a step: prints its id.
stepped() {
  local f
  for f in "$1"/*/"$ROLE"/*/combined.log; do
    grep -qE '^\[[01]\]:rank [01] step 2$' "$f" 2>/dev/null && basename "$(dirname "$f")" && return 0
  done
  return 1
}
# The pid of replica $2 in the state.json under log dir $1.
replica_pid() {
  "$PY" -c 'import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/*/state.json")[0]))
print([r["pid"] for r in d["replicas"] if r["id"] == int(sys.argv[2])][0])' "$1" "$2"
}

# lost CASE DIST.DDP-ARGS...: the job in the background; kill -9 of a stepping node's agent.
# Sets RC (muster run's exit), ERR (its stderr), ST (muster status), VICTIM (the replica).
lost() {
  local c=$1 logs=$T_DIR/logs-$B-$1 run pid
  shift
  MUSTER_LOG_DIR=$logs "$MUSTER" run "${cfg[@]}" dist.ddp -j 2x1 "$@" --python "$PY" \
    --script "$W" -- --steps 40 --step-ms 250 --print-steps >"$T_DIR/$B-$c.out" \
    2>"$T_DIR/$B-$c.err" &
  run=$!
  T_PIDS+=("$run")
  VICTIM=
  if t_until $((180 * slow)) stepped "$logs" >/dev/null; then
    VICTIM=$(stepped "$logs")
    pid=$(replica_pid "$logs" "$VICTIM")
    echo "# $B $c: kill -9 of replica $VICTIM's agent (pid $pid)"
    kill -KILL "$pid"
  else
    t_fail "$B $c: no worker made a step in $((180 * slow)) s: $(tail -5 "$T_DIR/$B-$c.err")"
  fi
  t_wait_exit "$run" $((300 * slow))
  RC=$T_RC
  ERR=$(cat "$T_DIR/$B-$c.err")
  ST=$(MUSTER_LOG_DIR=$logs "$MUSTER" status "$(cat "$T_DIR/$B-$c.out")" 2>&1)
  echo "# $B $c: muster run exited $RC; its stderr's tail:"
  tail -6 <<<"$ERR" | sed 's/^/#   /'
}

case_spare() {
  lost spare --spares 1
  t_expect_eq "$B spare: the job succeeded (muster run exits 0)" "$RC" 0
  t_expect_match "$B spare: status says SUCCEEDED" "$ST" "State: SUCCEEDED"
  t_expect_match "$B spare: the message names the agent, the signal and the standby" "$ST" \
    "Msg: node $ROLE/$VICTIM's agent was killed by SIGKILL; a standby took its place"
  t_expect_match "$B spare: muster run says it too" "$ERR" \
    "finished: SUCCEEDED after .*node $ROLE/$VICTIM's agent was killed by SIGKILL"
  t_expect_eq "$B spare: the last round ran at world 2, both ranks verified" \
    "$(grep -cE "^$ROLE/[0-2] \[[01]\]:rank [01]: allreduce ok, world 2" <<<"$ERR")" 2
}

case_retry() {
  lost retry --max_retries 1
  t_expect_eq "$B retry: the job succeeded (muster run exits 0)" "$RC" 0
  t_expect_match "$B retry: status says SUCCEEDED" "$ST" "State: SUCCEEDED"
  t_expect_match "$B retry: the message says the agent was restarted" "$ST" \
    "Msg: node $ROLE/$VICTIM's agent was killed by SIGKILL; restarted \(retry 1 of 1\)"
  t_expect_match "$B retry: the restarted replica succeeded" "$ST" "$ROLE\[$VICTIM\]:SUCCEEDED"
  t_expect_eq "$B retry: both ranks of the last round verified at world 2" \
    "$(grep -cE "^$ROLE/[01] \[[01]\]:rank [01]: allreduce ok, world 2" <<<"$ERR")" 2
}

case_budget() {
  lost budget --max_retries 0
  t_expect_eq "$B budget: nothing covers the loss: the job fails (muster run exits 1)" "$RC" 1
  t_expect_match "$B budget: status says FAILED" "$ST" "State: FAILED"
  t_expect_match "$B budget: muster run's root cause names the node, the signal, no retry left" \
    "$ERR" "root cause: node $ROLE/$VICTIM's agent was killed by SIGKILL; no retry left \(max_retries 0\) and no standby"
  t_expect_match "$B budget: muster status's root cause too" "$ST" \
    "Root Cause: node $ROLE/$VICTIM's agent was killed by SIGKILL; no retry left"
  t_expect_eq "$B budget: no restart" "$(grep -c 'restarted (retry' <<<"$ERR$ST")" 0
}

for B in ${BACKENDS:-muster etcd-v3}; do
  cfg=()
  case $B in
  etcd-v3)
    etcd3_start || { t_fail "the etcd cluster did not start"; continue; }
    cfg=(-cfg "rdzv=etcd-v3://127.0.0.1:${EC_PORT[0]},127.0.0.1:${EC_PORT[1]},127.0.0.1:${EC_PORT[2]}")
    ;;
  esac
  echo "# backend $B"
  for c in ${CASES:-spare retry budget}; do "case_$c"; done
done
etcd3_stop
t_done
