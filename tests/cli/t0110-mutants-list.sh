#!/usr/bin/env bash
# The mutation check's own rules (scripts/mutants.sh, issue 35): every line of a list is checked
# before anything is built, and a line whose file is gone, whose text is no longer found (a
# refactor that did not move its mutant), is found twice, or is not in the list's format fails
# the run naming the line. tests/mutants.txt itself passes that check. (That a surviving mutant
# fails the run needs a scratch build of minutes: tests/README.md, "The mutation check".)
. "$(dirname "$0")/../lib.sh"
SCRIPT=$MU_SOURCE_DIR/scripts/mutants.sh
export MU_MUTANTS_DIR=$T_DIR/scratch # never the default one a real run may hold

# check NAME LIST-LINE REGEX: a list of that one line fails the run with a message matching REGEX
check() {
  local name=$1 line=$2 want=$3 out rc
  printf '# a list of one line\n%s\n' "$line" >"$T_DIR/list.txt"
  out=$(bash "$SCRIPT" --list "$T_DIR/list.txt" 2>&1)
  rc=$?
  t_expect_eq "$name: the run fails" "$rc" 1
  t_expect_match "$name: it names the list's line 2" "$out" "list.txt:2: "
  t_expect_match "$name: it says why" "$out" "$want"
  if [ -d "$MU_MUTANTS_DIR/build" ]; then t_fail "$name: something was built"; else
    t_ok "$name: nothing was built"; fi
}
check "text not found" \
  'rendezvous/c10d/frame.c: this text is in no file of muster => x :: unit:c10d__bounds' \
  "no longer in rendezvous/c10d/frame.c: move this mutant"
check "file gone" 'rendezvous/c10d/no_such_file.c: v > 1 => v >= 1 :: unit:c10d__bounds' \
  "no_such_file.c is not there any more"
check "text found twice" 'rendezvous/c10d/frame.c: return => return :: unit:c10d__bounds' \
  "times: make it longer"
check "no tests" 'rendezvous/c10d/frame.c: kind == '"'"'S'"'"' => kind == 0 :: nothing' \
  "its tests must be unit:CASE, ctest:NAME or VAR=VALUE"
check "not the format" 'rendezvous/c10d/frame.c kind -> 0' "not 'FILE: TEXT => REPLACEMENT :: TESTS'"
# a list with the same mutant twice
good='rendezvous/c10d/frame.c: kind == '"'"'S'"'"' && v > lim->max_key => kind == '"'"'S'"'"' && v >= lim->max_key :: unit:c10d__bounds'
printf '%s\n%s\n' "$good" "$good" >"$T_DIR/twice.txt"
out=$(bash "$SCRIPT" --list "$T_DIR/twice.txt" 2>&1)
t_expect_eq "a mutant listed twice: the run fails" "$?" 1
t_expect_match "a mutant listed twice: named" "$out" "twice.txt:2: listed twice"
# a line that is valid but not selected still counts: a bad line fails a --files run too
printf '%s\n%s\n' "$good" 'client/gone.c: a => b :: unit:x' >"$T_DIR/other.txt"
out=$(bash "$SCRIPT" --list "$T_DIR/other.txt" --files rendezvous/persist/sync.c 2>&1)
t_expect_eq "a bad line outside --files: the run fails" "$?" 1
t_expect_match "a bad line outside --files: named" "$out" "other.txt:2: client/gone.c is not there"
# the repository's list: every line valid (--line 0 selects none: nothing is built)
out=$(bash "$SCRIPT" --line 0 2>&1)
t_expect_eq "tests/mutants.txt: every line is valid" "$?" 0
t_expect_match "tests/mutants.txt: nothing selected, nothing run" "$out" "^0 mutants, 0 killed"
[ "$(grep -cE '^[^#[:space:]]' "$MU_SOURCE_DIR/tests/mutants.txt")" -ge 30 ] &&
  t_ok "tests/mutants.txt lists 30 mutants or more" ||
  t_fail "tests/mutants.txt lists fewer than 30 mutants"
bash "$SCRIPT" --bogus >/dev/null 2>&1
t_expect_eq "an unknown option: exit 2" "$?" 2
t_done
