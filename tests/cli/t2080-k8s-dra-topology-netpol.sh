#!/usr/bin/env bash
# Trainium on a current EKS cluster, both APIs (issue 36 items 3-4, issue 33 item 5):
#  - -cfg neuron_devices=dra: one ResourceClaimTemplate per role for Neuron (neuron.aws.com,
#    All of a whole node or ExactCount, the CEL selector on the instance type, the LNC of trn2)
#    and one for EFA (efa.networking.k8s.aws); every trainer pod refers to both and has no
#    Neuron/EFA limits;
#  - -cfg topology=LABEL[:required|preferred]: Kueue's podset topology annotation on every
#    replicated job of a JobSet, networkTopology on a Volcano Job;
#  - the job's musterd gets a NetworkPolicy admitting only the job's own pods to its ports;
#  - everything emitted is valid against the Kubernetes API's schemas (tests/schemas/
#    kubernetes-api/, the Volcano and JobSet CRDs), and the validator rejects broken ones;
#  - with the recording kubectl, the objects are created after the job, owned by it, and go
#    with it; bad -cfg values fail with the choices and the closest one.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_need_validator
validate() { node "$VALIDATOR" --modules "$MODS/node_modules" "$@"; }
M=$T_DIR/manifests
mkdir -p "$M"
export MUSTERCONFIG=$T_DIR/musterconfig
printf '[kubernetes]\nmuster_image = registry.example/muster:0.1.0\n' >"$MUSTERCONFIG"
L3=topology.k8s.aws/network-node-layer-3

# dry NAME -cfg... component...: the job to $M/NAME.yaml, what comes with it to $M/NAME-objects.yaml.
dry() {
  local name=$1; shift
  "$MUSTER" run -s kubernetes --dryrun --json "$@" >"$T_DIR/$name.json" 2>"$T_DIR/$name.err" &&
    $PY - "$T_DIR/$name.json" "$M/$name.yaml" "$M/$name-objects.yaml" <<'PY' && t_ok "dryrun $name" ||
import json, sys
d = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(d["request"])
open(sys.argv[3], "w").write(d.get("objects", ""))
PY
    { cat "$T_DIR/$name.err"; t_fail "dryrun $name"; }
}

# What the job and its objects say, per API: trainer pods, claims, limits, topology, policy.
cat >"$T_DIR/check.py" <<'PY'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
objs = [o for o in yaml.safe_load_all(open(sys.argv[2])) if o]
if job["kind"] == "Job":
    pods = [(t["name"], t["template"]) for t in job["spec"]["tasks"]]
else:
    pods = [(r["name"], r["template"]["spec"]["template"]) for r in job["spec"]["replicatedJobs"]]
trainers = [(n, p) for n, p in pods if n != "musterd"]
rcts = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ResourceClaimTemplate"}
out = []
for name, pod in trainers:
    spec, ctr = pod["spec"], pod["spec"]["containers"][0]
    refs = sorted(c["resourceClaimTemplateName"] for c in spec.get("resourceClaims", []))
    lim = ctr.get("resources", {}).get("limits", {})
    out.append("pod %s: claims=%s refs_exist=%s ctr_claims=%s limits=%s" % (
        "trainer", [c["name"] for c in spec.get("resourceClaims", [])],
        all(r in rcts for r in refs) and len(refs) == len(rcts),
        [c["name"] for c in ctr.get("resources", {}).get("claims", [])],
        sorted(k for k in lim if k not in ("cpu", "memory"))))
