#!/usr/bin/env bash
# muster tee FILE -- COMMAND, which the Slurm script runs around each replica (issue 26: `muster
# log` of a Slurm job showed all of stdout, then all of stderr): COMMAND's stdout and stderr pass
# through unchanged, and FILE gets every line of both in the order they were written; the exit
# status, a signal and a command that cannot run come out as COMMAND's. No Slurm needed
# (integration/slurm_paths.sh runs it in a real Slurm job).
. "$(dirname "$0")/../lib.sh"
ALT=$MU_SOURCE_DIR/tests/fixtures/workers/alternate.sh
cd "$T_DIR" || exit 1

# 1. Lines alternating between the two streams: in FILE as written, each stream passed through.
"$MUSTER" tee both.log -- sh "$ALT" both.log 5 >out.txt 2>err.txt
t_expect_eq "tee exits as the command did (0)" "$?" 0
want=$(for i in 1 2 3 4 5; do printf 'out %s\nerr %s\n' "$i" "$i"; done; echo 'the end')
t_expect_eq "FILE: both streams' lines in the order written, the last one ended" \
  "$(cat both.log)" "$want"
t_expect_eq "FILE ends in a newline" "$(tail -c 1 both.log | od -An -c | tr -d ' ')" '\n'
t_expect_eq "stdout passed through unchanged" "$(cat out.txt)" \
  "$(printf 'out %s\n' 1 2 3 4 5)
the end"
t_expect_eq "stderr passed through unchanged" "$(cat err.txt)" "$(printf 'err %s\n' 1 2 3 4 5)"
[ "$(cat both.log)" = "$want" ] || { echo "# FILE:"; sed 's/^/#   /' both.log; }

# 2. FILE is appended to (a requeued job's second run adds to the first's)
"$MUSTER" tee both.log -- sh -c 'echo again' >/dev/null
t_expect_eq "FILE is appended to" "$(tail -1 both.log)" again

# 3. Exit status, signal, a command that is not there, stdin
"$MUSTER" tee st.log -- sh -c 'echo bye; exit 3' >/dev/null
t_expect_eq "exit status 3 passed on" "$?" 3
"$MUSTER" tee st.log -- sh -c 'echo killed >&2; kill -TERM $$' 2>/dev/null
t_expect_eq "a command ended by SIGTERM: tee ends by it too (128+15)" "$?" 143
t_expect_eq "... its last line is in FILE" "$(tail -1 st.log)" killed
"$MUSTER" tee st.log -- /nonexistent/prog 2>err.txt
t_expect_eq "a command that is not there: 127" "$?" 127
t_expect_match "... named" "$(cat err.txt)" "cannot run '/nonexistent/prog'"
t_expect_eq "stdin reaches the command" "$(echo piped | "$MUSTER" tee st.log -- cat)" piped

# 4. Usage: no '--', no command; a FILE that cannot be opened runs the command without it
"$MUSTER" tee only.log 2>err.txt
t_expect_eq "no command: usage error (2)" "$?" 2
t_expect_match "... says what is needed" "$(cat err.txt)" "muster tee FILE -- COMMAND"
out=$("$MUSTER" tee /nonexistent/dir/x.log -- echo still 2>err.txt)
t_expect_eq "FILE cannot be opened: the command runs all the same" "$out" still
t_expect_match "... with a warning naming FILE" "$(cat err.txt)" \
  "cannot open the combined log '/nonexistent/dir/x.log'"

# 5. A child the command leaves behind holding the pipes open: tee drains them for a moment after
#    the command ends, then ends with the command's status instead of waiting for the child.
timeout 15 "$MUSTER" tee left.log -- sh -c 'sleep 60 & echo $! >left.pid; echo hi; exit 4' \
  >out.txt 2>&1
rc=$?
[ -s left.pid ] && kill "$(cat left.pid)" 2>/dev/null
t_expect_eq "a child left holding the pipes: tee ends with the command's status, not the child" \
  "$rc" 4
t_expect_eq "... the command's line is in FILE" "$(cat left.log)" hi
t_done
