#!/usr/bin/env bash
# The local scheduler runs utils.echo and utils.sh to completion: handle, exit 0, logs, status.
. "$(dirname "$0")/../lib.sh"
t_local_jobs
out=$("$MUSTER" run utils.echo --msg "hello muster" 2>"$T_DIR/err"); rc=$?
t_expect_eq "run exits 0" "$rc" 0
t_expect_match "prints the handle" "$out" '^local://muster/echo-[a-z0-9]{12}$'
h=$out
id=${h##*/}
t_expect_match "summary on stderr" "$(cat "$T_DIR/err")" "finished: SUCCEEDED"
t_expect_eq "a local run shows the job's output (as TorchX)" \
  "$(grep -c '^echo/0 hello muster$' "$T_DIR/err")" 1
"$MUSTER" run utils.echo --msg hi >/dev/null 2>"$T_DIR/err.hi"
t_expect_eq "muster run utils.echo --msg hi prints hi, prefixed (one replica too)" \
  "$(grep -c '^echo/0 hi$' "$T_DIR/err.hi")" 1
"$MUSTER" run --no-log utils.echo --msg hi >/dev/null 2>"$T_DIR/err.nolog"
t_expect_eq "--no-log: the output is not shown" "$(grep -c 'hi$' "$T_DIR/err.nolog")" 0
"$MUSTER" run utils.sh --num_replicas 2 -- 'echo "line of $MUSTER_REPLICA_ID"' >/dev/null 2>"$T_DIR/err.two"
t_expect_eq "several replicas: prefixed role/replica" \
  "$(grep -E '^sh/[01] line of [01]$' "$T_DIR/err.two" | sort | tr '\n' '|')" \
  "sh/0 line of 0|sh/1 line of 1|"
t_expect_eq "stdout.log" "$(cat "$T_DIR/logs/$id/echo/0/stdout.log")" "hello muster"
t_expect_eq "combined.log" "$(cat "$T_DIR/logs/$id/echo/0/combined.log")" "hello muster"
t_expect_eq "muster log: one replica, prefixed as several are" "$("$MUSTER" log "$h")" "echo/0 hello muster"
t_expect_eq "muster log ROLE/REPLICA: the role/replica prefix kept (as TorchX)" \
  "$("$MUSTER" log "$h/echo/0")" "echo/0 hello muster"
t_expect_match "status" "$("$MUSTER" status "$h")" 'State: SUCCEEDED'
t_expect_match "status --json" "$("$MUSTER" status --json "$h")" '"state":"SUCCEEDED".*"state":4'
t_expect_match "describe" "$("$MUSTER" describe "$h")" '"entrypoint":	"echo"'
t_expect_match "list" "$("$MUSTER" list)" "$h +echo +SUCCEEDED"
t_expect_match "list: the age" "$("$MUSTER" list --since 1h)" "$h +echo +SUCCEEDED +[0-9]+s$"
t_expect_match "status: start and duration" "$("$MUSTER" status "$h")" 'Started: .*\(ran [0-9.]+s\)'
# --prune: a finished job that started long ago goes, the others stay.
"$MUSTER" run utils.echo --msg old >"$T_DIR/old" 2>/dev/null
old=$(cat "$T_DIR/old")
"$PY" - "$T_DIR/logs/${old##*/}/state.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["started_at"] = 1000.0
json.dump(d, open(sys.argv[1], "w"))
PY
t_expect_eq "list --since 1h: the old job is not listed" \
  "$("$MUSTER" list --since 1h | grep -c "$old ")" 0
out=$("$MUSTER" list --prune 2>&1)
t_expect_match "list --prune: says what it removed" "$out" "removed $old"
t_expect_eq "list --prune: its files are gone" "$(ls "$T_DIR/logs" | grep -c "${old##*/}")" 0
t_expect_match "list --prune: the recent job stays" "$("$MUSTER" list)" "$h +echo +SUCCEEDED"
"$MUSTER" list --since 3x 2>"$T_DIR/err"
t_expect_eq "list --since with a bad age: usage error" "$?" 2
"$MUSTER" log "$h/nosuchrole" 2>"$T_DIR/err"
t_expect_eq "log of an unknown role exits 1" "$?" 1
"$MUSTER" status local://muster/nosuchjob-1 2>"$T_DIR/err"
t_expect_eq "status of an unknown job exits 3 (docs/exit-codes.md)" "$?" 3

# utils.sh: three replicas, each sees its own replica id; stderr goes to stderr.log.
"$MUSTER" run utils.sh --num_replicas 3 -- 'echo out $MUSTER_REPLICA_ID; echo err >&2' >"$T_DIR/h" 2>/dev/null
t_expect_eq "utils.sh exits 0" "$?" 0
h=$(cat "$T_DIR/h"); id=${h##*/}
t_expect_eq "replica 2 stdout" "$(cat "$T_DIR/logs/$id/sh/2/stdout.log")" "out 2"
t_expect_eq "replica 2 stderr" "$(cat "$T_DIR/logs/$id/sh/2/stderr.log")" "err"
t_expect_eq "all replicas prefixed" "$("$MUSTER" log --streams stdout "$h" | sort | tr '\n' '|')" \
  "sh/0 out 0|sh/1 out 1|sh/2 out 2|"
t_expect_eq "--lines 1 of one replica: prefixed" "$("$MUSTER" log --lines 1 "$h/sh/1")" "sh/1 err"
# Every selection keeps the "role/replica " prefix (TorchX's torchx log): a role, one replica,
# one replica followed, one replica through --regex (matched against the line as written).
t_expect_eq "log ROLE: prefixed" "$("$MUSTER" log --streams stdout "$h/sh" | sort | tr '\n' '|')" \
  "sh/0 out 0|sh/1 out 1|sh/2 out 2|"
t_expect_eq "log ROLE/REPLICA: prefixed" "$("$MUSTER" log --streams stdout "$h/sh/2")" "sh/2 out 2"
t_expect_eq "log -t ROLE/REPLICA: prefixed" \
  "$("$MUSTER" log -t "$h/sh/2" | sort | tr '\n' '|')" "sh/2 err|sh/2 out 2|"
t_expect_eq "log --regex '^out' ROLE/REPLICA: matched as written, printed prefixed" \
  "$("$MUSTER" log --regex '^out' "$h/sh/1")" "sh/1 out 1"
# Device slices per replica.
"$MUSTER" run -cfg devices_per_replica=2 utils.sh --num_replicas 2 -- 'echo $CUDA_VISIBLE_DEVICES' >"$T_DIR/h" 2>/dev/null
h=$(cat "$T_DIR/h")
t_expect_eq "CUDA_VISIBLE_DEVICES slices" "$("$MUSTER" log "$h" | sort | tr '\n' '|')" "sh/0 0,1|sh/1 2,3|"
# A custom log_dir still works through the handle (a link in the default dir).
"$MUSTER" run -cfg log_dir="$T_DIR/other" utils.echo --msg x >"$T_DIR/h" 2>/dev/null
h=$(cat "$T_DIR/h")
t_expect_eq "log through the link" "$("$MUSTER" log "$h")" "echo/0 x"
# utils.booth and utils.python (the other builtins) to completion.
h=$("$MUSTER" run utils.booth --x1 0 --x2 0 --trial_idx 3 2>/dev/null)
t_expect_eq "utils.booth f(0,0) = 74" "$("$MUSTER" log "$h")" "booth/0 trial 3: booth(0, 0) = 74"
h=$("$MUSTER" run utils.python --python "$PY" -c 'import sys; print("py", sys.argv[1:])' -- a b 2>/dev/null)
t_expect_eq "utils.python -c with args" "$("$MUSTER" log "$h")" "python/0 py ['a', 'b']"
t_expect_eq "list is oldest first: the newest job is last" "$("$MUSTER" list | tail -n1 | awk '{print $1}')" "$h"
t_done
