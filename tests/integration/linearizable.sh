#!/bin/bash
# Linearizable under kill -9 (issue 15, point 3; docs/linearizability.md). Twelve clients do
# quorum GETs, creates, sets, TTL'd writes, compare-and-swaps and compare-and-deletes on a few
# keys while the server is killed with SIGKILL and restarted on the same port and data dir about
# once a second; every operation is recorded and the history is checked for linearizability by
# tests/linearizability/lincheck.py (Wing & Gong search with memoization, per key). Runs: the
# checker's self-tests, musterd --fsync batch, musterd --fsync always, and etcd 3.4 --enable-v2
# as the control. Each must show zero anomalies.
#   Kills per run: 8 (batch), 3 (always), 3 (etcd), about 25 s in all (the suite's time
#   budget); MU_LONG_TESTS=1: 100, 50 and 100 (about 7 minutes: within CTest's 600 s).
#   MU_LIN_KILLS=N overrides every run's kill count; MU_LIN_SEED=N fixes the workload seed.
#   A failing run keeps its data dirs, logs and history.jsonl (the path is printed).
. "$(dirname "$0")/../lib.sh"

LIN=$MU_SOURCE_DIR/tests/linearizability
K_BATCH=8 K_ALWAYS=3 K_ETCD=3
if [ "${MU_LONG_TESTS:-0}" = 1 ]; then K_BATCH=100 K_ALWAYS=50 K_ETCD=100; fi
if [ -n "${MU_LIN_KILLS:-}" ]; then
  K_BATCH=$MU_LIN_KILLS K_ALWAYS=$MU_LIN_KILLS K_ETCD=$MU_LIN_KILLS
fi
SEED=()
[ -n "${MU_LIN_SEED:-}" ] && SEED=(--seed "$MU_LIN_SEED")

# The checker first: it must reject every anomaly it is meant to find.
if out=$("$PY" "$LIN/selftest.py" 2>&1); then
  rejected=$(printf '%s\n' "$out" | grep -c '^ok - rejects')
  accepted=$(printf '%s\n' "$out" | grep -c '^ok - accepts')
  t_ok "checker self-tests: $rejected anomalous histories rejected, $accepted linearizable accepted"
else
  t_fail "checker self-tests"
  printf '%s\n' "$out" | grep -v '^ok' | head -40 | sed 's/^/#   /'
fi

run() { # name harness-args...
  local name=$1 rc; shift
  mkdir -p "$T_DIR/$name"
  t_spawn "$name" "$PY" "$LIN/harness.py" --dir "$T_DIR/$name" "${SEED[@]}" "$@"
  wait "$T_LAST_PID"; rc=$?
  grep -E '^[a-z].*: ([0-9]+ (kills|operations|anomalies)|linearizations placed|run failed)' \
    "$T_DIR/$name.log" | sed 's/^/# /'
  grep -E '^[a-z].*: (musterd did not exit|too few|no TTL)' "$T_DIR/$name.log" | sed 's/^/#   /'
  if [ "$rc" = 0 ]; then
    t_ok "$name: linearizable, zero anomalies"
  else
    t_fail "$name: not linearizable or the run failed (history, logs and data kept in $T_DIR/$name)"
    grep -E '^ANOMALY|^  ' "$T_DIR/$name.log" | head -60 | sed 's/^/#   /'
    T_KEEP=1
  fi
  if grep -lE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T_DIR/$name"/server-*.log \
      >/dev/null 2>&1; then
    t_fail "$name: sanitizer report in a server log"
    grep -hE -A15 'Sanitizer|runtime error:' "$T_DIR/$name"/server-*.log | head -40
    T_KEEP=1
  fi
}

run batch --server musterd --musterd "$MUSTERD" --fsync batch --port "$(t_free_port)" \
  --kills "$K_BATCH" --label "musterd --fsync batch"
run always --server musterd --musterd "$MUSTERD" --fsync always --port "$(t_free_port)" \
  --kills "$K_ALWAYS" --label "musterd --fsync always"
if command -v etcd >/dev/null; then
  port=$(t_free_port); peer=$(t_free_port)
  while [ "$peer" = "$port" ]; do peer=$(t_free_port); done
  run etcd --server etcd --etcd "$(command -v etcd)" --port "$port" --peer-port "$peer" \
    --kills "$K_ETCD" --label "etcd 3.4 (control)"
else
  t_skip_part "the etcd control run needs 'etcd' (apt-get install etcd-server, or: sudo scripts/install-deps.sh --test)"
fi
t_done
