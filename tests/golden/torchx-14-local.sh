#!/usr/bin/env bash
# TorchX golden 14 (local_cwd and local_docker; local_scheduler_test.py at b72ba038),
# reproduced with muster's local scheduler.
#
# Deliberate divergences:
#  D1 The scheduler is `local` (TorchX: local_cwd / local_docker); the session in handles is
#     `muster` (TorchX: `torchx`), so the handle is local://muster/<app_id>.
#  D2 The app dir is <log_dir>/<app_id> (no `<session>` level), and the default log dir is
#     $MUSTER_LOG_DIR or /tmp/muster/$USER (kept after the job so status/log work later),
#     not a temporary directory deleted at exit.
#  D3 MUSTER_RANK0_HOST (TorchX_RANK0_HOST) and MUSTER_JOB_ID (TORCHX_JOB_ID); PET_LOG_DIR is
#     not set (muster agent has its own --log-dir). TORCHELASTIC_ERROR_FILE is kept.
#  D4 The state is kept in <app dir>/state.json while the job runs (TorchX writes SUCCESS at the
#     end only), so status/log -f/cancel/list work from other processes; `list` is supported.
#  D5 dist.ddp -j 1x2 runs `muster agent` against the embedded musterd, not torchrun with
#     localhost:0 (see torchx-11-dist-ddp.sh).
#  D6 fail_fast (default true): the first failed replica stops the others (TorchX waits for
#     all; -cfg fail_fast=false gives TorchX's behaviour).
#  D7 local_docker (case d) is not implemented: muster has no docker scheduler.
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs" MUSTER_APP_ID_SUFFIX=42
cd "$T_DIR"
# a) two roles: master (1 replica, arg1, ENV_VAR_1=VAL1) and trainer (2 replicas).
cat >"$T_DIR/test_app.yaml" <<'YAML'
name: test_app
description: golden 14a
app:
  name: test_app
  roles:
    - {name: master, entrypoint: sh, args: [-c, 'echo "$0 $ENV_VAR_1 $MUSTER_RANK0_HOST $TORCHELASTIC_ERROR_FILE"', arg1], env: {ENV_VAR_1: VAL1}}
    - {name: trainer, entrypoint: sh, args: [-c, 'echo trainer $MUSTER_REPLICA_ID'], num_replicas: "2"}
YAML
out=$("$MUSTER" run --dryrun ./test_app.yaml)
t_expect_eq "dryrun creates no directories" "$(ls "$T_DIR/logs" 2>/dev/null | wc -l)" 0
t_expect_match "replica args = [entrypoint, *args]" "$out" "master/0: sh -c .* arg1"
t_expect_match "trainer has 2 replicas" "$out" 'trainer/1: sh -c'
h=$("$MUSTER" run ./test_app.yaml 2>/dev/null); rc=$?
t_expect_eq "handle (D1)" "$h" "local://muster/test-app-42"
t_expect_eq "exit 0" "$rc" 0
app_dir="$T_DIR/logs/test-app-42"
for f in master/0 trainer/0 trainer/1; do
  for s in stdout stderr combined; do
    [ -f "$app_dir/$f/$s.log" ]; t_expect_eq "log file $f/$s.log (D2)" "$?" 0
  done
done
t_expect_eq "master env: role env, rank0 host, error file (D3)" "$(cat "$app_dir/master/0/stdout.log")" \
  "arg1 VAL1 localhost $app_dir/master/0/error.json"
t_expect_eq "trainer 1" "$(cat "$app_dir/trainer/1/stdout.log")" "trainer 1"
t_expect_match "state.json records the end (D4)" "$(cat "$app_dir/state.json")" '"state":	"SUCCEEDED"'

# b) state and exit rules.
export MUSTER_APP_ID_SUFFIX=
h=$("$MUSTER" run -cfg fail_fast=false utils.sh --num_replicas 2 -- '[ $MUSTER_REPLICA_ID = 1 ] && exit 7; exit 0' 2>/dev/null); rc=$?
t_expect_eq "any rc != 0 -> FAILED, run exits 1" "$rc" 1
t_expect_match "FAILED" "$("$MUSTER" status "$h")" 'State: FAILED'
t_expect_match "the replica with rc 0 SUCCEEDED" "$("$MUSTER" status "$h")" '\*sh\[0\]:SUCCEEDED'
t_expect_match "list works (D4)" "$("$MUSTER" list)" "$h"

# c) dist.ddp -j 1x2 on the local scheduler (D5).
out=$(MUSTER_APP_ID_SUFFIX=42 "$MUSTER" run --dryrun dist.ddp -j 1x2 --script train.py)
t_expect_match "dist.ddp 1x2: one agent, 2 workers (D5)" "$out" \
  "train/0: muster agent --nnodes 1 --nproc-per-node 2 --rdzv-endpoint '127.0.0.1:<port>' --rdzv-id train-42"
t_expect_match "MUSTER_JOB_ID (D3)" "$out" 'MUSTER_JOB_ID=local://muster/train-42'
t_expect_match "role env: experiment" "$out" 'MUSTER_TRACKING_EXPERIMENT_NAME=default-experiment'
t_expect_match "role env: LOGLEVEL" "$out" 'LOGLEVEL=WARNING'
# d) local_docker: not implemented (D7).
"$MUSTER" run -s local_docker utils.echo 2>"$T_DIR/err"; t_expect_eq "no local_docker (D7)" "$?" 2
t_done
