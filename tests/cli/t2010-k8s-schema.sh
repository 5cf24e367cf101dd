#!/usr/bin/env bash
# Every manifest the suite generates is valid: each Volcano Job against the Volcano v1.15.1 CRDs
# (and each object created with a job, a ResourceClaimTemplate or NetworkPolicy, against the
# Kubernetes API's schemas in tests/schemas/kubernetes-api/)
# and admission rules, each JobSet against the JobSet v0.9.1 CRD and its webhook's rules
# (tests/schemas/validate-k8s.mjs with tests/schemas/volcano-v1.15.1/ and jobset-v0.9.1/,
# unknown fields rejected): the unit tests' manifests (TorchX cases 01-06, runopts, long names,
# the job's own musterd, JobSets, secrets), the trn1 goldens, and fresh
# `muster run -s kubernetes --dryrun` output of every builtin component on both APIs (dist.ddp,
# aws.trn1_ddp, elastic, with secrets, tolerations and Kueue). Then the validator shows it can
# fail: manifests broken one fault at a time are each rejected with the message for that fault.
# Needs node and the npm packages the validator names, which `scripts/install-deps.sh --test`
# installs into a fixed cache dir ($MU_NPM_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/muster-vjv);
# this test never reaches a registry.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER" "$MU_BUILD_DIR/mu_unit_tests"
t_need_validator
validate() { node "$VALIDATOR" --modules "$MODS/node_modules" "$@"; }
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

# 3. Dryruns of the builtins, with every runopt that changes the manifest. The muster image
# (init container, musterd task) comes from a config file, as a platform team would set it.
printf '[kubernetes]\nmuster_image = registry.example/muster:0.1.0\n' >"$T_DIR/musterconfig"
export MUSTERCONFIG=$T_DIR/musterconfig
dry() { # name component-and-args...
  local name=$1; shift
  "$MUSTER" run -s kubernetes --dryrun --json "$@" >"$T_DIR/$name.json" 2>"$T_DIR/$name.err" &&
    $PY -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["request"])' \
      <"$T_DIR/$name.json" >"$M/$name.yaml" &&
    $PY -c 'import json,sys
o = json.load(open(sys.argv[1])).get("objects")
o and open(sys.argv[2], "w").write(o)' "$T_DIR/$name.json" "$M/$name-objects.yaml" &&
    t_ok "dryrun $name" ||
    { cat "$T_DIR/$name.err"; t_fail "dryrun $name"; }
}
dry echo -cfg queue=default utils.echo --image alpine --msg hi
dry python -cfg queue=default utils.python --image python:3 -c 'print(1)'
dry ddp -cfg queue=default dist.ddp --image img -j 2x4 --script train.py -- --lr 0.1
dry ddp-elastic -cfg queue=default dist.ddp --image img -j 1:3x2 --script train.py
dry ddp-torchrun-c10d -cfg queue=default dist.ddp --image img -j 2x2 --launcher torchrun --script train.py
got=$($PY -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1])); t = d["spec"]["tasks"]; m = t[0]["template"]["spec"]["containers"][0]
a = t[1]["template"]["spec"]["containers"][0]["command"] + t[1]["template"]["spec"]["containers"][0].get("args", [])
c = m["command"]; print(c[c.index("--c10d-listen"):][:2], m["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], a[a.index("--rdzv_endpoint") + 1].split(".")[-1])' \
  "$M/ddp-torchrun-c10d.yaml" 2>&1)
t_expect_eq "torchrun c10d: musterd serves TCPStore on the pod's own address, the workers' endpoint" \
  "$got" "['--c10d-listen', '\$(MUSTER_POD_IP):29401'] status.podIP ${got##* }"
t_expect_match "torchrun c10d: the endpoint is the musterd task's port 29401" "${got##* }" ':29401$'
dry jobset-torchrun-c10d -cfg api=jobset dist.ddp --image img -j 2x2 --launcher torchrun --script train.py
got=$($PY -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1])); j = d["spec"]["replicatedJobs"]; n = d["metadata"]["name"]
m = j[0]["template"]["spec"]["template"]["spec"]["containers"][0]["command"]
w = j[1]["template"]["spec"]["template"]["spec"]["containers"][0]
a = w["command"] + w.get("args", [])
print(m[m.index("--c10d-listen"):][:2], a[a.index("--rdzv_endpoint") + 1] == n + "-musterd-0-0." + n + ":29401")' \
  "$M/jobset-torchrun-c10d.yaml" 2>&1)
