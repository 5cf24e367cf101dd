#!/usr/bin/env bash
# Unmodified torchrun (Debian's torch 1.13: /usr/bin/python3 -m torch.distributed.run) with its
# default backend, --rdzv_backend c10d, against musterd's TCPStore listener (docs/c10d.md). One
# musterd with --data-dir (every store write goes through the group commit) for three cases,
# two agents x two gloo workers (tests/integration/torchrun_worker.py):
#   fixed    --nnodes=2: both agents, one world of 4; every rank verifies its all_reduce
#   restart  --nnodes=2 --max_restarts=1, global rank 3 exits 3 on attempt 0: a new round
#   elastic  --nnodes=1:2, the second agent starts once the first runs alone (a world of 2):
#            the first agent's round restarts and both end in one world of 4
# The endpoint is 127.0.0.1:<musterd's c10d port>: torchrun takes a loopback endpoint for its
# own host, tries to host the store there, fails on the port musterd holds, and connects as a
# client (checked in the agents' logs). Env: TR_TIMEOUT (s per agent, 150).
. "$(dirname "$0")/../lib.sh"

TR_TIMEOUT=${TR_TIMEOUT:-150}
TR_WORKER="$MU_SOURCE_DIR/tests/integration/torchrun_worker.py"
t_need_built "$MUSTERD"
t_need_py torch python3-torch
t_torch_lock

t_start_musterd --c10d-listen 127.0.0.1:0 --data-dir "$T_DIR/data" ||
  { t_fail "musterd did not start: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
echo "# torchrun --rdzv_backend=c10d against musterd's TCPStore on 127.0.0.1:$C10D_PORT"
export OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1
unset MU_FAIL_RANK MU_WANT_WORLD

# agent CASE NAME ID TORCHRUN_ARGS...: starts one torchrun agent; sets T_LAST_PID.
agent() {
  local c=$1 name=$2 id=$3
  shift 3
  t_spawn "agent-$c-$name" timeout -k 5 "$TR_TIMEOUT" "$PY" -m torch.distributed.run \
    --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$C10D_PORT" \
    --rdzv_id="$id" --monitor_interval=1 --redirects=1 --tee=1 \
    --log_dir="$T_DIR/logs-$c-$name" "$@" "$TR_WORKER" "$T_DIR/out-$c"
}

# finish CASE ID PID_A PID_B: both agents exit 0; four ranks verified a world of 4. Sets
# TR_MAX_RESTART (the largest TORCHELASTIC_RESTART_COUNT a rank ran with).
finish() {
  local c=$1 id=$2 a=$3 b=$4 rca rcb r line bad=0 t0=$SECONDS fails0=$T_FAILS
  wait "$a"; rca=$?
  wait "$b"; rcb=$?
  echo "# $c: agents exited $rca/$rcb after $((SECONDS - t0)) s more"
  t_expect_eq "$c: agent A exit status" "$rca" 0
  t_expect_eq "$c: agent B exit status" "$rcb" 0
  TR_MAX_RESTART=0
  for r in 0 1 2 3; do
    if [ ! -f "$T_DIR/out-$c/rank$r.$id" ]; then
      bad=1
      t_fail "$c: rank $r wrote no result file"
      continue
    fi
    read -r line <"$T_DIR/out-$c/rank$r.$id"
    set -- $line - - -
    t_expect_eq "$c: rank $r verified its all_reduce in a world of 4" "$1 $2" "ok 4"
    [ "$3" -gt "$TR_MAX_RESTART" ] 2>/dev/null && TR_MAX_RESTART=$3
  done
  v=$(curl -s --max-time 5 "$MUSTERD_URL/v1/c10d")
  t_expect_match "$c: musterd holds the run's rendezvous state (/v1/c10d)" "$v" \
    "\"run_id\":\"$id\",\"keys\":[0-9]+,\"bytes\":[0-9]+,\"round\":[0-9]+,\"state\":true"
  # one cell of docs/compat.md (scripts/compat-table.sh): torch 1.13's torchrun, c10d
  t_compat 1.13 torchrun "c10d (musterd)" "$c" "$([ "$T_FAILS" = "$fails0" ] && echo pass || echo fail)"
  if [ "$rca$rcb" != 00 ] || [ "$bad" = 1 ]; then
    for ag in A B; do
      echo "# --- last lines of agent $ag ($c)"
      tail -n 25 "$T_DIR/agent-$c-$ag.log" | sed 's/^/#   /'
    done
  fi
}

# fixed: two agents at once
id=c10dfixed$$
mkdir -p "$T_DIR/out-fixed"
agent fixed A "$id" --nnodes=2 --max_restarts=0 --rdzv_conf=join_timeout=90; a=$T_LAST_PID
agent fixed B "$id" --nnodes=2 --max_restarts=0 --rdzv_conf=join_timeout=90; b=$T_LAST_PID
finish fixed "$id" "$a" "$b"

# restart: rank 3 fails its first attempt, one restart allowed
id=c10drestart$$
mkdir -p "$T_DIR/out-restart"
export MU_FAIL_RANK=3
agent restart A "$id" --nnodes=2 --max_restarts=1 --rdzv_conf=join_timeout=90; a=$T_LAST_PID
agent restart B "$id" --nnodes=2 --max_restarts=1 --rdzv_conf=join_timeout=90; b=$T_LAST_PID
finish restart "$id" "$a" "$b"
unset MU_FAIL_RANK
t_expect_eq "restart: the final attempt ran after a restart (TORCHELASTIC_RESTART_COUNT)" \
  "$TR_MAX_RESTART" 1

# elastic: the second node comes late
id=c10delastic$$
mkdir -p "$T_DIR/out-elastic"
export MU_WANT_WORLD=4
agent elastic A "$id" --nnodes=1:2 --max_restarts=0 \
  --rdzv_conf=join_timeout=90,last_call_timeout=2; a=$T_LAST_PID
if t_until 90 grep -q "world 2 < 4, waiting for the late node" "$T_DIR/agent-elastic-A.log"; then
  t_ok "elastic: the first agent ran alone first (a world of 2)"
else
  t_fail "elastic: the first agent never ran alone: $(tail -5 "$T_DIR/agent-elastic-A.log")"
fi
agent elastic B "$id" --nnodes=1:2 --max_restarts=0 \
  --rdzv_conf=join_timeout=90,last_call_timeout=2; b=$T_LAST_PID
finish elastic "$id" "$a" "$b"
unset MU_WANT_WORLD

n=$(cat "$T_DIR"/agent-*.log | grep -c "failed to bind to 0.0.0.0:$C10D_PORT" || true)
t_expect_match "every agent tried to host the store on the taken port, then was a client" \
  "$n" '^6$'
m=$(curl -s --max-time 5 "$MUSTERD_URL/metrics")
t_expect_match "the agents spoke torch 1.13's protocol (no handshake)" "$m" \
  'musterd_c10d_connections_protocol_total\{protocol="legacy"\} [1-9]'
t_stop_musterd_checked
t_done
