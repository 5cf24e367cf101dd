#!/usr/bin/env bash
# The job's progress (issue 31 items 1, 2, 3, 7; docs/agent.md, "Progress" and "Hung ranks") on
# both rendezvous backends, musterd (--rdzv-backend muster) and a 3-member etcd 3.4 cluster
# (etcd-v3). Real agents, real PyTorch gloo workers (tests/integration/progress_worker.py) under
# /usr/bin/python3; only the ranks the worker's --talk names make progress the agent can see:
#   silent   2 nodes x 2, --hang-timeout 5, only rank 0 prints (a line per 0.2 s step, 50
#            steps), ranks 1-3 their first step only: the job succeeds, no agent sees a hang
#            (the node without rank 0 made progress of its own once, so the 5 s timeout holds
#            for it, and only rank 0's progress, shared through the rendezvous, keeps it going)
#   import   2 nodes x 1, an 8 s sleep before `import torch`, --hang-timeout 5 and no
#            --hang-initial-timeout: succeeds (the default initial timeout, 600 s)
#   hung     2 nodes x 2, rank 3 sleeps after step 5, --hang-timeout 4 --max-restarts 1, rank 0
#            writes `step N` (and `checkpoint N` every 3 steps) to its heartbeat file: caught
#            within the timeout + 1 s (the agent's own measure of the job's time without
#            progress), rank 3's stack in the log, rank 3 named the suspect by its stack, the
#            checkpoint said, the step in the hang line; the second attempt completes
#   auto     1 node x 2, --hang-timeout auto, 0.2 s steps, rank 0 fails at step 30 of the first
#            attempt (--max-restarts 1): the learned timeout is said, in 5..60 s, and the
#            second attempt starts with the value the rendezvous kept
#   stop     2 nodes x 1, workers that never make progress, --hang-timeout 2
#            --hang-initial-timeout 2 --max-restarts 9 --max-no-progress-restarts 2: the hang
#            line names --hang-initial-timeout, every agent exits 93 after the third attempt
#            (two restarts without progress), and the run was shut saying why
#   regex    (musterd only: no rendezvous part) --progress-regex: a worker that prints a
#            non-matching line every 0.3 s is hung within the timeout; the matching line
#            counts (a worker printing matching lines is not hung); a bad pattern exits 2
#            naming it
#   BACKENDS="muster etcd-v3"  CASES="silent import hung auto stop regex"  (default all)
# Under MU_SANITIZED=1 a smaller set runs (musterd: hung, stop, regex; etcd: hung): the agent's
# and the rendezvous's code of each path once; the normal build runs every case.
. "$(dirname "$0")/agent_common.bash"
. "$(dirname "$0")/etcd3_cluster.bash"
t_need_py torch.distributed python3-torch
t_need_cmd etcd etcd-server
export GLOO_SOCKET_IFNAME=lo
W=$MU_SOURCE_DIR/tests/integration/progress_worker.py
HANG_LINE=$(grep -n 'time.sleep(10 \*\* 9)  # the hang' "$W" | cut -d: -f1)
slow=1
[ "$MU_SANITIZED" = 1 ] && slow=2
t_torch_lock

logs_of() { local n; for n in "$@"; do cat "$T_DIR/$B-$n.log"; done; }
start() { # name extra-args... (an agent of backend $B at $EP)
  local n=$1
  shift
  agent_start "$B-$n" --rdzv-backend "$B" --rdzv-endpoint "$EP" "$@"
  eval "pid_$n=\$AGENT_PID"
}
exits() { # what code name...: each agent exits with code
  local what=$1 code=$2 n
  shift 2
  for n in "$@"; do
    eval "agent_wait \$pid_$n $((240 * slow))"
    t_expect_eq "$B $what: agent $n exits $code" "$RC" "$code"
  done
}
run_get() { # RUN PYEXPR: the run as the rendezvous shows it (r)
  "$MUSTER" rdzv --json "$EP_RDZV" "$1" 2>/dev/null |
    "$PY" -c "import json,sys; r=json.load(sys.stdin)['runs'][0]; print($2)"
}

