#!/usr/bin/env bash
# A Kubernetes job that cannot make progress says so and why, on both APIs (Volcano Job and
# JobSet): `muster status` reads the job, its pods and (when a waiting pod's status says nothing)
# the namespace's Warning events. The recording kubectl stand-in (tests/fixtures/bin/kubectl)
# replays, for each state of tests/fixtures/kubectl/pods/ (written from the Kubernetes API's
# shapes, each file says where from), the job's pods in that state; the state's file also says
# what muster must answer: the job's state, the first line of its status (the reason) and, for a
# failed job, its root cause; `muster list` says what `status` says, for every state. Then `run
# --wait` printing each new reason, `list` reading the pods and events once for any number of
# jobs, `list` of JobSets, and the job's rendezvous token: a Secret created after the job, owned by it, deleted with it, and
# in no manifest and no argument. Under MU_SANITIZED=1 JobSet replays four pod states, not all.
. "$(dirname "$0")/../lib.sh"
t_fake_kubectl
F=$MU_SOURCE_DIR/tests/fixtures/kubectl
run_job() { # api name -> prints the handle
  MUSTER_APP_ID=$2 "$MUSTER" run -s kubernetes \
    -cfg "api=$1,rdzv=job,muster_image=registry.example/muster:0.1.0${3:+,$3}" \
    utils.echo --image alpine --num_replicas 2 2>"$T_DIR/run-$2.err"
}

