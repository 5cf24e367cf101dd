#!/usr/bin/env bash
# muster agent runs examples/train_ddp.py (PyTorch DDP, gloo) unchanged on 2 agents x 2
# workers with Debian's python3-torch; the loss decreases.
. "$(dirname "$0")/agent_common.bash"
t_need_py torch.distributed python3-torch
t_start_musterd
EP=127.0.0.1:$MUSTERD_PORT
export GLOO_SOCKET_IFNAME=lo
for i in 0 1; do
  agent_start "a$i" --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id ddp \
    --log-dir "$T_DIR/logs$i" --tee -- "$PY" "$MU_SOURCE_DIR/examples/train_ddp.py" --steps 15
  eval "p$i=$AGENT_PID"
done
for i in 0 1; do
  eval "agent_wait \$p$i 120"
  t_expect_eq "agent $i exits 0" "$RC" 0
done
all=$(cat "$T_DIR"/a0.log "$T_DIR"/a1.log)
t_expect_eq "all 4 ranks report a decreasing loss" \
  "$(grep -cE '^\[[0-3]\]:rank [0-3]/4 restart 0: first loss .* decreased' <<<"$all")" 4
first=$(grep -m1 -oE '^\[0\]:step 0 loss [0-9.]+' <<<"$all" | awk '{print $4}')
last=$(grep -oE '^\[0\]:step 14 loss [0-9.]+' <<<"$all" | awk '{print $4}')
t_expect_eq "loss at step 14 ($last) below step 0 ($first)" \
  "$(awk -v a="$first" -v b="$last" 'BEGIN { print (b != "" && b + 0 < a + 0) ? "yes" : "no" }')" yes
t_expect_match "per-worker log files with --log-dir" \
  "$(cat "$T_DIR"/logs*/ddp/attempt_1/*/stdout.log 2>/dev/null)" "step 14 loss"
agent_dump_logs
t_done
