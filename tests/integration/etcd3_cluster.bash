# A 3-member etcd 3.4 cluster on loopback for the etcd v3 rendezvous (sourced after lib.sh by
# tests/integration/rdzv_backends.sh and bench/bench_rdzv_backends.sh; not a test itself).
# Members are started with t_spawn (stopped by PID at the end), ports from t_free_port, data
# under $T_DIR (or $EC_DATA_ROOT: the bench puts them on /dev/shm).
# Starts members 0-2 (ports from t_free_port, data under $T_DIR), waits until all are healthy.
# Sets EC_PORT[i], EC_PID[i], EC_EP ("http://127.0.0.1:P0,...").
etcd3_start() {
  local i cluster="" ports=" "
  for i in 0 1 2 3 4 5; do
    local p
    p=$(t_free_port)
    while [[ $ports == *" $p "* ]]; do p=$(t_free_port); done
    ports+="$p "
  done
  read -r -a all <<<"$ports"
  for i in 0 1 2; do
    EC_PORT[$i]=${all[$i]}
    EC_PEER[$i]=${all[$((i + 3))]}
    cluster+="${cluster:+,}m$i=http://127.0.0.1:${EC_PEER[$i]}"
  done
  EC_CLUSTER=$cluster
  EC_EP=""
  for i in 0 1 2; do
    etcd3_spawn "$i"
    EC_EP+="${EC_EP:+,}http://127.0.0.1:${EC_PORT[$i]}"
  done
  for i in 0 1 2; do
    t_until 30 etcd3_healthy "$i" || return 1
  done
}
# Starts member $1 (again: a restarted member keeps its data directory and rejoins).
etcd3_spawn() {
  local i=$1
  EC_RUNS[$i]=$((${EC_RUNS[$i]:-0} + 1))
  t_spawn "etcd$i-${EC_RUNS[$i]}" etcd --name "m$i" --data-dir "${EC_DATA_ROOT:-$T_DIR}/etcd$i" \
    --listen-client-urls "http://127.0.0.1:${EC_PORT[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${EC_PORT[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${EC_PEER[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${EC_PEER[$i]}" \
    --initial-cluster "$EC_CLUSTER" --initial-cluster-state new \
    --initial-cluster-token "mu-$$" --heartbeat-interval 50 --election-timeout 500
  EC_PID[$i]=$T_LAST_PID
}
# Brings a killed member back and waits until it is healthy.
etcd3_revive() {
  etcd3_spawn "$1"
  t_until 30 etcd3_healthy "$1" || t_fail "etcd member $1 did not come back"
}
# Stops every member at once (SIGKILL by PID: their data is the test's own; a SIGTERM'd member of
# a cluster that is going away waits for its peers, and t_cleanup's 5 s with it).
etcd3_stop() {
  local i
  for i in 0 1 2; do
    [ -n "${EC_PID[$i]:-}" ] && kill -KILL -- "-${EC_PID[$i]}" 2>/dev/null
  done
  return 0
}
etcd3_healthy() { curl -s --max-time 1 "http://127.0.0.1:${EC_PORT[$1]}/health" | grep -q '"true"'; }

# The index of the member that leads now (after waiting for one), or nothing.
etcd3_leader() {
  local i st
  for i in 0 1 2; do
    kill -0 "${EC_PID[$i]}" 2>/dev/null || continue
    st=$(curl -s --max-time 1 -X POST -d '{}' "http://127.0.0.1:${EC_PORT[$i]}/v3/maintenance/status")
    if [ -n "$st" ] && [ "$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["header"]["member_id"] == d.get("leader"))' "$st")" = True ]; then
      echo "$i"
      return 0
    fi
  done
  return 1
}

# Moves the leadership from member $1 (the leader) to another live member; prints the new
# leader's index once it leads.
etcd3_move_leader() {
  local from=$1 to st id
  for to in 0 1 2; do
    [ "$to" != "$from" ] && kill -0 "${EC_PID[$to]}" 2>/dev/null && break
  done
  st=$(curl -s --max-time 1 -X POST -d '{}' "http://127.0.0.1:${EC_PORT[$to]}/v3/maintenance/status")
  id=$("$PY" -c 'import json,sys; print("%x" % int(json.loads(sys.argv[1])["header"]["member_id"]))' "$st") || return 1
  ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:${EC_PORT[$from]}" move-leader "$id" >/dev/null || return 1
  t_until 10 eval '[ "$(etcd3_leader)" = "$to" ]' && echo "$to"
}

# The members (indexes) that process $1 has a TCP connection to.
etcd3_members_of() {
  local i conns
  conns=$(ss -Htnp state established 2>/dev/null | grep "pid=$1," || true)
  for i in 0 1 2; do
    grep -q "127.0.0.1:${EC_PORT[$i]} " <<<"$conns" && echo "$i"
  done
}

