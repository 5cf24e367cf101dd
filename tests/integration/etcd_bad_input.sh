#!/usr/bin/env bash
# Malformed and hostile requests against musterd (etcd_bad_input.py): garbage, truncated and
# oversized bodies/headers/URLs, bad numbers, `..`/`//` paths, unknown methods, bad chunked
# encoding, 10,000 idle connections and --max-connections, a client that never reads, slowloris,
# idle timeout; after each case a fresh client must still get a correct answer.
#   TARGET=etcd runs the cases that apply to a real etcd (not musterd's own limits).
. "$(dirname "$0")/../lib.sh"

MANY=${MU_BAD_INPUT_CONNECTIONS:-10000}
# 10,000 client sockets here plus 10,000 in the server: raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((MANY + 200)) ]; then
  MANY=$(( $(ulimit -n) - 200 ))
  echo "# ulimit -n is $(ulimit -n): using $MANY idle connections"
fi
DRIVER=$MU_SOURCE_DIR/tests/integration/etcd_bad_input.py

if [ "${TARGET:-musterd}" = etcd ]; then
  t_start_etcd || { t_fail "etcd did not start"; t_done; }
  if "$PY" "$DRIVER" "$ETCD_URL" --etcd --pid "$ETCD_PID" --many 2000; then
    t_ok "bad input (etcd)"; else t_fail "bad input (etcd)"; fi
  t_done
fi

MAXC=$((MANY + 20))
# every connection comes from 127.0.0.1: the per-address share (tests/adversarial) is set as
# high as the total, so that the total bound is what this test meets
t_start_musterd --max-connections "$MAXC" --max-connections-per-address "$MAXC" \
  --max-body-bytes 65536 ||
  { t_fail "musterd did not start"; tail -5 "$T_DIR/musterd.log"; t_done; }
if timeout 300 "$PY" "$DRIVER" "$MUSTERD_URL" --pid "$MUSTERD_PID" --many "$MANY" \
    --max-connections "$MAXC" --max-body 65536 -k "${CASES:-}"; then
  t_ok "bad input"
else
  t_fail "bad input (see above)"
fi
t_stop_musterd_checked "$MUSTERD_PID" "$T_DIR/musterd.log"

# A second server with a short idle timeout (its own log).
port=$(t_free_port)
t_spawn musterd-idle "$MUSTERD" --listen "127.0.0.1:$port" --idle-timeout-ms 1000
idle_pid=$T_LAST_PID
t_wait_http "http://127.0.0.1:$port/healthz" 10 || { t_fail "musterd (idle timeout) did not start"; t_done; }
if timeout 60 "$PY" "$DRIVER" "http://127.0.0.1:$port" --pid "$idle_pid" --idle-ms 1000 \
    -k idle_timeout; then
  t_ok "idle timeout"
else
  t_fail "idle timeout (see above)"
fi
t_stop_musterd_checked "$idle_pid" "$T_DIR/musterd-idle.log"
t_done
