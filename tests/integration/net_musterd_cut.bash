# The body of net_musterd_cut_{5,15,60}.sh (sourced with CUT_S set): musterd's own host h1 is
# cut off both ways for CUT_S seconds while three members (h2-h4) run the ring all-reduce. The
# job must still complete: every agent exits 0 and every rank of the finished world said its
# sum exactly once (no rank held by two hosts). Outcomes only, no timings.
. "$(dirname "$0")/net_common.bash"
net_up 4
net_musterd 1
common=(--nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$NET_EP" --rdzv-id mcut --max-restarts 3)
ring=("$RING" --iters $((CUT_S * 10 + 150)) --sleep-ms 100 --timeout-ms 900000)
net_members "${common[@]}" -- "${ring[@]}"
net_cut 1
start=$SECONDS
t_until $((CUT_S + 5)) eval '[ $((SECONDS - start)) -ge '"$CUT_S"' ]'
net_heal 1
for i in 2 3 4; do
  agent_wait "${MEMBER_PIDS[i]}" $((CUT_S * 3 + 240))
  t_expect_eq "agent on h$i exits 0 after a ${CUT_S} s cut of musterd's host" "$RC" 0
done
net_ranks_once 3 "$T_DIR"/a[234].log
echo "# rounds: $(grep -c 'round [0-9]* closed' "$T_DIR/musterd.log"), restarts counted: $(grep -c 'restarting workers' "$T_DIR"/a[234].log | cut -d: -f2 | paste -sd' ')"
net_dump_logs
[ "$T_FAILS" -eq 0 ] || { echo "# musterd:"; tail -30 "$T_DIR/musterd.log" | sed 's/^/# /'; }
t_done
