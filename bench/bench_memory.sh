#!/usr/bin/env bash
# Memory and watch fan-out of musterd against etcd 3.4 (--enable-v2), same load on both:
#   1. RSS of a fresh server, then after PUTting 100,000 distinct keys of 64-byte values
#      (goal for musterd: <= 40 MB);
#   2. then 10,000 blocked watchers (GET ?wait=true) on one key, one PUT to it: when does each
#      watcher get its event (goal: all within 50 ms of the write), and RSS per watcher
#      (goal: <= 2 KB).
# RSS is VmRSS from /proc/PID/status. Servers alternate musterd, etcd, musterd, etcd, ...
# (ROUNDS times); the best run of each is kept. Prints one summary line.
#
#   bench/bench_memory.sh     env: MU_BUILD_DIR (./build), KEYS (100000), WATCHERS (10000),
#                                  VALUE_SIZE (64), ROUNDS (1)
# Not a test: it reports missed goals but fails only on a broken setup or lost requests.
. "$(dirname "$0")/lib.sh"

KEYS=${KEYS:-100000}
WATCHERS=${WATCHERS:-10000}
VALUE_SIZE=${VALUE_SIZE:-64}
ROUNDS=${ROUNDS:-1}
FANOUT=${FANOUT:-$MU_BUILD_DIR/bench/watch_fanout}

bench_need_tools etcd
bench_need_exe "$MUSTERD" musterd
bench_need_exe "$FANOUT" watch_fanout
bench_need_fds "$WATCHERS" "$WATCHERS watchers"

mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

declare -A KEYS_KB PER_KEY PER_WATCHER LAST_MS P99_MS EMPTY_KB
# one SERVER ROUND: a fresh server, the keys, then the watchers; keeps the best figures.
one() {
  local t=$1 round=$2 pid ep out empty
  if [ "$t" = musterd ]; then
    t_start_musterd --max-connections $((WATCHERS + 100)) \
      --max-connections-per-address $((WATCHERS + 100)) ||
      die "musterd did not start: $(tail -3 "$T_DIR/musterd.log")"
    pid=$MUSTERD_PID ep=127.0.0.1:$MUSTERD_PORT
  else
    t_start_etcd || die "etcd did not start: $(tail -3 "$T_DIR/etcd.log")"
    pid=$ETCD_PID ep=127.0.0.1:$ETCD_PORT
  fi
  sleep 0.5
  empty=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
  out=$("$FANOUT" --endpoint "$ep" --pid "$pid" --load-keys "$KEYS" --value-size "$VALUE_SIZE") ||
    die "$t: loading keys failed: $out"
  echo "# $t round $round: $out"
  local kb per
  kb=$(bench_field rss_loaded_kb "$out")
  per=$(bench_field bytes_per_key "$out")
  got=$(curl -s "http://$ep/v2/keys/bench/mem/k0000042" | jq -r '.node.value | length')
  [ "$got" = "$VALUE_SIZE" ] || echo "# warning: $t: key k0000042 has a value of length '$got'"
  bench_fanout_run "$t" "$round" "$ep" "$pid"
  out=$FANOUT_OUT
  if [ -z "${KEYS_KB[$t]:-}" ] || [ "$kb" -lt "${KEYS_KB[$t]}" ]; then
    KEYS_KB[$t]=$kb PER_KEY[$t]=$per EMPTY_KB[$t]=$empty
  fi
  local pw last p99 answered
  pw=$(bench_field bytes_per_watcher "$out")
  last=$(bench_field last_ms "$out")
  p99=$(bench_field p99_ms "$out")
  answered=$(bench_field answered "$out")
  [ "$answered" = "$WATCHERS" ] || last=inf
  if [ -z "${LAST_MS[$t]:-}" ] || [ "${LAST_MS[$t]}" = inf ] ||
    { [ "$last" != inf ] && awk -v a="$last" -v b="${LAST_MS[$t]}" 'BEGIN { exit !(a < b) }'; }; then
    LAST_MS[$t]=$last P99_MS[$t]=$p99 PER_WATCHER[$t]=$pw
  fi
}

for round in $(seq "$ROUNDS"); do
  one musterd "$round"
  one etcd "$round"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "n/a" }'; }
line="bench_memory keys=$KEYS x ${VALUE_SIZE}B, watchers=$WATCHERS:"
for t in musterd etcd; do
  line+=" $t rss empty=$(mb "${EMPTY_KB[$t]}")MB keys=$(mb "${KEYS_KB[$t]}")MB"
  line+=" (${PER_KEY[$t]} B/key) watchers: ${PER_WATCHER[$t]} B each,"
  line+=" p99 ${P99_MS[$t]} ms, last ${LAST_MS[$t]} ms |"
done
line+=" etcd/musterd rss with keys=$(ratio "${KEYS_KB[etcd]}" "${KEYS_KB[musterd]}")x"
line+=" per watcher=$(ratio "${PER_WATCHER[etcd]}" "${PER_WATCHER[musterd]}")x"
echo "$line (goals: keys <= 40 MB; every watcher answered within 50 ms of the write, <= 2 KB each)"
