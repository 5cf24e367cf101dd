#!/usr/bin/env bash
# The native rendezvous API (/v1) against a real musterd: concurrent joins, watch events,
# heartbeats and lease expiry, barriers, KV, leave/close/shutdown, a client going away, and bad
# requests (each a clear 4xx, musterd still serving). The checks live in rdzv_api.py.
. "$(dirname "$0")/../lib.sh"

t_need_built "$MUSTERD"
t_start_musterd || { t_fail "musterd did not start"; t_done; }

out=$(timeout 120 "$PY" "$MU_SOURCE_DIR/tests/integration/rdzv_api.py" "$MUSTERD_URL" 2>&1)
rc=$?
echo "$out"
t_expect_eq "rdzv_api.py exit status" "$rc" 0
if kill -0 "$MUSTERD_PID" 2>/dev/null; then t_ok "musterd alive at the end"; else
  t_fail "musterd died"; cat "$T_DIR/musterd.log"; fi
t_done
