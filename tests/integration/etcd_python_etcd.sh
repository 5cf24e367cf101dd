#!/usr/bin/env bash
# python-etcd (Debian python3-etcd, the client torch uses) against musterd: read/write/CAS,
# TTL expiry, watches, in-order keys, delete, listings (etcd_python_etcd.py).
#   TARGET=etcd runs the same checks against a real etcd.
. "$(dirname "$0")/../lib.sh"

# Stops musterd with SIGTERM and checks a clean exit: status 0 within 10 s and no sanitizer
# report in its log (ASan leak checks run at exit).
stop_musterd_checked() { # pid log
  local pid=$1 log=$2 rc i
  kill -0 "$pid" 2>/dev/null || { t_fail "musterd ($pid) died during the test"; tail -20 "$log"; return; }
  kill -TERM "$pid"
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then t_fail "musterd did not exit within 10 s of SIGTERM"; return; fi
  wait "$pid"; rc=$?
  t_expect_eq "musterd exits 0 on SIGTERM" "$rc" 0
  if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$log"; then
    t_fail "sanitizer report in $log:"; grep -E -A15 'Sanitizer|runtime error:' "$log" | head -40
  fi
}
"$PY" -c 'import etcd' 2>/dev/null || { echo "skip: python3-etcd not installed"; exit 77; }

if [ "${TARGET:-musterd}" = etcd ]; then
  t_start_etcd || { t_fail "etcd did not start"; t_done; }
  URL=$ETCD_URL
else
  t_start_musterd || { t_fail "musterd did not start"; tail -5 "$T_DIR/musterd.log"; t_done; }
  URL=$MUSTERD_URL
fi

if timeout 120 "$PY" "$MU_SOURCE_DIR/tests/integration/etcd_python_etcd.py" "$URL"; then
  t_ok "python-etcd checks"
else
  t_fail "python-etcd checks (see above)"
fi
if [ "${TARGET:-musterd}" != etcd ]; then stop_musterd_checked "$MUSTERD_PID" "$T_DIR/musterd.log"; fi
t_done
