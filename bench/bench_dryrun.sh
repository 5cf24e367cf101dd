#!/usr/bin/env bash
# muster run end to end: `--dryrun dist.ddp -j 2x8 --script train.py` (median of 200 runs, goal
# < 5 ms) and `utils.echo` on the local scheduler to completion (median of 50, goal < 50 ms).
# TorchX cannot be installed here (no PyPI); its import alone takes about 1 s (torchx.md), so
# the ratio printed is against that documented figure, not a measurement.
#   bench/bench_dryrun.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-${MU_BUILD_DIR:-$here/build}}" && pwd)
muster=$build/muster
[ -x "$muster" ] || { echo "bench_dryrun: $muster not built" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mu-bench-dryrun.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export MUSTER_LOG_DIR=$tmp/logs MUSTERCONFIG= HOME=$tmp
cd "$tmp"
/usr/bin/python3 - "$muster" <<'PY'
import statistics, subprocess, sys, time
muster = sys.argv[1]
def median_ms(argv, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ts.append((time.perf_counter() - t) * 1000)
        if r.returncode != 0:
            sys.exit(f"bench_dryrun: {' '.join(argv)} exited {r.returncode}")
    return statistics.median(ts)
dry = median_ms([muster, "run", "--dryrun", "dist.ddp", "-j", "2x8", "--script", "train.py"], 200)
echo = median_ms([muster, "run", "utils.echo"], 50)
print(f"bench_dryrun: dryrun dist.ddp -j 2x8 median {dry:.2f} ms (goal < 5, "
      f"{'ok' if dry < 5 else 'MISSED'}; TorchX ~1000 ms import alone, ~{1000 / dry:.0f}x, "
      f"not measured: TorchX is not installable here); utils.echo local to completion median "
      f"{echo:.2f} ms (goal < 50, {'ok' if echo < 50 else 'MISSED'})")
PY
