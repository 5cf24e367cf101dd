#!/usr/bin/env bash
# `muster run -s kubernetes --dryrun` of the trn1 tutorial's 2-node training job (aws.trn1_ddp,
# 2 x trn1.32xlarge, the job's own musterd): median wall time of the whole CLI process over N
# runs (target: < 5 ms). The peer, TorchX (`torchx run --dryrun`), is not installed here; the
# runs alternate with the floor every torchx call pays, Debian's Python starting up and
# importing yaml (what TorchX needs before doing any work), and the ratio is printed.
#
#   bench/bench_k8s_dryrun.sh [N]      (default 200; needs a build: MU_BUILD_DIR, default ./build)
set -u
N=${1:-200}
. "$(dirname "$0")/../tests/lib.sh"
[ -x "$MUSTER" ] || { echo "bench_k8s_dryrun: build muster first ($MUSTER)"; exit 1; }
args=(run -s kubernetes --dryrun -cfg queue=test,muster_image=registry.example/muster:0.1.0 aws.trn1_ddp --name berttrain --nnodes 2
      --nproc_per_node 32 --image 123456789012.dkr.ecr.us-west-2.amazonaws.com/eks:bert_pretrain
      --script dp_bert_large_hf_pretrain_hdf5.py --bf16 --cacheset bert-large
      --instance_type trn1.32xlarge -- --batch_size 16 --grad_accum_usteps 32
      --data_dir /data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128 --output_dir /data/output)
"$MUSTER" "${args[@]}" >"$T_DIR/out.txt" || { echo "bench_k8s_dryrun: dryrun failed"; exit 1; }
grep -q 'aws.amazon.com/neuron' "$T_DIR/out.txt" || { echo "bench_k8s_dryrun: no manifest"; exit 1; }
: >"$T_DIR/muster.ns"
: >"$T_DIR/python.ns"
for ((i = 0; i < N; i++)); do
  a=$(date +%s%N); "$MUSTER" "${args[@]}" >/dev/null; b=$(date +%s%N)
  echo $((b - a)) >>"$T_DIR/muster.ns"
  a=$(date +%s%N); "$PY" -c 'import yaml' >/dev/null; b=$(date +%s%N)
  echo $((b - a)) >>"$T_DIR/python.ns"
done
med() { sort -n "$1" | awk '{v[NR] = $1} END {printf "%.2f", v[int((NR + 1) / 2)] / 1e6}'; }
m=$(med "$T_DIR/muster.ns")
p=$(med "$T_DIR/python.ns")
verdict=$(awk -v m="$m" 'BEGIN {print (m < 5.0) ? "under" : "OVER"}')
echo "bench_k8s_dryrun: muster dryrun median ${m} ms over $N runs ($verdict the 5 ms target);" \
  "python3+yaml start-up (torchx's floor) ${p} ms; floor/muster = $(awk -v m="$m" -v p="$p" 'BEGIN {printf "%.1f", p / m}')x"
