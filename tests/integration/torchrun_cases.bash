# Shared body of torchrun_etcd.sh and torchrun_etcd_v2.sh (not a test itself: it does not end
# in .sh). Unmodified torchrun (/usr/bin/torchrun, Debian torch 1.13) with
# --rdzv_backend=$TR_BACKEND against musterd (default) or a real etcd (TARGET=etcd), three
# cases, two agents x two workers each:
#   fixed    --nnodes=2: gloo all_reduce, every rank verifies and writes a result file
#   elastic  --nnodes=1:3 with a short last_call_timeout: both agents end up in one world of 4
#   restart  --nnodes=2 --max_restarts=2, global rank 3 exits 3 on attempt 0: re-rendezvous
# Env: TARGET=musterd|etcd, TR_CASES="fixed elastic restart", TR_TIMEOUT (s per agent, 150).
# Notes (docs reference etcd-v2.md section 11): --redirects=1 --tee=1 work around the torch
# 1.13 + Python 3.11 crash; the two scripts take a lock so that ctest -j never runs them at the
# same time (8 workers importing torch on 2 cores is slow enough already).

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

TORCHRUN=${TORCHRUN:-/usr/bin/torchrun}
TARGET=${TARGET:-musterd}
TR_CASES=${TR_CASES:-fixed elastic restart}
TR_TIMEOUT=${TR_TIMEOUT:-150}
TR_WORKER="$MU_SOURCE_DIR/tests/integration/torchrun_worker.py"

t_need_built "$MUSTERD"
t_need_cmd "$TORCHRUN" python3-torch
t_need_py torch python3-torch
t_need_py etcd python3-etcd

t_torch_lock

case "$TARGET" in
musterd)
  t_start_musterd || { t_fail "musterd did not start: $(tail -5 "$T_DIR/musterd.log")"; t_done; }
  TR_PORT=$MUSTERD_PORT
  ;;
etcd)
  t_need_cmd etcd etcd-server
  t_start_etcd || { t_fail "etcd did not start: $(tail -5 "$T_DIR/etcd.log")"; t_done; }
  TR_PORT=$ETCD_PORT
  ;;
*)
  echo "not ok - TARGET='$TARGET' is not one of: musterd, etcd"
  exit 2
  ;;
esac
echo "# torchrun --rdzv_backend=$TR_BACKEND against $TARGET on 127.0.0.1:$TR_PORT"

export OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1
unset MU_FAIL_RANK

# Timeout key for the rendezvous as a whole: legacy etcd reads "timeout", the dynamic
# rendezvous (etcd-v2) reads "join_timeout".
if [ "$TR_BACKEND" = etcd ]; then tr_join=timeout; else tr_join=join_timeout; fi

# tr_case NAME NPROCS_PER_AGENT TORCHRUN_ARGS... : runs two agents, checks exits and results.
tr_case() {
  local name=$1; shift
  local id="mu${name}$$${RANDOM}" out="$T_DIR/out-$name" a b rca rcb t0 t1 r line
  local worlds=4 max_restart=0 bad=0 fails0=$T_FAILS
  mkdir -p "$out"
  t0=$(date +%s%N)
  for ag in A B; do
    t_spawn "agent-$name-$ag" timeout -k 5 "$TR_TIMEOUT" "$TORCHRUN" \
      --nproc_per_node=2 --rdzv_backend="$TR_BACKEND" \
      --rdzv_endpoint="127.0.0.1:$TR_PORT" --rdzv_id="$id" \
      --monitor_interval=1 --redirects=1 --tee=1 --log_dir="$T_DIR/logs-$name-$ag" \
      "$@" "$TR_WORKER" "$out"
    if [ "$ag" = A ]; then a=$T_LAST_PID; else b=$T_LAST_PID; fi
  done
  wait "$a"; rca=$?
  wait "$b"; rcb=$?
  t1=$(date +%s%N)
  echo "# $name: agents exited $rca/$rcb after $(((t1 - t0) / 1000000)) ms"
  t_expect_eq "$name: agent A exit status" "$rca" 0
  t_expect_eq "$name: agent B exit status" "$rcb" 0
  for r in 0 1 2 3; do
    if [ ! -f "$out/rank$r.$id" ]; then
      bad=1
      t_fail "$name: rank $r wrote no result file"
      continue
    fi
    read -r line <"$out/rank$r.$id"
    set -- $line - - -
    t_expect_eq "$name: rank $r verified its all_reduce in a world of $worlds" "$1 $2" "ok $worlds"
    case "$3" in [0-9]*) [ "$3" -gt "$max_restart" ] && max_restart=$3 ;; esac
  done
  if ls "$out" | grep -qv "^rank[0-3]\.$id\$"; then
    t_fail "$name: unexpected result files: $(ls "$out" | tr '\n' ' ')"
  fi
  TR_MAX_RESTART=$max_restart
  tr_check_server "$name" "$id"
  # one cell of docs/compat.md (scripts/compat-table.sh): torch 1.13's torchrun, this backend
  t_compat 1.13 torchrun "$TR_BACKEND ($TARGET)" "$name" \
    "$([ "$T_FAILS" = "$fails0" ] && echo pass || echo fail)"
  if [ "$rca$rcb" != 00 ] || [ "$bad" = 1 ]; then
    for ag in A B; do
      echo "# --- last lines of agent $ag ($name)"
      tail -n 25 "$T_DIR/agent-$name-$ag.log" | sed 's/^/#   /'
      # and its workers' own (torch: LOG_DIR/RUN/attempt_N/LOCAL_RANK/stdout.log, stderr.log)
      find "$T_DIR/logs-$name-$ag" -name '*.log' -size +0 2>/dev/null | sort | while read -r f; do
        echo "# --- ${f#"$T_DIR"/}"
        tail -n 10 "$f" | sed 's/^/#   /'
      done
    done
    echo "# --- musterd, last lines"
    tail -n 15 "$T_DIR/musterd.log" 2>/dev/null | sed 's/^/#   /'
  fi
}

