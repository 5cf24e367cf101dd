#!/usr/bin/env bash
# A member host cut off without a word (no FIN, no RST: an nft drop on the bridge, both ways) is
# lost in seconds (issue 30 item 2): musterd on h1, three members and a hot standby on h2-h5
# (defaults: no --lease-ttl), one member's host cut mid-run. musterd declares it lost within
# 3 s, the standby's workers run within 5 s of the cut, the survivors' workers are stopped
# within 2 s of the loss (bounds twice as long in a sanitized build), and the job completes in
# a world of 3 with every rank held once (the workers' own lines).
. "$(dirname "$0")/net_common.bash"
net_up 5
net_musterd 1
common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id cut --max-restarts 3)
net_members "${common[@]}" -- "$RING" --iters 150 --sleep-ms 100
net_agent 5 a5 "${common[@]}" -- "$RING" --iters 150 --sleep-ms 100
MEMBER_PIDS[5]=$AGENT_PID # the standby
wait_for_lines "$T_DIR/a5.log" 'standby' 1 30 || t_fail "a5 did not wait as a standby"
# the workers stepped a while; then h3 goes silent
wait_for_lines "$T_DIR/a2.log" 'rank [0-2] local_rank' 1 30 || true
net_cut 3
cut=$(date +%s%N)
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
if t_until $((3 * NET_SLOW)) grep -q "node '[^']*' lost" "$T_DIR/musterd.log"; then
  lost=$(date +%s%N)
  t_ok "h3 declared lost $(ms_since "$cut") ms after the cut (bound $((3000 * NET_SLOW)) ms)"
else
  lost=$(date +%s%N)
  t_fail "h3 not declared lost within $((3 * NET_SLOW)) s of the cut"
fi
# the survivors' round-1 workers are stopped (their agents say so) within 2 s of the loss
if t_until $((2 * NET_SLOW)) eval 't_has_lines "$T_DIR/a2.log" "stopping workers" && t_has_lines "$T_DIR/a4.log" "stopping workers"'; then
  t_ok "the survivors stopped their workers $(ms_since "$lost") ms after the loss"
else
  t_fail "the survivors did not stop their workers within $((2 * NET_SLOW)) s of the loss"
fi
if t_until $((5 * NET_SLOW)) t_has_lines "$T_DIR/a5.log" 'started 1 worker'; then
  t_ok "the standby's workers run $(ms_since "$cut") ms after the cut (bound $((5000 * NET_SLOW)) ms)"
else
  t_fail "the standby's workers did not start within $((5 * NET_SLOW)) s of the cut"
fi
for i in 2 4 5; do
  agent_wait "${MEMBER_PIDS[i]}" 120
  t_expect_eq "agent on h$i exits 0" "$RC" 0
done
net_ranks_once 3 "$T_DIR"/a[245].log
t_expect_eq "the cut host's workers finished nothing" \
  "$(grep -c 'allreduce ok' "$T_DIR/a3.log")" 0
net_dump_logs
[ "$T_FAILS" -eq 0 ] || { echo "# musterd:"; tail -30 "$T_DIR/musterd.log" | sed 's/^/# /'; }
t_done
