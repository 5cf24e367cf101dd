#!/usr/bin/env bash
# muster agent: a worker failing once with --max-restarts 1 succeeds on the 2nd attempt with
# TORCHELASTIC_RESTART_COUNT=1; with --max-restarts 0 the agent exits 1 with a summary naming
# the rank, exit code, host and the error file's message, and the other agent stops too.
. "$(dirname "$0")/agent_common.bash"
t_start_musterd
EP=127.0.0.1:$MUSTERD_PORT

agent_start a0 --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id once \
  --max-restarts 1 -- "$RING" --fail-rank 3
p0=$AGENT_PID
agent_start a1 --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id once \
  --max-restarts 1 -- "$RING" --fail-rank 3
p1=$AGENT_PID
agent_wait "$p0" 60
t_expect_eq "max-restarts 1: agent 0 exits 0" "$RC" 0
agent_wait "$p1" 60
t_expect_eq "max-restarts 1: agent 1 exits 0" "$RC" 0
all=$(cat "$T_DIR"/a0.log "$T_DIR"/a1.log)
t_expect_match "rank 3 failed once" "$all" "rank 3 \(local rank 1, node rank 1\) on host .*: exit code 1"
t_expect_match "restart 1 for rank 3" "$all" '^\[3\]:rank 3 local_rank 1 world 4 .*restart 1 '
t_expect_eq "2nd attempt verified by all 4 ranks" \
  "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4

agent_start b0 --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id fatal \
  --max-restarts 0 -- "$RING" --fail-rank 2 --iters 50 --sleep-ms 100
q0=$AGENT_PID
agent_start b1 --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id fatal \
  --max-restarts 0 -- "$RING" --fail-rank 2 --iters 50 --sleep-ms 100
q1=$AGENT_PID
agent_wait "$q0" 30
c0=$RC
agent_wait "$q1" 30
c1=$RC
t_expect_eq "max-restarts 0: both agents exit 1" "$c0 $c1" "1 1"
all=$(cat "$T_DIR"/b0.log "$T_DIR"/b1.log)
t_expect_match "summary names the rank, code and host" "$all" \
  "worker failure in run 'fatal'.*restarts left: 0"
t_expect_match "summary line" "$all" "rank 2 \(local rank 0, node rank 1\) on host $(hostname) .*exit code 1"
t_expect_match "error file message" "$all" "\| ring_allreduce: injected failure on rank 2 \(restart 0\)"
t_expect_match "the failing agent says the run failed" "$all" "run 'fatal' failed: rank 2"
t_expect_match "the other agent learns the run was shut" "$all" "shut"
agent_dump_logs
t_done
