#!/usr/bin/env bash
# The etcd v3 backend's lease keeper in seconds, on one etcd 3.4 member: a node's key lives under
# a lease of 2 s that a thread of the agent renews (every TTL/3); the whole node must not vanish
# while its workers run. 1. The key and its lease outlive 2.5 TTLs, renewed, the same lease.
# 2. A lease revoked behind the agent's back (as a resumed leader may) is replaced: a new lease
# and the key put again. 3. A node that leaves revokes its lease: nothing is left to expire.
# (rdzv_backends.sh has the faults of a 3-member cluster; this is the keeper alone.)
. "$(dirname "$0")/agent_common.bash"
t_need_cmd etcd etcd-server
t_start_etcd || { t_fail "etcd did not start"; tail -5 "$T_DIR/etcd.log"; t_done; }
TTL=2

# v3 NAME [ARGS]: one call of etcd's JSON gateway, printing what the test needs.
#   node RUN     the node key of RUN (its first n/ key) and its lease: "KEY LEASE", or nothing
#   ttl LEASE    the seconds the lease has left (-1: gone)
#   revoke LEASE
#   leases       how many leases exist
v3() {
  "$PY" - "$ETCD_URL" "$@" <<'PY'
import base64, json, sys, urllib.request
url, what, args = sys.argv[1], sys.argv[2], sys.argv[3:]
b64 = lambda s: base64.b64encode(s.encode()).decode()
def call(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), method="POST")
    return json.load(urllib.request.urlopen(req, timeout=5))
if what == "node":
    p = "/muster/%s/n/" % args[0]
    end = p[:-1] + chr(ord(p[-1]) + 1)
    for kv in call("/v3/kv/range", {"key": b64(p), "range_end": b64(end)}).get("kvs", []):
        print(base64.b64decode(kv["key"]).decode(), kv.get("lease", "0"))
        break
elif what == "ttl":
    print(call("/v3/lease/timetolive", {"ID": args[0]}).get("TTL", "-1"))
elif what == "revoke":
    call("/v3/lease/revoke", {"ID": args[0]})
elif what == "leases":
    print(len(call("/v3/lease/leases", {}).get("leases", [])))
PY
}

agent_start node --rdzv-backend etcd-v3 --rdzv-endpoint "$ETCD_URL" --rdzv-id lease1 \
  --rdzv-conf "lease_ttl=$TTL" --nnodes 1 --nproc-per-node 1 -- \
  sh -c "while [ ! -e '$T_DIR/stop' ]; do sleep 0.05; done"
AG=$AGENT_PID
node_up() { [ -n "$(v3 node lease1)" ] && grep -q 'started' "$T_DIR/node.log"; }
t_until 30 node_up || { t_fail "the node never joined: $(tail -n 5 "$T_DIR/node.log")"; t_done; }
read -r key lease <<<"$(v3 node lease1)"
t_expect_match "the node's key is leased" "$lease" '^[1-9][0-9]*$'

# 1. 2.5 TTLs: the key never goes, its lease is the same and never runs low (renewed every
#    TTL/3; without renewal it would be gone after one TTL).
start=$SECONDS missing=0 low=0
while [ $((SECONDS - start)) -lt 5 ]; do
  read -r k l <<<"$(v3 node lease1)"
  [ "$k" = "$key" ] && [ "$l" = "$lease" ] || missing=$((missing + 1))
  [ "$(v3 ttl "$lease")" -ge 1 ] || low=$((low + 1))
  t_tick
done
t_expect_eq "the key stays under the same lease for 2.5 TTLs (checks that missed it)" "$missing" 0
t_expect_eq "the lease never ran out (checks with less than 1 s left)" "$low" 0

# 2. The lease revoked behind the agent's back: the keeper grants another and puts the key again.
v3 revoke "$lease"
renewed() {
  read -r k l <<<"$(v3 node lease1)"
  [ "$k" = "$key" ] && [ -n "$l" ] && [ "$l" != "$lease" ] && [ "$(v3 ttl "$l")" -ge 1 ]
}
t_until 10 renewed && t_ok "a revoked lease is replaced and the node's key put again" ||
  t_fail "after the revoke: key '$(v3 node lease1)' (was '$key' under $lease)"
t_alive "$AG" && t_ok "the workers ran on through the revoke" || t_fail "the agent ended at the revoke"

# 3. The job ends: the node leaves and revokes its lease at once (not one TTL later).
touch "$T_DIR/stop"
agent_wait "$AG" 30
t_expect_eq "the agent exits 0" "$RC" 0
t_expect_eq "no lease is left behind (revoked at leave)" "$(v3 leases)" 0
agent_dump_logs
t_done
