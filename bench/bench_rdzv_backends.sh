#!/usr/bin/env bash
# The two rendezvous backends side by side (issue 14), one run each:
#  1. 2 agents x 2 workers, start-up and restart: muster agent on musterd, muster agent on a
#     3-member etcd v3 cluster, torchrun c10d (bench_agent.sh with KINDS="muster etcd3 c10d").
#     Goal: on etcd v3, start-up and restart >= 10x faster than torchrun c10d.
#  2. One round of NODES nodes (default 1000): rdzv_load join against musterd, etcd3_load join
#     against the 3-member etcd cluster (one thread and client per node: N - 1 join at once,
#     then the last). Goal: the round closes < 1 s after the last join (close_ms: from the last
#     join to the last answer).
#
#   bench/bench_rdzv_backends.sh          (needs a build: MU_BUILD_DIR, default ./build)
# The etcd members keep their data on /dev/shm when it exists (as the fsync cost of this VM's
# disk is not what is measured). Prints the summary lines of each part.
set -u
. "$(dirname "$0")/../tests/lib.sh"
. "$(dirname "$0")/../tests/integration/etcd3_cluster.bash"
NODES=${NODES:-1000}
ulimit -n "$(ulimit -Hn)" 2>/dev/null
[ -x "$MU_BUILD_DIR/bench/etcd3_load" ] || { echo "bench_rdzv_backends: build first"; exit 1; }

echo "== 2x2 start-up and restart (ms, one run)"
KINDS="muster etcd3 c10d" bash "$(dirname "$0")/bench_agent.sh" 1 | sed -n '/^agent/,$p'

echo "== one round of $NODES nodes"
t_start_musterd --max-connections $(($(ulimit -n) - 100)) \
  --max-connections-per-address $(($(ulimit -n) - 100)) --idle-timeout-ms 0 ||
  { echo "bench_rdzv_backends: musterd did not start"; exit 1; }
"$MU_BUILD_DIR/bench/rdzv_load" join --port "$MUSTERD_PORT" --nodes "$NODES" | sed 's/^/musterd: /'
if [ -d /dev/shm ]; then EC_DATA_ROOT=$(mktemp -d /dev/shm/mu-bench-etcd.XXXXXX); fi
etcd3_start || { echo "bench_rdzv_backends: the etcd cluster did not start"; exit 1; }
"$MU_BUILD_DIR/bench/etcd3_load" join --endpoints "etcd-v3://$EC_EP" --nodes "$NODES" 2>"$T_DIR/etcd3_load.err" |
  sed 's/^/etcd v3: /'
echo "etcd v3: $(grep -c . "$T_DIR/etcd3_load.err") error lines (first: $(head -1 "$T_DIR/etcd3_load.err"))"
etcd3_stop
t_cleanup
trap - EXIT
[ -n "${EC_DATA_ROOT:-}" ] && rm -rf "$EC_DATA_ROOT"
