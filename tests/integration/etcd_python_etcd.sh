#!/usr/bin/env bash
# python-etcd (Debian python3-etcd, the client torch uses) against musterd: read/write/CAS,
# TTL expiry, watches, in-order keys, delete, listings (etcd_python_etcd.py).
#   TARGET=etcd runs the same checks against a real etcd.
. "$(dirname "$0")/../lib.sh"

t_need_built "$MUSTERD"
t_need_py etcd python3-etcd

t_start_target

if timeout 120 "$PY" "$MU_SOURCE_DIR/tests/integration/etcd_python_etcd.py" "$URL"; then
  t_ok "python-etcd checks"
else
  t_fail "python-etcd checks (see above)"
fi
t_stop_target
t_done
