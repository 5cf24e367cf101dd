#!/bin/bash
# The adversarial suite (issue 15): what an attacker tries against musterd, one case per row
# of the issue's table and per principle, each bounded to seconds, against a real musterd
# (tests/adversarial/attacks.py holds the cases; Python standard library, raw sockets).
#   server A: --header-timeout-ms 1000 --body-timeout-ms 1000 --write-timeout-ms 1000
#             --quota-watchers-per-client 2 (the deadlines and the watcher quota)
#             --allowed-origin http://dash.example:8080 (browsers)
#   server B: --data-dir --fsync batch (the half-closed client)
#   server C: --max-output-bytes 65536 --quota-keys 300 --max-connections-per-address 20
#             (replies too large, deep paths; unfinished bodies, per address: no short
#             deadlines there)
#   server D: TLS (certificates made with the openssl CLI) --header-timeout-ms 1000
#   server E: --data-dir with small /v1 bounds (--v1-max-bytes 24 MiB,
#             --v1-max-runs-per-client 5, --v1-max-lease-ms 60000), killed -9 and restarted
#   server F: --token-file, --v1-max-runs-per-client 2 (runs counted per credential); its
#             third token runs session_spoof (a node speaks only for itself)
#   server G: --v1-max-bytes 16 MiB (the bound counts the memory the /v1 state holds)
#   server H: --token-file, --max-connections 400, --max-connections-per-address 40,
#             --max-buffer-bytes 32 MiB, --max-buffer-bytes-per-client 8 MiB (the budget)
#   server I: TLS, --header-timeout-ms 60000 (what a connection costs before a credential,
#             its connections held while it is measured; whole records to OpenSSL)
. "$(dirname "$0")/../lib.sh"
. "$MU_SOURCE_DIR/tests/integration/security_lib.bash" # sec_make_pki (needs openssl)

ulimit -n 8192 2>/dev/null || ulimit -n 4096 2>/dev/null # the budget cases: ~1000 sockets a side
ATT=$MU_SOURCE_DIR/tests/adversarial/attacks.py
t_start_musterd --header-timeout-ms 1000 --body-timeout-ms 1000 --write-timeout-ms 1000 \
  --quota-watchers-per-client 2 --allowed-origin http://dash.example:8080 ||
  { t_fail "musterd did not start"; t_done; }
A_URL=$MUSTERD_URL A_PID=$MUSTERD_PID
mv "$T_DIR/musterd.log" "$T_DIR/musterd-a.log"
t_start_musterd --data-dir "$T_DIR/data" --fsync batch || { t_fail "musterd (data dir) did not start"; t_done; }
B_URL=$MUSTERD_URL
mv "$T_DIR/musterd.log" "$T_DIR/musterd-b.log"
t_start_musterd --max-output-bytes 65536 --quota-keys 300 --max-connections-per-address 20 ||
  { t_fail "musterd C did not start"; t_done; }
C_URL=$MUSTERD_URL C_PID=$MUSTERD_PID
mv "$T_DIR/musterd.log" "$T_DIR/musterd-c.log"
sec_make_pki "$T_DIR/pki" || t_done
t_start_musterd --tls-cert "$T_DIR/pki/server.pem" --tls-key "$T_DIR/pki/server.key" \
  --header-timeout-ms 1000 || { t_fail "musterd D (TLS) did not start"; t_done; }
D_URL=$MUSTERD_URL D_PID=$MUSTERD_PID

# run_case CASE URL PID [DATA_URL]: one case of attacks.py, its lines as this test's.
# A case that printed no check at all fails: it asserted nothing. The timeout only ends a case
# that hangs: budget_tls's 1,000 TLS handshakes in Python took 31 s at a load of 10 on 2 cores.
run_case() {
  local c=$1 start=$SECONDS out rc line checks=0
  out=$(timeout 180 "$PY" "$ATT" "$@" 2>&1)
  rc=$?
  while IFS= read -r line; do
    case $line in
      "ok - "*) t_ok "${line#ok - }"; checks=$((checks + 1)) ;;
      "not ok - "*) t_fail "${line#not ok - }"; checks=$((checks + 1)) ;;
      *) [ -n "$line" ] && echo "# $line" ;;
    esac
  done <<<"$out"
  [ "$rc" = 0 ] || t_fail "case $c exited $rc"
  [ "$checks" -gt 0 ] || t_fail "case $c printed no check (no 'ok' or 'not ok' line): it tested nothing"
  echo "# case $c: $((SECONDS - start)) s"
}

for c in redirect wait_spellings head_watch nul utf8 half_close slowloris no_read write_deadline \
  log_forge cross_origin; do
  run_case "$c" "$A_URL" "$A_PID" "$B_URL"
done
for c in too_large deep_path body_hoard per_address; do
  run_case "$c" "$C_URL" "$C_PID"
