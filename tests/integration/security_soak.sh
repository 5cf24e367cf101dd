#!/usr/bin/env bash
# A short soak (CI mode of bench/bench_soak.sh): 200 clients churning keys, watches, TTL keys
# and /v1 joins for 20 s against musterd with a bearer token required; no request may fail.
# RSS is printed; the growth limit is loose here (the 10-minute run in bench/ is the RSS proof)
# and off under sanitizers.
# SOAK_SECONDS / SOAK_CLIENTS change the length and the load.
. "$(dirname "$0")/../lib.sh"

SOAK=$MU_BUILD_DIR/bench/soak
t_need_built "$MUSTERD" "$SOAK"
TOKEN=soak-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$TOKEN" >"$T_DIR/tokens"
secs=${SOAK_SECONDS:-20}
clients=${SOAK_CLIENTS:-200}
growth=100
# Under ASan freed memory sits in the quarantine (up to 256 MiB), so RSS climbs by design: there
# the proof is LeakSanitizer's silence at exit (bench_soak.sh fails on any sanitizer report).
[ "$MU_SANITIZED" = 1 ] && { clients=${SOAK_CLIENTS:-100}; growth=100000; }
out=$(MUSTERD="$MUSTERD" SOAK="$SOAK" SECONDS_TOTAL=$secs CLIENTS=$clients SAMPLE=5 WARMUP=5 \
  MAX_GROWTH=$growth MUSTERD_ARGS="--token-file $T_DIR/tokens" SOAK_TOKEN="$TOKEN" \
  bash "$MU_SOURCE_DIR/bench/bench_soak.sh" "$MU_BUILD_DIR" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
t_expect_eq "bench_soak.sh ($clients clients, ${secs}s, token required) exits 0" "$rc" 0
summary=$(printf '%s\n' "$out" | grep '^soak: seconds=')
t_expect_match "the summary line reports start/end RSS and no error" "$summary" \
  'errors=0 rss_start_kb=[1-9][0-9]* rss_end_kb=[1-9][0-9]*'
t_expect_match "every kind of operation ran" "$summary" \
  'set=[1-9].*delete=[1-9].*get=[1-9].*lease_put=[1-9].*lease_watch=[1-9].*watch=[1-9].*join=[1-9].*heartbeat=[1-9].*round_watch=[1-9].*leave=[1-9]'
t_done
