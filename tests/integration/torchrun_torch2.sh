#!/usr/bin/env bash
# torchrun 2.x (torch 2.6 and 2.14: Debian trixie's and sid's, in the roots of
# scripts/torch-roots.sh, run with chroot; loopback is shared) against musterd, one musterd for
# every run, its three backends side by side per case:
#   c10d     --rdzv_backend=c10d against musterd's --c10d-listen
#   etcd-v2  --rdzv_backend=etcd-v2 against musterd's etcd v2 API
#   etcd     --rdzv_backend=etcd (the legacy one) against the same API
# and three cases, two agents x one gloo worker (tests/integration/torchrun_worker.py):
#   fixed    --nnodes=2: one world of 2; every rank verifies its all_reduce
#   restart  --nnodes=2 --max-restarts=1, global rank 1 exits 3 on attempt 0: a new round
#   elastic  --nnodes=1:2: the second agent starts once the first runs alone (a world of 1);
#            both end in one world of 2
# restart and elastic set TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: since torch 2.4 rank 0's agent
# gives its workers the rendezvous store and keeps it across rounds, so a restart reads the dead
# attempt's gloo addresses and a late node waits for ever for MASTER_ADDR. That is torch's own
# bug: the control runs below show it on torch's own store (c10d, the agent hosting the store,
# no variable), and their result is recorded in docs/compat.md, not asserted (a torch that fixes
# it passes there). docs/c10d.md "torchrun 2.x and the shared store" says more.
# Each case's cells go to docs/compat.md (t_compat; scripts/compat-table.sh).
# Env: TR_TIMEOUT (s per agent, 420: 7 cases side by side, 14 agents and their workers, on 2 cores beside other tests), TR_CONTROL_TIMEOUT (s per control agent, 150), TR2_SUITES (default "trixie sid").
. "$(dirname "$0")/../lib.sh"

TR_TIMEOUT=${TR_TIMEOUT:-420}
TR_CONTROL_TIMEOUT=${TR_CONTROL_TIMEOUT:-150}
TR2_SUITES=${TR2_SUITES:-trixie sid}
WORKER=$MU_SOURCE_DIR/tests/integration/torchrun_worker.py
ROOTS=$MU_SOURCE_DIR/scripts/torch-roots.sh
BACKENDS="c10d etcd-v2 etcd"

t_need_built "$MUSTERD"
for s in $TR2_SUITES; do t_torch_root "$s"; done
# many torch processes at once: one such test on the machine at a time (tests/lib.sh)
t_torch_lock

t_start_musterd --c10d-listen 127.0.0.1:0 ||
  { t_fail "musterd did not start: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
t_c10d_port || { t_fail "no c10d start line: $(tail -5 "$T_DIR/musterd.log")"; t_done; }

# endpoint BACKEND: where that backend's agents rendezvous (musterd)
endpoint() {
  case $1 in
    c10d) echo "127.0.0.1:$C10D_PORT" ;;
    *) echo "127.0.0.1:$MUSTERD_PORT" ;;
  esac
}

# agent SUITE TAG NAME ENDPOINT BACKEND ENV... -- TORCHRUN_ARGS...: one torchrun agent in
# SUITE's root, its log $T_DIR/agent-TAG-NAME.log; sets T_LAST_PID. ENV are VAR=value for it.
agent() {
  local s=$1 tag=$2 name=$3 ep=$4 be=$5
  shift 5
  local envs=()
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  mkdir -p "$T_DIR/out-$tag"
  local limit=$TR_TIMEOUT
  # the control's failure is a hang: it is recorded, not asserted, so it waits less
  case $tag in *-control) limit=$TR_CONTROL_TIMEOUT ;; esac
  t_spawn "agent-$tag-$name" timeout -k 5 "$limit" "$ROOTS" run -b "$T_DIR" \
    -b "$MU_SOURCE_DIR" "$s" env OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1 \
    "${envs[@]}" python3 -m torch.distributed.run --nproc-per-node=1 --rdzv-backend="$be" \
    --rdzv-endpoint="$ep" --rdzv-id="$tag$$$RID_SUFFIX" --monitor-interval=1 "$@" "$WORKER" "$T_DIR/out-$tag"
}

