#!/usr/bin/env bash
# muster agent, elastic: 2 agents with --nnodes 2:3 run; a 3rd arrives late. The running
# agents are told that a node waits, stop their workers and re-join; the next round has all
# three nodes (world 6) and completes.
#
# No timing assumption: round 1's workers run for up to 30 s, so they are still running when
# the late agent joins however long it takes to start on a loaded machine (the scale-up must
# stop them); later rounds run 2 s. The wrapper picks the length from MUSTER_ROUND, which the
# agent sets for its workers.
. "$(dirname "$0")/agent_common.bash"
t_start_musterd
EP=127.0.0.1:$MUSTERD_PORT
common=(--nnodes 2:3 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id grow --last-call 0.5)
W=$T_DIR/worker.sh
printf '#!/bin/sh\nif [ "$MUSTER_ROUND" = 1 ]; then i=300; else i=20; fi\nexec "%s" --iters "$i" --sleep-ms 100\n' \
  "$RING" >"$W"
chmod +x "$W"
agent_start a0 "${common[@]}" -- "$W"
p0=$AGENT_PID
agent_start a1 "${common[@]}" -- "$W"
p1=$AGENT_PID
for i in 0 1; do
  wait_for_lines "$T_DIR/a$i.log" 'started 2 workers \(ranks [0-9]+-[0-9]+ of 4\)' 1 30 ||
    t_fail "agent $i did not start in a world of 4"
done
agent_start a2 "${common[@]}" -- "$W"
p2=$AGENT_PID
for i in 0 1 2; do
  eval "agent_wait \$p$i 60"
  t_expect_eq "agent $i exits 0" "$RC" 0
done
all=$(cat "$T_DIR"/a0.log "$T_DIR"/a1.log "$T_DIR"/a2.log)
t_expect_match "the running agents were told a node waits" "$(cat "$T_DIR/a0.log")" \
  "is waiting|a node waits to join"
t_expect_eq "no round-1 worker ran to its end" "$(grep -c 'allreduce ok, world 4' <<<"$all")" 0
t_expect_eq "world 6 verified the sum on all ranks" \
  "$(grep -cE '^\[[0-5]\]:rank [0-5]: allreduce ok, world 6' <<<"$all")" 6
t_expect_eq "no restart was counted for a scale-up" "$(grep -c 'restart 1 ' <<<"$all")" 0
t_expect_match "the late agent joined round 2" "$(cat "$T_DIR/a2.log")" "round 2: node rank 2 of 3"
agent_dump_logs
t_done
