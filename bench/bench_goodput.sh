#!/usr/bin/env bash
# Goodput, side by side with Debian's torchrun (issue 21), in three parts:
#
#   standby  node lost to workers running again: 3 agents for --nnodes 2 (2 PyTorch gloo workers
#            each), kill -9 of an active node's agent and workers; the time from the kill to the
#            4th worker of the next round starting. muster agent (a hot standby, musterd) vs
#            torchrun --rdzv_backend etcd-v2 on the same musterd (its third agent waits as a
#            standby does), runs alternating. Goal: 10x faster than torchrun.
#   hang     a rank that sleeps forever after step 5: the time from its hang to the 4th worker
#            of the next attempt starting, muster agent --hang-timeout 5 vs torchrun (which
#            never restarts a hung rank: the line says what torchrun did in the same window).
#   checkpoint  a job that checkpoints every 50 of its 200 steps (2 nodes x 2 gloo workers,
#            0.05 s steps, 1 s a checkpoint; a restart resumes after the last checkpoint) and
#            whose rank 0 is killed (SIGKILL) at step 120: under muster agent (--hang-timeout
#            30, so the agents share their steps) the steps lost since the checkpoint and the
#            badput per category (the run's goodput, musterd's accounting); under torchrun
#            (etcd-v2 on the same musterd) its total time, as muster's.
#   watch    the watch itself: one agent with 64 workers that touch their heartbeat file every
#            second, --hang-timeout 60: the agent's CPU (utime + stime of /proc/PID/stat) over
#            20 s, as a share of one core, against the same agent without --hang-timeout.
#
#   bench/bench_goodput.sh [ROUNDS]     (default 2; PARTS="standby hang checkpoint watch")
#
# Each part prints one summary line. torchrun runs with its defaults (monitor interval 5 s)
# unless TORCHRUN_MONITOR_INTERVAL is set; --redirects 2 --tee 2 as bench/bench_agent.sh says.
set -u
ROUNDS=${1:-2}
PARTS=${PARTS:-standby hang checkpoint watch}
. "$(dirname "$0")/lib.sh"
TORCHRUN=/usr/bin/torchrun
MON=${TORCHRUN_MONITOR_INTERVAL:-}
bench_need_exe "$MUSTER" muster
bench_need_exe "$MUSTERD" musterd
[ -x "$TORCHRUN" ] || die "no torchrun at $TORCHRUN (apt-get install python3-torch)"
"$PY" -c 'import torch.distributed' 2>/dev/null || die "no torch under $PY (python3-torch)"
export GLOO_SOCKET_IFNAME=lo
WORKER=$MU_SOURCE_DIR/tests/integration/goodput_worker.py
t_torch_lock

# Every worker records when its process started (before importing torch: the same cost under
# both launchers), then runs the gloo worker.
cat >"$T_DIR/worker.sh" <<W
#!/bin/sh
echo "\$(date +%s%N) \$RANK \${TORCHELASTIC_RESTART_COUNT:-0}" >>"\$BENCH_OUT/starts"
exec $PY $WORKER "\$@"
W
chmod +x "$T_DIR/worker.sh"

now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR] = $1} END {if (NR == 0) print 0; else print a[int((NR + 1) / 2)]}'; }

# Waits (at most $2 s) until 4 workers started after time $1 (ns); prints the 4th start's time.
fourth_start_after() {
  local after=$1 limit=${2:-120} i=0
  while [ "$(awk -v t="$after" '$1 > t' "$BENCH_OUT/starts" 2>/dev/null | wc -l)" -lt 4 ]; do
    i=$((i + 1))
    [ "$i" -gt $((limit * 20)) ] && { echo 0; return; }
    sleep 0.05
  done
  awk -v t="$after" '$1 > t {print $1}' "$BENCH_OUT/starts" | sort -n | sed -n 4p
}

# The pids of an agent (muster or torchrun) and of every process below it.
tree_pids() {
  local p=$1 c
  echo "$p"
  for c in $(pgrep -P "$p"); do tree_pids "$c"; done
}

# Stops what a case started: every process below the agents, by pid.
stop_case() {
  local p
  for p in "$@"; do
    kill -KILL $(tree_pids "$p") 2>/dev/null
    wait "$p" 2>/dev/null
  done
}

start_agents() { # kind id n extra-worker-args...: starts n agents; AGENTS holds their pids
  local kind=$1 id=$2 n=$3 i
  shift 3
  AGENTS=()
  for i in $(seq 0 $((n - 1))); do
    case $kind in
    muster)
      "$MUSTER" agent --nnodes 2 --nproc-per-node 2 --rdzv-endpoint "127.0.0.1:$MUSTERD_PORT" \
        --rdzv-id "$id" --max-restarts 3 $EXTRA -- "${WORKER_SH:-$T_DIR/worker.sh}" "$@" \
        >"$BENCH_OUT/agent$i.log" 2>&1 &
      ;;
    torchrun)
      "$TORCHRUN" --nnodes 2 --nproc_per_node 2 --rdzv_backend etcd-v2 \
        --rdzv_endpoint "127.0.0.1:$MUSTERD_PORT" --rdzv_id "$id" --max_restarts 3 \
        ${MON:+--monitor_interval $MON} --redirects 2 --tee 2 --no_python \
        "${WORKER_SH:-$T_DIR/worker.sh}" "$@" \
        >"$BENCH_OUT/agent$i.log" 2>&1 &
      ;;
    esac
    AGENTS+=($!)
    sleep 0.3 # join in this order: the last one is the standby
  done
}

