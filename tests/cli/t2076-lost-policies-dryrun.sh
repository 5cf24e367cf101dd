#!/usr/bin/env bash
# What a scheduler does when one task of a job ends badly, in --dryrun (issue 31 item 4;
# docs/slurm.md): a role with more replicas than it needs (--spares K, or an elastic floor
# below the maximum) has its lost agent covered by the rendezvous, so srun runs every task to its
# own end (--wait=0 --kill-on-bad-exit=0); a role with no replica to spare keeps srun's
# teardown (--wait=60 --kill-on-bad-exit=1), the script's requeue then restarts the job. Nothing
# runs.
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs" MUSTER_APP_ID_SUFFIX=pinned42
cd "$T_DIR" || exit 1

# srun_opts ARGS...: the --wait/--kill-on-bad-exit of every srun group, one per line
srun_opts() {
  "$MUSTER" run --dryrun -s slurm dist.ddp "$@" --script train.py 2>&1 |
    grep -oE -- '--wait=[0-9]+ --kill-on-bad-exit=[01]'
}
out=$(srun_opts -j 2x2 --spares 1)
t_expect_eq "slurm --spares 1: 3 groups, each runs to its own end" \
  "$(grep -c -- '--wait=0 --kill-on-bad-exit=0' <<<"$out")/$(wc -l <<<"$out")" 3/3
out=$(srun_opts -j 2x2 --spares 0)
t_expect_eq "slurm --spares 0: 2 groups, a bad exit ends the step" \
  "$(grep -c -- '--wait=60 --kill-on-bad-exit=1' <<<"$out")/$(wc -l <<<"$out")" 2/2
out=$(srun_opts -j 1:2x2)
t_expect_eq "slurm elastic 1:2 (a node to spare): 2 groups, each runs to its own end" \
  "$(grep -c -- '--wait=0 --kill-on-bad-exit=0' <<<"$out")/$(wc -l <<<"$out")" 2/2
out=$(srun_opts -j 2:2x2)
t_expect_eq "slurm 2:2 (none to spare): a bad exit ends the step" \
  "$(grep -c -- '--wait=60 --kill-on-bad-exit=1' <<<"$out")/$(wc -l <<<"$out")" 2/2
t_done
