#!/usr/bin/env bash
# torchrun --rdzv_backend=etcd (legacy etcd_rendezvous) against musterd, or TARGET=etcd.
TR_BACKEND=etcd
. "$(dirname "$0")/torchrun_cases.bash"
