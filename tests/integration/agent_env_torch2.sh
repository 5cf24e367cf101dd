#!/usr/bin/env bash
# The workers' environment under torchrun 2.14 and under `muster agent` (issue 32 item 4): the
# same command lines through torch 2.14's torchrun (Debian sid's, in the root of
# scripts/torch-roots.sh, chroot) and through the `torchrun` link to muster, both started with
# the same environment (env -i, TORCHELASTIC_ENABLE_FILE_TIMER=1 so that the file timer's
# variable is compared too), with a worker that dumps its whole environment
# (parity/mu_parity_worker.py). parity/env_diff.py diffs them rank by rank: every difference
# must be a row of docs/agent.md's "The environment under torchrun 2.14" table, with its reason
# (ports and paths of each launcher's choosing are rows too, their values normalized); a new
# difference fails, and so does a row whose difference is gone. Cases:
#   standalone  --standalone --nproc-per-node 2
#   c10d        2 agents x 2 workers, --nnodes 2 --rdzv-backend c10d on musterd's --c10d-listen
. "$(dirname "$0")/../lib.sh"

PDIR=$MU_SOURCE_DIR/tests/integration/parity
W=$PDIR/mu_parity_worker.py
ROOTS=$MU_SOURCE_DIR/scripts/torch-roots.sh
TORCHRUN_LINK="$(dirname "$MUSTER")/compat/torchrun"
CASES="standalone c10d"
t_need_built "$MUSTER" "$MUSTERD" "$TORCHRUN_LINK"
t_torch_root sid
t_torch_lock

t_start_musterd --c10d-listen 127.0.0.1:0 ||
  { t_fail "musterd did not start: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }

# The one environment both launchers start with (the test's shell adds nothing to it).
BASE=(PATH=/usr/bin:/bin HOME="$HOME" LANG=C.UTF-8 PYTHONUNBUFFERED=1
  GLOO_SOCKET_IFNAME=lo TORCHELASTIC_ENABLE_FILE_TIMER=1)

# launch SIDE CASE: the agents of CASE with torchrun 2.14 (tr) or muster (mu); PIDS gets theirs
launch() {
  local side=$1 c=$2 out=$T_DIR/$1-$2 n args
  mkdir -p "$out"
  case $c in
    standalone) n=1 args=(--standalone --nproc-per-node 2) ;;
    c10d)
      n=2 args=(--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d
        --rdzv-endpoint "127.0.0.1:$C10D_PORT" --rdzv-id "envdiff-$c-$side-$$"
        --rdzv-conf join_timeout=120)
      ;;
  esac
  for ((i = 0; i < n; i++)); do
    if [ "$side" = tr ]; then
      t_spawn "$side-$c-$i" timeout -k 5 240 "$ROOTS" run -b "$T_DIR" -b "$MU_SOURCE_DIR" sid \
        env -i "${BASE[@]}" MU_PARITY_OUT="$out" python3 -m torch.distributed.run \
        "${args[@]}" --monitor-interval 1 "$W" a --b=c
    else
      t_spawn "$side-$c-$i" timeout -k 5 240 env -i "${BASE[@]}" MU_PARITY_OUT="$out" \
        "$TORCHRUN_LINK" "${args[@]}" --monitor-interval 1 "$W" a --b=c
    fi
    PIDS+=("$T_LAST_PID")
  done
}

t0=$SECONDS
PIDS=()
for c in $CASES; do
  launch tr "$c"
  launch mu "$c"
done
for pid in "${PIDS[@]}"; do
  t_wait_exit "$pid" 260
  [ "$T_RC" = 0 ] || t_fail "agent $pid exited '$T_RC'"
done
echo "# $CASES, both launchers: $((SECONDS - t0)) s"
if "$PY" "$PDIR/env_diff.py" "$MU_SOURCE_DIR/docs/agent.md" "$T_DIR" $CASES >"$T_DIR/diff.txt" 2>&1; then
  t_ok "every difference of the workers' environments under torchrun 2.14 and muster agent is listed in docs/agent.md"
else
  t_fail "the workers' environments under torchrun 2.14 and muster agent: differences not as listed in docs/agent.md:"
fi
sed 's/^/#   /' "$T_DIR/diff.txt"
if [ "$T_FAILS" -gt 0 ]; then
  for f in "$T_DIR"/tr-*.log "$T_DIR"/mu-*.log; do
    echo "# --- $(basename "$f")"
    grep -v '^\[W' "$f" | tail -n 8 | sed 's/^/#   /'
  done
fi
t_stop_musterd_checked
t_done