case_silent() {
  local n
  for n in s0 s1; do
    start "$n" --nnodes 2 --nproc-per-node 2 --rdzv-id silent --hang-timeout 5 \
      -- "$PY" "$W" --steps 50 --step-ms 200 --talk 0 --once 1,2,3
  done
  exits silent 0 s0 s1
  local all
  all=$(logs_of s0 s1)
  t_expect_eq "$B silent: rank 0 did all 50 steps" "$(grep -c '^\[0\]:rank 0 step [0-9]* restart 0' <<<"$all")" 50
  t_expect_eq "$B silent: ranks 1-3 printed their first step only" \
    "$(grep '^\[[123]\]:' <<<"$all" | sed 's/^\[\([123]\)\]:rank [123] step \([0-9]*\) .*/\1 \2/' | sort | tr '\n' ' ')" "1 1 2 1 3 1 "
  t_expect_eq "$B silent: no agent saw a hang" "$(grep -c 'no progress from' <<<"$all")" 0
}

case_import() {
  local n
  for n in i0 i1; do
    start "$n" --nnodes 2 --nproc-per-node 1 --rdzv-id import --hang-timeout 5 \
      -- "$PY" "$W" --steps 10 --step-ms 100 --talk 0,1 --import-s 8
  done
  exits import 0 i0 i1
  local all
  all=$(logs_of i0 i1)
  t_expect_eq "$B import: both ranks finished" "$(grep -c 'done, world 2 restart 0 steps 10' <<<"$all")" 2
  t_expect_eq "$B import: no hang during the 8 s import" "$(grep -c 'no progress from' <<<"$all")" 0
}

case_hung() {
  local n
  for n in h0 h1; do
    start "$n" --nnodes 2 --nproc-per-node 2 --rdzv-id hung --max-restarts 1 --hang-timeout 4 \
      -- "$PY" "$W" --steps 12 --step-ms 100 --talk 0 --heartbeat --checkpoint-every 3 \
      --hang-rank 3 --hang-after 5
  done
  exits hung 0 h0 h1
  local all idle
  all=$(logs_of h0 h1)
  idle=$(grep -oE 'nor from any rank of the job for [0-9.]+ s' <<<"$all" | head -1 | awk '{print $9}')
  t_expect_eq "$B hung: caught within the timeout + 1 s (the job without progress for ${idle:-?} s)" \
    "$(awk -v t="${idle:-99}" 'BEGIN {print (t >= 4 && t <= 5) ? "yes" : "no"}')" yes
  t_expect_match "$B hung: the log holds rank 3's stack with its sleeping line" "$all" \
    "^\[3\]:  File \".*progress_worker\.py\", line $HANG_LINE in main"
  t_expect_match "$B hung: rank 3 is named the suspect by its stack" "$all" \
    "suspects of the hang on this node: rank 3 \(suspect-own-code: progress_worker\.py:$HANG_LINE in main\)"
  t_expect_match "$B hung: rank 0's checkpoint line was read" "$all" 'round 1: rank 0: checkpoint 3$'
  t_expect_match "$B hung: the hang line says the last step" "$all" \
    'the last step reported: [45]\): hung \(rule hung-job\)'
  t_expect_match "$B hung: the run's round 1 ended hung, rank 3 its cause" \
    "$(run_get hung '[(x["end"], x["why"]) for x in r["timings"]["rounds"]]')" \
    "\('hung', \"node '[^']+': rank 3 .*hung: no progress for [45] s: progress_worker\.py:$HANG_LINE in main"
  t_expect_eq "$B hung: the second attempt completed" \
    "$(grep -c 'rank 0: done, world 4 restart 1 steps 12' <<<"$all")" 1
}

case_auto() {
  start a0 --nnodes 1 --nproc-per-node 2 --rdzv-id auto --max-restarts 1 --hang-timeout auto \
    -- "$PY" "$W" --steps 40 --step-ms 200 --talk 0,1 --fail-at 30
  exits auto 0 a0
  local all t kept
  all=$(logs_of a0)
  t=$(grep -oE 'hang timeout \(--hang-timeout auto\): [0-9.]+ s in use: ' <<<"$all" | tail -1 | awk '{print $5}')
  t_expect_eq "$B auto: the learned timeout (${t:-none} s) is in 5..60 s" \
    "$(awk -v t="${t:-0}" 'BEGIN {print (t >= 5 && t <= 60) ? "yes" : "no"}')" yes
  # the value kept: at least the one said (it grows by less than 10% unsaid), still sane
  kept=$(grep -oE 'in use, kept by the rendezvous from an earlier attempt \([0-9.]+ s\)' <<<"$all" |
    head -1 | grep -oE '[0-9.]+ s\)$' | tr -d ' s)')
  t_expect_eq "$B auto: the second attempt starts with the value the rendezvous kept (${kept:-none} s, said ${t:-none} s)" \
    "$(awk -v k="${kept:-0}" -v t="${t:-99}" 'BEGIN {print (k >= t && k <= 60) ? "yes" : "no"}')" yes
  t_expect_eq "$B auto: no hang" "$(grep -c 'no progress from' <<<"$all")" 0
  t_expect_eq "$B auto: the second attempt completed" \
    "$(grep -c 'done, world 2 restart 1 steps 40' <<<"$all")" 2
}

