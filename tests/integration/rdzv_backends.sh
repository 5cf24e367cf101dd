#!/usr/bin/env bash
# muster agent on every rendezvous backend, the same cases and the same expectations: musterd
# (--rdzv-backend muster), a 3-member etcd 3.4 cluster on loopback (--rdzv-backend etcd-v3,
# every member listed) and a musterd's TCPStore port (--rdzv-backend c10d: the agents ask it
# for its musterd, and their workers' clients resolve the c10d:// endpoint the same way). Per backend: 2 agents x 2 workers of the C ring all-reduce; a worker
# failing once with --max-restarts 2; elastic 1:3 with a third node joining late. On etcd also
# the faults: kill -9 the leader while the agents wait in the round; kill -9 a member that a
# node's client talks to during the job; SIGSTOP a member for longer than the lease TTL and
# resume it. Each time the job completes, every rank verifies, and no worker restarts.
#   BACKENDS="muster etcd-v3 c10d"  the backends to run (default all)
#   CASES="allreduce restart elastic schedulers stop leader follower"  (default all)
# On etcd also -cfg rdzv=etcd-v3://... : local end to end, Slurm and Kubernetes rendered.
# Under MU_SANITIZED=1 a smaller set runs (musterd: allreduce; etcd: restart, leader, follower).
. "$(dirname "$0")/agent_common.bash"
. "$(dirname "$0")/etcd3_cluster.bash"
t_need_cmd etcd etcd-server
t_need_cmd ss iproute2

TTL=3 # seconds; the agents' lease (etcd's minimum is about 2)

# etcd has a key under the run's prefix of levels: some node waits in the round.
etcd3_has_node() {
  ETCDCTL_API=3 etcdctl --endpoints "$EC_EP" get --prefix --keys-only "/muster/$1/n/" 2>/dev/null |
    grep -q .
}

# --- the cases, on backend $B at endpoint $EP --------------------------------------------------

agents_ok() { # name run agents...: each exits 0
  local name=$1 n
  shift
  for n in "$@"; do
    eval "agent_wait \$pid_$n 90"
    t_expect_eq "$B $name: agent $n exits 0" "$RC" 0
  done
}

logs_of() { local n; for n in "$@"; do cat "$T_DIR/$B-$n.log"; done; }

start() { # name extra-args...
  local n=$1
  shift
  agent_start "$B-$n" --rdzv-backend "$B" --rdzv-endpoint "$EP" --rdzv-conf "lease_ttl=$TTL" "$@"
  eval "pid_$n=\$AGENT_PID"
}

case_allreduce() {
  local n
  for n in a0 a1; do
    start "$n" --nnodes 2 --nproc-per-node 2 --rdzv-id ring -- "$RING" --count 4096 --iters 3
  done
  agents_ok allreduce a0 a1
  local all
  all=$(logs_of a0 a1)
  t_expect_eq "$B allreduce: 4 ranks verified" \
    "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4
  for r in 0 1 2 3; do
    t_expect_match "$B allreduce: rank $r env" "$(grep -E "^\[$r\]:rank $r local_rank" <<<"$all")" \
      "local_rank $((r % 2)) world 4 group $((r / 2))/2 role default restart 0 master 127\.0\.0\.1:[0-9]+ round 1"
  done
}

case_restart() {
  local n
  for n in b0 b1; do
    start "$n" --nnodes 2 --nproc-per-node 2 --rdzv-id once --max-restarts 2 -- "$RING" --fail-rank 3
  done
  agents_ok restart b0 b1
  local all
  all=$(logs_of b0 b1)
  t_expect_match "$B restart: rank 3 failed once" "$all" "rank 3 \(local rank 1, node rank 1\) on host .*: exit code 1"
  t_expect_match "$B restart: restart 1 for rank 3" "$all" '^\[3\]:rank 3 local_rank 1 world 4 .*restart 1 '
  t_expect_eq "$B restart: the 2nd attempt verified by all 4 ranks" \
    "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4
}