# --- standby ----------------------------------------------------------------------------------

# Prints the ms from kill -9 of an active node to the 4th worker of the next round.
standby_case() {
  local kind=$1 id="sb$RANDOM$RANDOM" t0 t1 victim
  export BENCH_OUT=$T_DIR/$kind-$id
  mkdir -p "$BENCH_OUT"
  EXTRA="" start_agents "$kind" "$id" 3 --steps 100000 --step-ms 200
  t1=$(fourth_start_after 0 120)
  [ "$t1" != 0 ] || { echo "# $kind: the first round did not start" >&2; stop_case "${AGENTS[@]}"; echo 0; return; }
  sleep 3 # a few steps of training
  victim=$(tree_pids "${AGENTS[1]}")
  t0=$(now_ns)
  kill -KILL $victim 2>/dev/null
  t1=$(fourth_start_after "$t0" 120)
  stop_case "${AGENTS[@]}"
  [ "$t1" != 0 ] && echo $(((t1 - t0) / 1000000)) || echo 0
}

part_standby() {
  local m=() t=() r a b
  for r in $(seq 1 "$ROUNDS"); do
    a=$(standby_case muster)
    b=$(standby_case torchrun)
    echo "# standby round $r: muster ${a} ms, torchrun ${b} ms"
    m+=("$a")
    t+=("$b")
  done
  a=$(printf '%s\n' "${m[@]}" | median)
  b=$(printf '%s\n' "${t[@]}" | median)
  echo "standby: node lost (kill -9) to 4 workers running again: muster ${a} ms (hot standby)," \
    "torchrun etcd-v2 ${b} ms (monitor interval ${MON:-5} s): $(awk -v a="$a" -v b="$b" \
      'BEGIN {if (a > 0 && b > 0) printf "%.1fx faster", b / a; else print "n/a (a run failed)"}')" \
    "(median of $ROUNDS)"
}

# --- hang -------------------------------------------------------------------------------------

# muster: ms from the hang (the rank's "hanging" line) to the 4th worker of the next attempt.
hang_muster() {
  local id="hg$RANDOM$RANDOM" t0 t1
  export BENCH_OUT=$T_DIR/hang-$id
  mkdir -p "$BENCH_OUT"
  EXTRA="--hang-timeout 5" start_agents muster "$id" 2 --steps 20 --step-ms 100 --hang-rank 3
  t_until 120 grep -q "hanging at step" "$BENCH_OUT"/agent*.log
  t0=$(now_ns)
  t1=$(fourth_start_after "$t0" 120)
  stop_case "${AGENTS[@]}"
  [ "$t1" != 0 ] && echo $(((t1 - t0) / 1000000)) || echo 0
}

# torchrun: what it did in `window` s after the hang: restarts, workers still alive.
hang_torchrun() {
  local window=$1 id="hg$RANDOM$RANDOM" t0 restarted alive
  export BENCH_OUT=$T_DIR/hang-$id
  mkdir -p "$BENCH_OUT"
  EXTRA="" start_agents torchrun "$id" 2 --steps 20 --step-ms 100 --hang-rank 3
  t_until 120 grep -q "hanging at step" "$BENCH_OUT"/agent*.log
  t0=$(now_ns)
  sleep "$window"
  restarted=$(awk -v t="$t0" '$1 > t' "$BENCH_OUT/starts" | wc -l)
  alive=0
  for p in $(for a in "${AGENTS[@]}"; do tree_pids "$a"; done); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^$PY $WORKER" && alive=$((alive + 1))
  done
  stop_case "${AGENTS[@]}"
  echo "$restarted workers restarted, $alive of 4 still alive (hung)"
}

part_hang() {
  local m=() r a what
  for r in $(seq 1 "$ROUNDS"); do
    a=$(hang_muster)
    echo "# hang round $r: muster ${a} ms"
    m+=("$a")
  done
  a=$(printf '%s\n' "${m[@]}" | median)
  local window=$(((a / 1000) * 3 + 10))
  what=$(hang_torchrun "$window")
  echo "hang: a rank sleeping forever to 4 workers running again: muster ${a} ms" \
    "(--hang-timeout 5 s, median of $ROUNDS); torchrun in ${window} s: ${what}, no restart"
}

# --- checkpoint -------------------------------------------------------------------------------

cat >"$T_DIR/ckworker.sh" <<W
#!/bin/sh
echo "\$(date +%s%N) \$RANK \${TORCHELASTIC_RESTART_COUNT:-0}" >>"\$BENCH_OUT/starts"
exec $PY $MU_SOURCE_DIR/tests/integration/progress_worker.py "\$@"
W
chmod +x "$T_DIR/ckworker.sh"

