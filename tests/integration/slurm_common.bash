# Shared setup of the Slurm end-to-end tests (slurm_*.sh; not a test itself). Sourcing it loads
# ../lib.sh and skips the test (exit 77, naming what to install) unless Slurm is installed and
# the test runs as root; slurm_start then starts a private cluster with tests/slurm/local-slurm.sh.
. "$(dirname "$0")/../lib.sh"
SLURM_KIT=$MU_SOURCE_DIR/tests/slurm/local-slurm.sh
for b in slurmctld slurmd sbatch munged; do t_need_cmd "$b" "slurmctld slurmd slurm-client munge"; done
if [ "$(id -u)" -ne 0 ]; then
  echo "# skip: the local Slurm cluster needs root (slurmd starts jobs as their user)"
  exit 77
fi

stop_slurm() { bash "$SLURM_KIT" stop "$T_DIR/slurm" >"$T_DIR/stop.log" 2>&1; t_cleanup; }

# Starts a local Slurm of 4 nodes on loopback under $T_DIR/slurm (log: $T_DIR/start.log) and
# exports its SLURM_CONF; the EXIT trap stops it. When it does not start, the test fails and ends.
slurm_start() {
  trap stop_slurm EXIT
  LOCAL_SLURM_NODES=4 bash "$SLURM_KIT" start "$T_DIR/slurm" >"$T_DIR/start.log" 2>&1 ||
    { sed 's/^/# /' "$T_DIR/start.log"; t_fail "local Slurm starts"; t_done; }
  . "$T_DIR/slurm/env.sh"
}