done
run_case tls_half_open "$D_URL" "$D_PID"
# server E: /v1 with a data dir and small /v1 bounds. Row 5: the log grows by the change;
# the byte bound; then kill -9 and the same /v1 state back (runs, rounds, KV). Row 10.
mv "$T_DIR/musterd.log" "$T_DIR/musterd-d.log"
E_ARGS=(--data-dir "$T_DIR/v1data" --v1-max-bytes 25165824 --v1-max-runs-per-client 5
  --v1-max-lease-ms 60000)
t_start_musterd "${E_ARGS[@]}" || { t_fail "musterd E did not start"; t_done; }
# restart_same SIGNAL N RUN WHAT: dumps the /v1 state of server E, stops it with SIGNAL,
# starts it again on the same data dir and checks that the dump (which names RUN) is the same.
restart_same() {
  local sig=$1 n=$2 run=$3 what=$4
  timeout 30 "$PY" "$ATT" v1_dump "$MUSTERD_URL" "$MUSTERD_PID" >"$T_DIR/v1-before$n.txt" 2>&1
  kill "-$sig" "$MUSTERD_PID"
  wait "$MUSTERD_PID" 2>/dev/null
  mv "$T_DIR/musterd.log" "$T_DIR/musterd-e$n.log"
  t_start_musterd "${E_ARGS[@]}" || { t_fail "musterd E did not restart after $what"; t_done; }
  E_PID=$MUSTERD_PID
  timeout 30 "$PY" "$ATT" v1_dump "$MUSTERD_URL" "$MUSTERD_PID" >"$T_DIR/v1-after$n.txt" 2>&1
  if grep -q "\"$run\"" "$T_DIR/v1-before$n.txt" &&
    cmp -s "$T_DIR/v1-before$n.txt" "$T_DIR/v1-after$n.txt"; then
    t_ok "row 5: after $what the /v1 state is back exactly (runs, rounds, members, KV)"
  else
    t_fail "row 5: the /v1 state after $what differs"
    diff "$T_DIR/v1-before$n.txt" "$T_DIR/v1-after$n.txt" | head -20 | sed 's/^/# /'
  fi
}
run_case v1_log "$MUSTERD_URL" "$MUSTERD_PID" "$T_DIR/v1data"
restart_same KILL 1 v1log "kill -9 (the log replayed)"
run_case v1_runs "$MUSTERD_URL" "$MUSTERD_PID"
restart_same TERM 2 c2-run0 "a graceful stop (a snapshot of the whole state) and a start"
grep -q 'snap-' <(ls "$T_DIR/v1data") || t_fail "row 5: no snapshot was written at the stop"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-e3.log"
printf 'token-aaaa\ntoken-bbbb\ntoken-cccc\n' >"$T_DIR/tokens"
t_start_musterd --token-file "$T_DIR/tokens" --v1-max-runs-per-client 2 ||
  { t_fail "musterd F did not start"; t_done; }
F_PID=$MUSTERD_PID
run_case v1_runs_auth "$MUSTERD_URL" "$MUSTERD_PID"
run_case session_spoof "$MUSTERD_URL" "$MUSTERD_PID"
mv "$T_DIR/musterd.log" "$T_DIR/musterd-f.log"
t_start_musterd --v1-max-bytes 16777216 || { t_fail "musterd G did not start"; t_done; }
G_PID=$MUSTERD_PID
run_case v1_memory "$MUSTERD_URL" "$MUSTERD_PID"
# server H: the memory budget (issue 24, finding 4)
mv "$T_DIR/musterd.log" "$T_DIR/musterd-g.log"
echo token-hhhh >"$T_DIR/tokens-h"
t_start_musterd --token-file "$T_DIR/tokens-h" --max-connections 400 --max-connections-per-address 40 \
  --max-buffer-bytes 33554432 --max-buffer-bytes-per-client 8388608 ||
  { t_fail "musterd H did not start"; t_done; }
H_PID=$MUSTERD_PID
for c in budget_full budget_pipeline budget_output anon_share; do
  run_case "$c" "$MUSTERD_URL" "$MUSTERD_PID"
done
# server I: TLS, what a connection costs before any credential
mv "$T_DIR/musterd.log" "$T_DIR/musterd-h.log"
t_start_musterd --tls-cert "$T_DIR/pki/server.pem" --tls-key "$T_DIR/pki/server.key" \
  --header-timeout-ms 60000 || { t_fail "musterd I (TLS) did not start"; t_done; }
I_PID=$MUSTERD_PID
for c in budget_tls tls_records; do
  run_case "$c" "$MUSTERD_URL" "$MUSTERD_PID"
done
for pid in "$A_PID" "$C_PID" "$D_PID" "$E_PID" "$F_PID" "$G_PID" "$H_PID" "$I_PID"; do
  kill -0 "$pid" 2>/dev/null || t_fail "musterd (pid $pid) died during the attacks"
done
if grep -lE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T_DIR"/musterd*.log >/dev/null 2>&1; then
  t_fail "sanitizer report in a musterd log"
  grep -hE -A15 'Sanitizer|runtime error:' "$T_DIR"/musterd*.log | head -40
fi
t_done
