#!/usr/bin/env bash
# The etcd v3 cluster in a box (issue 30 item 6): three etcd 3.4 members on three hosts (h1-h3,
# one cluster), three agent members on h4-h6 and a hot standby on h7, all with
# --rdzv-endpoint etcd-v3://198.18.0.1:2379,198.18.0.2:2379,198.18.0.3:2379 (h1 first: the
# member every agent talks to), running the ring all-reduce. Each case on a cluster of its own:
#   member  h1, an etcd member's host, is cut both ways (no FIN, no RST): the cluster keeps its
#           quorum (2 of 3), the agents move to the next member (keepalive, TCP_USER_TIMEOUT),
#           and nothing of the run is lost: the job completes in round 1, the standby's worker
#           never starts, no restart is counted
#   agent   h5, an agent member's host, is cut both ways: its key expires with its lease (2 s
#           by default), the standby takes its place (within 15 s), the job completes in a
#           world of 3 with no restart counted
# Every rank of the finished world held once (the workers' own lines). Outcomes and upper
# bounds only.
#   CASES="member agent" (default both)
. "$(dirname "$0")/net_common.bash"

# Three etcd members on h1-h3, one cluster; sets NET_EP, and NET_ETCD/NET_ETCD_HOST (h2's).
etcd_cluster() {
  local i ip cluster="" urls=""
  command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
    { echo "not ok - needs etcd and etcdctl (etcd-server, etcd-client)"; exit 1; }
  for i in 1 2 3; do cluster+="${cluster:+,}e$i=http://$(net_ip "$i"):2380"; done
  for i in 1 2 3; do
    ip=$(net_ip "$i")
    rm -rf "$T_DIR/etcd$i-data"
    net_spawn "$i" "etcd$i" etcd --name "e$i" --data-dir "$T_DIR/etcd$i-data" \
      --listen-client-urls "http://$ip:2379" --advertise-client-urls "http://$ip:2379" \
      --listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
      --initial-cluster "$cluster" --initial-cluster-state new
    urls+="${urls:+,}$ip:2379"
  done
  for i in 1 2 3; do
    NET_ETCD="http://$(net_ip "$i"):2379" NET_ETCD_HOST=$i
    t_until 30 net__etcd_healthy ||
      { echo "not ok - etcd member on h$i is not healthy:"; tail -10 "$T_DIR/etcd$i.log"; exit 1; }
  done
  NET_ETCD="http://$(net_ip 2):2379" NET_ETCD_HOST=2 # h2 stays reachable in every case
  NET_EP="etcd-v3://$urls"
}

# cluster_case CASE: the run, the cut of h1 (member) or h5 (agent), the outcome
cluster_case() {
  local c=$1 i cut members=(4 5 6) ranks info
  net_up 7
  etcd_cluster
  local common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id "c$c"
    --max-restarts 3)
  local ring=("$RING" --iters 200 --sleep-ms 100 --timeout-ms 600000)
  MEMBER_PIDS=()
  for i in 4 5 6; do
    net_agent "$i" "a$i" "${common[@]}" -- "${ring[@]}"
    MEMBER_PIDS[i]=$AGENT_PID
  done
  for i in 4 5 6; do
    wait_for_lines "$T_DIR/a$i.log" 'started 1 worker \(rank [0-2] of 3\)' 1 60 ||
      { t_fail "$c: member a$i did not start"; net_dump_logs; return; }
  done
  net_agent 7 a7 "${common[@]}" -- "${ring[@]}"
  MEMBER_PIDS[7]=$AGENT_PID
  wait_for_lines "$T_DIR/a7.log" 'standby' 1 30 || t_fail "$c: a7 did not wait as a standby"
  wait_for_lines "$T_DIR/a4.log" 'rank [0-2] local_rank' 1 30 || true
  if [ "$c" = member ]; then
    net_cut 1
    cut=$SECONDS
    for i in 4 5 6; do
      agent_wait "${MEMBER_PIDS[i]}" 120
      t_expect_eq "$c: agent on h$i exits 0 (etcd member h1 cut)" "$RC" 0
    done
    agent_wait "${MEMBER_PIDS[7]}" 30
    t_expect_eq "$c: the standby on h7 exits 0 once the run ended" "$RC" 0
    t_expect_eq "$c: the standby's worker never started" \
      "$(grep -c 'started 1 worker' "$T_DIR/a7.log")" 0
    t_expect_match "$c: the run ended succeeded in round 1 ($((SECONDS - cut)) s after the cut)" \
      "$(net_etcd_get /muster/cmember/c/end) $(net_etcd_get /muster/cmember/c/round)" \
      '"state":"closed".*"round":1[,}]'
    ranks=("$T_DIR"/a[456].log)
  else
    net_cut 5
    cut=$SECONDS
    # the lease (2 s by default) ends, the watchers' grace (1.5 s) passes, the standby joins:
    # about 5 s; the bound leaves room for a loaded machine (two leases of 10 s took 21 s)
    if wait_for_lines "$T_DIR/a7.log" 'started 1 worker' 1 15; then
      t_ok "$c: the standby's worker runs $((SECONDS - cut)) s after h5's cut (bound 15 s)"
    else
      t_fail "$c: the standby did not take h5's place within 15 s"
    fi
    for i in 4 6 7; do
      agent_wait "${MEMBER_PIDS[i]}" 180
      t_expect_eq "$c: agent on h$i exits 0 (agent host h5 cut)" "$RC" 0
    done
    t_expect_match "$c: the run ended succeeded" "$(net_etcd_get /muster/cagent/c/end)" \
      '"state":"closed"'
    ranks=("$T_DIR"/a[467].log)
  fi
  info=$(net_etcd_get "/muster/c$c/c/restarts")
  t_expect_match "$c: no restart counted (c/restarts: '$info')" "${info:-none}" \
    '^(none|\{"count":0\})$'
  net_ranks_once 3 "${ranks[@]}"
  net_dump_logs
}

base=$T_DIR
for c in ${CASES:-member agent}; do
  echo "# case $c"
  T_DIR=$base/$c
  mkdir -p "$T_DIR"
  cluster_case "$c"
  net_down 2>/dev/null
  T_DIR=$base
done
t_done
