#!/usr/bin/env bash
# -cfg and .musterconfig precedence (TorchX's): -cfg > $MUSTERCONFIG (only, when set) or
# $HOME/.musterconfig > ./.musterconfig > runopt default; [cli:run] and [component:NAME].
. "$(dirname "$0")/../lib.sh"
export MUSTER_LOG_DIR="$T_DIR/logs"
mkdir -p "$T_DIR/home" "$T_DIR/cwd"
export HOME="$T_DIR/home"
unset MUSTERCONFIG
cd "$T_DIR/cwd"
logdir() { "$MUSTER" run --dryrun "$@" | awk '/^log_dir:/ {print $2}' | xargs dirname; }

t_expect_eq "runopt default" "$(logdir utils.echo)" "$T_DIR/logs"
printf '[local]\nlog_dir = %s\n' "$T_DIR/from-cwd" >"$T_DIR/cwd/.musterconfig"
t_expect_eq "./.musterconfig over the default" "$(logdir utils.echo)" "$T_DIR/from-cwd"
printf '[local]\nlog_dir = %s\n' "$T_DIR/from-home" >"$HOME/.musterconfig"
t_expect_eq "\$HOME/.musterconfig over ./.musterconfig" "$(logdir utils.echo)" "$T_DIR/from-home"
t_expect_eq "-cfg over the files" "$(logdir -cfg log_dir="$T_DIR/from-cli" utils.echo)" "$T_DIR/from-cli"
printf '[local]\nlog_dir = %s\n' "$T_DIR/from-env" >"$T_DIR/env.cfg"
t_expect_eq "\$MUSTERCONFIG replaces the others" \
  "$(MUSTERCONFIG="$T_DIR/env.cfg" logdir utils.echo)" "$T_DIR/from-env"
printf '[local]\nlog_dir = None\n' >"$T_DIR/none.cfg"
t_expect_eq "None unsets" "$(MUSTERCONFIG="$T_DIR/none.cfg" logdir utils.echo)" "$T_DIR/logs"
rm -f "$HOME/.musterconfig" "$T_DIR/cwd/.musterconfig"

# -cfg string forms (TorchX's cfg_from_str): ',' or ';' between pairs, quotes.
out=$("$MUSTER" run --dryrun -cfg "devices_per_replica=2;device_env=NEURON_RT_VISIBLE_CORES" utils.echo --num_replicas 2)
t_expect_match "-cfg with ';'" "$out" 'NEURON_RT_VISIBLE_CORES=2,3'
out=$("$MUSTER" run --dryrun -cfg "log_dir='$T_DIR/a,b=c',grace_period=1" utils.echo)
t_expect_match "-cfg quoted value with , and =" "$out" "log_dir: $T_DIR/a,b=c/"

# [cli:run] and [component:...] defaults; the command line still wins.
cat >"$T_DIR/run.cfg" <<CFG
[cli:run]
scheduler = local
component = utils.echo
[component:utils.echo]
msg = from-config
CFG
export MUSTERCONFIG="$T_DIR/run.cfg"
out=$("$MUSTER" run --dryrun)
t_expect_match "[cli:run] component + [component:] default" "$out" 'echo/0: echo from-config'
out=$("$MUSTER" run --dryrun --msg from-cli)
t_expect_match "args without a component use [cli:run] component" "$out" 'echo/0: echo from-cli'
printf '[component:utils.echo]\nmsgg = x\n' >"$T_DIR/bad.cfg"
MUSTERCONFIG="$T_DIR/bad.cfg" "$MUSTER" run --dryrun utils.echo 2>"$T_DIR/err"
t_expect_eq "unknown component key in the config exits 2" "$?" 2
t_expect_match "... and names file, line and key" "$(cat "$T_DIR/err")" "bad.cfg:2: .*'msgg'; did you mean '--msg'"
printf '[local]\nlogdir = x\n' >"$T_DIR/bad2.cfg"
MUSTERCONFIG="$T_DIR/bad2.cfg" "$MUSTER" run --dryrun utils.echo 2>"$T_DIR/err"
t_expect_eq "unknown runopt in the config exits 2" "$?" 2
t_expect_match "... with the suggestion" "$(cat "$T_DIR/err")" "bad2.cfg:2: unknown -cfg key 'logdir'.*'log_dir'"
printf '[local\n' >"$T_DIR/bad3.cfg"
MUSTERCONFIG="$T_DIR/bad3.cfg" "$MUSTER" run --dryrun utils.echo 2>"$T_DIR/err"
t_expect_eq "malformed config exits 2" "$?" 2
t_done
