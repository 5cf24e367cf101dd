#!/usr/bin/env bash
# Issue 36's trn2 dry runs of aws.trn1_ddp: on Kubernetes, --instance_type trn2.48xlarge gives
# 64 workers a node, aws.amazon.com/neuron: 16, vpc.amazonaws.com/efa: 16 and
# NEURON_LOGICAL_NC_CONFIG=2, and --lnc 1 gives 128; --nproc_per_node above the cores is refused
# at the bound (64 passes, 65 fails; 128 and 129 at LNC=1); the native stack (trn2's default) sets
# no PyTorch/XLA variable, --stack xla does; the builtin Neuron check is on by default. On Slurm
# trn2 takes its nodes with --exclusive, no GRES, and 64 (128) workers a node.
. "$(dirname "$0")/../lib.sh"
K=(run -s kubernetes --dryrun --json -cfg queue=q,muster_image=muster:0.1.0)
S=(run -s slurm --dryrun --json -cfg slurm_version=24.11)
A=(aws.trn1_ddp --image i --script t.py --nnodes 2)
cd "$T_DIR" || exit 1

k8s() { # out args...: the dry run's manifest and app as JSON in $T_DIR/out.json
  local out=$1; shift
  "$MUSTER" "${K[@]}" "${A[@]}" "$@" >"$T_DIR/$out.json" 2>"$T_DIR/$out.err" ||
    { sed 's/^/# /' "$T_DIR/$out.err"; return 1; }
}
# One worker pod of the manifest: "nproc neuron efa LNC health XLA-vars" (a word "-" when absent)
pod() {
  $PY - "$T_DIR/$1.json" <<'PYEOF'
import json, sys, yaml
j = json.load(open(sys.argv[1]))
docs = [d for d in yaml.safe_load_all(j["request"]) if d]
job = [d for d in docs if d.get("kind") == "Job"][0]
task = [t for t in job["spec"]["tasks"] if t["name"] != "musterd"][0]
c = task["template"]["spec"]["containers"][0]
cmd, lim = c["command"], c["resources"]["limits"]
env = {e["name"]: e.get("value") for e in c.get("env", [])}
hc = cmd[cmd.index("--health-check") + 1] if "--health-check" in cmd else "-"
xla = [k for k in env if k.startswith("XLA_") or k in ("NEURON_CC_FLAGS", "CCOM_SOCKET_IFNAME")]
print(cmd[cmd.index("--nproc-per-node") + 1], lim.get("aws.amazon.com/neuron", "-"),
      lim.get("vpc.amazonaws.com/efa", "-"), env.get("NEURON_LOGICAL_NC_CONFIG", "-"), hc,
      ",".join(sorted(xla)) or "-")
PYEOF
}

k8s trn2 --instance_type trn2.48xlarge && t_ok "trn2.48xlarge renders" || t_fail "trn2.48xlarge renders"
t_expect_eq "trn2.48xlarge: 64 workers, 16 Neuron devices, 16 EFA, LNC 2, the Neuron check, no XLA" \
  "$(pod trn2)" "64 16 16 2 neuron:type=trn2.48xlarge,mount=/data -"
k8s lnc1 --instance_type trn2.48xlarge --lnc 1 && t_ok "--lnc 1 renders" || t_fail "--lnc 1 renders"
t_expect_eq "trn2.48xlarge --lnc 1: 128 workers, LNC 1, the check at LNC 1" \
  "$(pod lnc1)" "128 16 16 1 neuron:type=trn2.48xlarge,lnc=1,mount=/data -"
k8s trn2u --instance_type trn2u.48xlarge && t_expect_eq "trn2u.48xlarge as trn2.48xlarge" \
  "$(pod trn2u)" "64 16 16 2 neuron:type=trn2u.48xlarge,mount=/data -" || t_fail "trn2u renders"
k8s xla --instance_type trn2.48xlarge --stack xla --bf16 &&
  t_expect_eq "--stack xla: the XLA variables and the LNC" "$(pod xla)" \
    "64 16 16 2 neuron:type=trn2.48xlarge,mount=/data CCOM_SOCKET_IFNAME,NEURON_CC_FLAGS,XLA_DOWNCAST_BF16,XLA_TRANSFER_SEED_ASYNC" ||
  t_fail "--stack xla renders"
