#!/usr/bin/env bash
# TCPStore store operations side by side (issue 22): musterd's --c10d-listen in memory, musterd
# with --data-dir (fsync batch; on /dev/shm), PyTorch's own TCPStore(is_master=True) in a Debian python
# process (torch 1.13's C++ server), torch 2.14's own TCPStore server (Debian sid's, in the root
# of scripts/torch-roots.sh: the classic server, as Debian builds torch without libuv), and
# c10d_ceiling (a minimal epoll server that stores
# nothing: the share of this machine TCP over loopback leaves), all under the same load
# generator, bench/c10d_load (libuv, closed loop per connection; docs/c10d.md's framing).
#
#   bench/bench_c10d.sh     env: CLIENTS="64 256 1024" OPS="set get add wait" SECS=2 ROUNDS=2
#
# Each (clients, op) runs every server ROUNDS times, the order rotating each round; a server's
# figure is its median round. Per run: ops/s, p50 and p99 latency, and the server's CPU per
# op (utime + stime from /proc/PID/stat). Goal: musterd in memory >= 3x PyTorch's throughput
# with a lower p99, and musterd with --data-dir >= PyTorch's in-memory throughput.
# Prints one line per (clients, op) and a summary line.
set -u
[ "${BENCH_DEBUG:-0}" = 1 ] && set -x
. "$(dirname "$0")/lib.sh"
B=$MU_BUILD_DIR/bench
bench_need_exe "$B/c10d_load" c10d_load
bench_need_exe "$B/c10d_ceiling" c10d_ceiling
bench_need_exe "$MUSTERD" musterd
"$PY" -c 'import torch.distributed' 2>/dev/null || die "needs Debian's python3-torch under $PY"
CLIENTS=${CLIENTS:-64 256 1024}
OPS=${OPS:-set get add wait}
SECS=${SECS:-2}
ROUNDS=${ROUNDS:-2}
max=0
for n in $CLIENTS; do [ "$n" -gt "$max" ] && max=$n; done
bench_need_fds $((max + 100)) "$max clients"

# --- the servers ---------------------------------------------------------------------------
start_musterd() { # NAME [args]: its c10d port in PORT_<NAME>, pid in PID_<NAME>
  local name=$1 port
  shift
  t_spawn "musterd-$name" "$MUSTERD" --listen 127.0.0.1:0 --c10d-listen 127.0.0.1:0 \
    --max-connections $((max + 100)) --max-connections-per-address $((max + 100)) "$@"
  eval "PID_$name=$T_LAST_PID"
  t_c10d_port "$T_DIR/musterd-$name.log" || die "musterd ($name) did not start"
  eval "PORT_$name=$C10D_PORT"
}
start_musterd mem
# the data dir on /dev/shm when there is one, as bench_rdzv_backends.sh keeps etcd's: this VM's
# fsync cost is not what is measured (bench_durable.sh measures it against etcd on disk)
if [ -d /dev/shm ]; then DATA=$(mktemp -d /dev/shm/mu-bench-c10d.XXXXXX); else DATA=$T_DIR/data; fi
trap 't_cleanup; [ "$DATA" = "$T_DIR/data" ] || rm -rf "$DATA"' EXIT
start_musterd disk --data-dir "$DATA"
cat >"$T_DIR/torch_store.py" <<'PY'
import sys, time
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print("listening on 127.0.0.1:%d" % s.port, flush=True)
time.sleep(1 << 30)
PY
t_spawn torch "$PY" "$T_DIR/torch_store.py"
PID_torch=$T_LAST_PID
# torch 2.14 in its root (scripts/torch-roots.sh build sid makes it once per machine); the exec
# chain (torch-roots.sh, unshare, chroot) keeps one PID, so its CPU is the server's
"$MU_SOURCE_DIR/scripts/torch-roots.sh" check sid ||
  die "needs the torch 2.14 root: sudo scripts/torch-roots.sh build sid"
t_spawn torch214 "$MU_SOURCE_DIR/scripts/torch-roots.sh" run -b "$T_DIR" sid python3 "$T_DIR/torch_store.py"
PID_torch214=$T_LAST_PID
t_spawn ceiling "$B/c10d_ceiling"
PID_ceiling=$T_LAST_PID
for s in torch torch214 ceiling; do
  t_until 120 grep -q "listening on" "$T_DIR/$s.log" || die "$s did not start: $(tail -3 "$T_DIR/$s.log")"
  eval "PORT_$s=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T_DIR/$s.log")"
