#!/usr/bin/env bash
# muster agent: 4 agents x 2 workers run the C ring all-reduce over a real musterd and verify
# the sum; the worker environment matches the torchrun contract (LOCAL_WORLD_SIZE 2 on 4
# nodes: the per-node count, not the node count).
. "$(dirname "$0")/agent_common.bash"
t_start_musterd
EP=127.0.0.1:$MUSTERD_PORT
pids=()
for i in 0 1 2 3; do
  agent_start "agent$i" --nnodes 4 --nproc-per-node 2 --rdzv-endpoint "$EP" --rdzv-id ring4 \
    --role trainer -- "$RING" --count 4096 --iters 3
  pids+=("$AGENT_PID")
done
for i in 0 1 2 3; do
  agent_wait "${pids[$i]}" 60
  t_expect_eq "agent $i exits 0" "$RC" 0
done
all=$(cat "$T_DIR"/agent*.log)
t_expect_eq "8 ranks verified the sum" "$(grep -cE '^\[[0-7]\]:rank [0-7]: allreduce ok, world 8' <<<"$all")" 8
t_expect_eq "every global rank once" \
  "$(grep -oE '^\[[0-7]\]:rank [0-7] local_rank' <<<"$all" | sort -u | wc -l)" 8
for r in 0 1 2 3 4 5 6 7; do
  line=$(grep -E "^\[$r\]:rank $r local_rank" <<<"$all")
  t_expect_match "rank $r env" "$line" \
    "local_rank $((r % 2)) world 8 group $((r / 2))/4 role trainer restart 0 master 127\.0\.0\.1:[0-9]+ round 1 local_world 2$"
done
t_expect_eq "one master for all" "$(grep -oE 'master 127.0.0.1:[0-9]+' <<<"$all" | sort -u | wc -l)" 1
# MASTER_PORT is drawn below the kernel's ephemeral range, where no outgoing connection or
# bind of port 0 can take it before rank 0's store binds it
port=$(grep -oE 'master 127.0.0.1:[0-9]+' <<<"$all" | head -1 | cut -d: -f2)
read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range
t_expect_eq "MASTER_PORT $port is below the ephemeral range ($eph_lo..)" \
  "$([ -n "$port" ] && [ "$port" -lt "$eph_lo" ] && [ "$port" -ge 1024 ] && echo yes || echo no)" yes
t_expect_eq "agents report success" "$(grep -c 'all 2 workers succeeded' <<<"$all")" 4
agent_dump_logs
t_done
