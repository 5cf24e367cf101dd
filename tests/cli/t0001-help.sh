#!/usr/bin/env bash
# Every subcommand of `muster -h` handles -h (exit 0, a usage line), even with no config.
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs"
cd "$T_DIR"
out=$("$MUSTER" -h); t_expect_eq "muster -h exits 0" "$?" 0
cmds=$(printf '%s\n' "$out" | awk '/^commands:/{on=1;next} on && /^    [a-z]/ {print $1}')
t_expect_match "the command table lists run" "$cmds" '^run$|run'
for c in $cmds; do
  help=$("$MUSTER" "$c" -h 2>&1); rc=$?
  t_expect_eq "muster $c -h exits 0" "$rc" 0
  t_expect_match "muster $c -h prints usage" "$help" "usage: muster $c"
done
# The component help is generated from the YAML file, for every builtin.
for comp in $("$MUSTER" builtins | awk 'NR>1 {print $2}'); do
  help=$("$MUSTER" run "$comp" --help 2>&1); rc=$?
  t_expect_eq "muster run $comp --help exits 0" "$rc" 0
  t_expect_match "muster run $comp --help shows its arguments" "$help" "arguments \(from .*$comp.yaml\)"
done
help=$("$MUSTER" run dist.ddp --help)
t_expect_match "dist.ddp --help lists -j" "$help" '-j, --j JOBSIZE'
t_expect_match "dist.ddp --help lists -h (named resource)" "$help" '-h, --h STR'
t_expect_match "dist.ddp --help lists --launcher choices" "$help" 'muster, torchrun'
v=$("$MUSTER" --version); t_expect_match "--version" "$v" '^muster [0-9]+\.[0-9]+'
"$MUSTER" nosuchcmd 2>"$T_DIR/err"; t_expect_eq "unknown command exits 2" "$?" 2
t_done
