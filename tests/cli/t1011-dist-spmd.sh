#!/usr/bin/env bash
# dist.spmd (issue 34): TorchX's successor to dist.ddp with its parameter names. -j N runs N nodes
# with one worker per GPU of the named resource -h (default gpu.small: 1 GPU); the job is
# dist.ddp's. A real run of the C ring all-reduce on the local scheduler, then the dryruns
# against dist.ddp's, then the errors.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
ring="$MU_BUILD_DIR/examples/ring_allreduce"
t_need_built "$MUSTER" "$ring"

# A real run: -j 2 on gpu.small (1 GPU) is 2 nodes x 1 worker
h=$(timeout 120 "$MUSTER" run dist.spmd -j 2 --script "$ring" 2>"$T_DIR/err"); rc=$?
t_expect_eq "dist.spmd -j 2 exits 0 ($(tail -3 "$T_DIR/err"))" "$rc" 0
logs=$("$MUSTER" log "$h" 2>&1)
for r in 0 1; do
  t_expect_match "rank $r verified in a world of 2" "$logs" "rank $r: allreduce ok, world 2"
done
t_expect_eq "no third rank" "$(grep -c 'rank 2:' <<<"$logs")" 0
t_expect_match "two nodes" "$("$MUSTER" status "$h")" 'ring_allreduce\[1\]:SUCCEEDED'

# The same job as dist.ddp: the dryruns match line for line
dry() { "$MUSTER" run --dryrun "$@" 2>&1; }
same() { # what, spmd args, ddp args: the dryruns, the random app id aside, are the same
  local what=$1
  dry dist.spmd $2 --script t.py -- --lr 0.1 | sed -E 's/t-[a-z0-9]{12}/t-APPID/g' >"$T_DIR/spmd"
  dry dist.ddp $3 --script t.py -- --lr 0.1 | sed -E 's/t-[a-z0-9]{12}/t-APPID/g' >"$T_DIR/ddp"
  t_expect_eq "$what: dist.spmd's job is dist.ddp's ($(diff "$T_DIR/spmd" "$T_DIR/ddp" | head -8))" \
    "$(cmp -s "$T_DIR/spmd" "$T_DIR/ddp" && echo same)" same
  t_expect_match "$what: a real dryrun" "$(cat "$T_DIR/spmd")" "=== SCHEDULER REQUEST ==="
}
same "-j 2 -h aws_p4d.24xlarge is 2x8" "-j 2 -h aws_p4d.24xlarge" "-j 2x8 -h aws_p4d.24xlarge"
same "-j 3 (gpu.small) is 3x1" "-j 3" "-j 3x1 -h gpu.small"
same "-j 1:3 (elastic nodes) is 1:3x1" "-j 1:3" "-j 1:3x1 -h gpu.small"
same "the defaults are 1x1 on gpu.small" "" "-j 1x1 -h gpu.small"
same "-j NxP as given" "-j 2x3 -h gpu.small" "-j 2x3 -h gpu.small"
same "--nproc_per_node wins" "-j 2 --nproc_per_node 4" "-j 2x4 -h gpu.small"
same "--launcher torchrun" "-j 2 --launcher torchrun" "-j 2x1 -h gpu.small --launcher torchrun"
t_expect_match "the dryrun has 8 workers per node" "$(dry dist.spmd -j 2 -h aws_p4d.24xlarge --script t.py)" "--nproc-per-node 8"

# TorchX's parameters are taken; -j N on a host without GPUs is refused with the fix
dry dist.spmd -j 2 --script t.py --name exp/run --env A=1 --max_retries 2 --mounts type=bind,src=/tmp,dst=/tmp --debug >"$T_DIR/out"
t_expect_eq "TorchX's parameters: exit 0 ($(tail -2 "$T_DIR/out"))" "$?" 0
"$MUSTER" run --dryrun dist.spmd -j 2 -h cpu.small --script t.py >/dev/null 2>"$T_DIR/err"
t_expect_eq "-j 2 -h cpu.small: exit 2" "$?" 2
t_expect_match "-j 2 -h cpu.small: says why and the fix" "$(cat "$T_DIR/err")" "'-j 2' takes the workers per node from the GPUs of '--h cpu.small', which has none; give -j 2xNPROC_PER_NODE"
"$MUSTER" run --dryrun dist.spmd -j 2x2 -h cpu.small --script t.py >/dev/null 2>"$T_DIR/err"
t_expect_eq "-j 2x2 -h cpu.small is fine" "$?" 0
"$MUSTER" run --dryrun dist.spmd -j 2 --script t.py -m mod >/dev/null 2>"$T_DIR/err"
t_expect_match "--script and -m: refused" "$(cat "$T_DIR/err")" "exactly one of --script and -m"
t_expect_match "muster builtins lists it" "$("$MUSTER" builtins 2>&1)" "dist.spmd"
t_done
