#!/usr/bin/env bash
# -cfg rdzv_tls=SECRET on Kubernetes, both APIs: the job's musterd serves HTTPS with a TLS Secret
# the user made (tls.crt, tls.key, ca.crt; rdzv_tls_client=SECRET: the agents' client
# certificate, and musterd requires one), and the agents reach it at
# https://<job>-musterd.<namespace>.svc, a headless Service muster creates after the job, owned
# by it, so that one certificate for *.<namespace>.svc serves every job of the namespace.
#  1. bad values are refused before kubectl runs, naming the runopt and the fix;
#  2. the kubectl path (the recording stand-in, tests/fixtures/bin/kubectl): the job, its token
#     Secret, then the Service, each owned by the job and deleted with it; the Service selects
#     the musterd pod; no certificate, key or token in any manifest or argument; a Service that
#     cannot be created deletes the job again;
#  3. the certificate's names: *.<namespace>.svc covers the Service's name for any job, and not
#     the pods' own names (openssl x509 -checkhost);
#  4. the manifest's own musterd and agent commands, run as the pods would run them (the
#     Secrets' files at their mount paths, the Service's name resolving to loopback in a private
#     mount namespace: needs root and unshare), complete a 2-node job over TLS with client
#     certificates and the token. What no test here can show: a cluster's DNS, the kubelet's
#     Secret volumes and probes (the manifests are validated against the CRDs in t2010).
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_need_py yaml python3-yaml
t_need_cmd openssl openssl
t_fake_kubectl
rm -f calls

