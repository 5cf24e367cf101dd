#!/usr/bin/env bash
# The crash test of tests/integration/durability_crash.sh run against etcd 3.4 (--data-dir,
# --enable-v2, its default durability), for comparison in the benchmark report: several
# clients write steadily through the v2 API, etcd is killed with SIGKILL at a random moment,
# restarted on the same data dir, and every acknowledged write must be there with its index.
#
#   bench/bench_crash_etcd.sh     env: ITERATIONS (5), CLIENTS (4)
# Prints one summary line: iterations, acknowledged writes, problems found.
# Not a test: it reports what etcd guarantees; it fails only on a broken setup.
. "$(dirname "$0")/../tests/lib.sh"

ITERATIONS=${ITERATIONS:-5}
CLIENTS=${CLIENTS:-4}
CLIENT="$MU_SOURCE_DIR/tests/integration/durability_client.py"
ACK=$T_DIR/acks
mkdir -p "$ACK"
command -v etcd >/dev/null || { echo "bench_crash_etcd: error: etcd is not installed" >&2; exit 1; }

problems=0
for i in $(seq 1 "$ITERATIONS"); do
  t_start_etcd || { echo "bench_crash_etcd: error: etcd did not start on its data dir:" >&2; tail -5 "$T_DIR/etcd.log" >&2; exit 1; }
  out=$("$PY" "$CLIENT" check "$ETCD_URL" "$ACK" 2>&1) || problems=$((problems + 1))
  echo "# etcd start $i: $(printf '%s' "$out" | tail -n 1)"
  printf '%s\n' "$out" | grep -E '^(LOST|WRONG)' | head -n 3 | sed 's/^/#   /'
  "$PY" "$CLIENT" write "$ETCD_URL" "$ACK" "$CLIENTS" 30 2>/dev/null &
  CPID=$!
  sleep "$(( RANDOM % 2 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
  sleep 0.3
  kill -KILL -- "-$ETCD_PID" 2>/dev/null || kill -KILL "$ETCD_PID"
  wait "$ETCD_PID" 2>/dev/null
  wait "$CPID"
done
t_start_etcd || { echo "bench_crash_etcd: error: etcd did not restart" >&2; exit 1; }
out=$("$PY" "$CLIENT" check "$ETCD_URL" "$ACK" 2>&1) || problems=$((problems + 1))
echo "# final: $(printf '%s' "$out" | tail -n 1)"
printf '%s\n' "$out" | grep -E '^(LOST|WRONG)' | head -n 3 | sed 's/^/#   /'
acks=$(cat "$ACK"/*.ack | grep -vc '"d?"')
echo "bench_crash_etcd: $ITERATIONS kill -9 of etcd under $CLIENTS writers: $acks acknowledged writes, checks with lost writes: $problems"
