#!/usr/bin/env bash
# Latency during a snapshot of 1 M keys (issue 15, part 4): what a steady reader sees while
# musterd writes a snapshot of a 1,000,000-key store.
#
# 1,000,000 keys are loaded once (bench/durable_load, --fsync off) and musterd stops gracefully
# (its final snapshot holds them all). Then, for each build, a copy of that data dir is served
# with --fsync FSYNC --snapshot-every SNAP_EVERY while bench/snap_latency runs for DURATION s:
# one client GETs random keys one after the other, another PUTs a key every millisecond, so
# the SNAP_EVERY-th PUT triggers a snapshot of the whole store mid-run. Printed: max and p99.9
# of the GETs (and of the PUTs), with the loop's time to start the snapshot and its total time
# from /metrics.
#   before: musterd built from git `main` (BEFORE_MUSTERD=path skips that build): the snapshot
#           is encoded and written on the loop
#   after:  this tree's musterd: a compactor thread builds it from the previous snapshot and
#           the closed log segments; the loop only switches the log segment
# Rounds alternate before/after (ROUNDS, default 2). FSYNC defaults to off: with batch, every
# GET made while a PUT's batch is being synced waits for that fdatasync (the barrier keeps
# reads linearizable), so the GET figures would measure the disk, not the snapshot.
#
#   bench/bench_snapshot_latency.sh   env: MU_BUILD_DIR (./build), KEYS (1000000), DURATION (12),
#                                          SNAP_EVERY (2000), ROUNDS (2), FSYNC (off),
#                                          BEFORE_MUSTERD, BASE (main)
# Goal: max GET latency <= 20 ms while the snapshot is written.
# Not a test: it never fails on a missed goal, only on a broken setup.
. "$(dirname "$0")/lib.sh"

KEYS=${KEYS:-1000000}
DURATION=${DURATION:-12}
SNAP_EVERY=${SNAP_EVERY:-2000}
ROUNDS=${ROUNDS:-2}
FSYNC=${FSYNC:-off}
BASE=${BASE:-main}
LOAD=$MU_BUILD_DIR/bench/durable_load
PROBE=$MU_BUILD_DIR/bench/snap_latency

bench_need_tools curl git cmake
bench_need_exe "$MUSTERD" musterd
bench_need_exe "$LOAD" durable_load
bench_need_exe "$PROBE" snap_latency

# The "before" binary: musterd built from $BASE in a scratch dir.
BEFORE=${BEFORE_MUSTERD:-}
if [ -z "$BEFORE" ]; then
  echo "# building musterd from '$BASE' in $T_DIR/base (BEFORE_MUSTERD=path skips this)"
  mkdir -p "$T_DIR/base"
  git -C "$MU_SOURCE_DIR" archive "$BASE" | tar -x -C "$T_DIR/base" || die "git archive $BASE failed"
  btype=$(sed -n "s/^CMAKE_BUILD_TYPE:STRING=//p" "$MU_BUILD_DIR/CMakeCache.txt" 2>/dev/null)
  cmake -S "$T_DIR/base" -B "$T_DIR/base/build" -DCMAKE_BUILD_TYPE="$btype" >/dev/null &&
    cmake --build "$T_DIR/base/build" -j2 --target musterd >/dev/null ||
    die "cannot build musterd from '$BASE'"
  BEFORE=$T_DIR/base/build/musterd
fi
bench_need_exe "$BEFORE" musterd

metric() { curl -s --max-time 5 "$MUSTERD_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# Load once, stop gracefully: the final snapshot holds every key.
t_start_musterd --data-dir "$T_DIR/loaded" --fsync off --snapshot-every 0 ||
  die "musterd did not start: $(tail -3 "$T_DIR/musterd.log")"
"$LOAD" 127.0.0.1 "$MUSTERD_PORT" "$KEYS" p 256 | sed 's/^/# /' || die "loading failed"
kill -TERM "$MUSTERD_PID"
t_wait_exit "$MUSTERD_PID" 120 || die "musterd did not stop after loading"

declare -A GMAX GP999 PMAX
run() { # which binary round
  local which=$1 bin=$2 round=$3 out get put snaps start dur
  rm -rf "$T_DIR/data"
  cp -a "$T_DIR/loaded" "$T_DIR/data"
  MUSTERD=$bin t_start_musterd --data-dir "$T_DIR/data" --fsync "$FSYNC" \
    --snapshot-every "$SNAP_EVERY" || die "$which: musterd did not start"
  t_wait_http "$MUSTERD_URL/healthz" 120 "$MUSTERD_PID" || die "$which: musterd did not recover"
  out=$("$PROBE" 127.0.0.1 "$MUSTERD_PORT" "$DURATION" "$KEYS" p 1000) || die "$which: probe failed"
  snaps=$(metric musterd_snapshots_total)
  start=$(metric musterd_snapshot_start_ms)
  dur=$(metric musterd_snapshot_duration_ms)
  get=$(grep '^get:' <<<"$out")
  put=$(grep '^put:' <<<"$out")
  echo "# $which round $round: $get"
  echo "# $which round $round: $put"
  echo "# $which round $round: snapshots taken: ${snaps:-?}${start:+, started in ${start} ms, written in ${dur} ms}"
  [ "${snaps:-0}" -ge 1 ] || echo "# warning: $which took no snapshot during the run: raise DURATION"
  local gmax gp999 pmax
  gmax=$(sed -n 's/.* max_ms=\([0-9.]*\).*/\1/p' <<<"$get")
  gp999=$(sed -n 's/.* p999_ms=\([0-9.]*\).*/\1/p' <<<"$get")
  pmax=$(sed -n 's/.* max_ms=\([0-9.]*\).*/\1/p' <<<"$put")
  # keep the worst round: the figure a reader can count on
  if [ -z "${GMAX[$which]:-}" ] || awk "BEGIN{exit !($gmax > ${GMAX[$which]})}"; then
    GMAX[$which]=$gmax
    GP999[$which]=$gp999
    PMAX[$which]=$pmax
  fi
  kill -TERM "$MUSTERD_PID"
  t_wait_exit "$MUSTERD_PID" 120
}
for round in $(seq "$ROUNDS"); do
  run before "$BEFORE" "$round"
  run after "$MUSTERD" "$round"
done
printf 'snapshot latency (%d keys, --fsync %s, GET while a snapshot is written, worst of %d): before max %s ms p99.9 %s ms (PUT max %s ms); after max %s ms p99.9 %s ms (PUT max %s ms); goal max <= 20 ms\n' \
  "$KEYS" "$FSYNC" "$ROUNDS" "${GMAX[before]}" "${GP999[before]}" "${PMAX[before]}" \
  "${GMAX[after]}" "${GP999[after]}" "${PMAX[after]}"
