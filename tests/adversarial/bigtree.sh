#!/bin/bash
# No stalls (issue 15): a recursive GET and a recursive DELETE of a big tree leave the loop to
# other clients between slices, and their answers are complete and at one index
# (tests/adversarial/bigtree.py holds the checks). 100,000 keys; 20,000 under the sanitizers.
# First, against a musterd with --max-output-bytes 1 MiB: an answer in slices over the cap is
# refused with a status.
. "$(dirname "$0")/../lib.sh"

NKEYS=100000
[ "$MU_SANITIZED" = 1 ] && NKEYS=20000
BT=$MU_SOURCE_DIR/tests/adversarial/bigtree.py
t_start_musterd --max-output-bytes 1048576 || { t_fail "musterd (small cap) did not start"; t_done; }
SMALL_PID=$MUSTERD_PID
mv "$T_DIR/musterd.log" "$T_DIR/musterd-small.log"
start=$SECONDS
# an answer of ~1.6 MB over a cap of 1 MiB; then the big run (its tree's answer is ~8 MB)
{ timeout 60 "$PY" "$BT" too_large "$MUSTERD_URL" 20000 || echo "not ok - too_large exited $?"; } \
  >"$T_DIR/bigtree.out" 2>&1
kill -0 "$SMALL_PID" 2>/dev/null || t_fail "musterd (small cap) died"
t_start_musterd --max-output-bytes 67108864 || { t_fail "musterd did not start"; t_done; }
timeout 120 "$PY" "$BT" "$MUSTERD_URL" "$NKEYS" >>"$T_DIR/bigtree.out" 2>&1
rc=$?
# its lines in order: checks become this test's, the rest comments
while IFS= read -r line; do
  if [[ $line == "ok - "* ]]; then t_ok "${line#ok - }"
  elif [[ $line == "not ok - "* ]]; then t_fail "${line#not ok - }"
  elif [ -n "$line" ]; then echo "# $line"; fi
done <"$T_DIR/bigtree.out"
[ "$rc" = 0 ] || t_fail "bigtree.py exited $rc"
echo "# $((SECONDS - start)) s"
kill -0 "$MUSTERD_PID" 2>/dev/null || t_fail "musterd died"
if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T_DIR"/musterd*.log 2>/dev/null; then
  t_fail "sanitizer report in the musterd log"
  grep -hE -A15 'Sanitizer|runtime error:' "$T_DIR"/musterd*.log | head -40
fi
t_done
