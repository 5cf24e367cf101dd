# Helpers of the net_*.sh tests (sourced; not a test itself): the cluster in a box
# (netns.bash) with musterd on h1 and muster agents running the C ring all-reduce on the others.
. "$(dirname "${BASH_SOURCE[0]}")/agent_common.bash"
. "$(dirname "${BASH_SOURCE[0]}")/netns.bash"

# A sanitized build is slower: its bounds are twice as long.
NET_SLOW=1
[ "$MU_SANITIZED" = 1 ] && NET_SLOW=2

# Starts musterd on host hI (default 1) on a port the kernel picks; sets NET_EP (ADDR:PORT) and
# MUSTERD_PID. Fails the test with its log when it does not start in 20 s.
net_musterd() {
  local i=${1:-1} ip
  ip=$(net_ip "$i")
  net_spawn "$i" musterd "$MUSTERD" --listen "$ip:0"
  MUSTERD_PID=$T_LAST_PID
  NET_EP=""
  t_until 20 net__ep "$ip" || true
  if [ -z "$NET_EP" ]; then
    echo "not ok - musterd on h$i did not start:"; tail -10 "$T_DIR/musterd.log"; exit 1
  fi
}
net__ep() {
  local port
  port=$(sed -n "s/.*musterd listening on $1:\([0-9][0-9]*\).*/\1/p" "$T_DIR/musterd.log" | head -1)
  [ -n "$port" ] && NET_EP="$1:$port"
}

# net_agent I NAME ARGS...: muster agent on host hI (log $T_DIR/NAME.log); sets AGENT_PID.
net_agent() {
  local i=$1 name=$2
  shift 2
  net_spawn "$i" "$name" "$MUSTER" agent "$@"
  AGENT_PID=$T_LAST_PID
}

# net_members ARGS...: muster agent ARGS on h2, h3 and h4 (logs a2..a4, pids MEMBER_PIDS[2..4]),
# then waits until each has started its worker as one of ranks 0-2 of world 3.
net_members() {
  local i
  MEMBER_PIDS=()
  for i in 2 3 4; do
    net_agent "$i" "a$i" "$@"
    MEMBER_PIDS[i]=$AGENT_PID
  done
  for i in 2 3 4; do
    wait_for_lines "$T_DIR/a$i.log" 'started 1 worker \(rank [0-2] of 3\)' 1 60 ||
      { t_fail "member a$i did not start"; net_dump_logs; t_done; }
  done
}

# net_ranks_once WORLD LOG...: every rank 0..WORLD-1 said "allreduce ok, world WORLD" exactly
# once across the logs (the workers' own lines): no rank was held by two hosts, none missing.
net_ranks_once() {
  local world=$1 r n bad=""
  shift
  for ((r = 0; r < world; r++)); do
    n=$(cat "$@" | grep -cE "rank $r: allreduce ok, world $world\b")
    [ "$n" = 1 ] || bad="$bad rank $r: $n;"
  done
  t_expect_eq "every rank of world $world finished exactly once (workers' lines)" "${bad:-ok}" ok
}

# Prints every log's tail when a check failed.
net_dump_logs() { agent_dump_logs; }

# --- the backends (net_oneway.sh, net_hang_cut.sh run each case on both) ----------------------

# net_backend B: the rendezvous on h1 for backend B: "muster" (musterd, net_musterd) or
# "etcd-v3" (one etcd 3.4 member, net_etcd3); sets NET_EP, what --rdzv-endpoint takes.
net_backend() {
  case $1 in
  muster) net_musterd 1 ;;
  etcd-v3) net_etcd3 1 ;;
  *) echo "not ok - unknown backend '$1' (BACKENDS takes: muster etcd-v3)"; exit 1 ;;
  esac
}

# net_etcd3 [I]: a one-member etcd 3.4 on host hI (default 1) at ADDR:2379 (the namespace's own
# port space); sets NET_ETCD (its client URL) and NET_EP (etcd-v3://ADDR:2379). Fails the test
# with its log when it is not healthy within 30 s; a missing etcd fails it too.
net_etcd3() {
  local i=${1:-1} ip
  ip=$(net_ip "$i")
  if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    echo "not ok - the etcd-v3 cases need etcd and etcdctl (scripts/install-deps.sh --test: etcd-server, etcd-client)"
    exit 1
  fi
  rm -rf "$T_DIR/etcd-data"
  net_spawn "$i" etcd etcd --name "n$i" --data-dir "$T_DIR/etcd-data" \
    --listen-client-urls "http://$ip:2379" --advertise-client-urls "http://$ip:2379" \
    --listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
    --initial-cluster "n$i=http://$ip:2380" --initial-cluster-state new
  NET_ETCD="http://$ip:2379"
  NET_ETCD_HOST=$i
  if ! t_until 30 net__etcd_healthy; then
    echo "not ok - etcd on h$i did not start:"; tail -10 "$T_DIR/etcd.log"; exit 1
  fi
  NET_EP="etcd-v3://$ip:2379"
}
net__etcd_healthy() {
  ip netns exec "$(net__h "$NET_ETCD_HOST")" curl -s --max-time 1 "$NET_ETCD/health" |
    grep -q '"true"'
}

# net_etcd_get KEY: the value of KEY in the test's etcd (nothing when absent).
net_etcd_get() {
  ip netns exec "$(net__h "$NET_ETCD_HOST")" etcdctl --endpoints "$NET_ETCD" get "$1" \
    --print-value-only 2>/dev/null
}

# net_etcd_keys PREFIX: the keys under PREFIX, one a line.
net_etcd_keys() {
  ip netns exec "$(net__h "$NET_ETCD_HOST")" etcdctl --endpoints "$NET_ETCD" get "$1" --prefix \
    --keys-only 2>/dev/null | grep -v '^$'
}

# net_backend_log: the log of the rendezvous server of this case (what a failure shows).
net_backend_log() {
  local f
  for f in "$T_DIR/musterd.log" "$T_DIR/etcd.log"; do
    [ -f "$f" ] && { echo "# $(basename "$f"):"; tail -30 "$f" | sed 's/^/# /'; }
  done
  return 0
}

# net_each_backend FN: runs FN B for every backend of $BACKENDS (default "muster etcd-v3"),
# each on a cluster of its own with its logs in $T_DIR/B/ (T_DIR is set back after).
net_each_backend() {
  local fn=$1 b base=$T_DIR
  for b in ${BACKENDS:-muster etcd-v3}; do
    echo "# backend $b"
    T_DIR=$base/$b
    mkdir -p "$T_DIR"
    "$fn" "$b"
    net_down 2>/dev/null
    T_DIR=$base
  done
}
