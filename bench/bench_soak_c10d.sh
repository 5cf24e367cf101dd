#!/usr/bin/env bash
# The hostile TCPStore soak: bench/bench_soak.sh --c10d (see there). musterd first, then torch's
# own TCPStore server under the same load.
# usage: bench/bench_soak.sh --c10d [BUILD_DIR]; env DURATION (300), TORCH_PY (/usr/bin/python3),
#        IDLE (1200 idle sockets), MUSTERD_ARGS (extra musterd options)
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-${MU_BUILD_DIR:-$SRC/build}}
MUSTERD=${MUSTERD:-$BUILD/musterd}
DURATION=${DURATION:-300}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
IDLE=${IDLE:-1200}
[ -x "$MUSTERD" ] || { echo "bench_soak: $MUSTERD is missing; build with cmake --build $BUILD" >&2; exit 2; }
"$TORCH_PY" -c 'import torch.distributed' 2>/dev/null ||
  { echo "bench_soak: $TORCH_PY cannot import torch.distributed (set TORCH_PY)" >&2; exit 2; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null

LOG=$(mktemp /tmp/bench_soak_c10d.XXXXXX)
PID=""
TPID=""
cleanup() {
  for p in $PID $TPID; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -f "$LOG" "$LOG.torch" "$LOG.out"
}
trap cleanup EXIT

# shellcheck disable=SC2086
"$MUSTERD" --listen 127.0.0.1:0 --c10d-listen 127.0.0.1:0 ${MUSTERD_ARGS:-} >"$LOG" 2>&1 &
PID=$!
HTTP_PORT=""
C10D_PORT=""
for _ in $(seq 200); do
  HTTP_PORT=$(sed -n 's/.*musterd listening on [0-9.]*:\([0-9]*\).*/\1/p' "$LOG" | head -1)
  C10D_PORT=$(sed -n 's/.*musterd c10d listening on [0-9.]*:\([0-9]*\).*/\1/p' "$LOG" | head -1)
  [ -n "$HTTP_PORT" ] && [ -n "$C10D_PORT" ] && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$HTTP_PORT" ] || [ -z "$C10D_PORT" ]; then
  echo "bench_soak: musterd did not start:" >&2
  cat "$LOG" >&2
  exit 1
fi
echo "# hostile TCPStore soak, ${DURATION}s a side, $(nproc) cores; musterd $("$MUSTERD" --version 2>&1 | head -1)"
python3 "$SRC/bench/soak_c10d.py" --label "musterd --c10d-listen (pid $PID)" --port "$C10D_PORT" \
  --pid "$PID" --duration "$DURATION" --http-port "$HTTP_PORT" --torch-python "$TORCH_PY" \
  --queues --idle "$IDLE" | tee "$LOG.out"
rc=${PIPESTATUS[0]}
if ! kill -0 "$PID" 2>/dev/null; then
  echo "bench_soak: musterd died during the soak:" >&2
  tail -20 "$LOG" >&2
  rc=1
fi
kill -TERM "$PID"
wait "$PID" 2>/dev/null
PID=
ok=$(sed -n 's/^normal TCPStore client.* success=\([0-9.]*\)%.*/\1/p' "$LOG.out")
hok=$(sed -n 's/^normal HTTP GET \/health.* success=\([0-9.]*\)%.*/\1/p' "$LOG.out")
rm -f "$LOG.out"
for v in "$ok" "$hok"; do
  if [ -z "$v" ] || ! awk -v v="$v" 'BEGIN { exit !(v >= 99) }'; then
    echo "bench_soak: a normal client of musterd was served less than 99 % (${v:-nothing})" >&2
    rc=1
  fi
done

# the same load against torch's own TCPStore server (for comparison: no pass or fail)
TPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$TORCH_PY" -c '
import datetime, sys, time
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), None, True, datetime.timedelta(seconds=30),
                  wait_for_workers=False)
print("ready", flush=True)
time.sleep(1e9)
' "$TPORT" >"$LOG.torch" 2>&1 &
TPID=$!
for _ in $(seq 600); do
  grep -q ready "$LOG.torch" && break
  kill -0 "$TPID" 2>/dev/null || break
  sleep 0.05
done
if grep -q ready "$LOG.torch"; then
  python3 "$SRC/bench/soak_c10d.py" --label "torch $("$TORCH_PY" -c 'import torch; print(torch.__version__)') TCPStore(is_master=True) (pid $TPID)" \
    --port "$TPORT" --pid "$TPID" --duration "$DURATION" --torch-python "$TORCH_PY" --idle "$IDLE"
  kill -0 "$TPID" 2>/dev/null || echo "# torch's TCPStore server died during the soak: $(tail -3 "$LOG.torch")"
else
  echo "# torch's TCPStore server did not start: $(tail -5 "$LOG.torch")"
fi
exit $rc
