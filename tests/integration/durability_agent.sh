#!/usr/bin/env bash
# muster agent across a crash of musterd --data-dir (issue #7): two agents run a 2x2 ring
# all-reduce job; musterd is killed with SIGKILL while the workers run and restarted on the
# same data dir and port. The agents re-attach to their round with their lease (heartbeats
# find the round active) instead of breaking it: the workers are never restarted and the job
# succeeds.
. "$(dirname "$0")/agent_common.bash"

DATA=$T_DIR/data
PORT=$(t_free_port)
EP=127.0.0.1:$PORT
start() {
  t_spawn "$1" "$MUSTERD" --listen "$EP" --data-dir "$DATA" --fsync batch
  MPID=$T_LAST_PID
  t_wait_http "http://$EP/healthz" 20
}
start musterd1 || { t_fail "musterd did not start"; t_done; }

for i in 0 1; do
  agent_start "a$i" --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id crash \
    -- "$RING" --iters 50 --sleep-ms 100
  eval "p$i=\$AGENT_PID"
done
# the 4 workers are up and have exchanged their addresses through the run's KV
wait_for_lines "$T_DIR/a0.log" '^\[[0-3]\]:rank [0-3] local_rank' 2 30 &&
  wait_for_lines "$T_DIR/a1.log" '^\[[0-3]\]:rank [0-3] local_rank' 2 30 ||
  t_fail "workers did not start"
sleep 1
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null
sleep 0.5
start musterd2 || t_fail "musterd did not restart on its data dir"
t_expect_match "restart recovered the run" "$(grep 'recovered data dir' "$T_DIR/musterd2.log")" \
  "1 rendezvous runs"
agent_wait "$p0" 60
c0=$RC
agent_wait "$p1" 60
c1=$RC
t_expect_eq "both agents exit 0" "$c0 $c1" "0 0"
all=$(cat "$T_DIR"/a0.log "$T_DIR"/a1.log)
t_expect_eq "4 ranks verified the all-reduce" \
  "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4
t_expect_eq "the round never broke" "$(grep -c 'is broken' <<<"$all")" 0
t_expect_eq "each agent started its workers once" \
  "$(grep -c 'started 2 workers' "$T_DIR/a0.log") $(grep -c 'started 2 workers' "$T_DIR/a1.log")" "1 1"
state=$(curl -s "http://$EP/v1/runs/crash" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["state"], d["round"])')
t_expect_eq "the run closed after round 1" "$state" "closed 1"
agent_dump_logs
t_done