for n, o in sorted(rcts.items()):
    ex = o["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    cfg = o["spec"]["spec"]["devices"].get("config", [])
    out.append("rct %s: %s %s count=%s cel=%s lnc=%s owned_labels=%s" % (
        n.rsplit("-", 1)[1], ex["deviceClassName"], ex["allocationMode"], ex.get("count"),
        [s["cel"]["expression"] for s in ex.get("selectors", [])],
        [c["opaque"]["parameters"]["logicalNeuronCore"] for c in cfg],
        o["metadata"]["labels"]["app.kubernetes.io/instance"] == job["metadata"]["name"]))
if job["kind"] == "Job":
    out.append("topology: %s" % job["spec"].get("networkTopology"))
else:
    out.append("topology: %s" % sorted({"%s=%s" % (k, v) for _, p in pods
               for k, v in p["metadata"].get("annotations", {}).items() if "topology" in k}))
    out.append("annotated: %d of %d" % (sum(1 for _, p in pods if any(
        "topology" in k for k in p["metadata"].get("annotations", {}))), len(pods)))
for o in objs:
    if o["kind"] != "NetworkPolicy":
        continue
    sel = o["spec"]["podSelector"]["matchLabels"]
    frm = o["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    musterd = [p for n, p in pods if n == "musterd"][0]
    matches = lambda labels, want: all(labels.get(k) == v for k, v in want.items())
    out.append("netpol: selects the musterd=%s ports=%s admits every pod of the job=%s only the job=%s" % (
        matches(musterd["metadata"]["labels"], sel),
        [p["port"] for p in o["spec"]["ingress"][0]["ports"]],
        all(matches(p["metadata"]["labels"], frm) for _, p in pods),
        frm.get("app.kubernetes.io/instance") == job["metadata"]["name"]))
print("\n".join(out))
PY
check() { $PY "$T_DIR/check.py" "$M/$1.yaml" "$M/$1-objects.yaml" 2>&1; }

# 1. DRA and topology on both APIs (aws.trn1_ddp: trn1.32xlarge, a whole node's 16 and 8).
for api in volcano jobset; do
  [ $api = volcano ] && q=queue=default, || q=""
  dry $api-dra -cfg "${q}api=$api,neuron_devices=dra,topology=$L3" \
    aws.trn1_ddp --nnodes 2 --image i --script t.py
  got=$(check $api-dra)
  want="pod trainer: claims=['neuron', 'efa'] refs_exist=True ctr_claims=['neuron', 'efa'] limits=[]
rct efa: efa.networking.k8s.aws All count=None cel=[] lnc=[] owned_labels=True
rct neuron: neuron.aws.com All count=None cel=[\"device.attributes['neuron.aws.com'].instanceType == 'trn1.32xlarge'\"] lnc=[] owned_labels=True"
  [ $api = jobset ] && n=1 || n=2
  t_expect_eq "$api dra: every trainer pod refers to both claim templates, no device limits" \
    "$(printf '%s\n' "$got" | grep -c "^pod trainer: claims=\['neuron', 'efa'\] refs_exist=True ctr_claims=\['neuron', 'efa'\] limits=\[\]$")" "$n"
  t_expect_eq "$api dra: the Neuron and EFA claim templates" "$(printf '%s\n' "$got" | grep '^rct')" \
    "$(printf '%s\n' "$want" | grep '^rct')"
  if [ $api = volcano ]; then
    t_expect_eq "volcano topology: networkTopology, layer-3 is tier 1, soft by default" \
      "$(printf '%s\n' "$got" | grep '^topology')" "topology: {'highestTierAllowed': 1, 'mode': 'soft'}"
  else
    t_expect_eq "jobset topology: Kueue's preferred annotation with the label" \
      "$(printf '%s\n' "$got" | grep '^topology')" "topology: ['kueue.x-k8s.io/podset-preferred-topology=$L3']"
    t_expect_eq "jobset topology: on every replicated job's pod template" \
      "$(printf '%s\n' "$got" | grep '^annotated')" "annotated: 2 of 2"
  fi
  t_expect_eq "$api: the musterd's NetworkPolicy" "$(printf '%s\n' "$got" | grep '^netpol')" \
    "netpol: selects the musterd=True ports=[29400] admits every pod of the job=True only the job=True"
  # :required, another layer, a tier name.
  dry $api-req -cfg "${q}api=$api,topology=topology.k8s.aws/network-node-layer-1:required" \
    aws.trn1_ddp --nnodes 2 --image i --script t.py
  got=$(check $api-req | grep '^topology')
  [ $api = volcano ] && want="topology: {'highestTierAllowed': 3, 'mode': 'hard'}" ||
    want="topology: ['kueue.x-k8s.io/podset-required-topology=topology.k8s.aws/network-node-layer-1']"
  t_expect_eq "$api topology :required, layer-1" "$got" "$want"
  # The default path: device plugin limits, no claim templates.
  dry $api-plugin -cfg "${q}api=$api" aws.trn1_ddp --nnodes 2 --image i --script t.py
  got=$(check $api-plugin)
  t_expect_match "$api plugin (default): limits, no claims" "$got" \
    "pod trainer: claims=\[\] refs_exist=True ctr_claims=\[\] limits=\['aws.amazon.com/neuron', 'vpc.amazonaws.com/efa'\]"
  t_expect_eq "$api plugin: no claim template" "$(printf '%s\n' "$got" | grep -c '^rct')" 0
done
dry volcano-tier -cfg "queue=q,topology=example.com/rack,topology_tier=rack" \
  dist.ddp --image img -j 2x1 --script t.py
t_expect_eq "volcano: another label with -cfg topology_tier=NAME" \
  "$(check volcano-tier | grep '^topology')" "topology: {'highestTierName': 'rack', 'mode': 'soft'}"
dry volcano-tier2 -cfg "queue=q,topology=example.com/rack:required,topology_tier=2" \
  dist.ddp --image img -j 2x1 --script t.py
t_expect_eq "volcano: -cfg topology_tier=N" \
  "$(check volcano-tier2 | grep '^topology')" "topology: {'highestTierAllowed': 2, 'mode': 'hard'}"

# 2. trn2 with LNC=1: the LNC as the driver's claim config; the CEL on trn2.48xlarge.
dry trn2-lnc -cfg queue=q,neuron_devices=dra dist.ddp --image img -j 2x1 --script t.py \
  -h aws_trn2.48xlarge --env NEURON_LOGICAL_NC_CONFIG=1
t_expect_match "trn2: the Neuron claim carries logicalNeuronCore 1" "$(check trn2-lnc | grep '^rct neuron')" \
  "neuron.aws.com All count=None cel=\[\"device.attributes\['neuron.aws.com'\].instanceType == 'trn2.48xlarge'\"\] lnc=\[1\]"

# 3. torchrun's TCPStore port is in the policy too; no own musterd, no policy.
dry c10d -cfg queue=q dist.ddp --image img -j 2x2 --launcher torchrun --script train.py
t_expect_eq "torchrun c10d: both musterd ports admitted only to the job" "$(check c10d | grep '^netpol')" \
  "netpol: selects the musterd=True ports=[29400, 29401] admits every pod of the job=True only the job=True"
dry jobset-c10d -cfg api=jobset dist.ddp --image img -j 2x2 --launcher torchrun --script train.py
t_expect_eq "torchrun c10d on a JobSet: the same" "$(check jobset-c10d | grep '^netpol')" \
  "netpol: selects the musterd=True ports=[29400, 29401] admits every pod of the job=True only the job=True"
"$MUSTER" run -s kubernetes --dryrun --json -cfg queue=q,rdzv=musterd.infra:2379 dist.ddp \
  --image img -j 2x1 --script t.py >"$T_DIR/ext.json" 2>&1
t_expect_eq "an external rendezvous: nothing created with the job" \
  "$($PY -c 'import json,sys; print("objects" in json.load(open(sys.argv[1])))' "$T_DIR/ext.json")" False

# 4. Everything is schema-valid.
validate "$M"/*.yaml >"$T_DIR/validate.log" 2>&1
rc=$?
sed 's/^/# /' "$T_DIR/validate.log"
t_expect_eq "validator exit status" "$rc" 0
t_expect_match "claim templates checked" "$(cat "$T_DIR/validate.log")" "ResourceClaimTemplate/.*-role1-neuron: valid"
t_expect_match "network policies checked" "$(cat "$T_DIR/validate.log")" "NetworkPolicy/.*-musterd: valid"
t_expect_match "all documents valid" "$(tail -1 "$T_DIR/validate.log")" " 0 invalid"

# 5. The validator can fail on each new kind: one fault at a time, each with its message.
mkdir -p "$T_DIR/bad"
cat >"$T_DIR/faults" <<'CASES'
rct-unknown-field|neuron|o["spec"]["spec"]["bogus"] = 1|spec.spec.bogus: unknown field
rct-exactly-field|neuron|ex["allCount"] = 2|exactly.allCount: unknown field
rct-mode|neuron|ex["allocationMode"] = "Some"|allocationMode: "Some" is not All or ExactCount
rct-count-with-all|neuron|ex["count"] = 4|exactly.count: must not be set with allocationMode All
rct-no-class|neuron|del ex["deviceClassName"]|deviceClassName: required
rct-request-name|neuron|req["name"] = "Neuron_0"|requests\[0\].name: "Neuron_0" is not a DNS-1123 label
rct-cel-type|neuron|ex["selectors"] = [{"cel": {"expression": 5}}]|expression: must be string
np-unknown-field|netpol|o["spec"]["ingres"] = []|spec.ingres: unknown field
np-no-selector|netpol|del o["spec"]["podSelector"]|spec.podSelector: required
np-protocol|netpol|o["spec"]["ingress"][0]["ports"][0]["protocol"] = "HTTP"|protocol: "HTTP" is not TCP, UDP or SCTP
np-port|netpol|o["spec"]["ingress"][0]["ports"][0]["port"] = 70000|port: must be 1-65535
pod-claim-missing|job|pod["spec"]["resourceClaims"].pop()|resources.claims\[1\].name: no claim "efa" in the pod's resourceClaims
CASES
"$PY" - "$M/volcano-dra.yaml" "$M/volcano-dra-objects.yaml" "$T_DIR/bad" "$T_DIR/faults" <<'PY' ||
import sys, yaml
job_f, objs_f, out, faults = sys.argv[1:5]
for line in open(faults):
    name, which, change, _ = line.rstrip("\n").split("|", 3)
    objs = [o for o in yaml.safe_load_all(open(objs_f)) if o]
    job = yaml.safe_load(open(job_f))
    pod = job["spec"]["tasks"][1]["template"]
    if which == "job":
        o = job
    else:
        o = [x for x in objs if x["metadata"]["name"].endswith("-" + which if which == "neuron" else "-musterd")][0]
    if o["kind"] == "ResourceClaimTemplate":
        req = o["spec"]["spec"]["devices"]["requests"][0]
        ex = req["exactly"]
    exec(change)
    yaml.safe_dump(o, open("%s/%s.yaml" % (out, name), "w"))
PY
  t_fail "could not write the broken objects"
validate -q "$T_DIR"/bad/*.yaml >"$T_DIR/bad.log" 2>&1
t_expect_eq "broken objects: the validator fails" "$?" 1
while IFS='|' read -r name _ _ want; do
  out=$(sed -n "\|^$T_DIR/bad/$name.yaml#1 .*: INVALID\$|,/^[^ ]/p" "$T_DIR/bad.log" | sed '$d')
  t_expect_match "broken ($name): rejected, saying why" "$out" "$want"
done <"$T_DIR/faults"

# 6. Bad values: the choices, the closest, exit 2.
bad() { # name want -cfg...
  local name=$1 want=$2; shift 2
  out=$("$MUSTER" run -s kubernetes --dryrun -cfg "$@" dist.ddp --image img -j 2x1 --script t.py 2>&1)
  t_expect_eq "bad ($name): exit 2" "$?" 2
  t_expect_match "bad ($name): says why" "$out" "$want"
}
bad neuron_devices "-cfg neuron_devices=dar: not one of plugin, dra; did you mean 'dra'\?" queue=q,neuron_devices=dar
bad neuron_devices-empty-match "-cfg neuron_devices=device: not one of plugin, dra" queue=q,neuron_devices=device
bad topology-mode "-cfg topology mode=requird: not one of preferred, required; did you mean 'required'\?" \
  "queue=q,topology=$L3:requird"
bad topology-label "'bad label!' is not a node label key; use the label of the level" "queue=q,topology=bad label!"
bad volcano-unknown-tier "Volcano places jobs by HyperNode tier.*-cfg topology_tier=N" \
  queue=q,topology=example.com/rack
bad topology-tier "-cfg topology_tier=Not_A_Tier: neither a tier number" \
  "queue=q,topology=$L3,topology_tier=Not_A_Tier"
bad topology-tier-zero "-cfg topology_tier=0: neither a tier number" "queue=q,topology=$L3,topology_tier=0"
out=$("$MUSTER" run -s kubernetes --dryrun -cfg api=jobset,topology=example.com/rack dist.ddp --image img \
  -j 2x1 --script t.py 2>&1)
t_expect_eq "jobset: any node label (Kueue's Topology names the levels)" "$?" 0

# 7. Submitted (recording kubectl): the job, its Secret, then the claim templates and the
# NetworkPolicy, each owned by the job; cancel takes them with the job.
t_fake_kubectl
h=$(MUSTER_APP_ID=dra-1 "$MUSTER" run -s kubernetes -cfg queue=q,namespace=ml,neuron_devices=dra \
  aws.trn1_ddp --nnodes 2 --image i --script t.py 2>"$T_DIR/run.err")
t_expect_eq "submitted" "$?" 0
t_expect_eq "the job, its token Secret, two claim templates, the NetworkPolicy" "$(cat calls)" \
  "-n ml create -f - -o json
-n ml create -f -
-n ml create -f -
-n ml create -f -
-n ml create -f -"
got=$($PY - calls.owned <<'PY'
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(" ".join("%s/%s:%s" % (o["kind"], o["metadata"]["name"],
      [r["kind"] + "/" + r["name"] for r in o["metadata"]["ownerReferences"]]) for o in objs))
PY
)
t_expect_eq "each owned by the job" "$got" \
  "ResourceClaimTemplate/dra-1-role1-neuron:['Job/dra-1'] ResourceClaimTemplate/dra-1-role1-efa:['Job/dra-1'] NetworkPolicy/dra-1-musterd:['Job/dra-1']"
KUBECTL_PHASE=Running "$MUSTER" cancel "$h" >/dev/null 2>&1
t_expect_eq "cancel: the claim templates and the policy go with the job" \
  "$(ls -A "$KUBECTL_STATE/ml/.owned" | wc -l)" 0
t_done
