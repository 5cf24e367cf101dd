#!/usr/bin/env bash
# A finished run is never lost (issue 30 items 3 and 6), on both backends: the rendezvous on h1
# (musterd, or one etcd 3.4 member for etcd-v3), three members on h2-h4 running the ring
# all-reduce. The workers finish (every rank said its sum: the ring's done barrier opened) and
# h2's and h4's agents leave with success; h3's workers linger (a wrapper holds them after the
# ring, as a slow teardown would) and h3 goes one way deaf: it can send to h1 but hears nothing
# from it (an nft drop of h1 -> h3 only). h3's lease runs out after the others succeeded:
#  - musterd loses h3 (its watch's connection) and the run ends succeeded at once, not waiting
#    for 3 nodes until the join timeout;
#  - on etcd there is no server to decide: h3's key expires, and the node that next reads the
#    round (h3's agent after the heal) ends the run succeeded by the same rule. The agents hold
#    a lease of 10 s there, and h3's agent stops its workers one lease after its watch found
#    every member silent, within 28 s of the cut (a watch that only times out: its 30 s, twice).
# After the heal, h3's agent, which stopped its workers and kept re-joining, finds the run ended
# succeeded and exits 0. Every rank held once (workers' lines). Outcomes and upper bounds only.
# A second case (linger, below) loses a member while another still runs toward its success.
#
#   BACKENDS="muster etcd-v3" (default both)  CASES="oneway linger" (default both)
. "$(dirname "$0")/net_common.bash"

