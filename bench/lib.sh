# Shared prologue of the benchmark scripts: tests/lib.sh (process and port helpers, cleanup by
# PID on exit) plus the checks every benchmark makes before it starts. Source it:
#   . "$(dirname "$0")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../tests/lib.sh"

# Prints "<bench>: error: MESSAGE" and exits 1 (a broken setup, never a missed goal).
die() {
  echo "$T_NAME: error: $*" >&2
  exit 1
}

# Each named command must be on PATH.
bench_need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed (scripts/install-deps.sh --test)"
  done
}

# bench_need_exe PATH TARGET: a built program of ours, with the build command in the error.
bench_need_exe() {
  [ -x "$1" ] || die "no $2 at '$1' (cmake --build <dir> --target $2, or set MU_BUILD_DIR)"
}

# bench_need_fds N WHAT: the open-file limit allows N sockets for WHAT.
bench_need_fds() {
  [ "$(ulimit -n)" -ge "$(($1 + 64))" ] ||
    die "ulimit -n is $(ulimit -n); $2 need $(($1 + 64)) (raise the hard limit)"
}

# bench_field NAME TEXT: the number after " NAME=" in a load generator's result line.
bench_field() { printf '%s' "$2" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

# bench_fanout_run NAME ROUND ENDPOINT PID: $FANOUT --watchers $WATCHERS against a server, its
# line printed and left in FANOUT_OUT, then the server stopped (etcd's data dir removed).
bench_fanout_run() {
  FANOUT_OUT=$("$FANOUT" --endpoint "$3" --pid "$4" --watchers "$WATCHERS") ||
    echo "# warning: $1: not every watcher was answered"
  echo "# $1 round $2: $FANOUT_OUT"
  kill -0 "$4" 2>/dev/null || die "$1 died during the run"
  kill -TERM "$4" 2>/dev/null
  wait "$4" 2>/dev/null
  rm -rf "$T_DIR/etcd-data"
}

# As many open files as the hard limit allows: load generators open thousands of sockets.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
