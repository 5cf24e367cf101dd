# Shared setup of the Slurm end-to-end tests (slurm_*.sh). Sourcing it loads ../lib.sh and skips
# the test (exit 77) unless Slurm and the local-cluster kit (../shared/slurm, or $MU_SLURM_KIT)
# are installed; slurm_start then starts a private cluster.
. "$(dirname "$0")/../lib.sh"
SLURM_KIT=${MU_SLURM_KIT:-$MU_SOURCE_DIR/../shared/slurm}
[ -x "$(command -v slurmctld)" ] && [ -x "$(command -v sbatch)" ] ||
  { echo "# skip: Slurm is not installed (slurmctld slurmd slurm-client munge)"; exit 77; }
[ -f "$SLURM_KIT/start-local-slurm.sh" ] || { echo "# skip: no $SLURM_KIT"; exit 77; }

stop_slurm() { bash "$SLURM_KIT/stop-local-slurm.sh" >"$T_DIR/stop.log" 2>&1; t_cleanup; }

# Starts a local Slurm of 4 nodes on loopback under $T_DIR/slurm (log: $T_DIR/start.log) and
# exports its SLURM_CONF; the EXIT trap stops it. When it does not start, the test fails and ends.
slurm_start() {
  export LOCAL_SLURM_DIR=$T_DIR/slurm LOCAL_SLURM_NODES=4
  LOCAL_SLURM_PORT=$(t_free_port)
  export LOCAL_SLURM_PORT
  trap stop_slurm EXIT
  bash "$SLURM_KIT/start-local-slurm.sh" >"$T_DIR/start.log" 2>&1 ||
    { cat "$T_DIR/start.log"; t_fail "local Slurm starts"; t_done; }
  . "$LOCAL_SLURM_DIR/env.sh"
}
