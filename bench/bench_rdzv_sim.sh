#!/usr/bin/env bash
# Issue 14, "past this machine, by simulation": musterd's rendezvous core driven in-process by
# 10,000, 100,000 and 1,000,000 simulated agents (bench/rdzv_sim.c: no sockets, the same code
# from HTTP parsing on). Goals: time and memory per node flat across the sizes (within 2x), a
# 100,000-node round closed < 1 s after the last join, a re-rendezvous after one failure at
# 100,000 nodes < 2 s. A size that would not fit in half of MemAvailable is skipped, and said so.
#
#   bench/bench_rdzv_sim.sh [NODES...]   env: MU_BUILD_DIR (./build), LEASE_MS (10000, the agent's default)
# Prints rdzv_sim's summary line per size, its wire line and one verdict line per goal; exits 1
# when a goal is missed. Not a test.
. "$(dirname "$0")/lib.sh"

SIM=$MU_BUILD_DIR/bench/rdzv_sim
bench_need_exe "$SIM" rdzv_sim
free -m | awk 'NR == 2 {printf "bench_rdzv_sim: memory: %s MB total, %s MB available\n", $2, $7}'
"$SIM" --lease-ms "${LEASE_MS:-10000}" "$@"