k8s trn1 --instance_type trn1.32xlarge &&
  t_expect_eq "trn1.32xlarge unchanged: 32 workers, 8 EFA, no LNC, the XLA stack" "$(pod trn1)" \
    "32 16 8 - neuron:type=trn1.32xlarge,mount=/data CCOM_SOCKET_IFNAME,NEURON_CC_FLAGS,XLA_TRANSFER_SEED_ASYNC" ||
  t_fail "trn1.32xlarge renders"
k8s none --instance_type trn2.48xlarge --health_check none &&
  t_expect_eq "--health_check none: no check" "$(pod none)" "64 16 16 2 - -" || t_fail "none renders"

# The cores are the bound: at max it renders, at max+1 it is refused naming the fix.
k8s at64 --instance_type trn2.48xlarge --nproc_per_node 64 && t_ok "64 workers at LNC 2" ||
  t_fail "64 workers at LNC 2"
out=$("$MUSTER" "${K[@]}" "${A[@]}" --instance_type trn2.48xlarge --nproc_per_node 65 2>&1)
t_expect_eq "65 workers at LNC 2: exit 2" "$?" 2
t_expect_match "65 workers at LNC 2: named" "$out" \
  "--nproc_per_node above 64 at LNC=2: a trn2.48xlarge or trn2u.48xlarge has 64 NeuronCores .* or --lnc 1"
k8s at128 --instance_type trn2.48xlarge --lnc 1 --nproc_per_node 128 && t_ok "128 workers at LNC 1" ||
  t_fail "128 workers at LNC 1"
out=$("$MUSTER" "${K[@]}" "${A[@]}" --instance_type trn2u.48xlarge --lnc 1 --nproc_per_node 129 2>&1)
t_expect_eq "129 workers at LNC 1: exit 2" "$?" 2
t_expect_match "129 workers at LNC 1: named" "$out" "--nproc_per_node above 128: "
out=$("$MUSTER" "${K[@]}" "${A[@]}" --instance_type trn1.32xlarge --lnc 1 2>&1)
t_expect_match "--lnc on trn1 refused" "$out" "--lnc on a trn1 type: the logical NeuronCore setting applies to Trainium2 only"
out=$("$MUSTER" "${K[@]}" "${A[@]}" --instance_type trn1.32xlarge --stack native 2>&1)
t_expect_match "--stack native on trn1 refused" "$out" "TorchNeuron \\(native PyTorch\\) runs on Trn2 and Trn3 only"
out=$("$MUSTER" "${K[@]}" "${A[@]}" --instance_type trn2.48xlarge --precompile 2>&1)
t_expect_match "--precompile with TorchNeuron refused" "$out" "neuron_parallel_compile belongs to PyTorch/XLA"

# --help says the check is on by default
out=$("$MUSTER" run aws.trn1_ddp --help 2>&1)
t_expect_match "--help: the builtin Neuron check by default" "$out" "Default neuron: muster agent's builtin Neuron check"

# Slurm: whole nodes, no GRES, the workers from the type and the LNC
slurm() { "$MUSTER" "${S[@]}" "${A[@]}" "$@" 2>"$T_DIR/s.err" |
  $PY -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["request"])' || sed 's/^/# /' "$T_DIR/s.err"; }
out=$(slurm --instance_type trn2.48xlarge)
t_expect_eq "slurm trn2: both groups --exclusive" "$(grep -c '^#SBATCH --job-name=role1-[01] .*--exclusive$' <<<"$out")" 2
if grep -q -- '--gres' <<<"$out"; then t_fail "slurm trn2: no GRES"; else t_ok "slurm trn2: no GRES"; fi
t_expect_eq "slurm trn2: 64 workers on each node" "$(grep -o 'agent --nnodes 2 --nproc-per-node 64 ' <<<"$out" | wc -l)" 2
t_expect_match "slurm trn2: NEURON_LOGICAL_NC_CONFIG exported" "$out" "--export=ALL,NEURON_LOGICAL_NC_CONFIG=2,"
out=$(slurm --instance_type trn2.48xlarge --lnc 1)
t_expect_eq "slurm trn2 --lnc 1: 128 workers on each node" "$(grep -o 'agent --nnodes 2 --nproc-per-node 128 ' <<<"$out" | wc -l)" 2
t_done
