#!/usr/bin/env bash
# A partition is a lost node, not a failure (issue 30 items 4 and 6), on both backends: the
# rendezvous on h1 (musterd, or one etcd 3.4 member for etcd-v3), three members and a hot standby
# on h2-h5 running the ring all-reduce (which writes its heartbeat file every step) with
# --hang-timeout 4 and --max-restarts 0. The network timeout is 30 s (MUSTER_NET_TIMEOUT_MS, as
# a site that rides through blips sets it; on etcd v3 the lease too, lease_ttl=10), so when h3
# is cut off both ways the survivors' ranks stall and are declared hung long before the
# connections or the lease tell anyone h3 is gone. The hang that the loss of a peer causes
# counts nothing:
#  - musterd ends round 1 on the survivors' report, then sees h3 lost and gives the restart
#    back (the loss caused the failure);
#  - on etcd the reporter first asks the round's members whether they are alive; h3 answers
#    nothing, so the round ends as lost, uncounted (g/1).
# The run is not shut for want of a restart, the standby takes h3's place, the job completes
# with the run's restart count still 0, and every rank of the finished world is held once
# (workers' lines). Outcomes and upper bounds only.
#
#   BACKENDS="muster etcd-v3" (default both)
. "$(dirname "$0")/net_common.bash"
export MUSTER_NET_TIMEOUT_MS=30000

hang_cut() {
  local b=$1 i first info g
  net_up 5
  net_backend "$b"
  local common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id hangcut
    --max-restarts 0 --hang-timeout 4)
  # such a site's etcd v3 lease rides through blips too (10 s, not the 2 s default, which has
  # h3's key gone, and round 1 broken by the loss, before the survivors' hang: no probe then)
  [ "$b" = etcd-v3 ] && common+=(--rdzv-conf lease_ttl=10)
  local ring=("$RING" --iters 300 --sleep-ms 100 --timeout-ms 600000)
  net_members "${common[@]}" -- "${ring[@]}"
  net_agent 5 a5 "${common[@]}" -- "${ring[@]}"
  MEMBER_PIDS[5]=$AGENT_PID # the standby
  wait_for_lines "$T_DIR/a5.log" 'standby' 1 30 || t_fail "$b: a5 did not wait as a standby"
  net_cut 3
  if [ "$b" = muster ]; then
    # the survivors' ranks stop moving: their agents declare the job hung (or a rank ends as
    # its peer's stopped first) and report it, ending round 1 before musterd sees h3 lost
    wait_for_lines "$T_DIR/musterd.log" 'round 1 broken' 1 $((30 * NET_SLOW)) ||
      t_fail "$b: no survivor reported the stalled ranks (hung or failed)"
    first=$(grep -nE "round 1 broken|node '[^']*' lost" "$T_DIR/musterd.log" | head -1)
    t_expect_match "$b: round 1 ended on the survivors' report before musterd saw h3 lost" \
      "$first" 'round 1 broken: node .*(hung|exited|failed)'
    wait_for_lines "$T_DIR/musterd.log" "node '[^']*' lost" 1 $((60 * NET_SLOW)) ||
      t_fail "$b: musterd did not see h3 lost"
    t_expect_match "$b: musterd says the loss caused the failure" \
      "$(grep -m1 -E "was lost.*the loss caused" "$T_DIR/musterd.log")" 'counts nothing'
  else
    # a survivor's hung report asks who is alive; h3 answers nothing: round 1 ends as lost
    t_until $((30 * NET_SLOW)) eval '[ -n "$(net_etcd_get /muster/hangcut/g/1)" ]' ||
      t_fail "$b: no survivor ended round 1 (g/1)"
    g=$(net_etcd_get /muster/hangcut/g/1)
    t_expect_match "$b: round 1 ended as lost, uncounted: the survivors' hang was the cut's" \
      "$g" '"end":"lost","counted":false'
    # node ids are HOST-PID-XXXX, and h3's agent has the pid we started (setsid, netns exec)
    t_expect_match "$b: the node named lost is h3's" "$g" \
      "node '[^']*-${MEMBER_PIDS[3]}-[0-9a-f]{4}' was lost"
  fi
  for i in 2 4 5; do
    agent_wait "${MEMBER_PIDS[i]}" $((180 * NET_SLOW))
    t_expect_eq "$b: agent on h$i exits 0 (the hang a lost peer caused spent no restart)" "$RC" 0
  done
  if [ "$b" = muster ]; then
    t_expect_eq "$b: the run was not shut" "$(grep -c 'run shut down' "$T_DIR/musterd.log")" 0
    info=$(ip netns exec "$(net__h 1)" curl -s "http://$NET_EP/v1/runs/hangcut")
    t_expect_match "$b: the run's restart count is 0" "$info" '"restart_count":0[,}]'
    t_expect_match "$b: the run ended succeeded" "$info" '"state":"closed"'
  else
    info=$(net_etcd_get /muster/hangcut/c/restarts)
    t_expect_match "$b: the run's restart count is 0 (c/restarts: '$info')" "${info:-none}" \
      '^(none|\{"count":0\})$'
    t_expect_match "$b: the run ended succeeded" "$(net_etcd_get /muster/hangcut/c/end)" \
      '"state":"closed"'
  fi
  net_ranks_once 3 "$T_DIR"/a[245].log
  net_dump_logs
  [ "$T_FAILS" -eq 0 ] || net_backend_log
}
net_each_backend hang_cut
t_done
