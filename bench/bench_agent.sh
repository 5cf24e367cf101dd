#!/usr/bin/env bash
# Agent start-up and restart latency: muster agent (against musterd) vs torchrun with the c10d
# backend vs torchrun with the etcd backend (a real etcd), 2 agents x 2 workers on this machine,
# runs alternating. Prints the median of each and the ratios.
#
#   bench/bench_agent.sh [ROUNDS]      (default 3; needs a build: MU_BUILD_DIR, default ./build)
#
# "Start-up" is the time from launching both agents to the 4th worker's first instruction (each
# worker writes a timestamp as it starts). "Restart" is the time from a worker's failure (it
# writes a timestamp just before exit 1) to the 4th worker of the second attempt starting.
# torchrun runs with its default --monitor_interval (5 s in torch 1.13) unless
# TORCHRUN_MONITOR_INTERVAL is set; it polls for worker exits, muster agent does not.
# torch 1.13 under Python 3.11 rejects the default --redirects/--tee values, so torchrun gets
# `--redirects 2 --tee 2` (a parsing bug in Debian's build, not a choice of ours).
set -u
ROUNDS=${1:-3}
. "$(dirname "$0")/../tests/lib.sh"
TORCHRUN=/usr/bin/torchrun
MON=${TORCHRUN_MONITOR_INTERVAL:-}
[ -x "$MUSTER" ] || { echo "bench_agent: build muster first ($MUSTER)"; exit 1; }

cat >"$T_DIR/worker.sh" <<'W'
#!/bin/sh
# Records when this worker started; with FAIL_ONCE, rank 3 fails on the first attempt.
# shellcheck disable=SC2016
echo "$(date +%s%N) $RANK" >>"$BENCH_OUT/starts"
[ -n "${FAIL_ONCE:-}" ] || exit 0
[ -e "$BENCH_OUT/failed" ] && exit 0 # the second attempt: done at once
if [ "$RANK" = 3 ]; then
  # Fail once all 4 workers of the first attempt started, so later starts are the restart.
  i=0
  while [ "$(wc -l <"$BENCH_OUT/starts")" -lt 4 ] && [ "$i" -lt 1000 ]; do
    sleep 0.01; i=$((i + 1))
  done
  date +%s%N >"$BENCH_OUT/failed.tmp" && mv "$BENCH_OUT/failed.tmp" "$BENCH_OUT/failed"
  exit 1
fi
# The other first-attempt workers run until their agent stops them for the re-rendezvous.
sleep 60
exit 0
W
chmod +x "$T_DIR/worker.sh"

now_ns() { date +%s%N; }

# Waits until 4 workers started after time $1 (ns); prints the 4th start time. (Restart counts
# differ between nodes: only the failing node counts a restart, as in torchrun.)
wait_starts() {
  local after=$1 i=0
  while [ "$(awk -v t="$after" '$1 > t' "$BENCH_OUT/starts" 2>/dev/null | wc -l)" -lt 4 ]; do
    i=$((i + 1)); [ "$i" -gt 1200 ] && { echo 0; return; }
    sleep 0.05
  done
  awk -v t="$after" '$1 > t {print $1}' "$BENCH_OUT/starts" | sort -n | sed -n 4p
}

