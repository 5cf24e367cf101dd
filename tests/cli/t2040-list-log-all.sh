#!/usr/bin/env bash
# `muster list -s SCHED -cfg ...` (TorchX's single-dash -cfg on every subcommand: a namespace for
# kubernetes, a partition/user for slurm) and `muster log HANDLE` without a role on kubernetes
# and slurm: every replica, each line prefixed "role/replica ". kubectl is the recording
# stand-in (tests/fixtures/bin/kubectl); squeue is a stand-in written here that replays the
# recorded Slurm 22.05 output (tests/fixtures/slurm/).
. "$(dirname "$0")/../lib.sh"
mkdir -p "$T_DIR/bin"
cat >"$T_DIR/bin/squeue" <<EOF
#!/bin/sh
printf '%s\n' "\$*" >>"$T_DIR/squeue.calls"
case "\$*" in
  *--jobs=6*) cat "$MU_SOURCE_DIR/tests/fixtures/slurm/squeue-22.05-hetjob.txt" ;;
  *) printf '6+0|trainer|RUNNING\n6+1|trainer|RUNNING\n9|echo|PENDING\n' ;;
esac
EOF
chmod +x "$T_DIR/bin/squeue"
export PATH=$T_DIR/bin:$MU_SOURCE_DIR/tests/fixtures/bin:$PATH
export KUBECTL_RECORD=$T_DIR/calls KUBECTL_STATE=$T_DIR/kubectl-jobs
cd "$T_DIR" || exit 1
t_kubectl_job ml echo-42 # submitted before the test

# ---- list: -cfg reaches the scheduler
out=$("$MUSTER" list -s kubernetes -cfg namespace=ml 2>&1)
t_expect_eq "list -cfg: exit 0" "$?" 0
t_expect_match "list -cfg namespace: kubectl -n ml" "$(grep -v ' get pods ' calls | tail -1)" \
  "^-n ml get jobs.batch.volcano.sh -l app.kubernetes.io/managed-by=muster -o json$"
t_expect_match "list -cfg namespace: handles in ml" "$out" "kubernetes://muster/ml:echo-abc123 "
"$MUSTER" list -s kubernetes -cfg=namespace=prod,context=c1 >/dev/null 2>&1
t_expect_eq "list -cfg=...: namespace and context" "$(grep -v ' get pods ' calls | tail -1)" \
  "--context c1 -n prod get jobs.batch.volcano.sh -l app.kubernetes.io/managed-by=muster -o json"
"$MUSTER" list -s kubernetes --cfg namespace=dev >/dev/null 2>&1
t_expect_match "list --cfg still works" "$(grep -v ' get pods ' calls | tail -1)" "^-n dev get "
out=$("$MUSTER" list -s kubernetes -cfg namespaec=ml 2>&1)
t_expect_eq "list: unknown -cfg key exits 2" "$?" 2
t_expect_match "list: unknown -cfg key is named" "$out" "namespaec.*namespace"
printf '[kubernetes]\nnamespace = fromfile\n' >.musterconfig
"$MUSTER" list -s kubernetes >/dev/null 2>&1
t_expect_match "list: namespace from .musterconfig" "$(grep -v ' get pods ' calls | tail -1)" "^-n fromfile get "
"$MUSTER" list -s kubernetes -cfg namespace=cli >/dev/null 2>&1
t_expect_match "list: -cfg wins over .musterconfig" "$(grep -v ' get pods ' calls | tail -1)" "^-n cli get "
rm .musterconfig

out=$("$MUSTER" list -s slurm 2>&1)
t_expect_eq "slurm list: exit 0" "$?" 0
t_expect_eq "slurm list: your jobs by default" "$(tail -1 squeue.calls)" \
  "--me --noheader --states=all --format=%i|%j|%T"
t_expect_match "slurm list: het job once" "$out" "slurm://muster/6 +trainer +RUNNING"
"$MUSTER" list -s slurm -cfg partition=gpu,user=alice >/dev/null 2>&1
t_expect_eq "slurm list -cfg partition,user" "$(tail -1 squeue.calls)" \
  "--user=alice --partition=gpu --noheader --states=all --format=%i|%j|%T"
"$MUSTER" list -s slurm -cfg user=ALL >/dev/null 2>&1
t_expect_eq "slurm list -cfg user=ALL" "$(tail -1 squeue.calls)" \
  "--noheader --states=all --format=%i|%j|%T"

