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

# As many open files as the hard limit allows: load generators open thousands of sockets.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
