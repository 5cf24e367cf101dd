#!/usr/bin/env bash
# A run that can no longer reach its minimum ends at once (issue 30 item 3; the rules'
# `unreachable`), on both backends: musterd, and one etcd 3.4 member for --rdzv-backend etcd-v3.
# Three agents for --nnodes 3 (one worker each, --max-restarts 3, --join-timeout 300): node a's
# worker succeeds at once and its agent leaves with success; then node b's worker fails (it
# waits for a's agent to have exited), c's runs on. The failure ends round 1 and a never joins
# again, so b and c alone can never make 3: the run is shut within seconds (not at the join
# timeout), both agents exit 1, and the reason names the missing node ('a' finished).
#   BACKENDS="muster etcd-v3" (default both)
. "$(dirname "$0")/agent_common.bash"
t_need_cmd etcd etcd-server

cat >"$T_DIR/worker.sh" <<EOF
#!/usr/bin/env bash
case \$NODE in
  a) exit 0 ;;
  b) while [ ! -e "$T_DIR/go.\$B" ]; do sleep 0.1; done; exit 1 ;;
  *) exec sleep 300 ;;
esac
EOF
chmod +x "$T_DIR/worker.sh"

for B in ${BACKENDS:-muster etcd-v3}; do
  if [ "$B" = muster ]; then
    t_start_musterd || { t_fail "musterd did not start"; t_done; }
    EP=127.0.0.1:$MUSTERD_PORT
  else
    t_start_etcd || { t_fail "etcd did not start"; tail -5 "$T_DIR/etcd.log"; t_done; }
    EP=$ETCD_URL
  fi
  for n in a b c; do
    t_spawn "$B-$n" env NODE=$n B="$B" "$MUSTER" agent --rdzv-backend "$B" --rdzv-endpoint "$EP" \
      --node-id "$n" --rdzv-conf lease_ttl=3 --nnodes 3 --nproc-per-node 1 --rdzv-id unreach --max-restarts 3 \
      --join-timeout 300 -- "$T_DIR/worker.sh"
    eval "pid_$n=\$T_LAST_PID"
  done
  agent_wait "$pid_a" 60
  t_expect_eq "$B: agent a exits 0 (its worker succeeded)" "$RC" 0
  : >"$T_DIR/go.$B"
  start=$SECONDS
  for n in b c; do
    eval "agent_wait \$pid_$n 30"
    t_expect_eq "$B: agent $n exits 1 within 30 s of b's failure (not at the 300 s join timeout)" \
      "$RC" 1
  done
  t_ok "$B: b and c ended $((SECONDS - start)) s after b's failure"
  t_expect_match "$B: the reason says the minimum cannot be reached and names the missing node" \
    "$(cat "$T_DIR/$B-b.log" "$T_DIR/$B-c.log")" \
    "can no longer reach its minimum of 3 nodes \(2 left\): 'a' finished"
  if [ "$B" = muster ]; then
    t_stop_musterd_checked
  else
    kill -TERM "$ETCD_PID" 2>/dev/null
    wait "$ETCD_PID" 2>/dev/null
  fi
done
agent_dump_logs
t_done