case_elastic() {
  local W=$T_DIR/grow.sh n
  # Rounds with fewer than 3 nodes run until the scale-up stops them; the round of 3 runs 2 s.
  printf '#!/bin/sh\nif [ "$WORLD_SIZE" = 6 ]; then i=20; else i=600; fi\nexec "%s" --iters "$i" --sleep-ms 100\n' \
    "$RING" >"$W"
  chmod +x "$W"
  for n in c0 c1; do
    start "$n" --nnodes 1:3 --nproc-per-node 2 --rdzv-id grow --last-call 0.5 -- "$W"
  done
  for n in c0 c1; do
    wait_for_lines "$T_DIR/$B-$n.log" 'started 2 workers \(ranks [0-9]+-[0-9]+ of 4\)' 1 30 ||
      t_fail "$B elastic: agent $n did not start in a world of 4"
  done
  start c2 --nnodes 1:3 --nproc-per-node 2 --rdzv-id grow --last-call 0.5 -- "$W"
  agents_ok elastic c0 c1 c2
  local all
  all=$(logs_of c0 c1 c2)
  # each running agent was told, or its workers failed first as the other's stopped for the
  # scale-up, and it re-joined without counting (the check below: no restart counted)
  local n
  for n in c0 c1; do
    t_expect_match "$B elastic: running agent $n was told a node waits (or re-joined uncounted)" \
      "$(logs_of $n)" "is waiting|a node waits to join|re-joining without counting"
  done
  t_expect_match "$B elastic: a running agent was told a node waits" "$(logs_of c0 c1)" \
    "is waiting|a node waits to join"
  t_expect_eq "$B elastic: world 6 verified on all ranks" \
    "$(grep -cE '^\[[0-5]\]:rank [0-5]: allreduce ok, world 6' <<<"$all")" 6
  t_expect_eq "$B elastic: no restart counted for a scale-up" "$(grep -c 'restart 1 ' <<<"$all")" 0
  t_expect_match "$B elastic: the late agent is node rank 2 of 3" "$(logs_of c2)" "node rank 2 of 3"
}

# A long job of 2 agents (iters x 100 ms) that must end with 4 verified ranks and no restart.
long_job() { # run iters
  local n
  for n in f0 f1; do
    start "$n" --nnodes 2 --nproc-per-node 2 --rdzv-id "$1" -- "$RING" --iters "$2" --sleep-ms 100
  done
}
long_job_ok() { # what
  agents_ok "$1" f0 f1
  local all
  all=$(logs_of f0 f1)
  t_expect_eq "$B $1: 4 ranks verified" "$(grep -cE '^\[[0-3]\]:rank [0-3]: allreduce ok, world 4' <<<"$all")" 4
  t_expect_eq "$B $1: no worker restarted" "$(grep -cE 'restart [1-9]|restarting|re-join' <<<"$all")" 0
  local f
  for f in f0 f1; do mv "$T_DIR/$B-$f.log" "$T_DIR/$B-$1-$f.log"; done
}

case_kill_leader_in_round() {
  start f0 --nnodes 2 --nproc-per-node 2 --rdzv-id lead -- "$RING" --iters 3
  t_until 20 etcd3_has_node lead || t_fail "etcd: agent 0 never joined"
  local l
  l=$(etcd3_leader) || { t_fail "etcd: no leader"; return; }
  kill -9 "${EC_PID[$l]}"
  echo "# killed the leader, member $l, while agent 0 waits in the round"
  start f1 --nnodes 2 --nproc-per-node 2 --rdzv-id lead -- "$RING" --iters 3
  long_job_ok "kill -9 the leader in the round"
  etcd3_revive "$l"
}

case_kill_follower_in_job() {
  long_job follow 40
  wait_for_lines "$T_DIR/$B-f0.log" 'started 2 workers' 1 30 || t_fail "etcd: job did not start"
  local l m victim=""
  l=$(etcd3_leader)
  for m in $(etcd3_members_of "$pid_f0") $(etcd3_members_of "$pid_f1"); do
    [ "$m" != "$l" ] && { victim=$m; break; }
  done
  if [ -z "$victim" ]; then
    # every agent happens to talk to the leader: make that member a follower
    victim=$l
    l=$(etcd3_move_leader "$l") || { t_fail "etcd: no agent talks to a follower (leader $victim), and the leadership did not move"; return; }
    echo "# every agent talked to the leader, member $victim: moved the leadership to member $l"
  fi
  kill -9 "${EC_PID[$victim]}"
  echo "# killed follower $victim that an agent talked to, during the job"
  long_job_ok "kill -9 a follower during the job"
}

# SIGSTOP the member an agent talks to for TTL + 2 s, then SIGCONT.
case_stop_member() {
  long_job stop 80
  [ -n "${DBG:-}" ] && t_spawn ewatch env ETCDCTL_API=3 etcdctl --endpoints "$EC_EP" watch --prefix /muster/stop/ --prev-kv
  wait_for_lines "$T_DIR/$B-f0.log" 'started 2 workers' 1 30 || t_fail "etcd: job did not start"
  local m victim=""
  for m in $(etcd3_members_of "$pid_f0") $(etcd3_members_of "$pid_f1"); do victim=$m; break; done
  [ -n "$victim" ] || victim=0
  [ "${STOP_LEADER:-0}" = 1 ] && victim=$(etcd3_leader)
  kill -STOP "${EC_PID[$victim]}"
  echo "# stopped member $victim for $((TTL + 2)) s"
  sleep $((TTL + 2)) # the fault's length is the test's subject, not a wait for something
  kill -CONT "${EC_PID[$victim]}"
  long_job_ok "SIGSTOP a member longer than the lease TTL"
}