for api in volcano jobset; do
  [ $api = volcano ] && opt=queue=q || opt=""
  h=$(run_job $api "echo-$api" "$opt")
  want_h="kubernetes://muster/default:echo-$api"
  [ $api = jobset ] && want_h="kubernetes://muster/default:jobset:echo-$api"
  t_expect_eq "$api: run prints the handle" "$h" "$want_h"
  for f in "$F"/pods/*.json; do
    state=$(basename "$f" .json)
    # the ASan build: every state on Volcano, four on JobSet (the pods' reading is one code for
    # both APIs; the normal build checks every pair)
    if [ "$MU_SANITIZED" = 1 ] && [ $api = jobset ]; then
      case $state in Healthy | ExitCode | Unschedulable | OOMKilled) ;; *) continue ;; esac
    fi
    mapfile -t want < <("$PY" -c 'import json,sys
e = json.load(open(sys.argv[1]))["expect"]
print(e["state"]); print(e.get("reason", "")); print(e.get("root_cause", ""))' "$f")
    want_state=${want[0]} re_reason=${want[1]} re_root=${want[2]}
    out=$(KUBECTL_PODS=$state "$MUSTER" status "$h" 2>&1)
    js=$(KUBECTL_PODS=$state "$MUSTER" status --json "$h" 2>&1)
    got=$("$PY" -c 'import json,sys
d = json.loads(sys.argv[1]); print(d["state"]); print(d.get("reason", "")); print(d.get("root_cause", ""))' "$js")
    got_state=$(sed -n 1p <<<"$got") got_reason=$(sed -n 2p <<<"$got") got_root=$(sed -n 3p <<<"$got")
    t_expect_eq "$api $state: state" "$got_state" "$want_state"
    lj=$(KUBECTL_PODS=$state "$MUSTER" list -s kubernetes -cfg "api=$api" --json 2>&1)
    t_expect_eq "$api $state: list says what status says" "$("$PY" -c 'import json,sys
print("".join(e["state"] + " " + e.get("reason", "") for e in json.loads(sys.argv[1])
              if e["app_handle"] == sys.argv[2]))' "$lj" "$h")" "$got_state $got_reason"
    first=$(head -1 <<<"$out")
    if [ -n "$re_reason" ]; then
      t_expect_match "$api $state: reason" "$got_reason" "$re_reason"
      t_expect_eq "$api $state: the first line says so and why" "$first" \
        "AppStatus: cannot make progress: $got_reason"
    elif [ "$want_state" = FAILED ]; then
      t_expect_eq "$api $state: no reason for a failed job" "$got_reason" ""
    else
      t_expect_eq "$api $state: nothing holds it up" "$first" "AppStatus:"
    fi
    if [ -n "$re_root" ]; then
      t_expect_match "$api $state: root cause" "$got_root" "$re_root"
      t_expect_eq "$api $state: the first line names the root cause" "$first" \
        "AppStatus: failed: $got_root"
      t_expect_eq "$api $state: Root Cause line" "$(grep -F "Root Cause: $got_root" <<<"$out")" \
        "    Root Cause: $got_root"
    fi
  done
  # Per replica: the message of each replica's pod.
  out=$(KUBECTL_PODS=InvalidImageName "$MUSTER" status "$h" 2>&1)
  t_expect_match "$api: the replica whose pod is stuck has its message" "$out" \
    "echo\[0\]:PENDING
        error_msg: InvalidImageName: Failed to apply default image tag"
  # The events are read only when a waiting pod's own status does not say why.
  : >calls
  KUBECTL_PODS=ImagePullBackOff "$MUSTER" status "$h" >/dev/null 2>&1
  t_expect_eq "$api: no events read when the pods say why" "$(grep -c ' get events ' calls)" 0
  : >calls
  KUBECTL_PODS=FailedMount "$MUSTER" status "$h" >/dev/null 2>&1
  t_expect_eq "$api: events read when they alone say why" \
    "$(grep -c -- '-n default get events --field-selector involvedObject.kind=Pod,type=Warning -o json$' calls)" 1
done

# JobSet status without pods in a state: its conditions (Suspended: Kueue has not admitted it).
h=kubernetes://muster/default:jobset:echo-jobset
for pair in Running:RUNNING Pending:PENDING Suspended:PENDING Completed:SUCCEEDED Failed:FAILED \
            NoStatus:UNKNOWN Restarting:RUNNING; do
  out=$(KUBECTL_PHASE=${pair%%:*} "$MUSTER" status "$h" 2>&1)
  t_expect_match "jobset ${pair%%:*} -> ${pair#*:}" "$out" "State: ${pair#*:}"
done
out=$(KUBECTL_PHASE=Restarting "$MUSTER" status "$h" 2>&1)
t_expect_match "jobset restarts counted" "$out" "Num Restarts: 1"
out=$(KUBECTL_PHASE=Running "$MUSTER" status "$h" 2>&1)
t_expect_match "jobset replicas from the pods, not the musterd" "$out" "echo\[1\]:RUNNING"
t_expect_match "jobset hostnames" "$(KUBECTL_PHASE=Completed "$MUSTER" status "$h" 2>&1)" \
  "hostname: echo-jobset-echo-1-0"
t_expect_match "jobset status asks for the JobSet" "$(grep ' get jobsets' calls | tail -1)" \
  "^-n default get jobsets.jobset.x-k8s.io echo-jobset -o json$"

# run --wait says why, each time the reason changes, then the outcome.
for api in volcano jobset; do
  [ $api = volcano ] && opt=queue=q || opt=""
  printf '%s\n' "Pending ImagePullBackOff" "Pending ImagePullBackOff" "Pending Unschedulable" \
    "Running Healthy" "Completed" >"$T_DIR/seq-$api"
  KUBECTL_SEQUENCE=$T_DIR/seq-$api MUSTER_APP_ID=wait-$api timeout 120 "$MUSTER" run \
    -s kubernetes --wait -cfg "api=$api,rdzv=job,muster_image=m:1${opt:+,$opt}" utils.echo \
    --image alpine --num_replicas 2 >/dev/null 2>"$T_DIR/wait-$api.err"
  t_expect_eq "$api: run --wait exits 0 once the job completes" "$?" 0
  t_expect_eq "$api: run --wait printed each reason once, as it changed" \
    "$(grep -o 'cannot make progress: echo/0: [A-Za-z]*' "$T_DIR/wait-$api.err")" \
    "cannot make progress: echo/0: ImagePullBackOff
cannot make progress: echo/0: Unschedulable"
done

# list: a job held up says why after its state, from one read of every muster pod of the
# namespace, and of its Warning events only when a waiting pod's status says nothing: one of
# each, however many jobs are listed.
for k in 1 2 3; do
  MUSTER_APP_ID=many-$k "$MUSTER" run -s kubernetes -cfg queue=q,rdzv=job,muster_image=m:1 \
    utils.echo --image alpine --num_replicas 2 >/dev/null 2>&1
done
: >calls
out=$(KUBECTL_PODS=FailedMount "$MUSTER" list -s kubernetes -cfg queue=q 2>&1)
t_expect_eq "list of many held-up jobs: one get pods, one get events" \
  "$(grep -c ' get pods ' calls) $(grep -c ' get events ' calls)" "1 1"
t_expect_eq "list: each of them says why from its events" \
  "$(grep -c 'many-[123] .*PENDING *cannot make progress: echo/0: FailedMount: MountVolume.SetUp failed for volume "mount-0" : secret "dataset-creds" not found' <<<"$out")" 3
: >calls
KUBECTL_PODS=ImagePullBackOff "$MUSTER" list -s kubernetes -cfg queue=q >/dev/null 2>&1
t_expect_eq "list: no events read when the pods say why" "$(grep -c ' get events ' calls)" 0
out=$(KUBECTL_PODS=ImagePullBackOff "$MUSTER" list -s kubernetes -cfg api=jobset 2>&1)
t_expect_match "list: the held-up job says why" "$out" \
  "kubernetes://muster/default:jobset:echo-jobset +echo +PENDING +cannot make progress: echo/0: ImagePullBackOff: Back-off pulling image"
t_expect_match "list read every muster pod once" "$(tail -1 calls)" \
  "^-n default get pods -l app.kubernetes.io/managed-by=muster -o json$"
js=$(KUBECTL_PODS=ImagePullBackOff "$MUSTER" list -s kubernetes -cfg api=jobset --json 2>&1)
t_expect_match "list --json: reason" "$js" '"app_handle":"kubernetes://muster/default:jobset:echo-jobset","app_name":"echo","state":"PENDING","reason":"echo/0: ImagePullBackOff'
out=$(KUBECTL_PODS=ImagePullBackOff "$MUSTER" list -s kubernetes -cfg queue=q 2>&1)
t_expect_match "list (Volcano): the held-up job says why" "$out" \
  "kubernetes://muster/default:echo-volcano +echo +PENDING +cannot make progress: echo/0: ImagePullBackOff"

# list: JobSets with -cfg api=jobset, app ids that say so.
out=$("$MUSTER" list -s kubernetes -cfg api=jobset 2>&1)
t_expect_match "list asks for JobSets" "$(grep -v ' get pods ' calls | tail -1)" \
  "^-n default get jobsets.jobset.x-k8s.io -l app.kubernetes.io/managed-by=muster -o json$"
t_expect_match "list: jobset completed" "$out" \
  "kubernetes://muster/default:jobset:echo-abc123 +echo +SUCCEEDED"
t_expect_match "list: jobset running" "$out" "kubernetes://muster/default:jobset:train-def456 +train +RUNNING"
t_expect_match "list: jobset failed" "$out" "kubernetes://muster/default:jobset:bert-ghi789 +bert +FAILED"

# The job's rendezvous token: created after the job as a Secret the job owns (the stand-in
# refuses an owner that does not exist by that uid), never in a manifest or an argument.
: >calls
rm -f calls.secrets
for api in volcano jobset; do
  [ $api = volcano ] && opt=,queue=q || opt=""
  MUSTER_APP_ID=ddp-$api "$MUSTER" run -s kubernetes -cfg "api=$api,muster_image=m:1$opt" \
    dist.ddp --image img -j 2x1 --script train.py >/dev/null 2>"$T_DIR/ddp-$api.err" ||
    cat "$T_DIR/ddp-$api.err"
  cp calls.stdin "$T_DIR/manifest-$api.yaml"
done
res=(jobs.batch.volcano.sh jobsets.jobset.x-k8s.io)
t_expect_eq "the job first (its uid back as JSON), then its token Secret and its NetworkPolicy" \
  "$(cat calls)" "-n default create -f - -o json
-n default create -f -
-n default create -f -
-n default create -f - -o json
-n default create -f -
-n default create -f -"
out=$("$PY" - calls.secrets "$T_DIR"/manifest-*.yaml calls <<'PY'
import json, sys, yaml
secrets = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
texts = [open(f).read() for f in sys.argv[2:]]
for s in secrets:
    tok = s["stringData"]["token"]
    own = s["metadata"]["ownerReferences"][0]
    assert len(tok) == 64 and all(c in "0123456789abcdef" for c in tok), "a 256-bit hex token"
    assert all(tok not in t for t in texts), "the token is in a manifest or an argument"
    print(s["metadata"]["name"], own["kind"], own["name"], own["uid"].startswith("uid-"))
assert secrets[0]["stringData"]["token"] != secrets[1]["stringData"]["token"], "one token per job"
PY
)
t_expect_eq "one Secret per job, owned by it; the token in no manifest, no argv, none shared" "$out" \
  "ddp-volcano-rdzv-token Job ddp-volcano True
ddp-jobset-rdzv-token JobSet ddp-jobset True"
for api in volcano jobset; do
  got=$("$PY" - "$T_DIR/manifest-$api.yaml" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
pods = [t["template"] for t in d["spec"]["tasks"]] if d["kind"] == "Job" else \
    [r["template"]["spec"]["template"] for r in d["spec"]["replicatedJobs"]]
out = []
for p in pods:
    c = p["spec"]["containers"][0]
    vol = [v["secret"]["secretName"] for v in p["spec"].get("volumes", []) if "secret" in v]
    mnt = [m["mountPath"] for m in c.get("volumeMounts", []) if m["name"] == "rdzv-token"]
    env = [e["value"] for e in c.get("env", []) if e["name"] == "MUSTER_RDZV_TOKEN_FILE"]
    tf = c["command"][c["command"].index("--token-file") + 1] if "--token-file" in c["command"] else ""
    out.append("%s %s %s %s" % (vol, mnt, env, tf))
print("\n".join(sorted(set(out))))
PY
)
  t_expect_eq "$api: musterd takes --token-file, each agent MUSTER_RDZV_TOKEN_FILE, from the Secret" \
    "$got" "['ddp-$api-rdzv-token'] ['/var/run/muster/rdzv'] ['/var/run/muster/rdzv/token'] 
['ddp-$api-rdzv-token'] ['/var/run/muster/rdzv'] [] /var/run/muster/rdzv/token"
done
t_expect_eq "a Secret for each job" "$(ls kubectl-jobs/default/.secrets | grep -c '^ddp-')" 2
"$MUSTER" cancel kubernetes://muster/default:jobset:ddp-jobset >/dev/null 2>&1
t_expect_eq "cancel deletes the JobSet" "$(tail -1 calls)" \
  "-n default delete jobsets.jobset.x-k8s.io ddp-jobset"
t_expect_eq "and its Secret goes with it (owner reference)" \
  "$(ls kubectl-jobs/default/.secrets | grep '^ddp-')" "ddp-volcano-rdzv-token"
# A dryrun makes no Secret and prints no token.
out=$("$MUSTER" run -s kubernetes --dryrun -cfg queue=q,muster_image=m:1 dist.ddp --image img \
  -j 2x1 --script t.py 2>&1)
t_expect_match "dryrun: the manifest names the Secret" "$out" "secretName: .*-rdzv-token"
t_expect_eq "dryrun: no token anywhere" "$(grep -c 'stringData\|token:' <<<"$out")" 0
# The Secret cannot be created: the job is deleted again, and the error says both.
: >calls
out=$(MUSTER_APP_ID=ddp-clash "$MUSTER" run -s kubernetes -cfg queue=q,muster_image=m:1 dist.ddp \
  --image img -j 2x1 --script t.py 2>&1 </dev/null; echo "exit $?")
t_ok "a first ddp-clash ran"
echo '{}' >kubectl-jobs/default/.secrets/ddp-clash2-rdzv-token
out=$(MUSTER_APP_ID=ddp-clash2 "$MUSTER" run -s kubernetes -cfg queue=q,muster_image=m:1 dist.ddp \
  --image img -j 2x1 --script t.py 2>&1; echo "exit $?")
t_expect_match "Secret clash: kubectl's message and the job deleted" "$out" \
  "AlreadyExists.*
.*the job's rendezvous token could not be stored, so ddp-clash2 was deleted"
t_expect_match "Secret clash: exit 1" "$out" "exit 1$"
t_expect_eq "Secret clash: the job is gone" "$(tail -1 calls)" \
  "-n default delete jobs.batch.volcano.sh ddp-clash2"
# describe: the app as submitted, read back from the job's object, on both APIs: the dryrun's
# app with the job's name in place of ${app_id}.
for api in volcano jobset; do
  [ $api = volcano ] && opt=,queue=q || opt=""
  MUSTER_APP_ID=desc-$api "$MUSTER" run -s kubernetes --dryrun --json -cfg "api=$api,muster_image=m:1$opt" \
    dist.ddp --image img -j 2x1 --script train.py -- --lr 0.1 >"$T_DIR/desc-$api.json" 2>/dev/null
  h=$(MUSTER_APP_ID=desc-$api "$MUSTER" run -s kubernetes -cfg "api=$api,muster_image=m:1$opt" \
    dist.ddp --image img -j 2x1 --script train.py -- --lr 0.1 2>/dev/null)
  "$MUSTER" describe "$h" >"$T_DIR/described-$api.json" 2>"$T_DIR/described-$api.err"
  t_expect_eq "$api: describe exits 0" "$?" 0
  got=$("$PY" - "$T_DIR/desc-$api.json" "$T_DIR/described-$api.json" "desc-$api" <<'PY'
import json, sys
want = json.loads(json.dumps(json.load(open(sys.argv[1]))["app"]).replace("${app_id}", sys.argv[3]))
got = json.load(open(sys.argv[2]))
for r in want["roles"]:  # the endpoint the job got
    r["args"] = [a.replace("${rdzv_endpoint}", "*") for a in r["args"]]
for r in got["roles"]:
    r["args"] = [a if "musterd" not in a else "*" for a in r["args"]]
print("same" if got == want else "differs:\n%s\n%s" % (json.dumps(got), json.dumps(want)))
PY
)
  t_expect_eq "$api: describe is the app as submitted (roles, replicas, image, resources, mounts)" "$got" same
done
t_kubectl_job default someone-elses
out=$("$MUSTER" describe kubernetes://muster/default:someone-elses 2>&1)
t_expect_eq "describe a job muster did not submit: exit 1" "$?" 1
t_expect_match "describe a job muster did not submit: why" "$out" "carries no muster.dev/app annotation"

# A token Secret of the user's: mounted, none created.
: >calls
MUSTER_APP_ID=ddp-own "$MUSTER" run -s kubernetes \
  -cfg queue=q,muster_image=m:1,rdzv=musterd.infra:2379,rdzv_token_secret=team-token dist.ddp \
  --image img -j 2x1 --script t.py >/dev/null 2>&1
t_expect_eq "rdzv_token_secret: one create, the job's" "$(cat calls)" "-n default create -f -"
t_expect_match "rdzv_token_secret: the agents mount it" "$(cat calls.stdin)" "secretName: team-token"
t_done