# tr_check_server CASE RUN_ID: the rendezvous state the agents left on the server. Legacy etcd:
# active_version is {"status": "closed", ...} and version_counter counts the rounds (>= 1 after
# a restart); etcd-v2: the state key exists. Sets TR_ROUNDS (legacy rounds, or "?").
tr_check_server() {
  local name=$1 id=$2 url="http://127.0.0.1:$TR_PORT/v2/keys" body
  TR_ROUNDS="?"
  if [ "$TR_BACKEND" = etcd ]; then
    body=$(curl -s --max-time 5 "$url/torchelastic/p2p/run_$id/rdzv/active_version")
    t_expect_match "$name: server holds the closed legacy rendezvous state" "$body" \
      '"value":"\{\\"status\\": \\"closed\\"'
    body=$(curl -s --max-time 5 "$url/torchelastic/p2p/run_$id/rdzv/version_counter")
    TR_ROUNDS=$(printf '%s' "$body" | sed -n 's/.*"value":"\([0-9]*\)".*/\1/p')
    t_expect_match "$name: server holds version_counter" "$TR_ROUNDS" '^[0-9]+$'
  else
    body=$(curl -s --max-time 5 "$url/torch/elastic/rendezvous/$id")
    t_expect_match "$name: server holds the etcd-v2 rendezvous state" "$body" \
      '"action":"get".*"value":"[A-Za-z0-9+/=]{20,}"'
  fi
}

for c in $TR_CASES; do
  case "$c" in
  fixed)
    tr_case fixed --nnodes=2 --max_restarts=0 --rdzv_conf="$tr_join=90"
    ;;
  elastic)
    tr_case elastic --nnodes=1:3 --max_restarts=0 \
      --rdzv_conf="$tr_join=90,last_call_timeout=5"
    ;;
  restart)
    export MU_FAIL_RANK=3
    tr_case restart --nnodes=2 --max_restarts=2 --rdzv_conf="$tr_join=90"
    unset MU_FAIL_RANK
    t_expect_eq "restart: the final attempt ran after a restart (TORCHELASTIC_RESTART_COUNT)" \
      "$([ "$TR_MAX_RESTART" -ge 1 ] && echo yes || echo "no: $TR_MAX_RESTART")" yes
    if [ "$TR_BACKEND" = etcd ]; then
      t_expect_eq "restart: a second legacy rendezvous round happened (version_counter >= 1)" \
        "$([ "${TR_ROUNDS:-0}" -ge 1 ] 2>/dev/null && echo yes || echo "no: '$TR_ROUNDS'")" yes
    fi
    ;;
  *)
    t_fail "unknown case '$c' in TR_CASES (cases: fixed elastic restart)"
    ;;
  esac
done

if [ "$TARGET" = musterd ] && ! kill -0 "$MUSTERD_PID" 2>/dev/null; then
  t_fail "musterd died during the run: $(tail -5 "$T_DIR/musterd.log")"
fi
t_done
