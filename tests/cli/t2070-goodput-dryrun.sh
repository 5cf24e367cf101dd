#!/usr/bin/env bash
# Goodput's parameters on every scheduler, in --dryrun: dist.ddp and aws.trn1_ddp take
# hang_timeout, hang_initial_timeout, health_check and spares; -cfg health_check on every
# scheduler reaches every node's agent (MUSTER_HEALTH_CHECK). Spares: local K more agents, Slurm
# K more nodes, Kubernetes K more replicas with the gang minimum unchanged. Nothing runs.
. "$(dirname "$0")/../lib.sh"
t_need_validator
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs" MUSTER_APP_ID_SUFFIX=pinned42
cd "$T_DIR" || exit 1
GP=(--hang_timeout 4 --hang_initial_timeout 90 --health_check 'nvidia-smi -L' --spares 1)

# local: three agents for --nnodes 2, each with the hang watch and the check
out=$("$MUSTER" run --dryrun dist.ddp -j 2x2 "${GP[@]}" --script train.py 2>&1)
t_expect_eq "local: 2 nodes + 1 spare = 3 agents" "$(grep -c '^  train/[0-9]: muster agent' <<<"$out")" 3
t_expect_eq "local: every agent keeps --nnodes 2 (the spare is a standby)" \
  "$(grep -c -- "--nnodes 2 " <<<"$out")" 3
t_expect_eq "local: every agent has the hang watch and the check" \
  "$(grep -c -- "--hang-timeout 4 --hang-initial-timeout 90 --health-check 'nvidia-smi -L'" <<<"$out")" 3
js=$("$MUSTER" run --dryrun --json dist.ddp -j 1:2x2 --spares 2 --script train.py)
check() { printf '%s' "$js" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
t_expect_eq "json: num_replicas is the maximum plus the spares" "$(check 'd["app"]["roles"][0]["num_replicas"]')" 4
t_expect_eq "json: min_replicas unchanged" "$(check 'd["app"]["roles"][0]["min_replicas"]')" 1
out=$("$MUSTER" run --dryrun dist.ddp -j 1:2x2 --spares=-1 --script train.py 2>&1)
t_expect_eq "a negative spares is refused" "$?" 2
t_expect_match "... naming it" "$out" "argument '--spares': '-1' does not match"
out=$("$MUSTER" run --dryrun dist.ddp -j 2x2 --hang_timeout 4x --script train.py 2>&1)
t_expect_match "a hang timeout that is no number is refused, naming it" "$out" \
  "argument '--hang_timeout': '4x' does not match"
# auto (the agent learns the timeout from the job's step intervals) on every builtin that has it
for c in "dist.ddp -j 2x2 --script train.py" "dist.spmd -j 2x2 --script train.py" \
  "aws.trn1_ddp --nnodes 2 --image img --script train.py"; do
  out=$("$MUSTER" run --dryrun ${c%% *} --hang_timeout auto ${c#* } 2>&1)
  t_expect_match "${c%% *}: --hang_timeout auto reaches the agents" "$out" "--hang-timeout auto"
  out=$("$MUSTER" run --dryrun ${c%% *} --hang_timeout autox ${c#* } 2>&1)
  t_expect_match "${c%% *}: --hang_timeout autox is refused, naming it" "$out" \
    "argument '--hang_timeout': 'autox' does not match"
done

# -cfg health_check: every scheduler has it; it reaches every role as MUSTER_HEALTH_CHECK
for s in local kubernetes slurm; do
  t_expect_match "$s: runopts has health_check" "$("$MUSTER" runopts "$s" 2>&1)" "health_check="
done
out=$("$MUSTER" run --dryrun -s local -cfg 'health_check=/opt/check.sh --quick' dist.ddp -j 2x1 \
  --script train.py 2>&1)
t_expect_match "local -cfg health_check: in the replicas' environment" "$out" \
  "MUSTER_HEALTH_CHECK='/opt/check.sh --quick' MUSTER_APP_ID"
out=$("$MUSTER" run --dryrun -s slurm -cfg 'health_check=/opt/check.sh' dist.ddp -j 2x2 "${GP[@]}" \
  --script train.py 2>&1)
t_expect_eq "slurm: 3 srun groups (2 nodes + 1 spare)" "$(grep -c -- '--output=slurm-' <<<"$out")" 3
t_expect_eq "slurm: every node gets the check" "$(grep -c 'MUSTER_HEALTH_CHECK=/opt/check.sh' <<<"$out")" 3

# kubernetes: aws.trn1_ddp with a spare: one more task, minAvailable only on the first nnodes
y=$("$MUSTER" run --dryrun -s kubernetes -cfg queue=q,muster_image=reg/muster:1,health_check=/opt/c \
  aws.trn1_ddp --nnodes 2 --spares 1 --hang_timeout 5 --image img --script train.py 2>&1 |
  sed -n '/^apiVersion:/,$p')
printf '%s\n' "$y" >"$T_DIR/trn1.yaml"
t_expect_eq "kubernetes: 3 training tasks (2 + 1 spare)" "$(grep -c '^  - name: role1-' <<<"$y")" 3
t_expect_eq "kubernetes: the gang minimum stays 2 (+ musterd)" \
  "$("$PY" -c 'import sys,yaml; d=yaml.safe_load(open(sys.argv[1])); print(sum(t.get("minAvailable",0) for t in d["spec"]["tasks"]))' "$T_DIR/trn1.yaml")" 3
t_expect_eq "kubernetes: every pod has the check" "$(grep -c 'name: MUSTER_HEALTH_CHECK' <<<"$y")" 3
t_expect_eq "kubernetes: every agent has the hang watch" "$(grep -c -- '- --hang-timeout' <<<"$y")" 3
node "$VALIDATOR" --modules "$MODS/node_modules" "$T_DIR/trn1.yaml" >"$T_DIR/validate.out" 2>&1
t_expect_eq "kubernetes: the manifest passes the Volcano schema" "$?" 0
t_done
