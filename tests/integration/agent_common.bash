# Helpers for the muster agent integration tests (sourced; not a test itself).
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
RING=$MU_BUILD_DIR/examples/ring_allreduce
t_need_built "$MUSTER" "$MUSTERD" "$RING"

# Starts one agent as a test process named $1; the rest are its arguments after 'agent'.
# Sets AGENT_PID.
agent_start() {
  local name=$1; shift
  t_spawn "$name" "$MUSTER" agent "$@"
  AGENT_PID=$T_LAST_PID
}

# Waits for a pid to exit (at most $2 seconds); sets RC to its exit status ("timeout" if it
# did not exit). Not in a $(...) subshell: only this shell can reap its children.
agent_wait() {
  t_wait_exit "$1" "${2:-60}"
  RC=$T_RC
}

# Waits until file $1 contains $3 lines matching regex $2 (at most $4 seconds).
wait_for_lines() {
  local file=$1 re=$2 want=${3:-1} limit=${4:-30}
  t_until "$limit" t_has_lines "$file" "$re" "$want" && return 0
  echo "# timed out waiting for $want x /$re/ in $file" >&2
  return 1
}

# Dumps the logs on failure, to make a red test readable.
agent_dump_logs() {
  if [ "$T_FAILS" -gt 0 ]; then
    for f in "$T_DIR"/*.log; do echo "# ---- $f"; sed 's/^/# /' "$f" | tail -40; done
  fi
}