# 1. Bad values: exit 2, the runopt named, kubectl never called.
bad() { # name want-regex cfg [component args...]
  local name=$1 want=$2 cfg=$3
  shift 3
  out=$("$MUSTER" run -s kubernetes -cfg "queue=q,muster_image=m:1,$cfg" "${@:-dist.ddp}" \
    $([ $# -eq 0 ] && echo --image img -j 2x1 --script t.py) 2>&1)
  t_expect_eq "$name: exit 2" "$?" 2
  t_expect_match "$name: says why" "$out" "$want"
}
bad "no Secret named" "-cfg rdzv_tls: the Secret's name is missing; name a Secret .*tls.crt, tls.key and ca.crt" "rdzv_tls=''"
bad "a directory, as on local" "rdzv_tls='/etc/muster/tls' is not a Kubernetes Secret name.*not a directory as on local and Slurm" "rdzv_tls=/etc/muster/tls"
bad "torchrun cannot check the certificate" "roles\[0\] \(t\) reaches the job's musterd without .muster agent.*--launcher muster" \
  "rdzv_tls=rdzv-tls" dist.ddp --image img -j 2x1 --script t.py --launcher torchrun
bad "a client certificate without a server's" "-cfg rdzv_tls_client: .*name that one's Secret with -cfg rdzv_tls too" "rdzv_tls_client=agent-tls"
bad "an existing musterd" "-cfg rdzv_tls: .*uses rdzv=musterd.infra:2379 instead" "rdzv_tls=rdzv-tls,rdzv=musterd.infra:2379"
t_expect_eq "no kubectl call for a refused job" "$(cat calls 2>/dev/null)" ""

# 2. Submitted through the stand-in, on both APIs (client certificates on the JobSet).
for api in volcano jobset; do
  [ $api = volcano ] && opt=queue=q, || opt=rdzv_tls_client=agent-tls,
  : >calls
  rm -f calls.services
  h=$(MUSTER_APP_ID=tls-$api "$MUSTER" run -s kubernetes \
    -cfg "${opt}api=$api,namespace=ml,muster_image=m:1,rdzv_tls=rdzv-tls" dist.ddp --image img \
    -j 2x1 --script t.py 2>"$T_DIR/run-$api.err")
  t_expect_eq "$api: submitted" "$?" 0
  t_expect_eq "$api: the job, its token Secret, its musterd's Service, then its NetworkPolicy" \
    "$(cat calls)" "-n ml create -f - -o json
-n ml create -f -
-n ml create -f -
-n ml create -f -"
  cp calls.stdin "$T_DIR/manifest-$api.yaml"
  got=$("$PY" - "$T_DIR/manifest-$api.yaml" calls.services <<'PY'
import json, sys, yaml
m = yaml.safe_load(open(sys.argv[1]))
svc = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
assert len(svc) == 1, svc
s = svc[0]
pods = [t["template"] for t in m["spec"]["tasks"]] if m["kind"] == "Job" else \
    [r["template"]["spec"]["template"] for r in m["spec"]["replicatedJobs"]]
picked = [p["spec"]["containers"][0]["name"] for p in pods
          if all(p["metadata"]["labels"].get(k) == v for k, v in s["spec"]["selector"].items())]
own = s["metadata"]["ownerReferences"][0]
print(s["metadata"]["name"], s["spec"]["clusterIP"], s["spec"]["ports"][0]["port"],
      "selects", picked, "owned by", own["kind"], own["name"])
PY
)
  kind=Job
  [ $api = jobset ] && kind=JobSet
  t_expect_eq "$api: the Service names the musterd pod alone, owned by the job" "$got" \
    "tls-$api-musterd None 29400 selects ['musterd'] owned by $kind tls-$api"
  t_expect_match "$api: the agents reach it by the Service's name" "$(cat calls.stdin)" \
    '"--rdzv-endpoint","https://tls-'$api'-musterd.ml.svc:29400"'
  t_expect_eq "$api: no key, certificate or token in the manifest, the Service or an argument" \
    "$(cat calls.stdin calls.services calls | grep -c -i 'BEGIN\|PRIVATE\|stringData')" 0
  t_expect_eq "$api: the Service exists" "$(ls kubectl-jobs/ml/.services)" "tls-$api-musterd"
  "$MUSTER" cancel "$h" >/dev/null 2>&1
  t_expect_eq "$api: cancel deletes the job, its Secret and its Service go with it" \
    "$(find kubectl-jobs/ml/.services kubectl-jobs/ml/.secrets -type f | wc -l)" 0
done

# A Service that cannot be created: the job is deleted again, and the error says both.
echo '{}' >kubectl-jobs/ml/.services/tls-clash-musterd
: >calls
out=$(MUSTER_APP_ID=tls-clash "$MUSTER" run -s kubernetes \
  -cfg queue=q,namespace=ml,muster_image=m:1,rdzv_tls=rdzv-tls dist.ddp --image img -j 2x1 \
  --script t.py 2>&1)
t_expect_eq "Service clash: exit 1" "$?" 1
t_expect_match "Service clash: kubectl's words, and the job deleted" "$out" \
  "AlreadyExists.*
.*the job's musterd's Service could not be created, so tls-clash was deleted"
t_expect_eq "Service clash: the job is gone" "$(tail -1 calls)" \
  "-n ml delete jobs.batch.volcano.sh tls-clash"

# 3. The names one certificate must cover (a wildcard covers one label, and OpenSSL wants two
# more after it: *.<job> covers nothing).
P=$T_DIR/pki
mkdir -p "$P"
(
  set -e
  cd "$P"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=tls test CA" -keyout ca.key -out ca.crt \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
  mk() { # name ext-file-text
    printf '%s\n' "$2" >"$1.ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
      -keyout "$1.key" -out "$1.csr"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile "$1.ext" -out "$1.crt"
  }
  mk server "subjectAltName=DNS:*.ml.svc,DNS:*.ml.svc.cluster.local
extendedKeyUsage=serverAuth"
  mk client "extendedKeyUsage=clientAuth"
) >"$T_DIR/openssl.log" 2>&1 || { tail -5 "$T_DIR/openssl.log"; t_fail "openssl"; t_done; }
covers() { openssl x509 -in "$P/server.crt" -noout -checkhost "$1" | grep -c "does match"; }
t_expect_eq "*.ml.svc covers the Service of any job of namespace ml" \
  "$(covers tls-volcano-musterd.ml.svc)$(covers train-k3x9ab12cd34-musterd.ml.svc)" 11
t_expect_eq "and neither a pod's own name, nor another namespace's" \
  "$(covers tls-volcano-musterd-0.tls-volcano)$(covers tls-volcano-musterd.team.svc)" 00

# 4. The manifest's own commands, as the pods run them, over TLS with client certificates.
if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
  t_skip_part "running the manifest's commands needs root and unshare -m (a private /etc/hosts)"
  t_done
fi
PORT=$(t_free_port)
MUSTER_APP_ID=e2e "$MUSTER" run -s kubernetes --dryrun --json \
  -cfg "queue=q,namespace=ml,muster_image=m:1,rdzv_port=$PORT,rdzv_tls=rdzv-tls,rdzv_tls_client=agent-tls" \
  dist.ddp --image img -j 2x1 --script t.py >"$T_DIR/e2e.json" 2>"$T_DIR/e2e.err" ||
  { cat "$T_DIR/e2e.err"; t_fail "e2e dryrun"; t_done; }
# One line per pod: its env (the literal values), then its command; muster and the listen
# address made local (the agent's absolute path is the init container's copy; musterd listens
# on loopback only, as every test here).
"$PY" - "$T_DIR/e2e.json" "$MUSTER" "$MUSTERD" >"$T_DIR/pods.sh" <<'PY'
import json, shlex, sys, yaml
m = yaml.safe_load(json.load(open(sys.argv[1]))["request"])
for t in m["spec"]["tasks"]:
    c = t["template"]["spec"]["containers"][0]
    env = ["%s=%s" % (e["name"], e["value"]) for e in c.get("env", []) if "value" in e]
    cmd = [sys.argv[2] if a == "/muster/bin/muster" else sys.argv[3] if a == "musterd" else
           a.replace("0.0.0.0:", "127.0.0.1:") for a in c["command"]]
    print("%s=(env %s %s)" % (t["name"].replace("-", "_"), " ".join(map(shlex.quote, env)),
                              " ".join(map(shlex.quote, cmd))))
PY
cat >"$T_DIR/t.py" <<'PY'
import os
print("worker rank %s of %s, rendezvous %s" % (os.environ["RANK"], os.environ["WORLD_SIZE"],
                                                os.environ["MUSTER_RDZV_ENDPOINT"]))
PY
cat >"$T_DIR/pods-run.sh" <<EOF
# Inside a private mount namespace: the Secrets' files where the pods mount them, the
# Service's name on loopback. Runs the musterd pod, then the two agent pods; stops musterd.
set -u
. "$T_DIR/pods.sh"
mount -t tmpfs muster-run /run || exit 3
mkdir -p /run/muster/rdzv /run/muster/rdzv-tls /run/muster/rdzv-tls-client
openssl rand -hex 32 >/run/muster/rdzv/token
cp "$P/server.crt" /run/muster/rdzv-tls/tls.crt
cp "$P/server.key" /run/muster/rdzv-tls/tls.key
cp "$P/ca.crt" /run/muster/rdzv-tls/ca.crt
cp "$P/client.crt" /run/muster/rdzv-tls-client/tls.crt
cp "$P/client.key" /run/muster/rdzv-tls-client/tls.key
{ cat /etc/hosts; echo "127.0.0.1 e2e-musterd.ml.svc"; } >"$T_DIR/hosts"
mount --bind "$T_DIR/hosts" /etc/hosts || exit 3
cd "$T_DIR"
"\${musterd[@]}" >"$T_DIR/musterd.log" 2>&1 &
mpid=\$!
timeout 120 "\${t_0[@]}" >"$T_DIR/agent0.log" 2>&1 &
a0=\$!
timeout 120 "\${t_1[@]}" >"$T_DIR/agent1.log" 2>&1
rc1=\$?
wait \$a0
rc0=\$?
curl -s -o /dev/null -w '%{http_code}' --cacert "$P/ca.crt" --cert "$P/client.crt" \
  --key "$P/client.key" "https://e2e-musterd.ml.svc:$PORT/v1/runs" >"$T_DIR/stranger.code"
kill \$mpid
wait \$mpid
echo "agents \$rc0 \$rc1, musterd \$?"
EOF
out=$(unshare -m --propagation private bash "$T_DIR/pods-run.sh" 2>&1)
t_expect_eq "both agents completed the job over https with client certificates; musterd stopped" \
  "$out" "agents 0 0, musterd 0"
t_expect_eq "no sanitizer report" "$(cat "$T_DIR"/agent*.log "$T_DIR/musterd.log" | grep -c 'Sanitizer')" 0
t_expect_eq "the workers ran, told the Service's https endpoint" \
  "$(cat "$T_DIR"/agent*.log | grep -o 'worker rank .*' | sort)" \
  "worker rank 0 of 2, rendezvous https://e2e-musterd.ml.svc:$PORT
worker rank 1 of 2, rendezvous https://e2e-musterd.ml.svc:$PORT"
t_expect_eq "a client with the certificate but not the token: 401" "$(cat "$T_DIR/stranger.code")" 401
[ "$out" = "agents 0 0, musterd 0" ] || tail -5 "$T_DIR"/agent*.log "$T_DIR/musterd.log"
t_done
