#!/usr/bin/env bash
# Goodput (issue 21) on both rendezvous backends, the same cases and the same expectations:
# musterd (--rdzv-backend muster) and a 3-member etcd 3.4 cluster (--rdzv-backend etcd-v3). Real
# agents, real PyTorch gloo workers (tests/integration/goodput_worker.py) under /usr/bin/python3:
#   hang     a rank sleeps forever after step 5 (--hang-timeout 4 --max-restarts 1): caught
#            within the timeout + 1 s (the agent's own measure), the log holds its Python
#            traceback with the sleeping line, the failure record names that line, the run's
#            round says hung, the second attempt completes on all 4 ranks
#   output   a worker that never touches its heartbeat file but prints a line a second is not
#            hung (--hang-timeout 2)
#   standby  3 agents for --nnodes 2 (2 workers each, --max-restarts 0): kill -9 of an active
#            node's agent and workers; the standby's workers start within 2 s of the kill (the
#            rendezvous's own timestamps), the job completes at world size 4 with every rank of
#            the last round verified, and the loss is not a restart
#   health   a node whose health check fails never starts workers, its check's output is in its
#            log, in the run and on musterd's status page (headless chromium, when installed);
#            the job runs on the two healthy nodes;
#            without a standby the run waits and says why, then goes on once the check passes
#   budget   2 agents, --max-restarts 1: a failure on one node, then one on the other, ends the
#            job (no third attempt); both nodes saw TORCHELASTIC_RESTART_COUNT=1 in the second
#   local    muster run dist.ddp on the local scheduler: time to first step and the restart's
#            downtime in `muster status`; with no restart left, the root cause says hung and
#            names the line, in `muster run` and `muster status`
#   standbyfail  3 agents for --nnodes 2, --max-restarts 1: a worker fails while the third waits
#            as a standby beside the full round: one restart counted, on both backends
#   BACKENDS="muster etcd-v3"  CASES="hang output standby standbyfail health budget local"  (default all)
# Under MU_SANITIZED=1 a smaller set runs (musterd: hang, standby, budget; etcd: standby).
. "$(dirname "$0")/agent_common.bash"
. "$(dirname "$0")/etcd3_cluster.bash"
t_need_py torch.distributed python3-torch
t_need_cmd etcd etcd-server
export GLOO_SOCKET_IFNAME=lo
W=$MU_SOURCE_DIR/tests/integration/goodput_worker.py
SLEEP_LINE=$(grep -n 'time.sleep(10 \*\* 9)' "$W" | cut -d: -f1)
TTL=3
t_torch_lock

logs_of() { local n; for n in "$@"; do cat "$T_DIR/$B-$n.log"; done; }
start() { # name extra-args... (an agent of backend $B at $EP)
  local n=$1
  shift
  agent_start "$B-$n" --rdzv-backend "$B" --rdzv-endpoint "$EP" --rdzv-conf "lease_ttl=$TTL" "$@"
  eval "pid_$n=\$AGENT_PID"
}
exits() { # what code name...: each agent exits with code
  local what=$1 code=$2 n
  shift 2
  for n in "$@"; do
    eval "agent_wait \$pid_$n 120"
    t_expect_eq "$B $what: agent $n exits $code" "$RC" "$code"
  done
}
# run_json RUN: the run as the rendezvous shows it (GET /v1/runs/ID, or etcd's keys in its shape)
run_json() {
  "$MUSTER" rdzv --json "$EP_RDZV" "$1" 2>/dev/null |
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["runs"][0]))'
}
# jq-like: run_get RUN PYEXPR (r is the run)
run_get() { run_json "$1" | "$PY" -c "import json,sys; r=json.load(sys.stdin); print($2)"; }
# The pids of process $1 and of everything below it.
tree_pids() {
  local c
  echo "$1"
  for c in $(pgrep -P "$1"); do tree_pids "$c"; done
}

