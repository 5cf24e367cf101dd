#!/bin/bash
# The adversarial suite (issue 15): what an attacker tries against musterd, one case per row
# of the issue's table and per principle, each bounded to seconds, against a real musterd
# (tests/adversarial/attacks.py holds the cases; Python standard library, raw sockets).
#   server A: --header-timeout-ms 1000 --body-timeout-ms 1000 --write-timeout-ms 1000
#             --quota-watchers-per-client 2 (the deadlines and the watcher quota)
#   server B: --data-dir --fsync batch (the half-closed client)
#   server C: --max-output-bytes 65536 --quota-keys 300 (replies too large, deep paths;
#             unfinished bodies: no short deadlines there)
. "$(dirname "$0")/../lib.sh"

ATT=$MU_SOURCE_DIR/tests/adversarial/attacks.py
t_start_musterd --header-timeout-ms 1000 --body-timeout-ms 1000 --write-timeout-ms 1000 \
  --quota-watchers-per-client 2 || { t_fail "musterd did not start"; t_done; }
A_URL=$MUSTERD_URL A_PID=$MUSTERD_PID
mv "$T_DIR/musterd.log" "$T_DIR/musterd-a.log"
t_start_musterd --data-dir "$T_DIR/data" --fsync batch || { t_fail "musterd (data dir) did not start"; t_done; }
B_URL=$MUSTERD_URL
mv "$T_DIR/musterd.log" "$T_DIR/musterd-b.log"
t_start_musterd --max-output-bytes 65536 --quota-keys 300 || { t_fail "musterd C did not start"; t_done; }
C_URL=$MUSTERD_URL C_PID=$MUSTERD_PID

for c in redirect wait_spellings head_watch nul utf8 half_close slowloris no_read write_deadline; do
  start=$SECONDS
  out=$(timeout 30 "$PY" "$ATT" "$c" "$A_URL" "$A_PID" "$B_URL" 2>&1)
  rc=$?
  while IFS= read -r line; do
    case $line in
      "ok - "*) t_ok "${line#ok - }" ;;
      "not ok - "*) t_fail "${line#not ok - }" ;;
      *) [ -n "$line" ] && echo "# $line" ;;
    esac
  done <<<"$out"
  [ "$rc" = 0 ] || t_fail "case $c exited $rc"
  echo "# case $c: $((SECONDS - start)) s"
done
for c in too_large deep_path body_hoard; do
  out=$(timeout 30 "$PY" "$ATT" "$c" "$C_URL" "$C_PID" 2>&1)
  rc=$?
  while IFS= read -r line; do
    case $line in
      "ok - "*) t_ok "${line#ok - }" ;;
      "not ok - "*) t_fail "${line#not ok - }" ;;
      *) [ -n "$line" ] && echo "# $line" ;;
    esac
  done <<<"$out"
  [ "$rc" = 0 ] || t_fail "case $c exited $rc"
done
kill -0 "$A_PID" 2>/dev/null || t_fail "musterd A died during the attacks"
t_done
