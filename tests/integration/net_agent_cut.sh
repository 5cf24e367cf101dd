#!/usr/bin/env bash
# An agent rides through a partition (issue 30 items 5 and 6), on both backends: the rendezvous
# on h1 (musterd, or one etcd 3.4 member for etcd-v3), three members and a hot standby on h2-h5;
# h3 is cut off both ways for 60 s. The standby takes its place (musterd: within 10 s; etcd v3:
# within 40 s, h3's key expires with its lease of 10 s and the watchers give it one more); h3's
# agent stops its workers once the rendezvous has not answered for a lease, keeps re-joining
# with backoff (the run's join timeout, not a fixed 30 s), and after the heal comes back: it
# waits as a standby of the full run and ends with it (exit 0). Every rank of the finished world
# held once.
#   BACKENDS="muster etcd-v3" (default both)
. "$(dirname "$0")/net_common.bash"

agent_cut() {
  local b=$1 i take=10 seen
  [ "$b" = etcd-v3 ] && take=40
  net_up 5
  net_backend "$b"
  local common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id ride
    --max-restarts 3)
  local ring=("$RING" --iters 900 --sleep-ms 100 --timeout-ms 600000)
  net_members "${common[@]}" -- "${ring[@]}"
  net_agent 5 a5 "${common[@]}" -- "${ring[@]}"
  MEMBER_PIDS[5]=$AGENT_PID # the standby
  wait_for_lines "$T_DIR/a5.log" 'standby' 1 30 || t_fail "$b: a5 did not wait as a standby"
  net_cut 3
  wait_for_lines "$T_DIR/a5.log" 'started 1 worker' 1 $((take * NET_SLOW)) ||
    t_fail "$b: the standby did not take the cut member's place within $((take * NET_SLOW)) s"
  # h3's agent notices it lost the rendezvous and stops its workers (within a lease and a bit)
  wait_for_lines "$T_DIR/a3.log" 'stopping workers' 1 $((30 * NET_SLOW)) ||
    t_fail "$b: h3's agent did not stop its workers while cut off"
  # the cut lasts 60 s in all; the agent must still be trying at its end (it gave up after 30 s)
  t_until 60 eval '! kill -0 ${MEMBER_PIDS[3]} 2>/dev/null' &&
    t_fail "$b: h3's agent exited while cut off (status: $(wait "${MEMBER_PIDS[3]}"; echo $?))"
  # (its round-1 line says "node rank N of" too: a line after the heal is one more)
  seen=$(grep -cE 'standby: round|node rank [0-9] of' "$T_DIR/a3.log")
  net_heal 3
  if t_until $((60 * NET_SLOW)) t_has_lines "$T_DIR/a3.log" 'standby: round|node rank [0-9] of' $((seen + 1)); then
    t_ok "$b: h3's agent came back after the heal: $(grep -E 'standby: round|node rank [0-9] of' "$T_DIR/a3.log" | tail -1 | cut -c1-100)"
  else
    t_fail "$b: h3's agent did not come back within $((60 * NET_SLOW)) s of the heal"
  fi
  for i in 2 4 5 3; do
    agent_wait "${MEMBER_PIDS[i]}" 180
    t_expect_eq "$b: agent on h$i exits 0" "$RC" 0
  done
  net_ranks_once 3 "$T_DIR"/a[245].log
  net_dump_logs
  [ "$T_FAILS" -eq 0 ] || net_backend_log
}
net_each_backend agent_cut
t_done