# conf BACKEND [LAST_CALL]: the --rdzv-conf (the legacy etcd backend names its timeout
# "timeout", the dynamic ones "join_timeout")
conf() {
  local k=join_timeout
  [ "$1" = etcd ] && k=timeout
  echo "--rdzv-conf=$k=120${2:+,last_call_timeout=$2}"
}

declare -A PA PB # the agents of each tag
RID_SUFFIX=""    # a case run once more gets a run id of its own (the first run's state stays)

# start_case SUITE CASE BACKEND ENDPOINT [ENV...]: starts the case's two agents (elastic: the
# second once the first runs alone). The tag is SUITE-CASE-BACKEND.
start_case() {
  local s=$1 c=$2 be=$3 ep=$4 tag="$1-$2-$3"
  shift 4
  case $c in
    fixed)
      agent "$s" "$tag" A "$ep" "$be" "$@" -- --nnodes=2 --max-restarts=0 "$(conf "$be")"
      PA[$tag]=$T_LAST_PID
      agent "$s" "$tag" B "$ep" "$be" "$@" -- --nnodes=2 --max-restarts=0 "$(conf "$be")"
      PB[$tag]=$T_LAST_PID
      ;;
    restart)
      agent "$s" "$tag" A "$ep" "$be" MU_FAIL_RANK=1 "$@" -- --nnodes=2 --max-restarts=1 "$(conf "$be")"
      PA[$tag]=$T_LAST_PID
      agent "$s" "$tag" B "$ep" "$be" MU_FAIL_RANK=1 "$@" -- --nnodes=2 --max-restarts=1 "$(conf "$be")"
      PB[$tag]=$T_LAST_PID
      ;;
    elastic)
      agent "$s" "$tag" A "$ep" "$be" MU_WANT_WORLD=2 "$@" -- --nnodes=1:2 --max-restarts=0 \
        "$(conf "$be" 2)"
      PA[$tag]=$T_LAST_PID
      PB[$tag]=""
      ;;
  esac
}

# late_nodes SUITE BACKEND... : the elastic cases' second agents, each once its first agent's
# worker runs alone (a world of 1)
late_nodes() {
  local s=$1 be tag
  shift
  for be in "$@"; do
    tag="$s-elastic-$be"
    if t_until 180 grep -q "world 1 < 2, waiting for the late node" "$T_DIR/agent-$tag-A.log"; then
      t_ok "torch $s, $be, elastic: the first agent ran alone first (a world of 1)"
    else
      t_fail "torch $s, $be, elastic: the first agent never ran alone: $(tail -5 "$T_DIR/agent-$tag-A.log")"
    fi
    agent "$s" "$tag" B "$(endpoint "$be")" "$be" MU_WANT_WORLD=2 TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 \
      -- --nnodes=1:2 --max-restarts=0 "$(conf "$be" 2)"
    PB[$tag]=$T_LAST_PID
  done
}

# result TAG: sets RES to "pass" when both agents exited 0 and both ranks verified a world of 2
# (and, for restart, the last attempt ran after one restart); else to "fail: why". Waits for the
# agents (so never in a $(...): a subshell cannot wait for this shell's children).
result() {
  local tag=$1 rca=0 rcb=0 r line maxr=0 why=""
  wait "${PA[$tag]}" || rca=$?
  if [ -n "${PB[$tag]}" ]; then wait "${PB[$tag]}" || rcb=$?; else rcb=none; fi
  [ "$rca$rcb" = 00 ] || why="agents exited $rca/$rcb"
  for r in 0 1; do
    line=$(cat "$T_DIR/out-$tag"/rank$r.* 2>/dev/null | head -1)
    set -- $line - - -
    [ "$1 $2" = "ok 2" ] || why="${why:+$why; }rank $r: ${line:-no result file}"
    [ "$3" -gt "$maxr" ] 2>/dev/null && maxr=$3
  done
  case $tag in *-restart-*) [ "$maxr" = 1 ] || why="${why:+$why; }no attempt after a restart (max restart count $maxr)" ;; esac
  RES="${why:+fail: }${why:-pass}"
}

# port_race TAG: a worker of TAG's agents could not bind its MASTER_PORT. torch's agent picks
# that port free (bind to port 0, close) and its rank-0 worker binds it later; with a dozen torch
# processes side by side another process can take it meanwhile (slurm_torchrun has the same rule).
port_race() {
  cat "$T_DIR/agent-$1-"*.log 2>/dev/null | grep -q 'errno: 98 - Address already in use'
}

