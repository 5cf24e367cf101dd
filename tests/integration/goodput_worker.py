#!/usr/bin/env python3
"""A PyTorch (gloo) worker for the goodput tests (tests/integration/goodput.sh) and benchmarks.

Every step all-reduces a tensor and checks the sum; after each step it touches its heartbeat
file (the one-line call of docs/agent.md) unless --no-heartbeat. At the end every rank prints
"rank R: allreduce ok, world W restart C steps N". Faults for the tests:

  --hang-rank R --hang-after K   rank R sleeps forever after step K (first attempt only)
  --fail R:C[:K]                 rank R raises at step K (default 3) while
                                 TORCHELASTIC_RESTART_COUNT is C (repeatable)
  --no-heartbeat                 never touch the heartbeat file (print a line per step instead)
  --print-steps                  print a line per step as well
"""
import argparse
import os
import pathlib
import sys
import time

import torch
import torch.distributed as dist


def beat():
    # the one-line heartbeat call: touching the file is progress (absent under torchrun)
    if "MUSTER_HEARTBEAT_FILE" in os.environ:
        pathlib.Path(os.environ["MUSTER_HEARTBEAT_FILE"]).touch()


def step(args, rank, world, restart, i):
    if rank == args.hang_rank and restart == 0 and i == args.hang_after + 1:
        print(f"rank {rank}: hanging at step {i}", file=sys.stderr, flush=True)
        time.sleep(10 ** 9)  # the hang
    for f in args.fail:
        r, c, k = (list(map(int, f.split(":"))) + [3])[:3]
        if rank == r and restart == c and i == k:
            raise RuntimeError(f"goodput_worker: injected failure on rank {rank} at step {i}")
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    if t[0].item() != want:
        raise RuntimeError(f"rank {rank}: all-reduce gave {t[0].item()}, want {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step-ms", type=int, default=100)
    ap.add_argument("--hang-rank", type=int, default=-1)
    ap.add_argument("--hang-after", type=int, default=5)
    ap.add_argument("--fail", action="append", default=[], metavar="R:C[:K]")
    ap.add_argument("--no-heartbeat", action="store_true")
    ap.add_argument("--print-steps", action="store_true")
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    print(f"rank {rank} world {world} restart {restart} round {os.environ.get('MUSTER_ROUND')}",
          flush=True)
    dist.init_process_group("gloo", init_method="env://")
    for i in range(1, args.steps + 1):
        step(args, rank, world, restart, i)
        if args.no_heartbeat or args.print_steps:
            print(f"rank {rank} step {i}", flush=True)
        if not args.no_heartbeat:
            beat()
        time.sleep(args.step_ms / 1000)
    dist.barrier()
    print(f"rank {rank}: allreduce ok, world {world} restart {restart} steps {args.steps}",
          flush=True)
    sys.stdout.flush()
    # as examples/train_ddp.py: leave without tearing down gloo (torch 1.13 can hang at exit)
    os._exit(0)


if __name__ == "__main__":
    main()