# Runs the job under `kind`; prints its total ms (0: it did not end in 300 s), and for muster
# the run's goodput JSON into $BENCH_OUT/goodput.json.
checkpoint_case() {
  local kind=$1 id="ck$RANDOM$RANDOM" t0 t1 a i=0
  export BENCH_OUT=$T_DIR/ck-$kind-$id
  mkdir -p "$BENCH_OUT"
  t0=$(now_ns)
  WORKER_SH=$T_DIR/ckworker.sh EXTRA="--hang-timeout 30" start_agents "$kind" "$id" 2 \
    --steps 200 --step-ms 50 --heartbeat --total --checkpoint-every 50 --kill-at 120 \
    --ckpt-file "$BENCH_OUT/ckpt"
  while [ "$(for a in "${AGENTS[@]}"; do kill -0 "$a" 2>/dev/null && echo x; done)" != "" ]; do
    i=$((i + 1))
    [ "$i" -gt 6000 ] && { stop_case "${AGENTS[@]}"; echo 0; return; }
    sleep 0.05
  done
  t1=$(now_ns)
  for a in "${AGENTS[@]}"; do wait "$a" 2>/dev/null; done
  if [ "$kind" = muster ]; then
    "$MUSTER" rdzv --json "127.0.0.1:$MUSTERD_PORT" "$id" 2>/dev/null |
      "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["runs"][0]["goodput"]))' \
        >"$BENCH_OUT/goodput.json"
    cp "$BENCH_OUT/goodput.json" "$T_DIR/last-goodput.json"
  fi
  echo $(((t1 - t0) / 1000000))
}

part_checkpoint() {
  local m=() t=() r a b
  for r in $(seq 1 "$ROUNDS"); do
    a=$(checkpoint_case muster)
    b=$(checkpoint_case torchrun)
    echo "# checkpoint round $r: muster ${a} ms, torchrun ${b} ms;" \
      "muster's goodput: $(cat "$T_DIR/last-goodput.json" 2>/dev/null)"
    m+=("$a")
    t+=("$b")
  done
  a=$(printf '%s\n' "${m[@]}" | median)
  b=$(printf '%s\n' "${t[@]}" | median)
  echo "checkpoint: 200 steps, a checkpoint every 50, rank 0 killed at step 120: muster" \
    "${a} ms total, torchrun etcd-v2 ${b} ms total (median of $ROUNDS); muster's last run:" \
    "$("$PY" -c '
import json, sys
g = json.load(open(sys.argv[1]))
bad = ", ".join("%s %.2f s" % (k, v / 1000) for k, v in g["badput_ms"].items() if v > 0)
print("%s steps lost since the checkpoint; wall %.2f s = productive %.2f s + %s"
      % (g["lost_steps"], g["wall_ms"] / 1000, g["productive_ms"] / 1000, bad))' \
      "$T_DIR/last-goodput.json" 2>/dev/null || echo "no goodput (the run failed?)")"
}

# --- watch ------------------------------------------------------------------------------------

cat >"$T_DIR/toucher.sh" <<'W'
#!/bin/sh
while :; do touch "$MUSTER_HEARTBEAT_FILE"; sleep 1; done
W
chmod +x "$T_DIR/toucher.sh"

# The agent's CPU ms over `secs` s with 64 touching workers; extra agent args follow.
watch_cpu() {
  local secs=20 id="w$RANDOM$RANDOM" pid a b
  "$MUSTER" agent --standalone --rdzv-id "$id" --nproc-per-node 64 "$@" -- "$T_DIR/toucher.sh" \
    >"$T_DIR/watch-$id.log" 2>&1 &
  pid=$!
  t_until 60 grep -qs "started 64 workers" "$T_DIR/watch-$id.log"
  sleep 3
  a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep "$secs"
  b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  stop_case "$pid"
  awk -v a="$a" -v b="$b" -v s="$secs" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%.2f", (b - a) / hz / s * 100}'
}

part_watch() {
  local on=() off=() r a b
  for r in $(seq 1 "$ROUNDS"); do
    a=$(watch_cpu --hang-timeout 60)
    b=$(watch_cpu)
    echo "# watch round $r: ${a}% with --hang-timeout, ${b}% without"
    on+=("$a")
    off+=("$b")
  done
  a=$(printf '%s\n' "${on[@]}" | median)
  b=$(printf '%s\n' "${off[@]}" | median)
  echo "watch: one agent, 64 workers touching their heartbeat file every second: ${a}% of a" \
    "core with --hang-timeout 60 (${b}% without; goal under 1%), median of $ROUNDS x 20 s"
}

t_start_musterd || die "musterd did not start"
for p in $PARTS; do
  case $p in
  standby) part_standby ;;
  hang) part_hang ;;
  checkpoint) part_checkpoint ;;
  watch) part_watch ;;
  *) die "unknown part '$p' (standby, hang, checkpoint, watch)" ;;
  esac
done
