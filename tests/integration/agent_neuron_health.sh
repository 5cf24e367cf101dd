#!/usr/bin/env bash
# The builtin Neuron health check through a real `muster agent --standalone` (its embedded
# musterd) and real workers (examples/ring_allreduce), reading trees built here from the Neuron
# driver's documented layout (aws-neuron-sdk neuron-sysfs-user-guide.rst) under --health-root:
#   healthy     a trn2.48xlarge tree: the check passes, says what it checked, the workers run
#   missing     neuron7 gone: the node does not join; its log names neuron7 and the count
#   ecc         neuron5's mem_ecc_uncorrected is 3: the node does not join; the log names both
#   nodriver    no driver directory: skipped with the reason, the workers run
# The agents that wait on a failed check are stopped by their pid.
. "$(dirname "$0")/agent_common.bash"

tree() { # root: a healthy trn2.48xlarge (16 devices of 8 cores, 16 EFA, /data mounted)
  local r=$1 d c
  for d in $(seq 0 15); do
    mkdir -p "$r/sys/devices/virtual/neuron_device/neuron$d/stats/hardware"
    echo 8 >"$r/sys/devices/virtual/neuron_device/neuron$d/core_count"
    for c in mem_ecc_uncorrected mem_ecc_repairable_uncorrected sram_ecc_uncorrected; do
      echo 0 >"$r/sys/devices/virtual/neuron_device/neuron$d/stats/hardware/$c"
    done
    mkdir -p "$r/sys/class/infiniband/rdmap${d}s27"
  done
  mkdir -p "$r/proc/self"
  printf 'overlay / overlay rw 0 0\nfs-1.fsx.aws@tcp:/x /data lustre rw 0 0\n' >"$r/proc/self/mounts"
}
CHECK=neuron:type=trn2.48xlarge,lnc=2,mount=/data
PATH=/usr/bin:/bin # no neuron-ls here: its part is the unit test's (tests/unit/test_neuron.c)

tree "$T_DIR/healthy"
out=$("$MUSTER" agent --standalone --nproc-per-node 2 --health-check "$CHECK" \
  --health-root "$T_DIR/healthy" -- "$RING" 2>&1); rc=$?
t_expect_eq "healthy: exit 0" "$rc" 0
t_expect_match "healthy: the check says what it checked" "$out" \
  "health check: Neuron check passed: 16 Neuron devices \(trn2.48xlarge\), 4 NeuronCores each at LNC=2, no uncorrectable ECC error.*16 EFA interfaces, /data on a shared volume"
t_expect_eq "healthy: 2 ranks verified" "$(grep -c 'allreduce ok, world 2' <<<"$out")" 2

failing() { # name root regex...: the agent waits, its log names each
  local name=$1 root=$2 re; shift 2
  agent_start "$name" --standalone --nproc-per-node 2 --health-check "$CHECK" --health-root "$root" \
    --health-check-interval 1 -- "$RING"
  local pid=$AGENT_PID
  wait_for_lines "$T_DIR/$name.log" "health check failed \(the Neuron check found" 2 60 &&
    t_ok "$name: the check fails, again and again" || t_fail "$name: the check fails"
  for re in "$@"; do
    t_expect_match "$name: names /$re/" "$(cat "$T_DIR/$name.log")" "$re"
  done
  if grep -q 'allreduce ok' "$T_DIR/$name.log"; then t_fail "$name: no worker ran"; else
    t_ok "$name: no worker ran"; fi
  kill -TERM "$pid"
  agent_wait "$pid" 30
  t_expect_match "$name: the agent stops on SIGTERM" "$RC" "^(143|130|1)$"
}

tree "$T_DIR/missing"
rm -r "$T_DIR/missing/sys/devices/virtual/neuron_device/neuron7"
failing missing "$T_DIR/missing" "\| neuron7: missing: .*neuron_device/neuron7 does not exist; a trn2.48xlarge has 16 Neuron devices \(neuron0..neuron15\), this node shows 15"

tree "$T_DIR/ecc"
echo 3 >"$T_DIR/ecc/sys/devices/virtual/neuron_device/neuron5/stats/hardware/mem_ecc_uncorrected"
failing ecc "$T_DIR/ecc" "\| neuron5: stats/hardware/mem_ecc_uncorrected is 3: unrepairable uncorrectable HBM ECC errors"

mkdir -p "$T_DIR/nodriver"
out=$("$MUSTER" agent --standalone --nproc-per-node 2 --health-check "$CHECK" \
  --health-root "$T_DIR/nodriver" -- "$RING" 2>&1); rc=$?
t_expect_eq "nodriver: exit 0" "$rc" 0
t_expect_match "nodriver: skipped, saying why" "$out" \
  "health check: Neuron check skipped: this node has no Neuron driver \(.*/sys/devices/virtual/neuron_device does not exist\)"

out=$("$MUSTER" agent --standalone --health-check neuron:type=trn9.huge -- "$RING" 2>&1); rc=$?
t_expect_eq "a bad builtin: usage error" "$rc" 2
t_expect_match "a bad builtin: named" "$out" "type=trn9.huge is not a Neuron instance type"
agent_dump_logs
t_done