case_hang() {
  local n
  for n in h0 h1; do
    start "$n" --nnodes 2 --nproc-per-node 2 --rdzv-id hang --max-restarts 1 --hang-timeout 4 \
      --hang-initial-timeout 120 -- "$PY" "$W" --steps 12 --step-ms 100 --hang-rank 3 --hang-after 5
  done
  exits hang 0 h0 h1
  local all idle rec
  all=$(logs_of h0 h1)
  idle=$(grep -oE 'no progress from rank [0-9]+ for [0-9.]+ s' <<<"$all" | head -1 | awk '{print $7}')
  t_expect_eq "$B hang: caught within the timeout + 1 s (no progress for ${idle:-?} s)" \
    "$(awk -v t="${idle:-99}" 'BEGIN {print (t >= 4 && t <= 5) ? "yes" : "no"}')" yes
  t_expect_match "$B hang: the log holds the hung rank's traceback with the sleeping line" "$all" \
    "^\[3\]:  File \".*goodput_worker\.py\", line $SLEEP_LINE in step"
  rec=$(grep -h 'failure record: ' "$T_DIR/$B-h0.log" "$T_DIR/$B-h1.log" | grep "goodput_worker\.py:$SLEEP_LINE in step")
  t_expect_match "$B hang: the hung rank's failure record names the line as its exception" "$rec" \
    "\"exception\":\"goodput_worker\.py:$SLEEP_LINE in step\""
  t_expect_match "$B hang: that record says hung, and not waiting" "$rec" \
    '"hung":"no progress for [45] s","waiting":false'
  t_expect_match "$B hang: the run's round 1 ended hung, counted" \
    "$(run_get hang '[(x["end"], x["counted"], x["why"]) for x in r["timings"]["rounds"]]')" \
    "\('hung', True, \"node '[^']+': rank 3 .*hung: no progress for [45] s: goodput_worker\.py:$SLEEP_LINE in step"
  t_expect_eq "$B hang: the second attempt completed on all 4 ranks" \
    "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4 restart 1' <<<"$all")" 4
}

case_output() {
  start o0 --nnodes 1 --nproc-per-node 1 --rdzv-id output --hang-timeout 2 \
    --hang-initial-timeout 120 -- "$PY" "$W" --no-heartbeat --steps 5 --step-ms 1000
  exits output 0 o0
  local all
  all=$(logs_of o0)
  t_expect_eq "$B output: a worker printing a line a second is not hung" \
    "$(grep -c 'no progress from' <<<"$all")" 0
  t_expect_match "$B output: it completed its 5 steps" "$all" "^\[0\]:rank 0: allreduce ok, world 1 restart 0 steps 5"
}

case_standby() {
  local n m
  for n in s0 s1 s2; do
    start "$n" --nnodes 2 --nproc-per-node 2 --rdzv-id standby --max-restarts 0 \
      -- "$PY" "$W" --steps 25 --step-ms 200 --print-steps
    [ "$n" = s1 ] && for m in s0 s1; do
      wait_for_lines "$T_DIR/$B-$m.log" 'started 2 workers' 1 60 ||
        t_fail "$B standby: agent $m did not start its workers"
    done
  done
  wait_for_lines "$T_DIR/$B-s2.log" '^\[muster agent\] standby: ' 1 30 ||
    t_fail "$B standby: the third agent does not say it is a standby"
  # training runs (a step done: past gloo's set-up, where no peer's loss is seen)
  wait_for_lines "$T_DIR/$B-s1.log" '^\[[0-3]\]:rank [0-3] step 2$' 1 60 || t_fail "$B standby: no step"

  local kill_ms pids
  pids=$(tree_pids "$pid_s1")
  kill_ms=$(date +%s%3N)
  kill -KILL $pids 2>/dev/null
  echo "# killed agent s1 and its workers at $kill_ms"
  exits standby 0 s0 s2
  local all started
  all=$(logs_of s0 s2)
  started=$(run_get standby '[x["started_ms"] for x in r["timings"]["rounds"] if x["round"] == 2][0]')
  t_expect_eq "$B standby: the standby's workers started within 2 s of the kill ($((started - kill_ms)) ms, the rendezvous's record)" \
    "$([ -n "$started" ] && [ "$started" != None ] && [ $((started - kill_ms)) -le 2000 ] && echo yes)" yes
  echo "# the run's rounds: $(run_get standby 'r["timings"]["rounds"]')"
  t_expect_match "$B standby: the standby is in round 2" "$(logs_of s2)" "round 2: started 2 workers"
  t_expect_eq "$B standby: every rank of the last round verified its all-reduce at world 4" \
    "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4 restart 0' <<<"$all")" 4
  t_expect_eq "$B standby: the loss is no restart (round 1 ended lost, restart count 0)" \
    "$(run_get standby '(r["timings"]["rounds"][0]["end"], r["restart_count"])')" "('lost', 0)"
}

