#!/usr/bin/env bash
# TorchX's utils.touch, utils.copy and utils.binary (issue 34) on the local scheduler: each does
# its work in a real job, with TorchX's parameter names; utils.copy refuses a scheme it cannot
# honour, naming the value.
. "$(dirname "$0")/../lib.sh"
t_need_built "$MUSTER"
t_local_jobs
run_ok() { # name cmd...: the job succeeds
  local name=$1; shift
  "$MUSTER" run "$@" >"$T_DIR/out" 2>"$T_DIR/err"
  t_expect_eq "$name: exit 0 ($(tail -3 "$T_DIR/err"))" "$?" 0
}

# utils.touch --file: creates it, then updates its time
run_ok "utils.touch a new file" utils.touch --file "$T_DIR/touched"
t_expect_eq "utils.touch: the file exists" "$([ -f "$T_DIR/touched" ] && echo yes)" yes
touch -d '2001-01-01' "$T_DIR/touched"
run_ok "utils.touch an old file" utils.touch --file "$T_DIR/touched"
t_expect_eq "utils.touch: its time updated" "$(find "$T_DIR/touched" -newermt 2002-01-01 | wc -l)" 1
"$MUSTER" run utils.touch >/dev/null 2>"$T_DIR/err"
t_expect_eq "utils.touch without --file: exit 2" "$?" 2
t_expect_match "utils.touch without --file: says so" "$(cat "$T_DIR/err")" "missing required argument --file"

# utils.copy --src --dst: a file (file:// and a plain path), into a directory it makes; a tree
printf 'payload %s\n' "$RANDOM" >"$T_DIR/src.txt"
run_ok "utils.copy file:// to a new directory" utils.copy --src "file://$T_DIR/src.txt" --dst "$T_DIR/new/dir/dst.txt"
t_expect_eq "utils.copy: same bytes" "$(cmp "$T_DIR/src.txt" "$T_DIR/new/dir/dst.txt" && echo same)" same
mkdir -p "$T_DIR/tree/sub" && echo leaf >"$T_DIR/tree/sub/leaf"
run_ok "utils.copy a directory" utils.copy --src "$T_DIR/tree" --dst "file://$T_DIR/tree2"
t_expect_eq "utils.copy: the tree copied" "$(cat "$T_DIR/tree2/sub/leaf" 2>&1)" leaf
"$MUSTER" run utils.copy --src "$T_DIR/missing" --dst "$T_DIR/x" >/dev/null 2>"$T_DIR/err"
t_expect_eq "utils.copy of a missing source: the job fails (exit 1)" "$?" 1
"$MUSTER" run utils.copy --src s3://bucket/key --dst "$T_DIR/x" >/dev/null 2>"$T_DIR/err"
t_expect_eq "utils.copy s3://: exit 2" "$?" 2
t_expect_match "utils.copy s3://: names the value" "$(cat "$T_DIR/err")" "argument '--src': 's3://bucket/key' does not match"
t_expect_match "utils.copy s3://: says the scheme is not supported" "$(cat "$T_DIR/err")" "s3://, gs:// and other fsspec schemes are not supported"

# utils.binary --entrypoint ARGS: the program with its arguments, TorchX's default name
run_ok "utils.binary" utils.binary --entrypoint printf -- 'binary %s\n' 'two words'
t_expect_match "utils.binary: the program's output" "$(cat "$T_DIR/err" "$T_DIR/out")" "binary/0 binary two words"
t_expect_match "utils.binary: TorchX's app name" "$(cat "$T_DIR/out")" '^local://muster/torchx-utils-binary-'
run_ok "utils.binary with 2 replicas" utils.binary --entrypoint true --num_replicas 2 --name bin2
t_expect_match "utils.binary: --name" "$(cat "$T_DIR/out")" '^local://muster/bin2-'
"$MUSTER" run utils.binary -- x >/dev/null 2>"$T_DIR/err"
t_expect_eq "utils.binary without --entrypoint: exit 2" "$?" 2
t_done
