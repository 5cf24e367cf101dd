#!/usr/bin/env bash
# The kubernetes scheduler's kubectl path (no API server can run here): a recording kubectl
# stand-in (tests/fixtures/bin/kubectl) checks every call's arguments and replays recorded
# `kubectl get -o json` output of Volcano jobs in each phase (tests/fixtures/kubectl/).
. "$(dirname "$0")/../lib.sh"
t_fake_kubectl

# run: create -f - in the namespace, the handle names it.
h=$(MUSTER_APP_ID=echo-42 "$MUSTER" run -s kubernetes -cfg queue=default,namespace=ml \
  utils.echo --image alpine --msg hi --num_replicas 2 2>"$T_DIR/run.err")
t_expect_eq "run prints the handle" "$h" "kubernetes://muster/ml:echo-42"
t_expect_eq "run called kubectl create" "$(cat calls)" "-n ml create -f -"
kind=$($PY -c 'import yaml,sys; d=yaml.safe_load(open(sys.argv[1])); print(d["kind"], d["metadata"]["name"], d["spec"]["queue"])' calls.stdin)
t_expect_eq "kubectl got the Volcano Job on stdin" "$kind" "Job echo-42 default"

# --context reaches kubectl.
: >calls
MUSTER_APP_ID=echo-43 "$MUSTER" run -s kubernetes -cfg queue=q,context=prod utils.echo \
  --image alpine >/dev/null 2>&1
t_expect_eq "context flag" "$(cat calls)" "--context prod -n default create -f -"

