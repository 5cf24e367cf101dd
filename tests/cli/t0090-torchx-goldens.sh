#!/usr/bin/env bash
# The TorchX cases muster reproduces through its command line (tests/golden/torchx-11, -14 and
# -15: the dist.ddp component, the local scheduler, CLI parsing and status formats), each item
# of their case.json checked by tests/golden/torchx_cli_cases.py; the cases' DIVERGENCES.md
# list what muster does differently on purpose.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_need_py yaml python3-yaml
t_local_jobs
timeout 600 "$PY" "$MU_SOURCE_DIR/tests/golden/torchx_cli_cases.py" "$T_DIR" >"$T_DIR/cases.tap" 2>&1
rc=$?
grep -v '^muster: ' "$T_DIR/cases.tap"
t_expect_match "the cases' checks ran" "$(tail -1 "$T_DIR/cases.tap")" '^# [0-9]+ passed, 0 failed$'
t_expect_eq "the driver's exit status" "$rc" 0
t_done
