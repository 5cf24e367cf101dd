#!/usr/bin/env bash
# A host that vanishes without a word (issue 30), side by side: muster agent on musterd against
# torchrun's c10d rendezvous (its own keep-alive: 5 s x 3 attempts, monitor every 5 s), on the
# same cluster in a box (tests/integration/netns.bash: five network namespaces on one bridge,
# 198.18.0.1-5, no route out) and the same cut.
#
#   h1  musterd (muster's rendezvous; under torchrun only the ring's KV: see below)
#   h2  member (under torchrun: the c10d store's host, --rdzv_conf is_host=1)
#   h3  member: the host that is cut (nft drop of everything to and from it on the bridge: no
#       FIN, no RST, its processes keep running)
#   h4  member
#   h5  hot standby (started after the three members run; under torchrun it waits in the
#       rendezvous as torchrun's fourth node for --nnodes 3)
#
# The workers are examples/ring_allreduce (a ring all-reduce over TCP between the three ranks,
# a step every 100 ms) under both launchers, so both stall alike when a peer goes silent. Under
# torchrun the ring still needs a KV for its peers' addresses: musterd on h1 serves it (a run
# kept open by a one-node muster agent on h1 that only sleeps), keyed by torchrun's MASTER_PORT
# (new each rendezvous round). A wrapper records each worker's pid and points its heartbeat
# file ("step N", written after every step) at the bench's own directory.
#
# Measured from the cut, polled every 20 ms:
#   stop   the survivors' (h2's and h4's) workers have all exited (their agents stopped them)
#   step   the standby's (h5's) worker wrote its first step (the ring runs again in world 3)
#
#   bench/bench_host_loss.sh [ROUNDS]      (default 3, muster and torchrun alternating)
#
# torch 1.13 under Python 3.11 rejects the default --redirects/--tee values, so torchrun gets
# `--redirects 2 --tee 2` as in bench/bench_agent.sh. Needs root (network namespaces), nft, ip, torch under /usr/bin/python3. Takes the machine's
# torchrun lock (tests/lib.sh) as the torchrun tests do. Prints a table and one summary line:
# medians, and torchrun's time over muster's (the goal: 10x, and muster at most 5 s to the
# replacement's first step). Not a test: it never fails on a missed goal.
set -u
ROUNDS=${1:-3}
. "$(dirname "$0")/lib.sh"
. "$MU_SOURCE_DIR/tests/integration/netns.bash"
RING=$MU_BUILD_DIR/examples/ring_allreduce
LIMIT=${BENCH_LIMIT:-120} # seconds after the cut before a case gives up
bench_need_exe "$MUSTER" muster
bench_need_exe "$MUSTERD" musterd
bench_need_exe "$RING" ring_allreduce
bench_need_tools nft ip setsid
[ "$(id -u)" = 0 ] || die "network namespaces need root"
"$PY" -c 'import torch.distributed.run' 2>/dev/null || die "no torch under $PY (python3-torch)"
t_torch_lock

cat >"$T_DIR/worker.sh" <<EOF
#!/bin/sh
# worker.sh OUT HOST RING-ARGS...: records the pid, then becomes the ring
out=\$1 host=\$2
shift 2
echo \$\$ >"\$out/pid.\$host"
export MUSTER_HEARTBEAT_FILE="\$out/hb.\$host"
if [ -n "\${BENCH_KV_EP:-}" ]; then # under torchrun: musterd on h1 is only the ring's KV
  export MUSTER_RDZV_ENDPOINT=\$BENCH_KV_EP MUSTER_RUN_ID=kv MUSTER_ROUND=\$MASTER_PORT
fi
exec "$RING" "\$@"
EOF
chmod +x "$T_DIR/worker.sh"
RING_ARGS=(--iters 1000000 --sleep-ms 100 --timeout-ms 3600000)

now_ns() { date +%s%N; }
# alive PID: the process exists and is not a zombie waiting for its parent
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
median() { sort -n | awk '{a[NR] = $1} END {if (NR == 0) print 0; else print a[int((NR + 1) / 2)]}'; }

# musterd on h1; sets EP (ADDR:PORT)
start_musterd() {
  local port=""
  net_spawn 1 "musterd.$1" "$MUSTERD" --listen "$(net_ip 1):0"
  t_until 20 grep -q "listening on" "$T_DIR/musterd.$1.log" || die "musterd did not start"
  port=$(sed -n 's/.*musterd listening on [0-9.]*:\([0-9]*\).*/\1/p' "$T_DIR/musterd.$1.log" | head -1)
  EP="$(net_ip 1):$port"
}

