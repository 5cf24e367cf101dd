#!/usr/bin/env bash
# The soak benchmark (issue #7): 1,000 clients churning keys, watches, TTL keys (leases) and
# /v1 joins against a fresh musterd for SECONDS (default 600), sampling musterd's VmRSS every
# minute. Prints the samples and one summary line (start/end RSS, errors); exits 1 on any
# error or when the RSS grew more than MAX_GROWTH percent after the warm-up.
# usage: bench/bench_soak.sh [BUILD_DIR]
#   env: SECONDS_TOTAL (600), CLIENTS (1000), THINK_MS (200), SAMPLE (60), WARMUP (60),
#        MAX_GROWTH (10), MUSTERD (the binary), MUSTERD_ARGS (extra options, e.g. a token file)
# The test suite never runs the 10-minute version; tests/integration/security_soak.sh runs a
# short one.
#
# bench/bench_soak.sh --c10d [BUILD_DIR]: the hostile TCPStore soak (issue 33): for DURATION
# seconds (default 300) hostile clients (idle sockets, WAIT frames, 4 MiB SETs, connection
# churn, pipelined queue pops; bench/soak_c10d.py) load musterd's --c10d-listen beside normal
# clients (a torch 1.13 TCPStore client at TORCH_PY, default /usr/bin/python3, and GET
# /health), sampling musterd's RSS every 5 s; then the same load (without the queues, which
# torch 1.13 does not speak) against torch's own TCPStore server, side by side. Prints each
# side's block: the normal clients' success rate and latency percentiles, RSS first/max/last
# and the ratios. Exits 1 when musterd died or a normal client's success fell below 99 %.
# Not a test (no CTest entry): it runs for minutes.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--c10d" ]; then
  shift
  exec bash "$SRC/bench/bench_soak_c10d.sh" "$@"
fi
BUILD=${1:-${MU_BUILD_DIR:-$SRC/build}}
MUSTERD=${MUSTERD:-$BUILD/musterd}
SOAK=${SOAK:-$BUILD/bench/soak}
SECONDS_TOTAL=${SECONDS_TOTAL:-600}
CLIENTS=${CLIENTS:-1000}
THINK_MS=${THINK_MS:-200}
SAMPLE=${SAMPLE:-60}
WARMUP=${WARMUP:-60}
MAX_GROWTH=${MAX_GROWTH:-10}
for f in "$MUSTERD" "$SOAK"; do
  [ -x "$f" ] || { echo "bench_soak: $f is missing; build with cmake --build $BUILD" >&2; exit 2; }
done
if [ "$WARMUP" -ge "$SECONDS_TOTAL" ]; then WARMUP=$((SECONDS_TOTAL / 4)); fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null

LOG=$(mktemp /tmp/bench_soak.XXXXXX)
PID=
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
  rm -f "$LOG"
}
trap cleanup EXIT

# shellcheck disable=SC2086
"$MUSTERD" --listen 127.0.0.1:0 --max-connections $((CLIENTS + 1000)) \
  --max-connections-per-address $((CLIENTS + 1000)) --log-level warn \
  ${MUSTERD_ARGS:-} >"$LOG" 2>&1 &
PID=$!
PORT=
for _ in $(seq 200); do
  PORT=$(sed -n 's/.*musterd listening on [0-9.]*:\([0-9]*\).*/\1/p' "$LOG" | head -1)
  [ -n "$PORT" ] && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$PORT" ]; then
  echo "bench_soak: musterd did not start:" >&2
  cat "$LOG" >&2
  exit 1
fi
echo "# soak: musterd pid $PID port $PORT, $CLIENTS clients for ${SECONDS_TOTAL}s (warm-up ${WARMUP}s)"
"$SOAK" --port "$PORT" --pid "$PID" --clients "$CLIENTS" --seconds "$SECONDS_TOTAL" \
  --think-ms "$THINK_MS" --sample-seconds "$SAMPLE" --warmup-seconds "$WARMUP" \
  --max-growth-pct "$MAX_GROWTH" ${SOAK_TOKEN:+--token "$SOAK_TOKEN"}
rc=$?
if ! kill -0 "$PID" 2>/dev/null; then
  echo "bench_soak: musterd died during the soak:" >&2
  tail -20 "$LOG" >&2
  exit 1
fi
kill -TERM "$PID"
wait "$PID"
mrc=$?
PID=
if [ "$mrc" -ne 0 ]; then
  echo "bench_soak: musterd exited $mrc on SIGTERM" >&2
  tail -20 "$LOG" >&2
  rc=1
fi
if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$LOG"; then
  echo "bench_soak: sanitizer report:" >&2
  grep -E -A20 'Sanitizer|runtime error:' "$LOG" | head -60 >&2
  rc=1
fi
exit $rc