# status: every Volcano phase maps as TorchX case 07.
for pair in Pending:PENDING Running:RUNNING Restarting:RUNNING Completed:SUCCEEDED \
            Failed:FAILED Aborted:CANCELLED Terminated:FAILED NoStatus:UNKNOWN; do
  phase=${pair%%:*} want=${pair#*:}
  out=$(KUBECTL_PHASE=$phase "$MUSTER" status "$h" 2>&1)
  t_expect_match "phase $phase -> $want" "$out" "State: $want"
done
out=$(KUBECTL_PHASE=Running "$MUSTER" status "$h" 2>&1)
t_expect_match "replicas of the role, not the musterd task" "$out" "echo\[1\]:RUNNING"
if printf '%s' "$out" | grep -q musterd; then t_fail "musterd task hidden"; else t_ok "musterd task hidden"; fi
t_expect_eq "status asks for the job by name, then its pods" "$(tail -2 calls)" \
  "-n ml get jobs.batch.volcano.sh echo-42 -o json
-n ml get pods -l app.kubernetes.io/instance=echo-42 -o json"
out=$(KUBECTL_PHASE=Missing "$MUSTER" status "$h" 2>&1)
t_expect_match "a deleted job: kubectl's NotFound is shown" "$out" 'NotFound.*"echo-42" not found'

# list: label-selected, app ids with the namespace.
out=$("$MUSTER" list -s kubernetes 2>&1)
t_expect_match "list selects muster's jobs" "$(grep -v ' get pods ' calls | tail -1)" \
  "^-n default get jobs.batch.volcano.sh -l app.kubernetes.io/managed-by=muster -o json$"
t_expect_match "list: completed" "$out" "kubernetes://muster/default:echo-abc123 +echo +SUCCEEDED"
t_expect_match "list: running" "$out" "kubernetes://muster/default:train-def456 +train +RUNNING"
t_expect_match "list: terminated" "$out" "kubernetes://muster/default:bert-ghi789 +bert +FAILED"


# log: the pod of role/replica, -f follows.
out=$(KUBECTL_PHASE=Completed "$MUSTER" log "$h/echo/1" 2>&1)
t_expect_match "log reads the pod of echo/1" "$out" "log line 1 from echo-42-echo-1-0"
grep -q -- "-n ml logs echo-42-echo-1-0" calls && t_ok "logs call" || t_fail "logs call: $(cat calls)"

# cancel: delete the CR (after checking it is not terminal).
KUBECTL_PHASE=Running "$MUSTER" cancel "$h" >/dev/null 2>&1
t_expect_match "cancel deletes the job" "$(tail -1 calls)" \
  "^-n ml delete jobs.batch.volcano.sh echo-42$"
out=$("$MUSTER" status "$h" 2>&1)
t_expect_match "after cancel the cluster has no such job" "$out" 'NotFound.*"echo-42" not found'
out=$("$MUSTER" log "$h/echo/1" 2>&1)
t_expect_match "nor its pods" "$out" 'NotFound.*pods "echo-42-echo-1-0" not found'
out=$("$MUSTER" status kubernetes://muster/ml:never-created 2>&1)
t_expect_match "a job never created: NotFound" "$out" '"never-created" not found'

# run --wait follows the job to its end and exits with its outcome.
KUBECTL_PHASE=Completed MUSTER_APP_ID=echo-46 timeout 60 "$MUSTER" run -s kubernetes --wait \
  -cfg queue=q utils.echo --image a >/dev/null 2>&1
t_expect_eq "--wait: Completed exits 0" "$?" 0
KUBECTL_PHASE=Failed MUSTER_APP_ID=echo-47 timeout 60 "$MUSTER" run -s kubernetes --wait \
  -cfg queue=q utils.echo --image a >/dev/null 2>&1
t_expect_eq "--wait: Failed exits 1" "$?" 1

# Errors carry kubectl's own message and what to do.
out=$(KUBECTL_FAIL='error: resource mapping not found for name: "echo-44" namespace: "" from "STDIN": no matches for kind "Job" in version "batch.volcano.sh/v1alpha1"
ensure CRDs are installed first' MUSTER_APP_ID=echo-44 "$MUSTER" run -s kubernetes \
  -cfg queue=q utils.echo --image alpine 2>&1)
t_expect_eq "CRD missing: exit 1" "$?" 1
t_expect_match "CRD missing: kubectl's message" "$out" "no matches for kind"
t_expect_match "CRD missing: what to do" "$out" "install Volcano"
out=$(KUBECTL_FAIL='Unable to connect to the server: dial tcp 127.0.0.1:6443: connect: connection refused' \
  "$MUSTER" status "$h" 2>&1)
t_expect_match "no cluster: kubectl's message and a hint" "$out" "connection refused.*
hint: kubectl cannot reach a cluster"
out=$(KUBECTL_FAIL='Error from server (AlreadyExists): error when creating "STDIN": jobs.batch.volcano.sh "echo-45" already exists' \
  MUSTER_APP_ID=echo-45 "$MUSTER" run -s kubernetes -cfg queue=q utils.echo --image a 2>&1)
t_expect_match "name conflict: message and hint" "$out" "AlreadyExists.*
hint: a job of that name exists"
out=$(PATH=/usr/bin:/bin "$MUSTER" run -s kubernetes -cfg queue=q,kubectl=no-such-kubectl \
  utils.echo --image a 2>&1)
t_expect_match "kubectl missing" "$out" "kubectl not found \('no-such-kubectl'\).*-cfg kubectl="
out=$("$MUSTER" run -s kubernetes utils.echo --image a 2>&1)
t_expect_match "queue required with volcano" "$out" "-cfg queue: required"

# Every missing required value at once (issue 26), and a dryrun without muster_image prints the
# plan with the placeholder marked and a warning; a submission refuses it.
out=$("$MUSTER" run -s kubernetes --dryrun dist.ddp -j 2x1 --script t.py 2>&1)
t_expect_eq "all missing at once: exit 2" "$?" 2
t_expect_match "all missing at once: the image, the queue and the muster image" "$out" \
  "3 required values are missing:
  - roles\[0\].image: required .*--image
  - -cfg queue: required .*
  - -cfg muster_image: required: .*scripts/build-image.sh"
"$MUSTER" run -s kubernetes --dryrun -cfg queue=q dist.ddp --image img -j 2x1 --script t.py \
  >"$T_DIR/plan.out" 2>"$T_DIR/plan.err"
t_expect_eq "dryrun without muster_image: exit 0" "$?" 0
t_expect_match "dryrun without muster_image: the plan, the placeholder marked" \
  "$(cat "$T_DIR/plan.out")" "image: '<-cfg muster_image is not set>'"
t_expect_match "dryrun without muster_image: a warning saying what to do" "$(cat "$T_DIR/plan.err")" \
  "^muster: warning: the plan shows '<-cfg muster_image is not set>' where the muster image goes; submitting it needs -cfg muster_image: required"
: >calls
out=$("$MUSTER" run -s kubernetes -cfg queue=q dist.ddp --image img -j 2x1 --script t.py 2>&1)
t_expect_eq "run without muster_image: exit 1" "$?" 1
t_expect_match "run without muster_image: refused, saying how" "$out" "-cfg muster_image: required"
t_expect_eq "run without muster_image: nothing reached kubectl" "$(cat calls)" ""
t_done
