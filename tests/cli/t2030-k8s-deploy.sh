#!/usr/bin/env bash
# muster deploy rendezvous: a Service + Deployment for one cluster-wide musterd (the trn1
# tutorial's etcd.yaml replaced), equal to the committed deploy/musterd.yaml by default, with
# --namespace/--name/--image/--port applied and bad input refused.
. "$(dirname "$0")/../lib.sh"
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
svc, dep = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
c = dep["spec"]["template"]["spec"]["containers"][0]
print(svc["kind"], svc["metadata"]["name"], svc["metadata"]["namespace"], svc["spec"]["ports"][0]["port"],
      svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items(),
      dep["kind"], dep["spec"]["replicas"], dep["spec"]["strategy"]["type"], c["image"],
      " ".join(c["command"]), c["readinessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["port"])
PYEOF
)
t_expect_eq "custom objects" "$got" \
  "Service etcd-server ml 2400 True Deployment 1 Recreate reg.example/muster:1 musterd --listen 0.0.0.0:2400 /healthz 2400"

out=$("$MUSTER" deploy 2>&1); t_expect_eq "no target: usage" "$?" 2
t_expect_match "no target: message" "$out" "write 'muster deploy rendezvous'"
out=$("$MUSTER" deploy etcd 2>&1)
t_expect_match "unknown target" "$out" "unknown deploy target 'etcd'"
out=$("$MUSTER" deploy rendezvous --name Bad_Name 2>&1)
t_expect_match "bad name" "$out" "--name 'Bad_Name' is not a Kubernetes name"
out=$("$MUSTER" deploy rendezvous --port 70000 2>&1)
t_expect_match "bad port" "$out" "--port 70000 is not a port number"
"$MUSTER" deploy -h >/dev/null && t_ok "-h" || t_fail "-h"

# The container recipe is FROM scratch with a shell-free health check (built and run by
# tests/integration/image_pipeline.sh).
t_expect_eq "Containerfile is FROM scratch" "$(awk '$1 == "FROM" {print $2}' "$MU_SOURCE_DIR/deploy/Containerfile")" scratch
t_expect_match "health check by musterd --probe" "$(grep ^HEALTHCHECK "$MU_SOURCE_DIR/deploy/Containerfile")" \
  'CMD \["/muster/bin/musterd", "--probe"'
t_done