# start_node KIND CASE I: one agent on host hI
start_node() {
  local kind=$1 c=$2 i=$3 out=$T_DIR/$2
  if [ "$kind" = muster ]; then
    net_spawn "$i" "$c.a$i" "$MUSTER" agent --nnodes 3 --nproc-per-node 1 --rdzv-endpoint "$EP" \
      --rdzv-id "$c" --max-restarts 3 -- "$T_DIR/worker.sh" "$out" "h$i" "${RING_ARGS[@]}"
  else
    local host=0
    [ "$i" = 2 ] && host=1
    net_spawn "$i" "$c.a$i" env BENCH_KV_EP="$EP" LOGLEVEL=INFO "$PY" -m torch.distributed.run \
      --nnodes 3 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint "$(net_ip 2):29400" \
      --rdzv_id "$c" --rdzv_conf "is_host=$host" --max_restarts 3 --redirects 2 --tee 2 --no_python \
      "$T_DIR/worker.sh" "$out" "h$i" "${RING_ARGS[@]}"
  fi
}

# one_case KIND ROUND: sets STOP and STEP, ms from the cut (0: not within LIMIT). Runs in this
# shell (not in a $(...)): its processes and namespaces are this shell's to clean up.
one_case() {
  local kind=$1 c=$1.$2 out i t0 now stop=0 step=0 p2 p4
  out=$T_DIR/$c
  mkdir -p "$out"
  net_up 5 >&2
  start_musterd "$c"
  # under torchrun, a one-node run on h1 keeps the ring's KV ("kv") open
  [ "$kind" = torchrun ] && net_spawn 1 "$c.kv" "$MUSTER" agent --nnodes 1 --rdzv-endpoint "$EP" \
    --rdzv-id kv -- sleep 3600
  [ "$kind" = torchrun ] && { t_until 30 grep -q 'started 1 worker' "$T_DIR/$c.kv.log" ||
    die "the KV run on h1 did not start: $(tail -3 "$T_DIR/$c.kv.log")"; }
  for i in 2 3 4; do start_node "$kind" "$c" "$i"; done
  for i in 2 3 4; do
    t_until 90 test -s "$out/hb.h$i" ||
      die "$c: h$i's worker never stepped: $(tail -5 "$T_DIR/$c.a$i.log")"
  done
  start_node "$kind" "$c" 5
  # the standby has joined (muster says so; torchrun's c10d node is in its rendezvous loop)
  if [ "$kind" = muster ]; then
    t_until 30 grep -q standby "$T_DIR/$c.a5.log" || die "$c: h5 is no standby"
  fi
  sleep 5 # both: the members step on, the standby settles
  [ -s "$out/hb.h5" ] && die "$c: the standby ran a worker before the cut"
  p2=$(cat "$out/pid.h2") p4=$(cat "$out/pid.h4")
  net_cut 3
  t0=$(now_ns)
  while :; do
    now=$(now_ns)
    if [ "$stop" = 0 ] && ! alive "$p2" && ! alive "$p4"; then stop=$(((now - t0) / 1000000)); fi
    if [ "$step" = 0 ] && [ -s "$out/hb.h5" ]; then step=$(((now - t0) / 1000000)); fi
    [ "$stop" != 0 ] && [ "$step" != 0 ] && break
    [ $((now - t0)) -gt $((LIMIT * 1000000000)) ] && break
    sleep 0.02
  done
  net_down 2>/dev/null
  wait 2>/dev/null # reaps the killed agents (no "Killed" notices in the table)
  STOP=$stop STEP=$step
}

echo "# bench_host_loss: $ROUNDS round(s), host h3 cut both ways (nft drop), ms from the cut"
printf '%-6s %-9s %12s %14s\n' round launcher "stop (ms)" "1st step (ms)"
: >"$T_DIR/muster.stop"
: >"$T_DIR/muster.step"
: >"$T_DIR/torchrun.stop"
: >"$T_DIR/torchrun.step"
for ((r = 1; r <= ROUNDS; r++)); do
  for kind in muster torchrun; do
    one_case "$kind" "$r"
    printf '%-6s %-9s %12s %14s\n' "$r" "$kind" "$STOP" "$STEP"
    [ "$STOP" = 0 ] || echo "$STOP" >>"$T_DIR/$kind.stop"
    [ "$STEP" = 0 ] || echo "$STEP" >>"$T_DIR/$kind.step"
  done
done
ms=$(median <"$T_DIR/muster.stop") mp=$(median <"$T_DIR/muster.step")
ts=$(median <"$T_DIR/torchrun.stop") tp=$(median <"$T_DIR/torchrun.step")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.1fx", a / b; else print "n/a"}'; }
goal=missed
[ "$mp" -gt 0 ] && [ "$mp" -le 5000 ] && [ "$tp" -ge $((mp * 10)) ] && goal=met
echo "bench_host_loss: medians of $ROUNDS: survivors stopped muster ${ms} ms torchrun-c10d ${ts} ms" \
  "($(ratio "$ts" "$ms")); replacement's first step muster ${mp} ms torchrun-c10d ${tp} ms" \
  "($(ratio "$tp" "$mp")); goal 10x and <= 5000 ms: $goal"
