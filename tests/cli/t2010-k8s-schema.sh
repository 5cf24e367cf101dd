#!/usr/bin/env bash
# Every Volcano manifest the suite generates is valid against the Volcano v1.15.1 Job CRD and
# its admission rules (../shared/k8s-schemas/validate-volcano-job.mjs, strict fields): the unit
# tests' manifests (TorchX cases 01-06, runopts, long names, the job's own musterd), the trn1
# goldens, and fresh `muster run -s kubernetes --dryrun` output of every builtin component.
# Needs node and the npm packages the validator names, which `scripts/install-deps.sh --test`
# installs into a fixed cache dir ($MU_NPM_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/muster-vjv);
# this test never reaches a registry, and fails (does not skip) when they are missing.
. "$(dirname "$0")/../lib.sh"
SCHEMAS=${MU_K8S_SCHEMAS:-$MU_SOURCE_DIR/../shared/k8s-schemas}
VALIDATOR=$SCHEMAS/validate-volcano-job.mjs
[ -f "$VALIDATOR" ] || { echo "# skip: no validator at $VALIDATOR (set MU_K8S_SCHEMAS)"; exit 77; }
command -v node >/dev/null ||
  { echo "not ok - node is not installed: run scripts/install-deps.sh --test"; exit 1; }
MODS=${MU_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster-vjv}
for mod in ajv ajv-formats yaml; do
  [ -d "$MODS/node_modules/$mod" ] || {
    echo "not ok - the validator's npm package '$mod' is missing from $MODS/node_modules:"
    echo "#   run scripts/install-deps.sh --test (it installs ajv@8 ajv-formats@3 yaml@2 there),"
    echo "#   or point MU_NPM_CACHE at a directory that has them"
    exit 1
  }
done
M=$T_DIR/manifests
mkdir -p "$M"

# 1. The unit tests' manifests.
MU_MANIFEST_DIR=$M "$MU_BUILD_DIR/mu_unit_tests" k8s__ >"$T_DIR/unit.log" 2>&1 &&
  t_ok "unit tests wrote their manifests" || { cat "$T_DIR/unit.log"; t_fail "unit tests"; }
n=$(ls "$M" | wc -l)
[ "$n" -ge 8 ] && t_ok "$n unit manifests" || t_fail "only $n unit manifests"

# 2. The goldens.
cp "$MU_SOURCE_DIR/tests/golden/trn1/precompile.yaml" "$M/golden-trn1-precompile.yaml"
cp "$MU_SOURCE_DIR/tests/golden/trn1/train.yaml" "$M/golden-trn1-train.yaml"

# 3. Dryruns of the builtins, with every runopt that changes the manifest.
dry() { # name component-and-args...
  local name=$1; shift
  "$MUSTER" run -s kubernetes --dryrun --json "$@" >"$T_DIR/$name.json" 2>"$T_DIR/$name.err" &&
    $PY -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["request"])' \
      <"$T_DIR/$name.json" >"$M/$name.yaml" && t_ok "dryrun $name" ||
    { cat "$T_DIR/$name.err"; t_fail "dryrun $name"; }
}
dry echo -cfg queue=default utils.echo --image alpine --msg hi
dry python -cfg queue=default utils.python --image python:3 -c 'print(1)'
dry ddp -cfg queue=default dist.ddp --image img -j 2x4 --script train.py -- --lr 0.1
dry ddp-elastic -cfg queue=default dist.ddp --image img -j 1:3x2 --script train.py
dry tensorboard -cfg queue=default metrics.tensorboard
dry trn1-2xl -cfg queue=default aws.trn1_ddp --nnodes 1 --nproc_per_node 2 --image i --script t.py --instance_type trn1.2xlarge
dry trn1-script-args -cfg queue=default aws.trn1_ddp --nnodes 2 --image i --script t.py --script_args "--lr 0.1 --msg 'a b'" --cacheset run_2
dry tolerations-kubectl -cfg 'queue=default,tolerations="k=v:NoSchedule;x.io/g=h:NoExecute";spot' utils.echo --image a
dry runopts -cfg 'queue=q,namespace=ml,service_account=sa,priority_class=high,image_pull_secret=regcred;other,node_selector=disk:ssd,tolerations=aws.amazon.com/neuron:NoSchedule;dedicated:ml:NoExecute;spot,labels=team:ml,env:prod,annotations=owner:alice,kueue_queue=lq' dist.ddp --image img -j 2x1 --script t.py
got=$($PY -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1])); p = d["spec"]["tasks"][1]["template"]["spec"]
print(len(p["tolerations"]), p["tolerations"][1], d["metadata"]["labels"]["env"], len(p["imagePullSecrets"]))' "$M/runopts.yaml")
t_expect_eq "runopts through -cfg" "$got" "3 {'key': 'dedicated', 'operator': 'Equal', 'value': 'ml', 'effect': 'NoExecute'} prod 2"
dry default-sched -cfg scheduler_name=default-scheduler utils.echo --image alpine
dry rdzv-ext -cfg queue=q,rdzv=musterd.infra:2379 dist.ddp --image img -j 2x1 --script t.py

NODE_PATH=$MODS/node_modules node "$VALIDATOR" "$M"/*.yaml >"$T_DIR/validate.log" 2>&1
rc=$?
cat "$T_DIR/validate.log" | sed 's/^/# /'
t_expect_eq "validator exit status" "$rc" 0
t_expect_match "all documents valid" "$(tail -1 "$T_DIR/validate.log")" " 0 invalid"

# The validator is able to fail: a broken manifest is rejected.
sed 's/^kind: Job$/kind: Job\nbogusField: 1/' "$M/echo.yaml" >"$T_DIR/broken.yaml"
NODE_PATH=$MODS/node_modules node "$VALIDATOR" -q "$T_DIR/broken.yaml" >/dev/null 2>&1
t_expect_eq "a broken manifest is rejected" "$?" 1
t_done