t_expect_eq "torchrun c10d on a JobSet: the musterd job serves TCPStore, the workers point at its pod" \
  "$got" "['--c10d-listen', '\$(MUSTER_POD_IP):29401'] True"
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
# The same on JobSets (-cfg api=jobset), and the mounts and variables from Secrets on both APIs.
for api in volcano jobset; do
  [ $api = volcano ] && q=queue=default, || q=""
  dry $api-ddp -cfg "${q}api=$api" dist.ddp --image img -j 2x4 --script train.py -- --lr 0.1
  dry $api-elastic -cfg "${q}api=$api" dist.ddp --image img -j 1:3x2 --script train.py
  dry $api-trn1 -cfg "${q}api=$api" aws.trn1_ddp --nnodes 2 --image i --script t.py --cacheset bert
  dry $api-secrets -cfg "${q}api=$api" dist.ddp --image img -j 2x1 --script t.py \
    --mounts type=secret,name=hf-token,dst=/var/secrets/hf,type=configmap,src=cfg,dst=/etc/cfg \
    --env HF_TOKEN=[SECRET]hf-token:token
  dry $api-tolerations -cfg "${q}api=$api,"'tolerations="k=v:NoSchedule;x.io/g=h:NoExecute";spot' \
    utils.echo --image a --num_replicas 3
  dry $api-kueue -cfg "${q}api=$api,kueue_queue=team-a,priority_class=high,service_account=sa" \
    dist.ddp --image img -j 2x1 --script t.py
done
dry jobset-torchrun -cfg api=jobset aws.trn1_ddp --nnodes 2 --image i --script t.py --launcher torchrun
# Neuron through DRA claim templates, and topology-aware placement (t2080 checks what they say).
dry volcano-dra-topology -cfg queue=q,neuron_devices=dra,topology=topology.k8s.aws/network-node-layer-3 \
  aws.trn1_ddp --nnodes 2 --image i --script t.py
dry jobset-dra-topology -cfg api=jobset,neuron_devices=dra,topology=topology.k8s.aws/network-node-layer-3:required \
  aws.trn1_ddp --nnodes 2 --image i --script t.py
