#!/usr/bin/env bash
# Slurm errors without a cluster: sbatch missing, a rejected submission, squeue/sacct output
# that says the job is gone. Stand-ins on PATH print what Slurm prints; muster must show it.
. "$(dirname "$0")/../lib.sh"
C=$MU_SOURCE_DIR/tests/fixtures/components/hetjob.yaml
cd "$T_DIR" || exit 1
mkdir -p bin empty
stub() { # name exit-status stdout stderr
  printf '%s' "$3" >"bin/$1.out"
  printf '%s' "$4" >"bin/$1.err"
  printf '#!/bin/sh\necho "$0 $*" >>%s/calls\ncat %s/bin/%s.out\ncat %s/bin/%s.err >&2\nexit %s\n' \
    "$T_DIR" "$T_DIR" "$1" "$T_DIR" "$1" "$2" >"bin/$1"
  chmod +x "bin/$1"
}

out=$(PATH=$T_DIR/empty "$MUSTER" run -s slurm -cfg slurm_version=22.05 "$C" 2>&1)
t_expect_eq "sbatch missing: exit 1" "$?" 1
t_expect_match "sbatch missing: what to do" "$out" "sbatch not found: install the Slurm client"

stub sbatch 1 "" "sbatch: error: invalid partition specified: nope
sbatch: error: Batch job submission failed: Invalid partition name specified
"
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" run -s slurm -cfg slurm_version=22.05,partition=nope "$C" 2>&1)
t_expect_eq "rejected: exit 1" "$?" 1
t_expect_match "rejected: Slurm's own message" "$out" "Invalid partition name specified"
t_expect_match "rejected: hint" "$out" "hint: .sinfo. lists the partitions"
t_expect_match "sbatch --parsable SCRIPT" "$(cat calls)" "bin/sbatch --parsable /tmp/muster-sbatch-.*/muster-sbatch.sh"
ls /tmp/muster-sbatch-* >/dev/null 2>&1 && t_fail "temp script left behind" || t_ok "temp script removed"
t_expect_eq "rejected: the job's spool (its token) is removed" "$(ls -A | grep -c muster-spool)" 0

stub sbatch 0 "4242;cluster1
" ""
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" run -s slurm -cfg 'slurm_version=22.05,job_dir=jd,comment=c1' "$C" 2>&1)
t_expect_eq "federated id, job_dir: handle" "$out" "slurm://muster/4242"
t_expect_match "job_dir: --chdir and the script inside it" "$(tail -1 calls)" \
  "sbatch --parsable --chdir=jd --comment=c1 jd/muster-sbatch.sh"
t_expect_eq "job_dir recorded" "$(head -1 .musterslurmjobdirs)" "4242 = $T_DIR/jd"
t_expect_eq "the app's name recorded" "$(sed -n 's/^4242 name = //p' .musterslurmjobdirs)" foo
# muster list shows the app's name, as local does (Slurm's job name is the first replica's, a-0);
# a job not submitted from here keeps Slurm's name.
stub squeue 0 "4242+0|a-0|RUNNING
4242+1|a-1|RUNNING
4242+2|b-0|RUNNING
99|other-0|PENDING
" ""
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" list -s slurm 2>&1)
t_expect_match "list: the app's name, not its first replica's job name ($out)" "$out" \
  "slurm://muster/4242 +foo +RUNNING"
t_expect_match "list: a job submitted elsewhere keeps Slurm's name" "$out" "slurm://muster/99 +other-0 +PENDING"
spool=$(sed -n 's/^4242 spool = //p' .musterslurmjobdirs)
t_expect_match "its spool recorded, in the job dir" "$spool" "^$T_DIR/jd/\.muster-spool-[0-9a-f]{12}$"
t_expect_eq "the spool is 0700, the token 0600" "$(stat -c %a "$spool" "$spool/rdzv.token" | tr '\n' ' ')" "700 600 "
t_expect_match "the token: 64 hex digits" "$(cat "$spool/rdzv.token")" '^[0-9a-f]{64}$'
t_expect_match "the script names the file, not the token" "$(cat jd/muster-sbatch.sh)" \
  "export MUSTER_RDZV_TOKEN_FILE=$spool/rdzv.token"
