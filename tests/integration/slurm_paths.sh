#!/usr/bin/env bash
# Slurm finds muster's own programs (issue 11): with the build directory NOT on PATH and no
# -cfg musterd=, `muster run -s slurm --wait dist.ddp -j 2x2` runs: the script calls musterd and
# `muster agent` by the absolute path of the running muster. A musterd that cannot bind on the
# batch host (its port taken) fails the job with a sentence saying so, in run's failure summary
# and in `muster status`, and nothing hangs. `muster tee`, by absolute path too, keeps a
# replica's stdout and stderr lines in the order written (issue 26).
. "$(dirname "$0")/slurm_common.bash"
RING=$MU_BUILD_DIR/examples/ring_allreduce
t_need_built "$MUSTER" "$MUSTERD" "$RING"

slurm_start
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
if command -v muster >/dev/null 2>&1 || command -v musterd >/dev/null 2>&1; then
  t_fail "a muster or musterd is on PATH ($(command -v muster musterd | tr '\n' ' ')): the test needs none"
fi
mkdir -p "$T_DIR/work" && cd "$T_DIR/work" || exit 1

# 1. The dry run names both programs by absolute path.
out=$("$MUSTER" run -s slurm --dryrun dist.ddp -j 2x2 --script "$RING" 2>&1)
t_expect_match "dryrun: musterd by absolute path" "$out" "^$MUSTERD --listen "
t_expect_match "dryrun: the agent by absolute path" "$out" " $MUSTER agent --nnodes 2 "

# 2. The job runs with nothing on PATH: 4 ranks verify the sum.
port=$(t_free_port)
out=$("$MUSTER" run -s slurm --wait -cfg "rdzv_host=127.0.0.1,rdzv_port=$port" dist.ddp -j 2x2 \
  --script "$RING" -- --count 4096 2>&1)
t_expect_eq "run --wait exits 0 without muster on PATH" "$?" 0
h=$(printf '%s\n' "$out" | grep -o 'slurm://muster/[0-9]*' | head -1)
id=${h##*/}
ok=$(cat slurm-"$id"-ring_allreduce-[01].out 2>/dev/null | grep -c 'allreduce ok, world 4')
t_expect_eq "4 ranks verified the sum" "$ok" 4
[ "$ok" = 4 ] || tail -5 slurm-"$id"-*.err slurm-"$id"-musterd.log 2>/dev/null | sed 's/^/# /'

# 3. The port of the job's musterd is taken on the batch host: the job fails, in words.
t_start_musterd || t_fail "a musterd to hold the port"
out=$(timeout 120 "$MUSTER" run -s slurm --wait -cfg "rdzv_host=127.0.0.1,rdzv_port=$MUSTERD_PORT" \
  dist.ddp -j 2x2 --script "$RING" 2>&1)
rc=$?
t_expect_eq "run --wait with the port taken exits 1 (not hung)" "$rc" 1
t_expect_match "failure summary says musterd did not start" "$out" \
  "musterd did not start on .*port $MUSTERD_PORT.*(in use|listen|bind)"
h=$(printf '%s\n' "$out" | grep -o 'slurm://muster/[0-9]*' | head -1)
st=$("$MUSTER" status "$h" 2>&1)
t_expect_match "status says musterd did not start" "$st" "musterd did not start on .*port $MUSTERD_PORT"

# 4. -cfg musterd= still wins: a musterd that does not exist is named.
out=$(timeout 120 "$MUSTER" run -s slurm --wait -cfg "rdzv_host=127.0.0.1,rdzv_port=$(t_free_port),musterd=/nonexistent/musterd" \
  dist.ddp -j 2x2 --script "$RING" 2>&1)
t_expect_eq "a missing -cfg musterd exits 1" "$?" 1
t_expect_match "... and names it" "$out" "musterd did not start.*/nonexistent/musterd"

# 5. A replica's stdout and stderr in the order written (issue 26: muster log showed all of
# stdout, then all of stderr): the script runs the command under `muster tee` (by absolute path
# too), and muster run --log, muster log APP and muster log APP/sh/0 show the lines alternating.
cp "$MU_SOURCE_DIR/tests/fixtures/workers/alternate.sh" .
fails=$T_FAILS
out=$(timeout 120 "$MUSTER" run -s slurm --wait --log utils.sh -- \
  sh alternate.sh 'slurm-$SLURM_JOB_ID-sh-0.log' 4 2>&1)
t_expect_eq "alternating streams: the job runs" "$?" 0
h=$(printf '%s\n' "$out" | grep -o 'slurm://muster/[0-9]*' | head -1)
want=$(for i in 1 2 3 4; do printf 'out %s\nerr %s\n' "$i" "$i"; done; echo 'the end')
got=$(printf '%s\n' "$out" | sed -E 's/^sh\/0[ |:]+//' | grep -E '^(out|err) [0-9]|^the end')
t_expect_eq "muster run --log: stdout and stderr lines in the order written" "$got" "$want"
got=$("$MUSTER" log "$h" 2>&1 | sed -E 's/^sh\/0[ |:]+//' | grep -E '^(out|err) [0-9]|^the end')
t_expect_eq "muster log APP: in the order written" "$got" "$want"
got=$("$MUSTER" log "$h/sh/0" 2>&1 | grep -E '^sh/0 ((out|err) [0-9]|the end)')
t_expect_eq "muster log APP/sh/0: in the order written, prefixed sh/0" "$got" \
  "$(printf '%s\n' "$want" | sed 's|^|sh/0 |')"
got=$("$MUSTER" log --streams stderr "$h/sh/0" 2>&1 | grep -E '^sh/0 ((out|err) [0-9]|the end)')
t_expect_eq "muster log --streams stderr: stderr alone" "$got" "$(printf 'sh/0 err %s\n' 1 2 3 4)"
[ "$T_FAILS" = "$fails" ] ||
  { printf '%s\n' "$out" | tail -20 | sed 's/^/# run: /'; tail -n 5 slurm-"${h##*/}"-* | sed 's/^/# /'; }
t_done
