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