oneway() {
  local b=$1 i cut
  net_up 4
  net_backend "$b"
  # the worker: the ring, then (on h3 only) a linger of up to 5 min that the agent ends
  cat >"$T_DIR/worker.sh" <<EOF
#!/usr/bin/env bash
"$RING" "\$@" || exit \$?
[ "\$NET_HOST" = h3 ] || exit 0
for ((i = 0; i < 3000; i++)); do sleep 0.1; done
EOF
  chmod +x "$T_DIR/worker.sh"
  local common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id oneway
    --max-restarts 3)
  # on etcd v3 a lease of 10 s (a site that rides through blips): h3's watch, cut off from every
  # member, says so after one turn of them (seconds), and h3 stops its workers one lease after
  # that; a watch that only timed out (30 s with this lease) would be waited out twice first
  [ "$b" = etcd-v3 ] && common+=(--rdzv-conf lease_ttl=10)
  MEMBER_PIDS=()
  for i in 2 3 4; do
    net_spawn "$i" "a$i" env NET_HOST="h$i" "$MUSTER" agent "${common[@]}" -- \
      "$T_DIR/worker.sh" --iters 30 --sleep-ms 100
    MEMBER_PIDS[i]=$T_LAST_PID
  done
  if ! wait_for_lines "$T_DIR/a3.log" 'allreduce ok, world 3' 1 $((60 * NET_SLOW)); then
    t_fail "$b: h3's worker did not finish its ring"
    net_dump_logs
    return
  fi
  net_cut_to 3 1 # h1 -> h3 dropped: h3 still reaches h1, h1's answers never reach h3
  cut=$SECONDS
  for i in 2 4; do
    agent_wait "${MEMBER_PIDS[i]}" $((30 * NET_SLOW))
    t_expect_eq "$b: agent on h$i exits 0 (its workers succeeded)" "$RC" 0
  done
  if [ "$b" = muster ]; then
    # musterd loses h3 within seconds (keepalive): the run then ends succeeded at once
    if t_until $((20 * NET_SLOW)) grep -q "run closed" "$T_DIR/musterd.log"; then
      t_ok "$b: the run ended succeeded $((SECONDS - cut)) s after the one-way cut: $(grep -m1 'run closed' "$T_DIR/musterd.log" | sed 's/.*run closed/run closed/' | cut -c1-160)"
    else
      t_fail "$b: the run did not end succeeded within $((20 * NET_SLOW)) s of the cut (it waits for nodes)"
    fi
    t_expect_eq "$b: the run was not shut" "$(grep -c 'run shut down' "$T_DIR/musterd.log")" 0
  fi
  # h3's agent stops its lingering workers (no answer from the rendezvous), keeps re-joining
  wait_for_lines "$T_DIR/a3.log" 'stopping workers' 1 $((40 * NET_SLOW)) ||
    t_fail "$b: h3's agent did not stop its workers while deaf"
  if [ "$b" = etcd-v3 ]; then
    t_expect_eq "$b: h3's agent stopped its workers within $((28 * NET_SLOW)) s of the cut, one lease after its watch found every member silent (it took $((SECONDS - cut)) s)" \
      "$((SECONDS - cut <= 28 * NET_SLOW))" 1
    # h3's lease runs out: no node of the run holds a key (h2 and h4 left with success)
    t_until $((40 * NET_SLOW)) eval '[ -z "$(net_etcd_keys /muster/oneway/n/)" ]' ||
      t_fail "$b: h3's key did not expire while it was deaf: $(net_etcd_keys /muster/oneway/n/)"
    t_expect_eq "$b: the run is still open while nobody reads it" \
      "$(net_etcd_get /muster/oneway/c/end)" ""
  fi
  net_heal 3
  agent_wait "${MEMBER_PIDS[3]}" $((60 * NET_SLOW))
  t_expect_eq "$b: h3's agent exits 0 once it reaches the run that ended succeeded" "$RC" 0
  if [ "$b" = etcd-v3 ]; then
    t_expect_match "$b: the run ended succeeded, every member done or lost after a success" \
      "$(net_etcd_get /muster/oneway/c/end)" '"state":"closed".*succeeded-lost'
  fi
  net_ranks_once 3 "$T_DIR"/a[234].log
  net_dump_logs
  [ "$T_FAILS" -eq 0 ] || net_backend_log
}
# A member lost after another succeeded does not break the round for those still running
# (the rules' lost-after-success): h2 succeeds at once, h4's workers take 15 s (etcd: 30 s) more
# after the ring (a slow checkpoint), h3's linger and h3 is cut both ways. h4 keeps its workers (its
# watch sees h3's key vanish and, one TTL later, counts it done), leaves with success and so
# closes the run; h3's agent, back after the heal, finds it closed and exits 0.
linger() {
  local b=$1 i h4=150
  # h4's workers outlast h3's loss: musterd sees it in ~2 s; on etcd, h3's key expires within
  # one TTL (10 s) and h4's watch waits one more before it would call h3 lost: 30 s there
  [ "$b" = etcd-v3 ] && h4=300
  net_up 4
  net_backend "$b"
  cat >"$T_DIR/worker.sh" <<EOF
#!/usr/bin/env bash
"$RING" "\$@" || exit \$?
case \$NET_HOST in h2) exit 0 ;; h4) n=\$H4_STEPS ;; *) n=3000 ;; esac
for ((i = 0; i < n; i++)); do sleep 0.1; done
EOF
  chmod +x "$T_DIR/worker.sh"
  local common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id linger
    --max-restarts 3)
  MEMBER_PIDS=()
  for i in 2 3 4; do
    net_spawn "$i" "a$i" env NET_HOST="h$i" H4_STEPS="$h4" "$MUSTER" agent "${common[@]}" -- \
      "$T_DIR/worker.sh" --iters 30 --sleep-ms 100
    MEMBER_PIDS[i]=$T_LAST_PID
  done
  if ! wait_for_lines "$T_DIR/a3.log" 'allreduce ok, world 3' 1 $((60 * NET_SLOW)); then
    t_fail "$b: h3's worker did not finish its ring"
    net_dump_logs
    return
  fi
  agent_wait "${MEMBER_PIDS[2]}" $((30 * NET_SLOW))
  t_expect_eq "$b: agent on h2 exits 0 (its workers succeeded)" "$RC" 0
  net_cut 3
  agent_wait "${MEMBER_PIDS[4]}" $((90 * NET_SLOW))
  t_expect_eq "$b: agent on h4 exits 0: h3's loss after h2's success did not break the round" \
    "$RC" 0
  t_expect_eq "$b: h4's agent never stopped its workers" \
    "$(grep -c 'stopping workers' "$T_DIR/a4.log")" 0
  if [ "$b" = muster ]; then
    t_expect_eq "$b: the run closed" "$(grep -c 'run closed' "$T_DIR/musterd.log")" 1
  else
    t_expect_match "$b: h4's leave closed the run" "$(net_etcd_get /muster/linger/c/end)" \
      '"state":"closed"'
  fi
  # h3's agent, cut off, stops its lingering workers before the heal (one lease without an
  # answer), so that it comes back as a node re-joining, not one whose workers still run
  wait_for_lines "$T_DIR/a3.log" 'stopping workers' 1 $((40 * NET_SLOW)) ||
    t_fail "$b: h3's agent did not stop its workers while cut off"
  net_heal 3
  agent_wait "${MEMBER_PIDS[3]}" $((60 * NET_SLOW))
  t_expect_eq "$b: h3's agent exits 0 once it reaches the closed run" "$RC" 0
  net_ranks_once 3 "$T_DIR"/a[234].log
  net_dump_logs
  [ "$T_FAILS" -eq 0 ] || net_backend_log
}
for c in ${CASES:-oneway linger}; do net_each_backend "$c"; done
t_done
