#!/usr/bin/env bash
# torchrun --rdzv_backend=etcd-v2 (dynamic rendezvous) against musterd, or TARGET=etcd.
TR_BACKEND=etcd-v2
. "$(dirname "$0")/torchrun_cases.bash"