# once_more SUITE CASE BACKEND: runs the case again under a new run id, after a port race
once_more() {
  local s=$1 c=$2 be=$3 tag="$1-$2-$3" ag env=()
  echo "# torch's MASTER_PORT was taken between its agent's pick and its worker's bind ($tag): once more"
  for ag in A B; do
    [ -f "$T_DIR/agent-$tag-$ag.log" ] && mv "$T_DIR/agent-$tag-$ag.log" "$T_DIR/agent-$tag-$ag.race.log"
  done
  rm -rf "$T_DIR/out-$tag"
  [ "$c" = fixed ] || env=(TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)
  RID_SUFFIX=again
  start_case "$s" "$c" "$be" "$(endpoint "$be")" "${env[@]}"
  [ "$c" = elastic ] && late_nodes "$s" "$be"
  RID_SUFFIX=""
  result "$tag"
}

# check SUITE CASE BACKEND VERSION: asserts the case and records its cell
check() {
  local s=$1 c=$2 be=$3 v=$4 tag="$1-$2-$3" res ag
  result "$tag"
  [ "$RES" != pass ] && port_race "$tag" && once_more "$s" "$c" "$be"
  res=$RES
  if [ "$res" = pass ]; then
    t_ok "torch $v, torchrun --rdzv-backend=$be against musterd: $c"
  else
    t_fail "torch $v, torchrun --rdzv-backend=$be against musterd: $c: $res"
    for ag in A B; do
      [ -f "$T_DIR/agent-$tag-$ag.log" ] || continue
      echo "# --- last lines of agent $ag ($tag)"
      grep -v '^\[W' "$T_DIR/agent-$tag-$ag.log" | tail -n 15 | sed 's/^/#   /'
    done
  fi
  local note=""
  [ "$c" = fixed ] || note=" (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)"
  t_compat "$v" torchrun "$be (musterd)" "$c$note" "${res%%:*}"
}

for s in $TR2_SUITES; do
  v=$(cat "$("$ROOTS" path "$s")/.muster-torch-version")
  v=${v%%+*}
  echo "# torch $v ($s): torchrun against musterd (c10d on $C10D_PORT, etcd on $MUSTERD_PORT)"
  t0=$SECONDS
  for be in $BACKENDS; do start_case "$s" fixed "$be" "$(endpoint "$be")"; done
  for be in $BACKENDS; do check "$s" fixed "$be" "$v"; done
  echo "# torch $v: fixed took $((SECONDS - t0)) s"
  # restart and elastic side by side, and the controls on torch's own store with them
  t0=$SECONDS
  for be in $BACKENDS; do
    start_case "$s" restart "$be" "$(endpoint "$be")" TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
    start_case "$s" elastic "$be" "$(endpoint "$be")" TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
  done
  cport=$(t_free_port)
  for ag in A B; do
    agent "$s" "$s-restart-control" "$ag" "127.0.0.1:$cport" c10d MU_FAIL_RANK=1 -- \
      --nnodes=2 --max-restarts=1 "$(conf c10d)"
    if [ "$ag" = A ]; then PA[$s-restart-control]=$T_LAST_PID; else PB[$s-restart-control]=$T_LAST_PID; fi
  done
  late_nodes "$s" $BACKENDS
  for be in $BACKENDS; do
    check "$s" restart "$be" "$v"
    check "$s" elastic "$be" "$v"
  done
  # the control: torchrun's own c10d store (the agent that binds the port hosts it), shared
  # with the workers as torch does by default
  result "$s-restart-control"
  res=$RES
  echo "# torch $v control, restart on torch's own store with the shared store (torch's default): $res"
  t_compat "$v" torchrun "c10d (torch's own store, control)" "restart (store shared, torch's default)" "${res%%:*}"
  echo "# torch $v: restart and elastic took $((SECONDS - t0)) s"
done

if grep -q 'unknown_query' "$T_DIR/musterd.log"; then
  t_fail "musterd closed a torchrun 2.x connection for an unknown query: $(grep unknown_query "$T_DIR/musterd.log" | head -3)"
else
  t_ok "no query of torchrun 2.x was unknown to musterd"
fi
t_stop_musterd_checked
t_done
