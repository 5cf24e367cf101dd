#!/usr/bin/env bash
# etcd v2 conformance: the same request sequence against musterd and against a real etcd 3.4
# (--enable-v2), answers compared with indexes taken relative (etcd_conformance.py).
#   TARGET=etcd  compare two real etcds instead (checks that the test itself is deterministic).
#   CASES=name   run only the cases whose name contains this.
. "$(dirname "$0")/../lib.sh"

t_need_built "$MUSTERD"
t_need_cmd etcd etcd-server

t_start_etcd || { t_fail "etcd did not start"; t_done; }
REF_URL=$ETCD_URL
if [ "${TARGET:-musterd}" = etcd ]; then
  # A second etcd: t_start_etcd keeps its data under $T_DIR, so give it another one.
  main_dir=$T_DIR; T_DIR=$main_dir/second; mkdir -p "$T_DIR"
  t_start_etcd || { T_DIR=$main_dir; t_fail "second etcd did not start"; t_done; }
  T_DIR=$main_dir
  SUT_URL=$ETCD_URL; SUT_NAME=etcd-b
else
  t_start_musterd || { t_fail "musterd did not start (see $T_DIR/musterd.log)"; \
    cat "$T_DIR/musterd.log" 2>/dev/null | tail -5; t_done; }
  SUT_URL=$MUSTERD_URL; SUT_NAME=musterd
fi

"$PY" "$MU_SOURCE_DIR/tests/integration/etcd_conformance.py" --a "$SUT_URL" --b "$REF_URL" \
  --name-a "$SUT_NAME" --name-b etcd -k "${CASES:-}"
rc=$?
t_stop_target
if [ "$rc" = 0 ]; then t_ok "conformance ($SUT_NAME vs etcd)"; else t_fail "conformance ($SUT_NAME vs etcd): see the lines above"; fi
t_done
