#!/usr/bin/env bash
# HTTP throughput of musterd against etcd 3.4 (--enable-v2) and the ceiling (bench/ceiling.c),
# with wrk on loopback: GET of one key and PUT of distinct keys, 64-byte values, 64
# connections. Runs alternate musterd, etcd, ceiling, musterd, etcd, ceiling, ... and the best
# run of each is kept (noise on a shared machine only ever lowers a figure). Prints one summary
# line with throughput, p99 latency and the ratios musterd/etcd and musterd/ceiling.
#
#   bench/bench_http.sh            env: MU_BUILD_DIR (./build), DURATION (s, 5), CONNS (64),
#                                       THREADS (wrk threads, 1), ROUNDS (2), SCOPED (0)
# SCOPED=1 adds a second musterd that requires a token with scopes (keys=/bench runs=bench-*)
# and sends it with every request: the cost of credentials and their scope check, side by side
# (musterd+scope/musterd in the summary).
# Goals (issue #2): PUT >= 5x etcd, GET >= 3x etcd and >= 80% of the ceiling, lower p99.
# Not a test: it never fails on a missed goal, only on a broken setup.
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-5}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-2}
CEILING=${CEILING:-$MU_BUILD_DIR/bench/ceiling}
LUA="$MU_SOURCE_DIR/bench/wrk.lua"
VALUE=$(printf 'v%.0s' $(seq 64))

bench_need_tools wrk etcd curl
bench_need_exe "$MUSTERD" musterd
bench_need_exe "$CEILING" ceiling

t_start_musterd || die "musterd did not start: $(tail -3 "$T_DIR/musterd.log")"
t_start_etcd || die "etcd did not start: $(tail -3 "$T_DIR/etcd.log")"
CEILING_PORT=$(t_free_port)
t_spawn ceiling "$CEILING" --listen "127.0.0.1:$CEILING_PORT"
t_wait_http "http://127.0.0.1:$CEILING_PORT/" 5 || die "ceiling did not start"

declare -A URL=([musterd]=$MUSTERD_URL [etcd]=$ETCD_URL [ceiling]="http://127.0.0.1:$CEILING_PORT")
declare -A PID=([musterd]=$MUSTERD_PID [etcd]=$ETCD_PID [ceiling]=$T_LAST_PID)
declare -A AUTH=()
TARGETS="musterd etcd ceiling"
if [ "${SCOPED:-0}" = 1 ]; then
  TOKEN=bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  printf '%s keys=/bench runs=bench-*\nother-token-%s keys=/other\n' "$TOKEN" "$TOKEN" \
    >"$T_DIR/tokens"
  mv "$T_DIR/musterd.log" "$T_DIR/musterd-open.log"
  t_start_musterd --token-file "$T_DIR/tokens" || die "musterd+scope did not start"
  URL[scoped]=$MUSTERD_URL PID[scoped]=$MUSTERD_PID AUTH[scoped]="Bearer $TOKEN"
  TARGETS="musterd scoped etcd ceiling"
fi

# The key every GET reads, with the same 64-byte value on both servers.
for t in musterd etcd ${URL[scoped]:+scoped}; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data "value=$VALUE" \
    -H "Authorization: ${AUTH[$t]:-none}" "${URL[$t]}/v2/keys/bench/get")
  case "$code" in 200 | 201) ;; *) die "$t: PUT /v2/keys/bench/get answered $code" ;; esac
  got=$(curl -s -H "Authorization: ${AUTH[$t]:-none}" "${URL[$t]}/v2/keys/bench/get" | jq -r .node.value)
  [ "$got" = "$VALUE" ] || die "$t: GET /v2/keys/bench/get returned '$got'"
done

declare -A RPS P99 ERRS
# run KIND TARGET ROUND: one wrk run; keeps the best rps and its p99 per kind+target.
run() {
  local kind=$1 t=$2 round=$3 out rps p99 non2xx sockerr
  if [ "$kind" = get ]; then
    out=$(MU_WRK_AUTH=${AUTH[$t]:-} wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" -s "$LUA" \
      "${URL[$t]}/v2/keys/bench/get" -- get 2>&1)
  else
    out=$(MU_WRK_AUTH=${AUTH[$t]:-} wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" -s "$LUA" \
      "${URL[$t]}/v2/keys/bench/get" -- put "r$round" 2>&1)
  fi
  out=$(printf '%s\n' "$out" | grep '^MU_WRK') || die "$kind $t: wrk printed no result"
  rps=$(printf '%s' "$out" | sed -n 's/.* rps=\([0-9]*\).*/\1/p')
  p99=$(printf '%s' "$out" | sed -n 's/.* p99_us=\([0-9]*\).*/\1/p')
  non2xx=$(printf '%s' "$out" | sed -n 's/.* non2xx=\([0-9]*\).*/\1/p')
  sockerr=$(printf '%s' "$out" | sed -n 's/.* sockerr=\([0-9]*\).*/\1/p')
  kill -0 "${PID[$t]}" 2>/dev/null || die "$t died during the $kind run"
  echo "# $kind $t round $round: $rps req/s, p99 ${p99} us, errors: $non2xx non-2xx, $sockerr socket"
  ERRS[$kind.$t]=$((${ERRS[$kind.$t]:-0} + non2xx + sockerr))
  if [ "$rps" -gt "${RPS[$kind.$t]:-0}" ]; then
    RPS[$kind.$t]=$rps
    P99[$kind.$t]=$p99
  fi
}

for kind in get put; do
  for round in $(seq "$ROUNDS"); do
    for t in $TARGETS; do run "$kind" "$t" "$round"; done
  done
done

# The PUTs really stored distinct keys (the 100th key of round 1, thread 1).
for t in musterd etcd; do
  got=$(curl -s "${URL[$t]}/v2/keys/bench/put/r1-t1-100" | jq -r .node.value)
  [ "$got" = "$VALUE" ] || echo "# warning: $t: /bench/put/r1-t1-100 holds '$got', not the value"
done
for t in musterd etcd ${URL[scoped]:+scoped}; do
  [ "${ERRS[get.$t]}${ERRS[put.$t]}" = 00 ] ||
    echo "# warning: $t answered errors (GET ${ERRS[get.$t]}, PUT ${ERRS[put.$t]}): figures are suspect"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }
ms() { awk -v a="$1" 'BEGIN { printf "%.2f", a / 1000 }'; }
line="bench_http c=$CONNS d=${DURATION}s best of $ROUNDS:"
for kind in get put; do
  K=$(echo "$kind" | tr a-z A-Z)
  line+=" $K req/s musterd=${RPS[$kind.musterd]} etcd=${RPS[$kind.etcd]} ceiling=${RPS[$kind.ceiling]}"
  line+=" p99ms musterd=$(ms "${P99[$kind.musterd]}") etcd=$(ms "${P99[$kind.etcd]}")"
  line+=" ceiling=$(ms "${P99[$kind.ceiling]}");"
  line+=" musterd/etcd=$(ratio "${RPS[$kind.musterd]}" "${RPS[$kind.etcd]}")x"
  line+=" musterd/ceiling=$(pct "${RPS[$kind.musterd]}" "${RPS[$kind.ceiling]}")"
  [ -n "${URL[scoped]:-}" ] && line+=" musterd+scope=${RPS[$kind.scoped]}"\
" (p99 $(ms "${P99[$kind.scoped]}") ms) musterd+scope/musterd=$(ratio "${RPS[$kind.scoped]}" "${RPS[$kind.musterd]}")x"
  line+=" |"
done
echo "${line% |} (goals: PUT >= 5x etcd; GET >= 3x etcd and >= 80% of ceiling)"