case_stop() {
  local n
  for n in x0 x1; do
    start "$n" --nnodes 2 --nproc-per-node 1 --rdzv-id stop --max-restarts 9 --stop-grace 1 \
      --hang-timeout 2 --hang-initial-timeout 2 --max-no-progress-restarts 2 \
      -- "$PY" "$W" --never
  done
  exits stop 93 x0 x1
  local all
  all=$(logs_of x0 x1)
  t_expect_match "$B stop: the hang before the first progress names --hang-initial-timeout" \
    "$all" 'nor from any rank of the job for [0-9.]+ s \(--hang-initial-timeout 2\.0 s, the timeout before'
  t_expect_match "$B stop: the agents say why they stopped" "$all" \
    'stop retrying: no progress over 2 consecutive restarts'
  t_expect_eq "$B stop: no fourth attempt" "$(grep -c 'round [0-9]*: started 1 worker' "$T_DIR/$B-x0.log")" 3
  t_expect_match "$B stop: the run was shut saying why" "$(run_get stop '(r["state"], r["reason"])')" \
    "'shut'.*stop retrying: no progress over 2 consecutive restarts"
}

case_regex() {
  local out rc
  start r0 --nnodes 1 --rdzv-id regex --hang-timeout 3 --hang-initial-timeout 30 \
    --progress-regex '^step [0-9]+$' -- bash -c 'echo step 1; while :; do echo noise; sleep 0.3; done'
  exits regex 1 r0
  t_expect_match "$B regex: non-matching lines are no progress: hung" "$(logs_of r0)" \
    'nor from any rank of the job for [34]\.[0-9] s \(--hang-timeout 3\.0 s\)'
  start r1 --nnodes 1 --rdzv-id regex1 --hang-timeout 2 --hang-initial-timeout 30 \
    --progress-regex 'step [0-9]+' -- bash -c 'for i in $(seq 12); do echo noise; echo "at step $i"; sleep 0.5; done'
  exits regex 0 r1
  t_expect_eq "$B regex: matching lines are progress: not hung" "$(grep -c 'no progress from' "$T_DIR/$B-r1.log")" 0
  out=$("$MUSTER" agent --standalone --hang-timeout 3 --progress-regex '(step' -- true 2>&1)
  rc=$?
  t_expect_eq "a bad --progress-regex exits 2" "$rc" 2
  t_expect_match "it names the pattern and the fix" "$out" \
    "--progress-regex '\(step': .*; give a POSIX extended regular expression"
  out=$("$MUSTER" agent --standalone --hang-timeout soon -- true 2>&1)
  t_expect_match "a bad --hang-timeout names it and 'auto'" "$out" \
    "--hang-timeout 'soon': expected seconds \(0: no hang watch\) or 'auto'"
  out=$("$MUSTER" agent --help 2>&1)
  t_expect_match "--help says what counts as progress" "$out" \
    "progress is a change of a worker's MUSTER_HEARTBEAT_FILE modification time"
}

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
  all="silent import hung auto stop"
  [ "$B" = muster ] && all="$all regex"
  [ "$MU_SANITIZED" = 1 ] && all=$([ "$B" = muster ] && echo "hung stop regex" || echo hung)
  for c in silent import hung auto stop regex; do
    [[ " ${CASES:-$all} " == *" $c "* && " $all " == *" $c "* ]] && "case_$c"
  done
  [ "$B" = muster ] && t_stop_musterd_checked
done
agent_dump_logs
etcd3_stop
t_done
