#!/usr/bin/env bash
# muster agent, elastic: 3 agents with --nnodes 2:4 run; one is killed with SIGKILL mid-run.
# Its lease expires, the other two re-rendezvous and the job completes with the smaller world.
. "$(dirname "$0")/agent_common.bash"
t_start_musterd
EP=127.0.0.1:$MUSTERD_PORT
common=(--nnodes 2:4 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id shrink --max-restarts 3
        --last-call 1 --lease-ttl 2)
for i in 0 1 2; do
  agent_start "a$i" "${common[@]}" -- "$RING" --iters 25 --sleep-ms 100
  eval "p$i=$AGENT_PID"
done
# All three in one round of world 6, workers running.
for i in 0 1 2; do
  wait_for_lines "$T_DIR/a$i.log" 'started 2 workers \(ranks [0-9]+-[0-9]+ of 6\)' 1 30 ||
    t_fail "agent $i did not start in a world of 6"
done
sleep 1
kill -KILL "$p2"
{ wait "$p2"; } 2>/dev/null
for i in 0 1; do
  eval "agent_wait \$p$i 60"
  t_expect_eq "surviving agent $i exits 0" "$RC" 0
done
all=$(cat "$T_DIR"/a0.log "$T_DIR"/a1.log)
t_expect_eq "the smaller world (4) verified the sum" \
  "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4
t_expect_eq "no rank of world 6 finished" "$(grep -c 'allreduce ok, world 6' <<<"$all")" 0
# An open watch holds a node's lease: an agent heart-beats when it joins and when its workers
# start, not every TTL/3 (which would be ~25 heartbeats here with a 2 s lease).
joins=$(cat "$T_DIR"/a[012].log | grep -cE "round [0-9]+: node rank")
hb=$(curl -s --max-time 5 "http://$EP/metrics" | sed -n 's/^muster_rdzv_heartbeats_total //p')
t_expect_eq "heartbeats: at most 2 per join, plus 2 ($joins joins)" \
  "$([ -n "$hb" ] && [ "$hb" -le $((2 * joins + 2)) ] && echo ok || echo "$hb")" ok
# The killed agent's workers notice their parent is gone and leave no orphans.
t_until 20 eval '[ "$(t_count_procs "$RING --iters 25 --sleep-ms 100")" -eq 0 ]'
t_expect_eq "no ring_allreduce left running" \
  "$(pgrep -f "$RING --iters 25 --sleep-ms 100" | wc -l)" 0
agent_dump_logs
t_done
