#!/usr/bin/env bash
# The TorchX golden cases 11, 14 and 15 (tests/golden/torchx-*.sh, each with its deliberate
# divergences written at the top), run as one test.
. "$(dirname "$0")/../lib.sh"
for g in "$MU_SOURCE_DIR"/tests/golden/torchx-*.sh; do
  out=$(bash "$g" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -E '^(not ok|#)' | sed "s|^|$(basename "$g"): |"
  t_expect_eq "$(basename "$g")" "$rc" 0
done
t_done