# -cfg rdzv=etcd-v3://M1,M2,M3: the local scheduler starts no musterd and points every agent
# at the cluster (end to end); Slurm and Kubernetes render the same endpoint and no musterd.
case_schedulers() {
  local cl="etcd-v3://127.0.0.1:${EC_PORT[0]},127.0.0.1:${EC_PORT[1]},127.0.0.1:${EC_PORT[2]}"
  local h rc logs r out
  h=$(cd "$T_DIR" && HOME=$T_DIR MUSTERCONFIG= MUSTER_LOG_DIR=$T_DIR/logs timeout 120 \
    "$MUSTER" run -cfg "rdzv=$cl" dist.ddp -j 2x2 --script "$RING" 2>"$T_DIR/local.err")
  rc=$?
  t_expect_eq "local -cfg rdzv=etcd-v3://: dist.ddp 2x2 exits 0" "$rc" 0
  logs=$(HOME=$T_DIR MUSTERCONFIG= MUSTER_LOG_DIR=$T_DIR/logs "$MUSTER" log "$h" 2>&1)
  for r in 0 1 2 3; do
    t_expect_match "local etcd-v3: rank $r verified" "$logs" "rank $r: allreduce ok, world 4"
  done
  t_expect_match "local etcd-v3: the round is in etcd" \
    "$(ETCDCTL_API=3 etcdctl --endpoints "$EC_EP" get --prefix --keys-only /muster/ 2>&1)" \
    "^/muster/${h##*/}[^/]*/c/round$"
  t_expect_match "local etcd-v3: the job's endpoint is the cluster, no embedded musterd" \
    "$(tr -d '\t ' <"$T_DIR/logs/${h##*/}/state.json")" "\"rdzv_endpoint\":\"etcd-v3://127\\.0\\.0\\.1:${EC_PORT[0]},"
  out=$(cd "$T_DIR" && HOME=$T_DIR MUSTERCONFIG= "$MUSTER" run --dryrun -s slurm -cfg "rdzv=$cl" \
    dist.ddp -j 2x2 --script train.py 2>&1)
  t_expect_eq "slurm etcd-v3: both nodes' agents get the cluster" \
    "$(grep -o -- "--rdzv-endpoint $cl " <<<"$out" | wc -l)" 2
  t_expect_eq "slurm etcd-v3: the script starts no musterd" "$(grep -c 'musterd ' <<<"$out")" 0
  out=$(cd "$T_DIR" && HOME=$T_DIR MUSTERCONFIG= "$MUSTER" run --dryrun -s kubernetes \
    -cfg "queue=default,muster_image=registry.example/muster:0.1.0,rdzv=$cl" \
    dist.ddp -j 2x2 --image img --script train.py 2>&1)
  t_expect_eq "kubernetes etcd-v3: the agents get the cluster" "$(grep -c -- "- $cl\$" <<<"$out")" 2
  t_expect_eq "kubernetes etcd-v3: no musterd task" "$(grep -c 'name: musterd' <<<"$out")" 0
}

for B in ${BACKENDS:-muster etcd-v3 c10d}; do
  case $B in
  muster)
    t_start_musterd || { t_fail "musterd did not start"; continue; }
    EP=127.0.0.1:$MUSTERD_PORT
    ;;
  c10d)
    [ -n "${MUSTERD_PID:-}" ] && t_stop_musterd_checked # the muster backend's
    t_start_musterd --c10d-listen 127.0.0.1:0 || { t_fail "musterd did not start"; continue; }
    t_c10d_port || { t_fail "no c10d start line"; continue; }
    EP=127.0.0.1:$C10D_PORT
    ;;
  etcd-v3)
    etcd3_start || { t_fail "the etcd cluster did not start"; continue; }
    EP=$EC_EP
    ;;
  esac
  echo "# backend $B at $EP"
  all="allreduce restart elastic schedulers stop leader follower"
  # the sanitized build runs the cases that exercise the most code once, within the budget
  [ "$MU_SANITIZED" = 1 ] && all=$([ "$B" != etcd-v3 ] && echo allreduce || echo "restart leader follower")
  want() { [[ " ${CASES:-$all} " == *" $1 "* ]]; }
  want allreduce && case_allreduce
  want restart && case_restart
  want elastic && case_elastic
  if [ "$B" = etcd-v3 ]; then
    want schedulers && case_schedulers
    want stop && case_stop_member
    want leader && case_kill_leader_in_round
    want follower && case_kill_follower_in_job
  fi
done
agent_dump_logs
etcd3_stop
t_done
