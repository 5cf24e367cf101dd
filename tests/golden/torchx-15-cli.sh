#!/usr/bin/env bash
# TorchX golden 15 (-cfg strings, --mounts, component name/args, handles, status formats),
# reproduced through the muster CLI. The string-level cases (cfg_from_str, to_dict,
# parse_mounts, handle regex) are also unit tests: tests/unit/test_config.c, test_job.c.
#
# Deliberate divergences:
#  D1 An unknown -cfg key is an error (exit 2) naming the key and the closest runopt; TorchX
#     drops it with a warning, which is how typos went unnoticed (TorchX #512, PR #1013).
#  D2 A component that takes no script arguments rejects `-- ...` (TorchX splits the same way
#     and then fails inside argparse).
#  D3 status text: the hostname line is printed for finished replicas only; exit codes are
#     shown for FAILED replicas from the process's real exit status. status --json adds
#     "app_handle" and "exit_code".
#  D4 A bool -cfg value must be true/false/yes/no/1/0/on/off (TorchX: anything not "true" is
#     false).
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs"
cd "$T_DIR"
# cfg_from_str through -cfg (list runopt device_env is str; use log_dir/devices).
"$MUSTER" run --dryrun -cfg UNKWN=b utils.echo >/dev/null 2>"$T_DIR/err"
t_expect_eq "unknown -cfg key: exit 2 (D1)" "$?" 2
t_expect_match "... names it" "$(cat "$T_DIR/err")" "unknown -cfg key 'UNKWN'"
"$MUSTER" run --dryrun -cfg fail_fast=maybe utils.echo >/dev/null 2>"$T_DIR/err"
t_expect_eq "bool -cfg must be a bool (D4)" "$?" 2
for bad in FOO "FOO," "FOO;" "FOO=" "FOO=;BAR=v1"; do
  "$MUSTER" run --dryrun -cfg "$bad" utils.echo >/dev/null 2>&1
  t_expect_eq "to_dict error '$bad': exit 2" "$?" 2
done
# to_dict through a map argument (--env).
js=$("$MUSTER" run --dryrun --json dist.ddp --script t.py --env 'foo=bar1,bar2,bar3,my_key=my_value,new_foo=new_bar1,new_bar2')
env() { printf '%s' "$js" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['app']['roles'][0]['env'][sys.argv[1]])" "$1"; }
t_expect_eq "to_dict foo" "$(env foo)" "bar1,bar2,bar3"
t_expect_eq "to_dict my_key" "$(env my_key)" "my_value"
t_expect_eq "to_dict new_foo" "$(env new_foo)" "new_bar1,new_bar2"
js=$("$MUSTER" run --dryrun --json dist.ddp --script t.py --env 'FOO="value with = and , and ;"')
t_expect_eq "to_dict quoted" "$(env FOO)" "value with = and , and ;"
# parse_mounts through --mounts.
js=$("$MUSTER" run --dryrun --json dist.ddp --script t.py --mounts \
  'type=bind,src=foo,dst=dst,type=bind,source=foo1,readonly,target=dst1,type=volume,destination=dst2,source=foo2,readonly,type=device,src=duck,type=device,src=foo,dst=bar,perm=rw,type=bind,src=~/foo,dst=dst')
m=$(printf '%s' "$js" | "$PY" -c "
import json,sys
for m in json.load(sys.stdin)['app']['roles'][0]['mounts']:
    print(m['type'], m.get('src_path', m.get('src')), m['dst_path'], m.get('read_only', m.get('permissions')))" | tr '\n' '|')
t_expect_eq "parse_mounts" "$m" "bind foo dst False|bind foo1 dst1 True|volume foo2 dst2 True|device duck duck rwm|device foo bar rw|bind $HOME/foo dst False|"
for bad in src=foo type=bind,blah=foo type=bind type=device,src=x,perm=rwx type=nfs,src=a,dst=b; do
  "$MUSTER" run --dryrun dist.ddp --script t.py --mounts "$bad" >/dev/null 2>&1
  t_expect_eq "parse_mounts error '$bad': exit 2" "$?" 2
done
# component name and args.
t_expect_match "[utils.echo]" "$("$MUSTER" run --dryrun utils.echo)" 'echo/0: echo '\''hello world'\'''
t_expect_match "[--, utils.echo]" "$("$MUSTER" run --dryrun -- utils.echo)" 'echo/0: echo '\''hello world'\'''
t_expect_match "[utils.echo, --msg, hello]" "$("$MUSTER" run --dryrun utils.echo --msg hello)" 'echo/0: echo hello$'
"$MUSTER" run --dryrun utils.echo --msg hello -- -- >/dev/null 2>"$T_DIR/err"
t_expect_eq "[utils.echo, --msg, hello, --, --]: no script args (D2)" "$?" 2
"$MUSTER" run --dryrun --msg hello >/dev/null 2>"$T_DIR/err"
t_expect_eq "[--msg, hello] without a default component: exit 2" "$?" 2
printf '[cli:run]\ncomponent = utils.echo\n' >"$T_DIR/c.cfg"
t_expect_match "[--msg, hello] with [cli:run] component" "$(MUSTERCONFIG="$T_DIR/c.cfg" "$MUSTER" run --dryrun --msg hello)" 'echo hello$'
"$MUSTER" run --dryrun utils.echo --msg hello --msg repeate >/dev/null 2>"$T_DIR/err"
t_expect_eq "repeated argument: exit 2" "$?" 2
# handles: the status of a job addressed as SCHED://SESSION/ID, any session.
h=$("$MUSTER" run utils.echo 2>/dev/null)
id=${h##*/}
t_expect_match "handle with another session" "$("$MUSTER" status "local://other/$id")" 'State: SUCCEEDED'
t_expect_match "handle with an empty session" "$("$MUSTER" status "local:///$id")" 'State: SUCCEEDED'
# status text and --json: replica 0 FAILED, replica 1 RUNNING (D3).
marker=$((RANDOM + 40000))
t_spawn run "$MUSTER" run -cfg fail_fast=false,grace_period=1 utils.sh --num_replicas 2 -- "[ \$MUSTER_REPLICA_ID = 0 ] && exit 1; exec sleep $marker"
for _ in $(seq 100); do
  h=$(head -n1 "$T_DIR/run.log" 2>/dev/null)
  [ -n "$h" ] && "$MUSTER" status "$h" 2>/dev/null | grep -q 'sh\[0\]:FAILED' && break
  sleep 0.05
done
st=$("$MUSTER" status "$h")
t_expect_match "text: State RUNNING" "$st" 'State: RUNNING'
t_expect_match "text: *role[0]:FAILED (exitcode: 1)" "$st" ' \*sh\[0\]:FAILED \(exitcode: 1\)'
t_expect_match "text: role[1]:RUNNING" "$st" '  sh\[1\]:RUNNING'
t_expect_match "text: trailer" "$st" 'Structured Error Msg: <NONE>'
js=$("$MUSTER" status --json "$h")
t_expect_eq "json: state name on top, numbers below" \
  "$(printf '%s' "$js" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print(d['state'], d['num_restarts'], [r['state'] for r in d['roles'][0]['replicas']], d['url'], d['structured_error_msg'])")" \
  "RUNNING 0 [5, 3] None <NONE>"
"$MUSTER" cancel "$h"
t_expect_eq "no sleeper left" "$(pgrep -f "^sleep $marker" | wc -l)" 0
t_done
