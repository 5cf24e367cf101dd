#!/usr/bin/env bash
# One c10d rendezvous round of AGENTS simulated torchrun agents (bench/c10d_rdzv_sim: the
# queries torch 1.13's dynamic rendezvous sends over the c10d backend), on musterd's
# --c10d-listen (in memory, and with --data-dir on /dev/shm) and on PyTorch's own
# TCPStore(is_master=True), alternating, ROUNDS times each; a fresh run id per round.
#
#   bench/bench_c10d_rdzv.sh      env: AGENTS=1000 ROUNDS=2 POLL_MS=100
#
# Prints each round's line and a summary line: the time until the round closed (the closing
# compare_set answered) and until the last agent saw it, median over the rounds, and the ratio.
set -u
. "$(dirname "$0")/lib.sh"
B=$MU_BUILD_DIR/bench
bench_need_exe "$B/c10d_rdzv_sim" c10d_rdzv_sim
bench_need_exe "$MUSTERD" musterd
"$PY" -c 'import torch.distributed' 2>/dev/null || die "needs Debian's python3-torch under $PY"
AGENTS=${AGENTS:-1000}
ROUNDS=${ROUNDS:-2}
POLL_MS=${POLL_MS:-100}
bench_need_fds $((AGENTS + 100)) "$AGENTS agents"

if [ -d /dev/shm ]; then DATA=$(mktemp -d /dev/shm/mu-bench-c10d.XXXXXX); else DATA=$T_DIR/data; fi
trap 't_cleanup; [ "$DATA" = "$T_DIR/data" ] || rm -rf "$DATA"' EXIT
for s in mem disk; do
  args=()
  [ "$s" = disk ] && args=(--data-dir "$DATA")
  t_spawn "musterd-$s" "$MUSTERD" --listen 127.0.0.1:0 --c10d-listen 127.0.0.1:0 \
    --max-connections $((AGENTS + 100)) --max-connections-per-address $((AGENTS + 100)) "${args[@]}"
  t_c10d_port "$T_DIR/musterd-$s.log" || die "musterd ($s) did not start"
  eval "PORT_$s=$C10D_PORT"
done
cat >"$T_DIR/torch_store.py" <<'PY'
import time
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print("listening on 127.0.0.1:%d" % s.port, flush=True)
time.sleep(1 << 30)
PY
t_spawn torch "$PY" "$T_DIR/torch_store.py"
t_until 60 grep -q "listening on" "$T_DIR/torch.log" || die "torch did not start"
PORT_torch=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T_DIR/torch.log")

for ((r = 0; r < ROUNDS; r++)); do
  order="mem torch disk"
  [ $((r % 2)) = 1 ] && order="torch mem disk"
  for s in $order; do
    eval "port=\$PORT_$s"
    line=$("$B/c10d_rdzv_sim" --port "$port" --agents "$AGENTS" --poll-ms "$POLL_MS") ||
      die "$s: the round did not close: $line"
    echo "# $s round $r: $line"
    printf '%s %s\n' "$(bench_field closed_ms "$line")" "$(bench_field all_saw_ms "$line")" \
      >>"$T_DIR/$s.res"
  done
done
med() { awk -v c="$2" '{print $c}' "$T_DIR/$1.res" | sort -n | awk '{v[NR] = $0} END {print v[int((NR + 1) / 2)]}'; }
awk -v n="$AGENTS" -v mc="$(med mem 1)" -v ma="$(med mem 2)" -v tc="$(med torch 1)" \
  -v ta="$(med torch 2)" -v dc="$(med disk 1)" -v da="$(med disk 2)" 'BEGIN {
  printf "summary: c10d rendezvous of %d agents: closed after %.0f ms on musterd, %.0f ms on PyTorch TCPStore (%.2fx as fast), %.0f ms on musterd --data-dir; last agent saw it after %.0f / %.0f / %.0f ms\n",
    n, mc, tc, (mc > 0 ? tc / mc : 0), dc, ma, ta, da }'