# run_case KIND FAIL -> prints "startup_ms restart_ms"
run_case() {
  trap - EXIT # a $(...) subshell must not run lib.sh's cleanup
  local kind=$1 fail=$2 out pids=() id="b$RANDOM$RANDOM"
  out=$(mktemp -d "$T_DIR/$kind.XXXX")
  export BENCH_OUT=$out
  if [ "$fail" = 1 ]; then export FAIL_ONCE=1; else unset FAIL_ONCE; fi
  local t0; t0=$(now_ns)
  for n in 0 1; do
    case $kind in
      muster)
        "$MUSTER" agent --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "127.0.0.1:$MUSTERD_PORT" \
          --rdzv-id "$id" --max-restarts 1 -- "$T_DIR/worker.sh" >"$out/agent$n.log" 2>&1 & ;;
      etcd3) # muster agent on a 3-member etcd v3 cluster (KINDS=... etcd3)
        "$MUSTER" agent --nnodes 2 --nproc-per-node 2 --rdzv-backend etcd-v3 --rdzv-endpoint "$EC_EP" \
          --rdzv-id "$id" --max-restarts 1 -- "$T_DIR/worker.sh" >"$out/agent$n.log" 2>&1 & ;;
      c10d)
        "$TORCHRUN" --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d \
          --rdzv_endpoint "127.0.0.1:$C10D_PORT" --rdzv_id "$id" --max_restarts 1 \
          ${MON:+--monitor_interval $MON} --redirects 2 --tee 2 --no_python "$T_DIR/worker.sh" \
          >"$out/agent$n.log" 2>&1 & ;;
      etcd)
        "$TORCHRUN" --nnodes 2 --nproc_per_node 2 --rdzv_backend etcd \
          --rdzv_endpoint "127.0.0.1:$ETCD_PORT" --rdzv_id "$id" --max_restarts 1 \
          ${MON:+--monitor_interval $MON} --redirects 2 --tee 2 --no_python "$T_DIR/worker.sh" \
          >"$out/agent$n.log" 2>&1 & ;;
    esac
    pids+=($!)
  done
  local s0 s1="" f=""
  s0=$(wait_starts "$t0")
  if [ "$fail" = 1 ]; then
    local i=0
    while [ ! -s "$out/failed" ] && [ "$i" -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    f=$(cat "$out/failed" 2>/dev/null || echo 0)
    s1=$(wait_starts "$f")
  fi
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ "$s0" = 0 ] || { [ "$fail" = 1 ] && { [ "$s1" = 0 ] || [ "$f" = 0 ]; }; }; then
    echo "bench_agent: $kind did not start its workers; logs in $out" >&2
    T_KEEP=1
    echo "nan nan"
    return
  fi
  local up=$(( (s0 - t0) / 1000000 )) re=-
  [ "$fail" = 1 ] && re=$(( (s1 - f) / 1000000 ))
  echo "$up $re"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "nan")}'; }

KINDS=${KINDS:-muster c10d etcd} # etcd3: muster agent on a 3-member etcd v3 cluster
t_start_musterd
[[ " $KINDS " == *" etcd "* ]] && t_start_etcd
if [[ " $KINDS " == *" etcd3 "* ]]; then
  . "$(dirname "$0")/../tests/integration/etcd3_cluster.bash"
  etcd3_start || { echo "bench_agent: the etcd cluster did not start"; exit 1; }
fi
C10D_PORT=$(t_free_port)
declare -A up re
for kind in $KINDS; do up[$kind]=""; re[$kind]=""; done
for r in $(seq 1 "$ROUNDS"); do
  for kind in $KINDS; do
    read -r u _ <<<"$(run_case "$kind" 0)"
    read -r _ x <<<"$(run_case "$kind" 1)"
    up[$kind]="${up[$kind]} $u"; re[$kind]="${re[$kind]} $x"
    echo "round $r $kind: start-up ${u} ms, restart ${x} ms"
  done
done
echo
printf '%-8s %14s %14s\n' agent "start-up ms" "restart ms"
for kind in $KINDS; do
  printf '%-8s %14s %14s\n' "$kind" "$(echo "${up[$kind]}" | median)" "$(echo "${re[$kind]}" | median)"
done
mu=$(echo "${up[muster]}" | median); mr=$(echo "${re[muster]}" | median)
if [[ " $KINDS " == *" etcd3 "* && " $KINDS " == *" c10d "* ]]; then
  awk -v a="$(echo "${up[c10d]}" | median)" -v b="$(echo "${up[etcd3]}" | median)" \
      -v c="$(echo "${re[c10d]}" | median)" -v d="$(echo "${re[etcd3]}" | median)" 'BEGIN {
    printf "torchrun c10d / muster agent on etcd v3: start-up %.1fx, restart %.1fx\n",
           (b > 0 ? a / b : 0), (d > 0 ? c / d : 0) }'
fi
for kind in c10d etcd; do
  [[ " $KINDS " == *" $kind "* ]] || continue
  awk -v a="$(echo "${up[$kind]}" | median)" -v b="$mu" -v c="$(echo "${re[$kind]}" | median)" \
      -v d="$mr" -v k="$kind" 'BEGIN {
    printf "torchrun %-5s / muster agent: start-up %.1fx, restart %.1fx\n", k,
           (b > 0 ? a / b : 0), (d > 0 ? c / d : 0) }'
done