case_health() {
  local bad="echo 'GPU 0: fell off the bus'; exit 3" n
  start x2 --nnodes 2 --nproc-per-node 1 --rdzv-id health --health-check "$bad" \
    --health-check-interval 1 -- "$PY" "$W" --steps 10
  wait_for_lines "$T_DIR/$B-x2.log" 'health check failed' 1 30 || t_fail "$B health: no check"
  for n in x0 x1; do
    start "$n" --nnodes 2 --nproc-per-node 1 --rdzv-id health -- "$PY" "$W" --steps 10
  done
  t_until 60 eval "run_get health 'r[\"unhealthy\"][0][\"output\"]' 2>/dev/null | grep -q 'fell off the bus'"
  t_expect_match "$B health: the run shows the node unhealthy with its check's output" \
    "$(run_get health '[(u["node_id"], u["output"]) for u in r["unhealthy"]]')" "fell off the bus"
  exits health 0 x0 x1 x2
  t_expect_eq "$B health: the job ran on the two healthy nodes" \
    "$(logs_of x0 x1 | grep -cE '^\[[01]\]:rank [01]: allreduce ok, world 2')" 2
  t_expect_eq "$B health: the unhealthy node never started workers" \
    "$(grep -c 'started 1 worker' "$T_DIR/$B-x2.log")" 0
  t_expect_match "$B health: its log has the check's output" "$(logs_of x2)" "\| GPU 0: fell off the bus"
  # no standby: the run waits and says why, until the check passes
  local flag=$T_DIR/$B-disk-ok
  start y1 --nnodes 2 --nproc-per-node 1 --rdzv-id wait --health-check-interval 1 \
    --health-check "test -e $flag || { echo 'disk /data is full'; exit 1; }" -- "$PY" "$W" --steps 5
  start y0 --nnodes 2 --nproc-per-node 1 --rdzv-id wait -- "$PY" "$W" --steps 5
  if wait_for_lines "$T_DIR/$B-y0.log" "waiting for 1 more node.*1 unhealthy.*disk /data is full" 1 30; then
    t_ok "$B health: without a standby the run waits and says a node is unhealthy and why"
  else
    t_fail "$B health: the waiting node does not say that a node is unhealthy and why: $(tail -3 "$T_DIR/$B-y0.log")"
  fi
  # the status page (musterd's own, in a real browser) shows the node and its check's output
  if [ "$B" = muster ] && command -v chromium >/dev/null; then
    mkdir -p "$T_DIR/shots"
    "$PY" "$MU_SOURCE_DIR/tests/integration/ui_browser.py" --text "$MUSTERD_URL/" wait \
      .unhealthy "disk /data is full" "$B health: the status page shows the unhealthy node and \
its check's output" "$T_DIR/shots" >"$T_DIR/browser.out" 2>&1
    grep -q '^ok - ' "$T_DIR/browser.out" && t_ok "$(sed -n 's/^ok - //p' "$T_DIR/browser.out")" ||
      t_fail "$B health: the status page does not show the unhealthy node: $(head -c 600 "$T_DIR/browser.out")"
  fi
  touch "$flag"
  exits "health (no standby)" 0 y0 y1
}

# A worker fails while a standby waits beside the full round: that counts a restart (the standby
# does not make the round "ending" as a scale-up would), on both backends: the count itself.
case_standbyfail() {
  local n
  for n in f0 f1; do
    start "$n" --nnodes 2 --nproc-per-node 1 --rdzv-id standbyfail --max-restarts 1 \
      -- "$PY" "$W" --steps 60 --step-ms 250 --fail 1:0:40
  done
  for n in f0 f1; do
    wait_for_lines "$T_DIR/$B-$n.log" 'started 1 worker' 1 60 ||
      t_fail "$B standbyfail: agent $n did not start its worker"
  done
  start f2 --nnodes 2 --nproc-per-node 1 --rdzv-id standbyfail --max-restarts 1 \
    -- "$PY" "$W" --steps 60 --step-ms 250 --fail 1:0:40
  wait_for_lines "$T_DIR/$B-f2.log" '^\[muster agent\] standby: ' 1 60 ||
    t_fail "$B standbyfail: the third agent does not say it is a standby"
  if grep -q 'restart 1' <<<"$(logs_of f0 f1)"; then
    t_fail "$B standbyfail: the failure came before the standby waited (the machine is slow?)"
  fi
  for n in f0 f1 f2; do eval "agent_wait \$pid_$n 180"; done
  echo "# the run's rounds: $(run_get standbyfail 'r["timings"]["rounds"]')"
  t_expect_eq "$B standbyfail: the failure counted one restart (round 1 ended failed)" \
    "$(run_get standbyfail '(r["restart_count"], r["timings"]["rounds"][0]["end"])')" \
    "(1, 'failed')"
}

