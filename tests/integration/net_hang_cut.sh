#!/usr/bin/env bash
# A partition is a lost node, not a failure (issue 30 item 4): musterd on h1, three members and
# a hot standby on h2-h5 running the ring all-reduce (which writes its heartbeat file every
# step) with --hang-timeout 4 and --max-restarts 0. The network timeout is 30 s
# (MUSTER_NET_TIMEOUT_MS, as a site that rides through blips sets it), so when h3 is cut off
# both ways the survivors' ranks stall and are declared hung long before musterd sees h3 lost.
# The hang that the loss of a peer causes counts nothing: the run is not shut for want of a
# restart, the standby takes h3's place once h3 is lost, the job completes with the run's
# restart count still 0, and every rank of the finished world is held once (workers' lines).
# Outcomes and upper bounds only.
. "$(dirname "$0")/net_common.bash"
export MUSTER_NET_TIMEOUT_MS=30000
net_up 5
net_musterd 1
common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id hangcut
  --max-restarts 0 --hang-timeout 4)
ring=("$RING" --iters 300 --sleep-ms 100 --timeout-ms 600000)
net_members "${common[@]}" -- "${ring[@]}"
net_agent 5 a5 "${common[@]}" -- "${ring[@]}"
MEMBER_PIDS[5]=$AGENT_PID # the standby
wait_for_lines "$T_DIR/a5.log" 'standby' 1 30 || t_fail "a5 did not wait as a standby"
net_cut 3
# the survivors' ranks stop moving: their agents declare the job hung (or a rank ends as its
# peer's stopped first) and report it, ending round 1 on a failure before musterd sees h3 lost
wait_for_lines "$T_DIR/musterd.log" 'round 1 broken' 1 $((30 * NET_SLOW)) ||
  t_fail "no survivor reported the stalled ranks (hung or failed)"
first=$(grep -nE "round 1 broken|node '[^']*' lost" "$T_DIR/musterd.log" | head -1)
t_expect_match "round 1 ended on the survivors' report before musterd saw h3 lost" "$first" \
  'round 1 broken: node .*(hung|exited|failed)'
wait_for_lines "$T_DIR/musterd.log" "node '[^']*' lost" 1 $((60 * NET_SLOW)) ||
  t_fail "musterd did not see h3 lost"
t_expect_match "musterd says the loss caused the failure" \
  "$(grep -m1 -E "was lost.*the loss caused" "$T_DIR/musterd.log")" 'counts nothing'
for i in 2 4 5; do
  agent_wait "${MEMBER_PIDS[i]}" $((180 * NET_SLOW))
  t_expect_eq "agent on h$i exits 0 (the hang a lost peer caused spent no restart)" "$RC" 0
done
t_expect_eq "the run was not shut" "$(grep -c 'run shut down' "$T_DIR/musterd.log")" 0
info=$(ip netns exec "$(net__h 1)" curl -s "http://$NET_EP/v1/runs/hangcut")
t_expect_match "the run's restart count is 0" "$info" '"restart_count":0[,}]'
t_expect_match "the run ended succeeded" "$info" '"state":"closed"'
net_ranks_once 3 "$T_DIR"/a[245].log
net_dump_logs
[ "$T_FAILS" -eq 0 ] || { echo "# musterd:"; tail -30 "$T_DIR/musterd.log" | sed 's/^/# /'; }
t_done