done
# the python process's own threads (the store is its C++ thread): CPU of the whole process
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

# run SERVER OP CLIENTS: one c10d_load run; prints "rate p50 p99 cpu_us_per_op"
run() {
  local s=$1 op=$2 n=$3 port pid t0 t1 line rate
  eval "port=\$PORT_$s pid=\$PID_$s"
  t0=$(cpu_ticks "$pid")
  # torch 2.14's classic server takes only torch >= 2.1's numbering (VALIDATE first)
  local v2=()
  [ "$s" = torch214 ] && v2=(--v2)
  line=$("$B/c10d_load" "$op" --port "$port" --clients "$n" --seconds "$SECS" "${v2[@]}") ||
    echo "# warning: $s $op $n: $line" >&2
  t1=$(cpu_ticks "$pid")
  rate=$(bench_field rate "$line")
  awk -v r="$rate" -v p50="$(bench_field p50_ms "$line")" -v p99="$(bench_field p99_ms "$line")" \
    -v t=$((t1 - t0)) -v hz="$HZ" -v ops="$(bench_field ops "$line")" -v secs="$SECS" \
    'BEGIN { printf "%s %s %s %.1f\n", r, p50, p99, (ops > 0 ? t / hz * 1e6 / (ops * (secs + 1) / secs) : 0) }'
}
median() { sort -n | awk '{v[NR] = $0} END {print v[int((NR + 1) / 2)]}'; }

servers="mem torch torch214 disk ceiling"
declare -A R
ratios=()
for n in $CLIENTS; do
  for op in $OPS; do
    for ((round = 0; round < ROUNDS; round++)); do
      set -- $servers
      for ((k = 0; k < round % 5; k++)); do set -- "${@:2}" "$1"; done # rotate the order
      for s in "$@"; do
        [ "$op" = wait ] && [ "$s" = ceiling ] && continue # it stores nothing to wait for
        R[$s.$round]=$(run "$s" "$op" "$n")
      done
    done
    line="c10d $op clients=$n:"
    for s in $servers; do
      [ "$op" = wait ] && [ "$s" = ceiling ] && continue
      rate=$(for ((r = 0; r < ROUNDS; r++)); do echo "${R[$s.$r]}"; done | awk '{print $1}' | median)
      pick=$(for ((r = 0; r < ROUNDS; r++)); do echo "${R[$s.$r]}"; done | awk -v x="$rate" '$1 == x' | head -1)
      set -- $pick 0 0 0 0 # a server whose rounds all failed: zeros, not an unbound $3
      eval "rate_$s=$1 p99_$s=$3"
      line+=" $s ${1}/s p50 ${2} p99 ${3} ms ${4} us-cpu/op;"
    done
    x=$(awk -v a="$rate_mem" -v b="$rate_torch" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    d=$(awk -v a="$rate_disk" -v b="$rate_torch" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    y=$(awk -v a="$rate_mem" -v b="$rate_torch214" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    line+=" musterd/torch ${x}x (p99 ${p99_mem} vs ${p99_torch} ms), --data-dir/torch ${d}x"
    line+=", musterd/torch2.14 ${y}x (p99 ${p99_mem} vs ${p99_torch214} ms)"
    [ "$op" != wait ] && line+=", musterd at $(awk -v a="$rate_mem" -v c="$rate_ceiling" 'BEGIN {printf "%.0f", (c > 0 ? 100 * a / c : 0)}')% of the ceiling"
    echo "$line"
    ratios+=("$x:$d:$y")
  done
done
for s in mem disk torch torch214; do
  eval "pid=\$PID_$s"
  kill -0 "$pid" 2>/dev/null || die "$s died during the run"
done
printf '%s\n' "${ratios[@]}" | awk -F: '{ l += log($1); d += log($2); y += log($3); n++; if ($1 < mn || n == 1) mn = $1; if ($2 < md || n == 1) md = $2; if ($3 < my || n == 1) my = $3 }
  END { printf "summary: c10d store ops, %d (clients, op) pairs: musterd in memory %.2fx PyTorch TCPStore (geometric mean; worst %.2fx), musterd --data-dir %.2fx (worst %.2fx), musterd in memory %.2fx torch 2.14 TCPStore (worst %.2fx); goal 3x and >= 1x\n", n, exp(l / n), mn, exp(d / n), md, exp(y / n), my }'