case_budget() {
  local n
  for n in b0 b1; do
    start "$n" --nnodes 2 --nproc-per-node 1 --rdzv-id budget --max-restarts 1 \
      -- "$PY" "$W" --steps 10 --fail 0:0:3 --fail 1:1:3
  done
  exits budget 1 b0 b1
  local n0 n1
  n0=$(logs_of b0)
  n1=$(logs_of b1)
  t_expect_match "$B budget: agent b0 saw restart count 1 in the second attempt" "$n0" \
    '^\[[01]\]:rank [01] world 2 restart 1 '
  t_expect_match "$B budget: agent b1 saw restart count 1 in the second attempt" "$n1" \
    '^\[[01]\]:rank [01] world 2 restart 1 '
  t_expect_eq "$B budget: no third attempt" "$(grep -cE 'world 2 restart [2-9]' <<<"$n0$n1")" 0
  t_expect_match "$B budget: the run was shut with no restart left" \
    "$(run_get budget '(r["state"], r["reason"])')" "'shut'.*no restart left"
}

case_local() {
  local cfg=() h st
  [ "$B" = etcd-v3 ] && cfg=(-cfg "rdzv=$EP_RDZV")
  h=$(cd "$T_DIR" && "$MUSTER" run "${cfg[@]}" dist.ddp -j 1x2 --max_retries 1 --hang_timeout 3 \
    --hang_initial_timeout 120 --python "$PY" --script "$W" -- --steps 8 --hang-rank 1 \
    --hang-after 2 2>"$T_DIR/$B-local1.err")
  t_expect_eq "$B local: the job recovered from the hang" "$?" 0
  st=$("$MUSTER" status "$h" 2>&1)
  t_expect_match "$B local: muster status shows the time to first step" "$st" \
    "Time To First Step: [0-9]+\.[0-9]+s"
  t_expect_match "$B local: muster status shows the restart's downtime" "$st" \
    "Restart Downtime: round 2 after round 1 hung: downtime [0-9]+\.[0-9]+s"
  h=$(cd "$T_DIR" && "$MUSTER" run "${cfg[@]}" dist.ddp -j 1x2 --max_retries 0 --hang_timeout 3 \
    --hang_initial_timeout 120 --python "$PY" --script "$W" -- --steps 8 --hang-rank 1 \
    --hang-after 2 2>"$T_DIR/$B-local2.err")
  t_expect_eq "$B local: with no restart left the job fails" "$?" 1
  t_expect_match "$B local: muster run's root cause says hung and names the line" \
    "$(cat "$T_DIR/$B-local2.err")" \
    "root cause: rank 1 .*hung: no progress for [34] s: goodput_worker\.py:$SLEEP_LINE in step"
  t_expect_match "$B local: muster status's root cause too" "$("$MUSTER" status "$h" 2>&1)" \
    "Root Cause: rank 1 .*hung: no progress for [34] s: goodput_worker\.py:$SLEEP_LINE in step"
}

t_local_jobs
for B in ${BACKENDS:-muster etcd-v3}; do
  case $B in
  muster)
    t_start_musterd || { t_fail "musterd did not start"; continue; }
    EP=127.0.0.1:$MUSTERD_PORT
    EP_RDZV=$EP
    ;;
  etcd-v3)
    etcd3_start || { t_fail "the etcd cluster did not start"; continue; }
    EP=$EC_EP
    EP_RDZV="etcd-v3://127.0.0.1:${EC_PORT[0]},127.0.0.1:${EC_PORT[1]},127.0.0.1:${EC_PORT[2]}"
    ;;
  esac
  echo "# backend $B at $EP"
  all="hang output standby standbyfail health budget local"
  [ "$MU_SANITIZED" = 1 ] && all=$([ "$B" = muster ] && echo "hang standby budget" || echo standby)
  want() { [[ " ${CASES:-$all} " == *" $1 "* ]]; }
  for c in hang output standby standbyfail health budget local; do
    want "$c" && "case_$c"
  done
  [ "$B" = muster ] && t_stop_musterd_checked # a clean exit, no sanitizer report
done
agent_dump_logs
etcd3_stop
t_done
