#!/usr/bin/env bash
# Every manifest `muster deploy` prints is valid: the Volcano Queue against the Volcano v1.15.1
# CRD (tests/schemas/validate-k8s.mjs, unknown fields rejected), the core kinds (Service,
# Deployment, StorageClass, PersistentVolumeClaim) and Kueue's (ResourceFlavor, ClusterQueue,
# LocalQueue: no CRD of Kueue's is in the suite) for the fields their API servers require and
# the shapes they check. The storage manifests carry the trn1 tutorial's parameters; bad input
# is refused with a message naming the option.
. "$(dirname "$0")/../lib.sh"
t_need_validator
M=$T_DIR/m
mkdir -p "$M"
gen() { # name args...
  local n=$1; shift
  "$MUSTER" deploy "$@" >"$M/$n.yaml" 2>"$T_DIR/$n.err" && t_ok "deploy $*" ||
    t_fail "deploy $*: $(cat "$T_DIR/$n.err")"
}
gen rendezvous rendezvous
gen rendezvous-custom rendezvous --namespace ml --name etcd-server --image r/m:1 --port 2400
gen rendezvous-sized rendezvous --image r/m:1 --data-size 20Gi --storage-class gp3
gen rendezvous-nodata rendezvous --image r/m:1 --no-data
gen queue queue
gen queue-capped queue --name trn1 --weight 3 --reclaimable --cpu 256 --memory 2Ti
gen kueue kueue
gen kueue-trn1 kueue --name trn1 --namespace ml --cluster-queue neuron --cpu 512 --memory 8Ti \
  --neuron 64 --efa 32
gen storage storage --subnet-id subnet-0abc --security-group sg-0def
gen storage-custom storage --subnet-id subnet-1 --security-group sg-1 --name data --class lustre \
  --size 2400Gi --namespace ml --throughput 100

# Volcano kinds through the CRD validator.
node "$VALIDATOR" --modules "$MODS/node_modules" "$M"/queue*.yaml >"$T_DIR/v.log" 2>&1
rc=$?
sed 's/^/# /' "$T_DIR/v.log"
t_expect_eq "Volcano Queue valid against the CRD" "$rc" 0

