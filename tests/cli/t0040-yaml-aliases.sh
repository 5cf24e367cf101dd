#!/usr/bin/env bash
# A component of nested YAML aliases ("billion laughs", about 500 bytes that name 9^9 scalars)
# cannot exhaust memory: `muster run --dryrun`, `muster run FILE --help` and `muster builtins`
# (which reads every file on MUSTER_COMPONENTS_PATH) refuse it at once, naming the file, under a
# memory limit (ulimit -v; ASan's hard_rss_limit_mb in the sanitized build, whose shadow memory
# ulimit -v cannot hold) and a time limit. Anchors used with measure still work. A parameter
# pattern whose counted repeats would make regcomp take gigabytes is refused the same way.
. "$(dirname "$0")/../lib.sh"
export HOME="$T_DIR" MUSTERCONFIG= MUSTER_LOG_DIR="$T_DIR/logs"
mkdir -p "$T_DIR/comps" && cd "$T_DIR" || exit 1

{
  echo 'name: laughs'
  echo 'description: nine levels of nine aliases'
  echo 'params: []'
  echo 'app: {name: x, roles: [{name: r, entrypoint: echo}]}'
  echo 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'
  for i in 1 2 3 4 5 6 7 8; do
    p="*l$((i - 1))"
    echo "l$i: &l$i [$p,$p,$p,$p,$p,$p,$p,$p,$p]"
  done
} >"$T_DIR/comps/laughs.yaml"
t_expect_match "the bomb is small" "$(wc -c <"$T_DIR/comps/laughs.yaml")" '^[0-9]{3}$'

# bounded COMMAND...: runs COMMAND with at most 20 s and about 512 MB; sets RC, OUT (stdout and
# stderr).
bounded() {
  if [ "$MU_SANITIZED" = 1 ]; then
    OUT=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=512" timeout 20 "$@" 2>&1)
  else
    OUT=$( (ulimit -v 524288 && exec timeout 20 "$@") 2>&1)
  fi
  RC=$?
}
why="comps/laughs.yaml: its aliases expand it past 65536 nodes or 4 MiB"

bounded "$MUSTER" run --dryrun ./comps/laughs.yaml
t_expect_eq "run --dryrun: exit 2 (not killed, not out of memory)" "$RC" 2
t_expect_match "run --dryrun: names the file and the cause" "$OUT" "$why"

bounded "$MUSTER" run ./comps/laughs.yaml --help
t_expect_eq "run FILE --help: exit 2" "$RC" 2
t_expect_match "run FILE --help: names the file and the cause" "$OUT" "$why"

cp "$MU_SOURCE_DIR/components/utils.echo.yaml" "$T_DIR/comps/"
MUSTER_COMPONENTS_PATH=$T_DIR/comps bounded "$MUSTER" builtins
t_expect_eq "builtins with the bomb on the path: exit 0" "$RC" 0
t_expect_match "builtins: the bomb cannot be loaded, and says why" \
  "$(sed -e ':a' -e '$!N;s/\n \{28\}/ /;ta' -e 'P;D' <<<"$OUT" | grep ' laughs ')" \
  "\(cannot be loaded: .*$why" # the description's wrapped lines joined
t_expect_match "builtins: the others still list" "$OUT" ' utils\.echo +'

# A parameter's pattern is the same class: glibc's regcomp spells counted repeats out and takes
# memory by the square of that (a{0,5000}: 400 MB; four nested {1,200}: all there is), and takes
# exponential time and memory for a repeated group that can match nothing (32 of (a*)*: minutes;
# 300 of (a*)?: 3 GB).
rep() { local s='' i; for ((i = 0; i < $2; i++)); do s+=$1; done; printf '%s' "$s"; }
for bomb in "$(rep '(a*)*' 32)" "$(rep '((a*)?)' 300)"; do
  printf 'name: rx\nparams: [{name: p, default: a, pattern: "%s"}]\n' "$bomb" \
    >"$T_DIR/comps/rx.yaml"
  echo 'app: {name: x, roles: [{name: r, entrypoint: echo}]}' >>"$T_DIR/comps/rx.yaml"
  bounded "$MUSTER" run --dryrun ./comps/rx.yaml
  t_expect_eq "pattern ${bomb:0:12}...: exit 2 (not killed, not timed out)" "$RC" 2
  t_expect_match "pattern ${bomb:0:12}...: names the cause and the fix" "$OUT" \
    "params\[0\]\.pattern: .* a group that can match the empty string.*\(a\*\)\* is a\*"