if grep -qF "$(cat "$spool/rdzv.token")" jd/muster-sbatch.sh calls; then
  t_fail "the token is in the script or on sbatch's command line"
else
  t_ok "the token is in neither the script nor sbatch's command line"
fi
stub scancel 0 "" ""
PATH=$T_DIR/bin:$PATH "$MUSTER" cancel slurm://muster/4242 >/dev/null 2>&1
t_expect_match "cancel: scancel" "$(tail -1 calls)" "scancel 4242"
[ -e "$spool" ] && t_fail "cancel left the job's spool" || t_ok "cancel removes the job's spool"
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" run -s slurm -cfg slurm_version=22.05,job_dir=jd "$C" 2>&1)
t_expect_match "job_dir must not exist" "$out" "job_dir: cannot create 'jd'.*must not exist"

# Logs come from the job dir recorded for the id.
printf 'hello\nworld\n' >jd/slurm-4242-a-1.out
printf 'oops\n' >jd/slurm-4242-a-1.err
stub squeue 0 "4242+0|a-0|COMPLETED|n1
4242+1|a-1|COMPLETED|n2
4242+2|b-0|COMPLETED|n3
" ""
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" log slurm://muster/4242/a/1 2>&1)
t_expect_eq "log: stdout then stderr of a/1, from the job dir" "$out" "a/1 hello
a/1 world
a/1 oops"
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" status slurm://muster/4242 2>&1)
t_expect_match "status from squeue" "$out" "State: SUCCEEDED"
t_expect_match "squeue args" "$(tail -1 calls)" "squeue --noheader --jobs=4242 --states=all --format=%i\|%j\|%T\|%N"

# A failed replica is named by its index, beside the node rank its agent joined the rendezvous
# with (join order: replica 0 may be node rank 1): the record is in the last lines of a-0's .err.
rec='{"message":{"message":"ValueError: bad shard 7","extraInfo":{"py_callstack":"","timestamp":"5"}},"muster":{"rank":2,"local_rank":0,"node_rank":1,"host":"n1","exit_code":3,"time_ms":5000,"exception":"ValueError: bad shard 7"}}'
printf 'worker output\n[muster agent] failure record: %s\n' "$rec" >jd/slurm-4242-a-0.err
stub squeue 0 "4242+0|a-0|FAILED|n1
4242+1|a-1|CANCELLED|n2
4242+2|b-0|CANCELLED|n3
" ""
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" status slurm://muster/4242 2>&1)
t_expect_match "failed replica: a[0]'s error names replica a/0, then its node rank ($out)" \
  "$(grep -A2 'a\[0\]:FAILED' <<<"$out" | grep error_msg)" \
  "error_msg: rank 2 \(replica a/0, node rank 1 on host n1\) exited with code 3: ValueError: bad shard 7$"
t_expect_match "failed replica: the root cause names replica a/0" "$out" \
  "Root Cause: rank 2 \(replica a/0, node rank 1 on host n1\) exited with code 3"

# Gone from squeue, accounting disabled: a clear "not found".
stub squeue 1 "" "slurm_load_jobs error: Invalid job id specified
"
stub sacct 1 "" "Slurm accounting storage is disabled
"
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" status slurm://muster/777 2>&1)
t_expect_match "unknown job" "$out" "slurm job '777' not found in squeue \(and accounting is disabled\)"
# With accounting: sacct answers (TorchX case 10).
stub sacct 0 "JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode
89|mesh0-0|all|root|8|CANCELLED by 2166|0:0
89.batch|batch||root|8|CANCELLED|0:15
" ""
out=$(PATH=$T_DIR/bin:$PATH "$MUSTER" status slurm://muster/89 2>&1)
t_expect_match "sacct fallback: cancelled" "$out" "State: CANCELLED"
t_expect_match "sacct args" "$(tail -1 calls)" "sacct --parsable2 -j 89"
t_done
