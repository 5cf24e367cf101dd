#!/usr/bin/env bash
# Parity with torchrun: the same command lines run through Debian's torchrun
# (/usr/bin/python3 -m torch.distributed.run, torch 1.13) and through `torchrun`, the link to
# muster the build makes (so `muster agent`), with a worker (parity/mu_parity_worker.py) that
# dumps its environment, sys.argv and command line; parity/parity_compare.py compares them per
# global rank: every variable torchrun sets, with the same value modulo ports, paths and ids,
# and the same argv. The differences that stay are its KNOWN rows (and docs/agent.md).
# Cases (two workers per agent where it matters):
#   standalone  --standalone --nproc_per_node 2 W a --b=c
#   static      2 agents: --nnodes 2 --node_rank R --master_addr 127.0.0.1 --master_port P
#   rdzv        2 agents: --nnodes 2 --rdzv_backend etcd-v2 --rdzv_endpoint MUSTERD --rdzv_id ID
#   elastic     2 agents: --nnodes 1:2, the same rendezvous
#   module      -m mu_parity_worker (static, one node, its own --master_port)
#   nopython    --no_python W (static, one node, its own --master_port)
# The torchrun side runs its cases at once (torch's import is the slow part), then the muster
# side. Under a sanitizer build (MU_SANITIZED=1): standalone and static only.
# Env: PARITY_CASES to choose cases.
. "$(dirname "$0")/../lib.sh"

TR_PY=/usr/bin/python3
PDIR="$MU_SOURCE_DIR/tests/integration/parity"
W="$PDIR/mu_parity_worker.py"
TORCHRUN_LINK="$(dirname "$MUSTER")/compat/torchrun"
t_need_built "$MUSTER" "$MUSTERD" "$TORCHRUN_LINK"
t_need_py torch python3-torch
t_need_py etcd python3-etcd

if [ "$MU_SANITIZED" = 1 ]; then
  CASES=${PARITY_CASES:-standalone static}
else
  CASES=${PARITY_CASES:-standalone static rdzv elastic module nopython}
fi

# Both launchers start with the same environment: this one (python3 from /usr/bin first, so
# that the implicit interpreter is the same file), dumped as the base of the comparison.
export PATH=/usr/bin:$PATH PYTHONPATH=$PDIR PYTHONUNBUFFERED=1 GLOO_SOCKET_IFNAME=lo
unset OMP_NUM_THREADS NCCL_ASYNC_ERROR_HANDLING PYTHON_EXEC ${!PET_*}
"$TR_PY" -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], "w"))' \
  "$T_DIR/base.json"

t_start_musterd || { t_fail "musterd did not start"; t_done; }
# torch 1.13 under Python 3.11 needs --redirects/--tee other than 0 (docs/agent.md): both get
# the same, so the command lines stay the same.
STD=(--redirects 2 --tee 2 --monitor_interval 1)

# p_launch SIDE CASE: starts the agents of CASE with the launcher of SIDE (tr or mu); records
# the PIDs in P_PIDS.
p_launch() {
  local side=$1 c=$2 out="$T_DIR/$1-$2" port id
  local -a L
  mkdir -p "$out"
  if [ "$side" = tr ]; then L=("$TR_PY" -m torch.distributed.run); else L=("$TORCHRUN_LINK"); fi
  export MU_PARITY_OUT=$out
  id="par-$c-$side-$$"
  case "$c" in
  standalone)
    t_spawn "$side-$c" "${L[@]}" --standalone --nproc_per_node 2 "${STD[@]}" "$W" a --b=c
    P_PIDS+=("$T_LAST_PID")
    ;;
  static)
    port=$(t_free_port)
    for r in 0 1; do
      t_spawn "$side-$c-$r" "${L[@]}" --nnodes 2 --node_rank $r --master_addr 127.0.0.1 \
        --master_port "$port" --nproc_per_node 2 --max_restarts 1 --role trainer "${STD[@]}" \
        "$W" --epochs 1
      P_PIDS+=("$T_LAST_PID")
    done
    ;;
  rdzv | elastic)
    local nn=2
    [ "$c" = elastic ] && nn=1:2
    for r in 0 1; do
      t_spawn "$side-$c-$r" "${L[@]}" --nnodes $nn --nproc_per_node 2 --rdzv_backend etcd-v2 \
        --rdzv_endpoint "127.0.0.1:$MUSTERD_PORT" --rdzv_id "$id" \
        --rdzv_conf join_timeout=60,last_call_timeout=20 "${STD[@]}" "$W" x
      P_PIDS+=("$T_LAST_PID")
    done
    ;;
  module)
    port=$(t_free_port)
    t_spawn "$side-$c" "${L[@]}" --nnodes 1 --master_port "$port" --nproc_per_node 1 "${STD[@]}" \
      -m mu_parity_worker --flag
    P_PIDS+=("$T_LAST_PID")
    ;;
  nopython)
    port=$(t_free_port)
    t_spawn "$side-$c" "${L[@]}" --nnodes 1 --master_port "$port" --nproc_per_node 1 "${STD[@]}" \
      --no_python "$W" plain
    P_PIDS+=("$T_LAST_PID")
    ;;
  *)
    t_fail "unknown case '$c' (cases: standalone static rdzv elastic module nopython)"
    ;;
  esac
}

# Every case with both launchers at once (torch's import is the slow part, muster's side takes
# a few seconds); each agent must exit 0 within 240 s.
t_torch_lock
t0=$SECONDS
P_PIDS=()
for c in $CASES; do p_launch tr "$c"; done
for c in $CASES; do p_launch mu "$c"; done
for pid in "${P_PIDS[@]}"; do
  t_wait_exit "$pid" 240
  [ "$T_RC" = 0 ] || t_fail "agent $pid exited '$T_RC'"
done
echo "# $CASES: both launchers in $((SECONDS - t0)) s"
for c in $CASES; do
  if "$TR_PY" "$PDIR/parity_compare.py" "$c" "$T_DIR/base.json" "$T_DIR/tr-$c" "$T_DIR/mu-$c" \
    >"$T_DIR/cmp-$c.txt" 2>&1; then
    t_ok "$c: muster agent gives the workers what torchrun gives them"
  else
    t_fail "$c: differences:"
  fi
  sed 's/^/#   /' "$T_DIR/cmp-$c.txt"
done
if [ "$T_FAILS" -gt 0 ]; then
  for f in "$T_DIR"/tr-*.log "$T_DIR"/mu-*.log; do
    echo "# --- $(basename "$f")"
    tail -n 8 "$f" | sed 's/^/#   /'
  done
fi
t_stop_musterd_checked
t_done
