#!/usr/bin/env bash
# What Kubernetes does with a lost pod, in --dryrun (issue 31 item 4; docs/kubernetes.md, "A
# lost pod"): a role with a replica to spare (--spares K, or an elastic -j MIN:MAX with
# MIN < MAX) has its lost pod replaced alone while the rendezvous covers the loss. On Volcano
# each of its tasks restarts itself (PodEvicted and PodFailed -> RestartTask, the task's
# maxRetry max_retries + spares) and the job's maxRetry is one more than those losses (Volcano
# counts every RestartTask in the job's retryCount and fails the job when it reaches maxRetry);
# on a JobSet each of its Jobs replaces its pod (backoffLimit max_retries + spares), so no Job
# fails and the JobSet restarts nothing. A role with none to spare keeps TorchX's policies
# (none without retries; RestartJob with --max_retries) and backoffLimit 0. Each side of the
# bound: min == num (none to spare) and min == num - 1. Every manifest is schema-validated.
# Nothing runs.
. "$(dirname "$0")/../lib.sh"
t_need_validator
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs" MUSTER_APP_ID_SUFFIX=pinned42
cd "$T_DIR" || exit 1
M=$T_DIR/manifests
mkdir -p "$M"

# policies NAME [-cfg ...] DIST-DDP-ARGS...: renders dist.ddp into $M/NAME.yaml and prints the
# policies that decide a lost pod's fate, one line:
#   Volcano: "maxRetry=J minAvailable=[...] | TASK: maxRetry=T EVENT>ACTION,... | ..." (the
#   role's tasks, "-" for a field left out);
#   JobSet:  "maxRestarts=J | RJOB: backoffLimit=B | ..." (the roles' replicated jobs).
policies() {
  local name=$1; shift
  local cfg=queue=default
  if [ "$1" = -cfg ]; then cfg=$2; shift 2; fi
  "$MUSTER" run -s kubernetes --dryrun --json -cfg "$cfg" dist.ddp --image img "$@" \
    --script train.py >"$T_DIR/$name.json" 2>"$T_DIR/$name.err" ||
    { sed 's/^/# /' "$T_DIR/$name.err"; echo "dryrun failed"; return; }
  $PY - "$T_DIR/$name.json" "$M/$name.yaml" <<'PYEOF'
import json, sys, yaml
req = json.load(open(sys.argv[1]))["request"]
open(sys.argv[2], "w").write(req)
d = [x for x in yaml.safe_load_all(req) if x][0]
s = d["spec"]
if d["kind"] == "JobSet":
    out = ["maxRestarts=%s" % s["failurePolicy"]["maxRestarts"]]
    out += ["%s: backoffLimit=%s" % (r["name"], r["template"]["spec"]["backoffLimit"])
            for r in s["replicatedJobs"] if r["name"] != "musterd"]
else:
    tasks = [t for t in s["tasks"] if t["name"] != "musterd"]
    out = ["maxRetry=%s minAvailable=%s" % (s["maxRetry"], [t.get("minAvailable") for t in tasks])]
    for t in tasks:
        pol = ",".join("%s>%s" % (p["event"], p["action"]) for p in t.get("policies", [])) or "-"
        out.append("%s: maxRetry=%s %s" % (t["name"], t.get("maxRetry", "-"), pol))
print(" | ".join(out))
PYEOF
}
R=PodEvicted\>RestartTask,PodFailed\>RestartTask
J=PodEvicted\>RestartJob,PodFailed\>RestartJob

# Volcano: --spares 1 (3 nodes, 2 needed) against --spares 0 (2 of 2).
t_expect_eq "volcano --spares 1: each task replaces its own pod, 1 loss covered" \
  "$(policies v-spare1 -j 2x2 --spares 1)" \
  "maxRetry=2 minAvailable=[1, 1, 0] | train-0: maxRetry=1 $R | train-1: maxRetry=1 $R | train-2: maxRetry=1 $R"
t_expect_eq "volcano --spares 0: TorchX's default, no policy (maxRetry 0)" \
  "$(policies v-spare0 -j 2x2 --spares 0)" \
  "maxRetry=0 minAvailable=[1, 1] | train-0: maxRetry=- - | train-1: maxRetry=- -"
