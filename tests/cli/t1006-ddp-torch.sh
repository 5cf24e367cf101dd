#!/usr/bin/env bash
# The second documented example: examples/train_ddp.py with Debian's python3-torch, 2 nodes x
# 1 worker, once with muster agent and once with unmodified torchrun (etcd-v2 rendezvous on the
# embedded musterd).
. "$(dirname "$0")/../lib.sh"
t_local_jobs
export GLOO_SOCKET_IFNAME=lo
t_need_py torch python3-torch
t_need_cmd /usr/bin/torchrun python3-torch
for launcher in muster torchrun; do
  h=$(timeout 120 "$MUSTER" run dist.ddp -j 2x1 --launcher $launcher --python "$PY" \
    --script "$MU_SOURCE_DIR/examples/train_ddp.py" -- --steps 3 2>"$T_DIR/err"); rc=$?
  t_expect_eq "$launcher: exit 0" "$rc" 0
  logs=$("$MUSTER" log "$h")
  t_expect_match "$launcher: rank 0 trained" "$logs" 'rank 0/2 restart 0: first loss .* decreased'
  t_expect_match "$launcher: rank 1 trained" "$logs" 'rank 1/2 restart 0: first loss .* decreased'
done
t_done
