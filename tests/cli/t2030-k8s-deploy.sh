#!/usr/bin/env bash
# muster deploy rendezvous: a Service + data claim + Deployment for one cluster-wide musterd (the
# trn1 tutorial's etcd.yaml replaced), equal to the committed deploy/musterd.yaml by default, with
# --namespace/--name/--image/--port applied and bad input refused; its state on the claim; the
# default image named with a warning (or taken from .musterconfig); `deploy -h` documents every
# target.
. "$(dirname "$0")/../lib.sh"
export HOME=$T_DIR MUSTERCONFIG=
cd "$T_DIR" || exit 1
"$MUSTER" deploy rendezvous >"$T_DIR/default.yaml" 2>"$T_DIR/err"
t_expect_eq "exit 0" "$?" 0
same=$($PY -c 'import sys, yaml
a = list(yaml.safe_load_all(open(sys.argv[1]))); b = list(yaml.safe_load_all(open(sys.argv[2])))
print(a == b)' "$T_DIR/default.yaml" "$MU_SOURCE_DIR/deploy/musterd.yaml")
t_expect_eq "equals deploy/musterd.yaml" "$same" True

"$MUSTER" deploy rendezvous --namespace ml --name etcd-server --image reg.example/muster:1 \
  --port 2400 >"$T_DIR/custom.yaml"
got=$($PY - "$T_DIR/custom.yaml" <<'PYEOF'
import sys, yaml
svc, pvc, dep = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
c = dep["spec"]["template"]["spec"]["containers"][0]
print(svc["kind"], svc["metadata"]["name"], svc["metadata"]["namespace"], svc["spec"]["ports"][0]["port"],
      svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items(),
      dep["kind"], dep["spec"]["replicas"], dep["spec"]["strategy"]["type"], c["image"],
      " ".join(c["command"]), c["readinessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["port"])
PYEOF
)
t_expect_eq "custom objects" "$got" \
  "Service etcd-server ml 2400 True Deployment 1 Recreate reg.example/muster:1 musterd --listen 0.0.0.0:2400 --data-dir /var/lib/musterd /healthz 2400"

# The state on a claim: the PVC, its mount at the data dir, writable by musterd's group.
data() { # yaml
  $PY - "$1" <<'PYEOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = [d["kind"] for d in docs]
dep = docs[-1]; pod = dep["spec"]["template"]["spec"]; c = pod["containers"][0]
pvc = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
vols = {v["name"]: v for v in pod.get("volumes", [])}
mnt = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
claim = vols.get(mnt.get("/var/lib/musterd"), {}).get("persistentVolumeClaim", {}).get("claimName")
print(kinds, claim, pvc[0]["spec"]["resources"]["requests"]["storage"] if pvc else None,
      pvc[0]["spec"].get("storageClassName") if pvc else None,
      pod["securityContext"].get("fsGroup"), "--data-dir" in c["command"])
PYEOF
}
t_expect_eq "default: the data claim mounted at --data-dir" "$(data "$T_DIR/default.yaml")" \
  "['Service', 'PersistentVolumeClaim', 'Deployment'] musterd-data 1Gi None 65532 True"
"$MUSTER" deploy rendezvous --image i --data-size 5Gi --storage-class gp3 >"$T_DIR/sized.yaml"
t_expect_eq "--data-size, --storage-class" "$(data "$T_DIR/sized.yaml")" \
  "['Service', 'PersistentVolumeClaim', 'Deployment'] musterd-data 5Gi gp3 65532 True"
"$MUSTER" deploy rendezvous --image i --no-data >"$T_DIR/nodata.yaml"
t_expect_eq "--no-data: memory only" "$(data "$T_DIR/nodata.yaml")" \
  "['Service', 'Deployment'] None None None None False"

# The image: the default is named with a warning (no registry has it); the config's is used.
t_expect_match "default image: a warning that says what to do" "$(cat "$T_DIR/err")" \
  "warning: --image not given: the manifest names 'muster:[0-9.]+', an image you build .*--image REGISTRY/muster:TAG"
"$MUSTER" deploy rendezvous --image reg/m:2 >/dev/null 2>"$T_DIR/err2"
t_expect_eq "--image given: no warning" "$(cat "$T_DIR/err2")" ""
printf '[kubernetes]\nmuster_image = reg.example/muster:9\n' >"$T_DIR/.musterconfig"
img=$("$MUSTER" deploy rendezvous 2>"$T_DIR/err3" | $PY -c 'import sys, yaml
print([d for d in yaml.safe_load_all(sys.stdin) if d][-1]["spec"]["template"]["spec"]["containers"][0]["image"])')
t_expect_eq "[kubernetes] muster_image is the default image" "$img" reg.example/muster:9
t_expect_eq "... without a warning" "$(cat "$T_DIR/err3")" ""
rm "$T_DIR/.musterconfig"

out=$("$MUSTER" deploy 2>&1); t_expect_eq "no target: usage" "$?" 2
t_expect_match "no target: message" "$out" "write 'muster deploy rendezvous'"
out=$("$MUSTER" deploy etcd 2>&1)
t_expect_match "unknown target" "$out" "unknown deploy target 'etcd'"
out=$("$MUSTER" deploy rendezvous --name Bad_Name 2>&1)
t_expect_match "bad name" "$out" "--name 'Bad_Name' is not a Kubernetes name"
out=$("$MUSTER" deploy rendezvous --port 70000 2>&1)
t_expect_match "bad port" "$out" "--port 70000 is not a port number"
help=$("$MUSTER" deploy -h); t_expect_eq "-h: exit 0" "$?" 0
for t in "rendezvous" "queue" "storage" "agent DIR"; do
  t_expect_match "-h names the target '$t'" "$help" "^    $t "
  t_expect_match "-h carries the usage of '$t'" "$help" "^usage: muster deploy $t"
done
t_expect_match "-h: a target's options too" "$help" "--security-group SG"
man=$MU_BUILD_DIR/man/muster.1
for t in rendezvous queue storage agent; do
  grep -q "muster deploy $t" "$man" && t_ok "the man page documents 'deploy $t'" ||
    t_fail "the man page ($man) lacks 'deploy $t'"
done

# The container recipe is FROM scratch with a shell-free health check (built and run by
# tests/integration/image_pipeline.sh).
t_expect_eq "Containerfile is FROM scratch" "$(awk '$1 == "FROM" {print $2}' "$MU_SOURCE_DIR/deploy/Containerfile")" scratch
t_expect_match "health check by musterd --probe" "$(grep ^HEALTHCHECK "$MU_SOURCE_DIR/deploy/Containerfile")" \
  'CMD \["/muster/bin/musterd", "--probe"'
t_done
