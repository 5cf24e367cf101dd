#!/usr/bin/env bash
# No blocking calls on the agent's loop (issue 29 item 5): musterd stops answering (SIGSTOP) just
# before the worker's first progress, which the agent reports to the rendezvous, and answers
# again only 8 s later (SIGCONT). The worker then makes no more progress: the hang watch
# (--hang-timeout 2) must still see it hung within a few seconds, long before musterd answers,
# as it did when the report ran on the loop and stopped the watch until the call timed out.
. "$(dirname "$0")/agent_common.bash"
t_start_musterd
EP=127.0.0.1:$MUSTERD_PORT
slow=1
[ "$MU_SANITIZED" = 1 ] && slow=2
agent_start a --nnodes 1 --nproc-per-node 1 --rdzv-endpoint "$EP" --rdzv-id slow \
  --max-restarts 0 --hang-timeout 2 --hang-initial-timeout 60 -- \
  bash -c 'sleep 3; echo first step; exec sleep 100'
p=$AGENT_PID
wait_for_lines "$T_DIR/a.log" 'started 1 worker' 1 30 || t_fail "the agent did not start its worker"
kill -STOP "$MUSTERD_PID"
stopped=$SECONDS
if ! wait_for_lines "$T_DIR/a.log" 'first step' 1 10; then
  t_fail "the worker did not print its first step"
fi
seen=$(date +%s%N)
if t_until $((5 * slow)) t_has_lines "$T_DIR/a.log" 'no progress from rank 0 for'; then
  t_ok "the hang watch fired $((($(date +%s%N) - seen) / 1000000)) ms after the last progress (--hang-timeout 2, bound $((5 * slow)) s) while musterd did not answer"
else
  t_fail "the hang watch did not fire within $((5 * slow)) s of the last progress while musterd did not answer"
fi
t_expect_eq "musterd was still stopped when the hang was seen" "$((SECONDS - stopped < 8))" 1
# musterd answers 8 s after it stopped; the agent then reports the hang and ends (no restart)
t_until 10 eval '[ $((SECONDS - stopped)) -ge 8 ]'
kill -CONT "$MUSTERD_PID"
agent_wait "$p" $((60 * slow))
t_expect_eq "the agent ends as failed once musterd answers (exit 1)" "$RC" 1
t_expect_match "it names the hang" "$(cat "$T_DIR/a.log")" 'hung'
agent_dump_logs
t_stop_musterd_checked
t_done