done
# What no count foresees is bounded by compiling it first in a child with 2 s of CPU and 256 MiB
# more memory: 300 of (a*|b*) take regcomp minutes.
printf 'name: rx\nparams: [{name: p, default: a, pattern: "%s"}]\n' "$(rep '(a*|b*)' 300)" \
  >"$T_DIR/comps/rx.yaml"
echo 'app: {name: x, roles: [{name: r, entrypoint: echo}]}' >>"$T_DIR/comps/rx.yaml"
bounded "$MUSTER" run --dryrun ./comps/rx.yaml
t_expect_eq "pattern (a*|b*) x300: exit 2 (not timed out)" "$RC" 2
t_expect_match "pattern (a*|b*) x300: names the cause" "$OUT" \
  "params\[0\]\.pattern: .* takes the regular expression library more than 2 s or 256 MiB"
for bomb in 'a{0,5000}' '((((a{1,200}){1,200}){1,200}){1,200})'; do
  printf 'name: rx\nparams: [{name: p, default: a, pattern: "%s"}]\n' "$bomb" \
    >"$T_DIR/comps/rx.yaml"
  echo 'app: {name: x, roles: [{name: r, entrypoint: echo}]}' >>"$T_DIR/comps/rx.yaml"
  bounded "$MUSTER" run --dryrun ./comps/rx.yaml
  t_expect_eq "pattern $bomb: exit 2 (not killed, not out of memory)" "$RC" 2
  t_expect_match "pattern $bomb: names the parameter, the cause and the fix" "$OUT" \
    "comps/rx.yaml: params\[0\]\.pattern: .* repeats its parts past 1000 .* with \* or smaller"
done
printf 'name: rx\nparams: [{name: p, default: a, pattern: "%s"}]\n' \
  "$(printf '(%.0s' {1..40})a$(printf ')%.0s' {1..40})" >"$T_DIR/comps/rx.yaml"
echo 'app: {name: x, roles: [{name: r, entrypoint: echo}]}' >>"$T_DIR/comps/rx.yaml"
bounded "$MUSTER" run --dryrun ./comps/rx.yaml
t_expect_eq "pattern nested 40 deep: exit 2" "$RC" 2
t_expect_match "pattern nested 40 deep: says so" "$OUT" "nests its groups \\( \\) more than 32 deep"
printf 'name: rx\nparams: [{name: p, default: ab-1, pattern: "%s"}]\n' \
  '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,3}' \
  >"$T_DIR/comps/rx.yaml"
echo 'app: {name: x, roles: [{name: r, entrypoint: echo}]}' >>"$T_DIR/comps/rx.yaml"
bounded "$MUSTER" run --dryrun ./comps/rx.yaml
t_expect_eq "a DNS-name pattern with counts still works: exit 0" "$RC" 0

# Anchors within measure: one env map named by two roles.
cat >"$T_DIR/comps/shared.yaml" <<'EOF'
name: shared
description: two roles share one env map through an anchor
params: []
app:
  name: shared
  roles:
    - {name: a, entrypoint: echo, env: &e {A: "1", B: "2"}}
    - {name: b, entrypoint: echo, env: *e}
EOF
bounded "$MUSTER" run --dryrun ./comps/shared.yaml
t_expect_eq "a modest alias still works: exit 0" "$RC" 0
t_expect_eq "both roles got the shared env" "$(grep -c 'env: .*A=1 B=2' <<<"$OUT")" 2
t_done
