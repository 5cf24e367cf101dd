#!/usr/bin/env bash
# What credentials and their scopes cost (issue 24): musterd's CPU time per request (its
# utime + stime over the requests wrk made), GET of one key and PUT of distinct keys, 64
# connections, with no credentials, with an unscoped token, and with a token scoped to
# keys=/bench runs=bench-*; optionally a second binary without credentials (MUSTERD_BASE: the
# code before, for a side-by-side). Configurations alternate, ROUNDS rounds; CPU per request
# is what a loaded, shared machine disturbs least (throughput swings by 2x here).
#
#   bench/bench_scopes.sh        env: MU_BUILD_DIR (./build), MUSTERD_BASE (none), DURATION (4),
#                                     ROUNDS (3)
# Prints one summary line "bench_scopes ..." with the mean CPU microseconds per request.
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-4}
ROUNDS=${ROUNDS:-3}
LUA=$MU_SOURCE_DIR/bench/wrk.lua
bench_need_tools wrk curl
bench_need_exe "$MUSTERD" musterd
printf 'tok-plain-%s\n' "$$" >"$T_DIR/plain"
printf 'tok-scoped-%s keys=/bench runs=bench-*\nother-%s keys=/other\n' "$$" "$$" >"$T_DIR/scoped"
CFGS="none plain scoped"
[ -n "${MUSTERD_BASE:-}" ] && { bench_need_exe "$MUSTERD_BASE" musterd; CFGS="base $CFGS"; }
VALUE=$(printf 'v%.0s' $(seq 64))

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
declare -A SUM
for round in $(seq "$ROUNDS"); do
  for cfg in $CFGS; do
    bin=$MUSTERD args=() auth=""
    case $cfg in
      base) bin=$MUSTERD_BASE ;;
      plain) args=(--token-file "$T_DIR/plain") auth="Bearer tok-plain-$$" ;;
      scoped) args=(--token-file "$T_DIR/scoped") auth="Bearer tok-scoped-$$" ;;
    esac
    MUSTERD=$bin t_start_musterd --log-level info "${args[@]}" || die "$cfg did not start"
    curl -s -o /dev/null -X PUT -H "Authorization: ${auth:-none}" \
      "$MUSTERD_URL/v2/keys/bench/get" --data "value=$VALUE"
    for kind in get put; do
      t0=$(ticks "$MUSTERD_PID")
      out=$(MU_WRK_AUTH=$auth wrk -t1 -c64 -d"${DURATION}s" -s "$LUA" \
        "$MUSTERD_URL/v2/keys/bench/get" -- "$kind" "r$round" 2>&1 | grep '^MU_WRK')
      t1=$(ticks "$MUSTERD_PID")
      req=$(bench_field requests "$out")
      [ "$(bench_field non2xx "$out")" = 0 ] || die "$cfg $kind: errors: $out"
      us=$(awk -v t=$((t1 - t0)) -v r="$req" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "%.2f", t * 1e6 / hz / r }')
      echo "# round $round $cfg $kind: $req requests, $us us of musterd CPU each"
      SUM[$cfg.$kind]=$(awk -v a="${SUM[$cfg.$kind]:-0}" -v b="$us" 'BEGIN { print a + b }')
    done
    kill "$MUSTERD_PID"
    wait "$MUSTERD_PID" 2>/dev/null
  done
done
line="bench_scopes ${ROUNDS}x${DURATION}s, musterd CPU us per request:"
for kind in get put; do
  for cfg in $CFGS; do
    line+=" $kind.$cfg=$(awk -v a="${SUM[$cfg.$kind]}" -v n="$ROUNDS" 'BEGIN { printf "%.2f", a / n }')"
  done
done
echo "$line"
