#!/usr/bin/env bash
# The etcd v3 rendezvous of a big run (max_nodes > 256) on a 3-member etcd cluster: its rounds
# keep the member list out of c/round (in m/<R>), and each waiting node learns its rank from
# its bucket a/<R>/<b> (docs/rendezvous.md, "The etcd v3 backend"). 300 nodes join one run
# (bench/etcd3_load: a thread and a client each, as agents; under MU_SANITIZED=1, 24 nodes of a
# run with --nnodes 24:300, which is big by its max all the same):
#  - every join is answered, the 300 rounds agree (node ranks 0..299 once each, offsets, world
#    size, one master) and node 0's watch sees the round healthy (it reads m/<R>);
#  - muster rdzv etcd-v3://... reads the run: 300 members in rank order, none waiting.
# A timing check is bench/bench_rdzv_backends.sh's, not this test's.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/etcd3_cluster.bash"
t_need_built "$MUSTER" "$MU_BUILD_DIR/bench/etcd3_load"
t_need_cmd etcd etcd-server
t_need_cmd curl curl
NODES=300 MAX=300
[ "$MU_SANITIZED" = 1 ] && NODES=24

etcd3_start || { t_fail "a 3-member etcd cluster started"; t_done; }
out=$("$MU_BUILD_DIR/bench/etcd3_load" join --endpoints "etcd-v3://$EC_EP" --nodes "$NODES" \
  --max "$MAX" --run big --goal-ms 600000 2>"$T_DIR/load.err")
t_expect_match "$NODES nodes joined, the rounds agree" "$out" \
  "nodes=$NODES .* failed=0 rounds_agree=yes PASS"
[ -s "$T_DIR/load.err" ] && sed 's/^/# /' "$T_DIR/load.err" | head -5

json=$("$MUSTER" rdzv --json "etcd-v3://$EC_EP" big)
check=$("$PY" -c '
import json, sys
r = json.loads(sys.argv[1])["runs"][0]
m = r["members"]
ok = (r["nnodes"] == len(m) == int(sys.argv[2]) and r["waiting"] == 0 and r["round"] == 1
      and [x["node_rank"] for x in m] == list(range(len(m)))
      and [x["rank_offset"] for x in m] == list(range(len(m)))
      and len({x["node_id"] for x in m}) == len(m))
print("ok" if ok else "bad: %s" % {k: r[k] for k in ("nnodes", "waiting", "round", "round_state")})
' "$json" "$NODES" 2>&1)
t_expect_eq "muster rdzv reads the $NODES members of the big round from m/1" "$check" ok
etcd3_stop
t_done
