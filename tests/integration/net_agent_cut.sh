#!/usr/bin/env bash
# An agent rides through a partition (issue 30 item 5): musterd on h1, three members and a hot
# standby on h2-h5; h3 is cut off both ways for 60 s. The standby takes its place; h3's agent
# stops its workers once the rendezvous has not answered for a lease, keeps re-joining with
# backoff (the run's join timeout, not a fixed 30 s), and after the heal comes back: it waits as
# a standby of the full run and ends with it (exit 0). Every rank of the finished world held once.
. "$(dirname "$0")/net_common.bash"
net_up 5
net_musterd 1
common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id ride --max-restarts 3)
net_members "${common[@]}" -- "$RING" --iters 900 --sleep-ms 100 --timeout-ms 600000
net_agent 5 a5 "${common[@]}" -- "$RING" --iters 900 --sleep-ms 100 --timeout-ms 600000
MEMBER_PIDS[5]=$AGENT_PID # the standby
wait_for_lines "$T_DIR/a5.log" 'standby' 1 30 || t_fail "a5 did not wait as a standby"
net_cut 3
wait_for_lines "$T_DIR/a5.log" 'started 1 worker' 1 $((10 * NET_SLOW)) ||
  t_fail "the standby did not take the cut member's place"
# h3's agent notices it lost the rendezvous and stops its workers (within a lease and a bit)
wait_for_lines "$T_DIR/a3.log" 'stopping workers' 1 $((30 * NET_SLOW)) ||
  t_fail "h3's agent did not stop its workers while cut off"
# the cut lasts 60 s in all; the agent must still be trying at its end (it gave up after 30 s)
t_until 60 eval '! kill -0 ${MEMBER_PIDS[3]} 2>/dev/null' && t_fail "h3's agent exited while cut off (status: $(wait "${MEMBER_PIDS[3]}"; echo $?))"
net_heal 3
if t_until $((60 * NET_SLOW)) eval 't_has_lines "$T_DIR/a3.log" "standby: round|node rank [0-9] of"'; then
  t_ok "h3's agent came back after the heal: $(grep -E 'standby: round|node rank [0-9] of' "$T_DIR/a3.log" | tail -1 | cut -c1-100)"
else
  t_fail "h3's agent did not come back within $((60 * NET_SLOW)) s of the heal"
fi
for i in 2 4 5 3; do
  agent_wait "${MEMBER_PIDS[i]}" 180
  t_expect_eq "agent on h$i exits 0" "$RC" 0
done
net_ranks_once 3 "$T_DIR"/a[245].log
net_dump_logs
[ "$T_FAILS" -eq 0 ] || { echo "# musterd:"; tail -30 "$T_DIR/musterd.log" | sed 's/^/# /'; }
t_done