# Core kinds: what the API server requires.
out=$($PY - "$M"/*.yaml <<'PYEOF'
import re, sys, yaml
QTY = re.compile(r'^[0-9]+(\.[0-9]+)?([KMGTPE]i?|m|)$')
NAME = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
bad, kinds = [], []
def need(c, what):
    if not c: bad.append(what)
for f in sys.argv[1:]:
    for d in yaml.safe_load_all(open(f)):
        if not d: continue
        k = d.get("kind"); kinds.append(k); w = "%s %s" % (f.rsplit("/", 1)[1], k)
        need(isinstance(d.get("apiVersion"), str), w + ": apiVersion")
        md = d.get("metadata", {})
        need(NAME.match(md.get("name", "")) and len(md["name"]) <= 63, w + ": metadata.name")
        if k == "Service":
            ports = d["spec"].get("ports", [])
            need(ports and all(1 <= p["port"] <= 65535 and p.get("protocol") in ("TCP", "UDP") for p in ports), w + ": spec.ports")
        elif k == "Deployment":
            s = d["spec"]
            need(d["apiVersion"] == "apps/v1", w + ": apps/v1")
            sel = s["selector"]["matchLabels"]
            need(sel.items() <= s["template"]["metadata"]["labels"].items(), w + ": selector matches the template")
            cs = s["template"]["spec"]["containers"]
            need(cs and all(c.get("name") and c.get("image") for c in cs), w + ": containers name+image")
        elif k == "StorageClass":
            need(d["apiVersion"] == "storage.k8s.io/v1" and d.get("provisioner") == "fsx.csi.aws.com", w + ": provisioner")
            p = d.get("parameters", {})
            need(all(isinstance(v, str) for v in p.values()), w + ": parameters are strings")
            for key in ("subnetId", "securityGroupIds", "deploymentType", "perUnitStorageThroughput"):
                need(key in p, w + ": parameters." + key)
            need(d.get("mountOptions") == ["flock"], w + ": mountOptions flock")
        elif k == "PersistentVolumeClaim":
            s = d["spec"]
            modes = s.get("accessModes") or []
            need(modes and set(modes) <= {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}, w + ": accessModes")
            need(QTY.match(str(s["resources"]["requests"]["storage"])), w + ": requests.storage quantity")
            need("storageClassName" not in s or isinstance(s["storageClassName"], str), w + ": storageClassName")
            # the FSx claim is shared by every node (RWX); musterd's data claim by one pod (RWO)
            need(modes == (["ReadWriteOnce"] if f.rsplit("/", 1)[1].startswith("rendezvous") else ["ReadWriteMany"]), w + ": its access mode")
        elif k == "Queue":
            pass
        elif k in ("ResourceFlavor", "ClusterQueue", "LocalQueue"):  # Kueue v1beta1's required fields
            need(d["apiVersion"] == "kueue.x-k8s.io/v1beta1", w + ": kueue.x-k8s.io/v1beta1")
            if k == "ClusterQueue":
                for rg in d["spec"]["resourceGroups"]:
                    for fl in rg["flavors"]:
                        names = [r["name"] for r in fl["resources"]]
                        need(names == rg["coveredResources"], w + ": each covered resource has a quota")
                        need(all(QTY.match(str(r["nominalQuota"])) for r in fl["resources"]), w + ": quotas are quantities")
            if k == "LocalQueue":
                need(isinstance(d["spec"].get("clusterQueue"), str) and md.get("namespace"), w + ": clusterQueue, namespace")
        else:
            bad.append(w + ": unexpected kind")
print(" ".join(sorted(set(kinds))), "|", "; ".join(bad) or "ok")
PYEOF
)
t_expect_eq "core kinds have their required fields" "$out" \
  "ClusterQueue Deployment LocalQueue PersistentVolumeClaim Queue ResourceFlavor Service StorageClass | ok"
got=$($PY -c 'import sys, yaml
rf, cq, lq = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
fl = cq["spec"]["resourceGroups"][0]["flavors"][0]
print(rf["metadata"]["name"], fl["name"], cq["metadata"]["name"], lq["spec"]["clusterQueue"], lq["metadata"]["namespace"],
      lq["metadata"]["name"], {r["name"]: r["nominalQuota"] for r in fl["resources"]})' "$M/kueue-trn1.yaml")
t_expect_eq "kueue: the LocalQueue on its ClusterQueue, the flavor's quotas" "$got" \
  "default-flavor default-flavor neuron neuron ml trn1 {'cpu': '512', 'memory': '8Ti', 'aws.amazon.com/neuron': '64', 'vpc.amazonaws.com/efa': '32'}"
t_expect_match "kueue: how to run on it" "$(head -1 "$M/kueue-trn1.yaml")" \
  "-cfg api=jobset,kueue_queue=trn1,namespace=ml"

# The tutorial's parameters (storageclass.yaml, claim.yaml).
got=$($PY -c 'import sys, yaml
sc, pvc = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
p = sc["parameters"]
print(sc["metadata"]["name"], p["subnetId"], p["securityGroupIds"], p["deploymentType"], p["perUnitStorageThroughput"],
      p["fileSystemTypeVersion"], p["weeklyMaintenanceStartTime"], pvc["metadata"]["name"], pvc["spec"]["storageClassName"],
      pvc["spec"]["resources"]["requests"]["storage"])' "$M/storage.yaml")
t_expect_eq "storage: the tutorial's values" "$got" \
  "fsx-sc subnet-0abc sg-0def PERSISTENT_1 200 2.12 7:09:00 fsx-claim fsx-sc 1200Gi"
got=$($PY -c 'import sys, yaml
q = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d][0]
print(q["metadata"]["name"], q["spec"]["weight"], q["spec"]["reclaimable"], q["spec"]["capability"])' "$M/queue-capped.yaml")
t_expect_eq "queue: options applied" "$got" "trn1 3 True {'cpu': '256', 'memory': '2Ti'}"

# The storage hint names each component's own way to mount the claim (issue 34), and each one
# works: aws.trn1_ddp takes --claim, dist.ddp and dist.spmd --mounts; the dryrun's pods mount the
# claim at /data.
hint=$(grep '^#' "$M/storage-custom.yaml")
t_expect_match "storage hint: aws.trn1_ddp's --claim" "$hint" '^#   aws\.trn1_ddp: --claim data$'
t_expect_match "storage hint: --mounts for dist.ddp and dist.spmd" "$hint" \
  '^#   dist\.ddp, dist\.spmd and the others: --mounts type=volume,src=data,dst=/data$'
t_expect_match "storage hint: the default claim is aws.trn1_ddp's default" "$(grep '^#' "$M/storage.yaml")" \
  '^#   aws\.trn1_ddp: --claim fsx-claim \(its default: nothing to add\)$'
claim_mounts() { # a dryrun on stdin: "claim:path" of each volume its pods mount from a claim
  sed '1,/^=== SCHEDULER REQUEST ===$/d' | $PY -c 'import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    for t in ((d or {}).get("spec") or {}).get("tasks") or []:
        ps = t["template"]["spec"]
        vols = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in ps.get("volumes") or [] if "persistentVolumeClaim" in v}
        for c in ps["containers"]:
            for m in c.get("volumeMounts") or []:
                if m["name"] in vols:
                    print(vols[m["name"]] + ":" + m["mountPath"])'
}
K8S="-cfg queue=q,muster_image=muster:0.1.0,namespace=ml"
trn=$(sed -n 's/^#   aws\.trn1_ddp: //p' "$M/storage-custom.yaml")
ddp=$(sed -n 's/^#   dist\.ddp, dist\.spmd and the others: //p' "$M/storage-custom.yaml")
# shellcheck disable=SC2086 # the hint's words, as a user pastes them
got=$("$MUSTER" run -s kubernetes --dryrun $K8S aws.trn1_ddp --nnodes 1 --image i --script t.py $trn 2>"$T_DIR/d.err" | claim_mounts)
t_expect_eq "aws.trn1_ddp $trn: the claim at /data ($(tail -2 "$T_DIR/d.err"))" "$got" "data:/data"
for c in dist.ddp dist.spmd; do
  # shellcheck disable=SC2086
  got=$("$MUSTER" run -s kubernetes --dryrun $K8S $c --image i --script t.py $ddp 2>"$T_DIR/d.err" | claim_mounts)
  t_expect_eq "$c $ddp: the claim at /data ($(tail -2 "$T_DIR/d.err"))" "$got" "data:/data"
done
out=$("$MUSTER" run -s kubernetes --dryrun $K8S aws.trn1_ddp --nnodes 1 --image i --script t.py $ddp 2>&1)
t_expect_eq "aws.trn1_ddp does not take --mounts (hence the hint's --claim)" "$?" 2

# Bad input.
out=$("$MUSTER" deploy storage --security-group sg-1 2>&1); t_expect_eq "storage without subnet: exit 2" "$?" 2
t_expect_match "... names --subnet-id" "$out" "--subnet-id is required"
out=$("$MUSTER" deploy storage --subnet-id s --security-group g --throughput 7 2>&1)
t_expect_match "bad throughput named" "$out" "--throughput 7: PERSISTENT_1 offers 50, 100 or 200"
out=$("$MUSTER" deploy queue --name Q_1 2>&1); t_expect_eq "bad queue name: exit 2" "$?" 2
t_expect_match "... named" "$out" "--name 'Q_1' is not a Kubernetes name"
out=$("$MUSTER" deploy queue --weight 0 2>&1); t_expect_match "bad weight named" "$out" "--weight 0"
out=$("$MUSTER" deploy kueue --neuron lots 2>&1); t_expect_eq "bad kueue quota: exit 2" "$?" 2
t_expect_match "... named" "$out" "--neuron 'lots' is not a Kubernetes quantity"
out=$("$MUSTER" deploy agent 2>&1); t_expect_eq "agent without DIR: exit 2" "$?" 2
t_expect_match "... says what to give" "$out" "muster deploy agent DIR"

# The Queue validator can fail: an unknown field in the Queue is rejected.
$PY -c 'import sys, yaml
q = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d][0]; q["spec"]["wieght"] = 1
yaml.safe_dump(q, open(sys.argv[2], "w"))' "$M/queue.yaml" "$T_DIR/badq.yaml"
out=$(node "$VALIDATOR" --modules "$MODS/node_modules" "$T_DIR/badq.yaml" 2>&1)
t_expect_eq "a broken Queue is rejected" "$?" 1
t_expect_match "... naming the field" "$out" "wieght"
t_done