t_expect_eq "volcano --spares 2: 2 losses covered" \
  "$(policies v-spare2 -j 2x2 --spares 2)" \
  "maxRetry=3 minAvailable=[1, 1, 0, 0] | train-0: maxRetry=2 $R | train-1: maxRetry=2 $R | train-2: maxRetry=2 $R | train-3: maxRetry=2 $R"
# The elastic bound: min == num - 1 has a node to spare, min == num has none.
t_expect_eq "volcano -j 2:3x2 (min = num - 1): RestartTask" \
  "$(policies v-el23 -j 2:3x2)" \
  "maxRetry=2 minAvailable=[1, 1, 0] | train-0: maxRetry=1 $R | train-1: maxRetry=1 $R | train-2: maxRetry=1 $R"
t_expect_eq "volcano -j 3:3x2 (min = num): no policy" \
  "$(policies v-el33 -j 3:3x2)" \
  "maxRetry=0 minAvailable=[1, 1, 1] | train-0: maxRetry=- - | train-1: maxRetry=- - | train-2: maxRetry=- -"
# With a restart budget: spares add to it; without a spare it stays TorchX's RestartJob.
t_expect_eq "volcano --max_retries 2 --spares 1: 3 losses replaced alone" \
  "$(policies v-r2s1 -j 2x2 --max_retries 2 --spares 1)" \
  "maxRetry=4 minAvailable=[1, 1, 0] | train-0: maxRetry=3 $R | train-1: maxRetry=3 $R | train-2: maxRetry=3 $R"
t_expect_eq "volcano --max_retries 2 --spares 0: TorchX's RestartJob" \
  "$(policies v-r2s0 -j 2x2 --max_retries 2 --spares 0)" \
  "maxRetry=2 minAvailable=[1, 1] | train-0: maxRetry=2 $J | train-1: maxRetry=2 $J"

# JobSet: the same bounds through -cfg api=jobset.
t_expect_eq "jobset --spares 1: each Job replaces its pod once, the JobSet restarts nothing" \
  "$(policies j-spare1 -cfg api=jobset -j 2x2 --spares 1)" "maxRestarts=0 | train: backoffLimit=1"
t_expect_eq "jobset --spares 0: a lost pod fails its Job (backoffLimit 0)" \
  "$(policies j-spare0 -cfg api=jobset -j 2x2 --spares 0)" "maxRestarts=0 | train: backoffLimit=0"
t_expect_eq "jobset -j 2:3x2 (min = num - 1): backoffLimit 1" \
  "$(policies j-el23 -cfg api=jobset -j 2:3x2)" "maxRestarts=0 | train: backoffLimit=1"
t_expect_eq "jobset -j 3:3x2 (min = num): backoffLimit 0" \
  "$(policies j-el33 -cfg api=jobset -j 3:3x2)" "maxRestarts=0 | train: backoffLimit=0"
t_expect_eq "jobset --max_retries 2 --spares 1: backoffLimit 3, maxRestarts 2" \
  "$(policies j-r2s1 -cfg api=jobset -j 2x2 --max_retries 2 --spares 1)" \
  "maxRestarts=2 | train: backoffLimit=3"
t_expect_eq "jobset --max_retries 2 --spares 0: the JobSet restarts (maxRestarts 2)" \
  "$(policies j-r2s0 -cfg api=jobset -j 2x2 --max_retries 2 --spares 0)" \
  "maxRestarts=2 | train: backoffLimit=0"

# Every manifest above is valid: Volcano's CRD and admission rules, the JobSet CRD.
node "$VALIDATOR" --modules "$MODS/node_modules" "$M"/*.yaml >"$T_DIR/validate.log" 2>&1
rc=$?
sed 's/^/# /' "$T_DIR/validate.log"
t_expect_eq "validator exit status" "$rc" 0
t_expect_match "all 13 manifests valid" "$(tail -1 "$T_DIR/validate.log")" "^13 document.* 0 invalid"
t_done
