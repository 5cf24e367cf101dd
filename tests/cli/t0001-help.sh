#!/usr/bin/env bash
# Every subcommand of `muster -h` handles -h (exit 0, a usage line), even with no config; the
# usage blocks of docs/cli.md are the -h texts; the scheduler names come from the table.
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
for comp in $("$MUSTER" builtins | awk '$1 ~ /^[0-9]+\.$/ {print $2}'); do
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

# docs/cli.md shows each command's -h as the binary prints it (from the option tables): a block
# with option rows must be the whole -h; a block of usage lines alone (muster agent's) its start.
drift=$("$PY" - "$MUSTER" "$MU_SOURCE_DIR/docs/cli.md" <<'PY'
import re, subprocess, sys
muster, doc = sys.argv[1], open(sys.argv[2]).read()
for text, cmd in re.findall(r"```\n(usage: muster (\S+).*?)```", doc, re.S):
    out = subprocess.run([muster, cmd, "-h"], capture_output=True, text=True).stdout.strip()
    text = text.strip()
    rows = any(re.match(r"^ +-\S.*\S {2,}\S", l) for l in text.splitlines())  # "  -x, --y  help"
    if (out != text) if rows else not out.startswith(text):
        print("muster %s -h differs from its block in docs/cli.md (update the block):" % cmd)
        import difflib
        for l in difflib.unified_diff(text.splitlines(), out.splitlines(), "docs", "-h", lineterm=""):
            print("#   " + l)
PY
)
t_expect_eq "docs/cli.md: every command's block is its -h" "$drift" ""

# The scheduler names come from the scheduler table everywhere: runopts heads each one's options;
# the -s help, the unknown-scheduler message and the bash completion list the same.
scheds=$("$MUSTER" runopts | sed -n 's/^\([a-z0-9_-]\+\):$/\1/p' | tr '\n' ' ')
t_expect_match "runopts: a scheduler table" "$scheds" '^local kubernetes slurm local_container $'
first=${scheds%% *} rest=${scheds#* }
t_expect_match "run -h: -s lists the table" "$("$MUSTER" run -h)" \
  "-s, --scheduler SCHED +the scheduler: $first \(default\), $(echo ${rest% } | sed 's/ /, /g')$"
t_expect_match "list -h: -s lists the table" "$("$MUSTER" list -h)" \
  "-s, --scheduler SCHED +the scheduler: $first \(default\), $(echo ${rest% } | sed 's/ /, /g')$"
err=$("$MUSTER" run -s zzzzzzzz utils.echo 2>&1)
for s in $scheds; do t_expect_match "an unknown scheduler: the message names $s" "$err" "use .*\b$s\b"; done
. "$MU_SOURCE_DIR/packaging/muster.bash-completion"
COMP_WORDS=("$MUSTER" run -s "") COMP_CWORD=3
_muster
t_expect_eq "bash completion of -s: the table" "${COMPREPLY[*]} " "$scheds"
# Each builtin's help has its description wrapped (issue 34: they were single 300-450 character
# lines), and the words all kept.
list=$("$MUSTER" builtins)
t_expect_eq "builtins: lines over 100 columns" "$(printf '%s\n' "$list" | awk 'length($0) > 100' | wc -l)" 0
t_expect_match "builtins: a wrapped description continues under its column" \
  "$(printf '%s\n' "$list" | grep -A1 ' aws\.trn1_ddp  ' | tail -1)" '^ {28}[a-z(]'
names=$(printf '%s\n' "$list" | awk '$1 ~ /^[0-9]+\.$/ {print $2}')
t_expect_eq "builtins: every component listed" "$(echo $names | wc -w)" "$(ls "$MU_SOURCE_DIR"/components/*.yaml | wc -l)"
for name in $names; do
  help=$("$MUSTER" run "$name" --help 2>&1)
  desc=$(printf '%s\n' "$help" | sed -n '3,/^arguments (from/p' | sed '$d')
  t_expect_eq "run $name --help: description lines over 100 columns" \
    "$(printf '%s\n' "$desc" | awk 'length($0) > 100' | wc -l)" 0
  src_words=$("$MUSTER" builtins --print "$name" | python3 -c 'import sys, yaml; print(len(str(yaml.safe_load(sys.stdin)["description"]).split()))')
  t_expect_eq "run $name --help: every word of the description" "$(printf '%s\n' "$desc" | wc -w)" "$src_words"
done
t_done