# The job's musterd serving HTTPS from a TLS Secret (-cfg rdzv_tls), with client certificates.
dry volcano-tls -cfg queue=default,rdzv_tls=rdzv-tls,rdzv_tls_client=agent-tls dist.ddp --image img -j 2x1 --script t.py
dry jobset-tls -cfg api=jobset,rdzv_tls=rdzv-tls aws.trn1_ddp --nnodes 2 --image i --script t.py
got=$($PY -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
print(d["kind"], d["spec"]["suspend"], d["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
      [r["name"] for r in d["spec"]["replicatedJobs"]])' "$M/jobset-kueue.yaml")
t_expect_eq "JobSet with Kueue: suspended, labelled, musterd then the role" "$got" \
  "JobSet True team-a ['musterd', 't']"
got=$($PY -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
c = d["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
print(c["resources"]["limits"]["aws.amazon.com/neuron"], c["resources"]["limits"]["vpc.amazonaws.com/efa"],
      [e["value"] for e in c["env"] if e["name"] == "NEURON_CC_FLAGS"])' "$M/jobset-trn1.yaml")
t_expect_eq "aws.trn1_ddp on a JobSet: Neuron and EFA devices, per-replica cache set" "$got" \
  "16 8 ['--cache_dir=/data/neuron_cache/bert_\$(MUSTER_REPLICA_ID)']"

validate "$M"/*.yaml >"$T_DIR/validate.log" 2>&1
rc=$?
sed 's/^/# /' "$T_DIR/validate.log"
t_expect_eq "validator exit status" "$rc" 0
t_expect_match "all documents valid" "$(tail -1 "$T_DIR/validate.log")" " 0 invalid"

# The validator is able to fail: the echo Job broken one fault at a time, each rejected with
# its own message (one fault per rule family: schema, Volcano's admission rules, pod rules).
# One validator run checks them all (compiling the Job schema takes seconds).
cat >"$T_DIR/faults" <<'CASES'
unknown-field|job["bogusField"] = 1|^  - bogusField: unknown field
misspelt-field|spec["minAvaliable"] = 1|spec.minAvaliable: unknown field
not-a-quantity|ctr["resources"]["limits"]["cpu"] = "lots"|resources.limits.cpu: must match pattern
replicas-type|task["replicas"] = "two"|spec.tasks\[0\].replicas: must be integer
no-tasks|spec["tasks"] = []|spec.tasks: no task specified
task-min-over-replicas|task["minAvailable"] = task["replicas"] + 1|'minAvailable' \([0-9]+\) is greater than 'replicas'
job-min-over-replicas|spec["minAvailable"] = 99|job 'minAvailable' \(99\) is greater than the total replicas
duplicate-task|spec["tasks"].append(dict(task))|duplicated task name
bad-policy-action|spec["policies"] = [{"event": "PodFailed", "action": "Restart"}]|invalid policy action "Restart"
event-and-exitcode|spec["policies"] = [{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}]|must not specify event and exitCode simultaneously
unknown-plugin|spec.setdefault("plugins", {})["envs"] = []|spec.plugins\["envs"\]: no such job plugin
job-name|job["metadata"]["name"] = "Echo_Job"|metadata.name: "Echo_Job" is not a DNS-1123 subdomain
label-value|job["metadata"].setdefault("labels", {})["x"] = "-bad-"|labels\["x"\]: "-bad-" is not a valid label value
long-hostname|job["metadata"]["name"] = "a" * 60|the pod hostname "a{60}-.*" \(job-task-index\)
no-image|del ctr["image"]|containers\[0\].image: required
container-name|ctr["name"] = "Echo"|containers\[0\].name: "Echo" is not a DNS-1123 label
missing-volume|ctr["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]|volumeMounts\[0\].name: no volume "data"
restart-policy|pod["restartPolicy"] = "Sometimes"|restartPolicy: "Sometimes" is not Always
port-name|ctr["ports"] = [{"containerPort": 29500, "name": "rendezvous-port-c10d"}]|"rendezvous-port-c10d" is not an IANA service name
request-over-limit|ctr["resources"] = {"limits": {"memory": "1Gi"}, "requests": {"memory": "2Gi"}}|requests.memory: 2Gi is more than the limit 1Gi
extended-fraction|ctr["resources"] = {"limits": {"nvidia.com/gpu": "1.5"}}|an extended resource must be a whole number
CASES
# The same for a JobSet, with the webhook's rules.
cat >"$T_DIR/jsfaults" <<'CASES'
js-unknown-field|spec["bogus"] = 1|^  - spec.bogus: unknown field
js-pod-unknown-field|pod["restartPolicyy"] = "Never"|template.spec.template.spec.restartPolicyy: unknown field
js-depends-first|rjobs[0]["dependsOn"] = [{"name": "echo", "status": "Ready"}]|DependsOn can't be set for the first ReplicatedJob
js-depends-later|rjobs[1]["dependsOn"] = [{"name": "nosuch", "status": "Ready"}]|cannot depend on replicatedJob "nosuch"
js-depends-status|rjobs[1]["dependsOn"] = [{"name": "musterd", "status": "Running"}]|dependsOn\[0\].status: must be one of "Ready", "Complete"
js-success-target|spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["nosuch"]}|invalid replicatedJob name "nosuch"
js-long-pod-name|job["metadata"]["name"] = "a" * 50|the pod name "a{50}-.*-abcde" .* is not a DNS-1035 label
js-restart-always|pod["restartPolicy"] = "Always"|a Job's pods restart OnFailure or Never, got "Always"
js-inorder-and-depends|spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}|StartupPolicy and DependsOn APIs are mutually exclusive
js-no-image|del ctr["image"]|containers\[0\].image: required
js-duplicate-rjob|rjobs.append(dict(rjobs[1]))|item \[2\] has the same name as item \[1\]
CASES
mkdir -p "$T_DIR/bad"
"$PY" - "$M/echo.yaml" "$T_DIR/bad" "$T_DIR/faults" <<'PY' || t_fail "could not write the broken manifests"
import sys, yaml
src, out, faults = sys.argv[1:4]
for line in open(faults):
    name, change, _ = line.rstrip("\n").split("|", 2)
    job = yaml.safe_load(open(src))
    spec, task = job["spec"], job["spec"]["tasks"][0]
    pod = task["template"]["spec"]
    ctr = pod["containers"][0]
    exec(change)
    yaml.safe_dump(job, open("%s/%s.yaml" % (out, name), "w"))
PY
"$PY" - "$M/jobset-ddp.yaml" "$T_DIR/bad" "$T_DIR/jsfaults" <<'PY' || t_fail "could not write the broken JobSets"
import sys, yaml
src, out, faults = sys.argv[1:4]
for line in open(faults):
    name, change, _ = line.rstrip("\n").split("|", 2)
    job = yaml.safe_load(open(src))
    spec = job["spec"]
    rjobs = spec["replicatedJobs"]
    pod = rjobs[1]["template"]["spec"]["template"]["spec"]
    ctr = pod["containers"][0]
    exec(change)
    yaml.safe_dump(job, open("%s/%s.yaml" % (out, name), "w"))
PY
validate -q "$T_DIR"/bad/*.yaml >"$T_DIR/bad.log" 2>&1
t_expect_eq "broken manifests: the validator fails" "$?" 1
while IFS='|' read -r name _ want; do
  # This file's report: from its "INVALID" line to the next line that is not a problem.
  out=$(sed -n "\|^$T_DIR/bad/$name.yaml#1 .*: INVALID\$|,/^[^ ]/p" "$T_DIR/bad.log" | sed '$d')
  t_expect_match "broken ($name): rejected, saying why" "$out" "$want"
done < <(cat "$T_DIR/faults" "$T_DIR/jsfaults")
t_done