# -cfg on status/log/cancel too.
out=$(KUBECTL_PHASE=Running "$MUSTER" status -cfg context=c2 kubernetes://muster/ml:echo-42 2>&1)
t_expect_match "status -cfg context" "$(tail -1 calls)" "^--context c2 -n ml get "

# ---- log without a role: every replica, prefixed
: >calls
out=$(KUBECTL_PHASE=Running "$MUSTER" log kubernetes://muster/ml:echo-42 2>&1)
t_expect_eq "k8s log all: exit 0" "$?" 0
got=$(printf '%s\n' "$out" | sort)
want=$(printf '%s\n' "echo/0 log line 1 from echo-42-echo-0-0" "echo/0 log line 2 from echo-42-echo-0-0" \
  "echo/1 log line 1 from echo-42-echo-1-0" "echo/1 log line 2 from echo-42-echo-1-0" | sort)
t_expect_eq "k8s log all: every replica, prefixed role/replica" "$got" "$want"
t_expect_eq "k8s log all: one kubectl logs per pod" "$(grep -c ' logs ' calls)" 2
if grep -q musterd calls; then t_fail "k8s log all: not the musterd task"; else t_ok "k8s log all: not the musterd task"; fi
out=$(KUBECTL_PHASE=Running "$MUSTER" log kubernetes://muster/ml:echo-42/echo 2>&1)
t_expect_eq "k8s log of a role: both replicas" "$(printf '%s\n' "$out" | grep -c '^echo/[01] log line')" 4
out=$(KUBECTL_PHASE=Running "$MUSTER" log kubernetes://muster/ml:echo-42/echo/1 2>&1)
t_expect_eq "k8s log of one replica: prefixed too (as TorchX)" "$out" "echo/1 log line 1 from echo-42-echo-1-0
echo/1 log line 2 from echo-42-echo-1-0"
out=$(KUBECTL_TAIL=5 KUBECTL_PHASE=Running "$MUSTER" log -t --lines 5 \
  kubernetes://muster/ml:echo-42 2>&1)
t_expect_eq "k8s log -t --lines 5 all: exit 0" "$?" 0
t_expect_match "k8s log -t --lines 5 all: -f and --tail=5 reach kubectl" \
  "$(grep ' logs ' calls | tail -1)" "logs echo-42-echo-[01]-0 -f --tail=5$"
: >calls
out=$(KUBECTL_PHASE=Running "$MUSTER" log -t kubernetes://muster/ml:echo-42/echo/0 2>&1)
t_expect_eq "k8s log -t (TorchX: follow): every line, no --tail" "$out" \
  "echo/0 log line 1 from echo-42-echo-0-0
echo/0 log line 2 from echo-42-echo-0-0"
t_expect_eq "k8s log -t: kubectl logs -f, nothing else" "$(cat calls)" \
  "-n ml logs echo-42-echo-0-0 -f"
out=$(KUBECTL_PHASE=Running "$MUSTER" log kubernetes://muster/ml:echo-42/nope 2>&1)
t_expect_eq "k8s log unknown role: exit 1" "$?" 1
t_expect_match "k8s log unknown role: named" "$out" "has no role 'nope'"

# run --wait --log streams every replica's log, prefixed, while it waits.
KUBECTL_PHASE=Completed MUSTER_APP_ID=echo-46 timeout 60 "$MUSTER" run -s kubernetes --wait \
  --log -cfg queue=q utils.echo --image a --num_replicas 2 >/dev/null 2>run.err
t_expect_eq "run --wait --log: exit 0" "$?" 0
t_expect_eq "run --wait --log: every replica's lines, prefixed" \
  "$(grep -c '^echo/[01] log line [12] from echo-46-echo-[01]-0$' run.err)" 4

# ---- slurm: the per-replica files of the het job
printf 'a0\nb0\n' >slurm-6-trainer-0.out
: >slurm-6-trainer-0.err
printf 'a1\n' >slurm-6-trainer-1.out
printf 'warn1' >slurm-6-trainer-1.err # no final newline: still a whole prefixed line
out=$("$MUSTER" log slurm://muster/6 2>&1)
t_expect_eq "slurm log all: exit 0" "$?" 0
t_expect_eq "slurm log all: every replica, prefixed" "$(printf '%s\n' "$out" | sort)" \
  "trainer/0 a0
trainer/0 b0
trainer/1 a1
trainer/1 warn1"
out=$("$MUSTER" log slurm://muster/6/trainer/0 2>&1)
t_expect_eq "slurm log of one replica: prefixed" "$out" "trainer/0 a0
trainer/0 b0"
rm slurm-6-trainer-1.out slurm-6-trainer-1.err
out=$("$MUSTER" log slurm://muster/6 2>&1)
t_expect_eq "slurm log, a replica without files: exit 1" "$?" 1
t_expect_match "slurm log, a replica without files: the others still print" "$out" "trainer/0 a0"
t_expect_match "slurm log, a replica without files: the combined log named, with the reason" \
  "$out" "trainer/1: no log file .*slurm-6-trainer-1.log"
# a job of this muster: its combined log (muster tee's, both streams in order) is what is shown
printf 'a0\nwarn0\nb0\n' >slurm-6-trainer-0.log
t_expect_eq "slurm log of one replica: its .log when there is one" \
  "$("$MUSTER" log slurm://muster/6/trainer/0 2>&1)" "trainer/0 a0
trainer/0 warn0
trainer/0 b0"
t_expect_eq "... --streams stdout: its .out" \
  "$("$MUSTER" log --streams stdout slurm://muster/6/trainer/0 2>&1)" "trainer/0 a0
trainer/0 b0"
t_done
