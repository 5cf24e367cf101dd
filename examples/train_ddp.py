#!/usr/bin/env python3
"""Tiny PyTorch DDP (gloo) training that runs unchanged under torchrun and muster agent.

Every rank fits the same linear model to its own shard of a synthetic regression problem;
DDP averages the gradients. Prints the loss at every step from rank 0 and exits 1 if the final
loss is not below the first one. Uses only the torchrun environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) through init_method="env://".

    muster agent --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:2379 --rdzv-id t \
        -- /usr/bin/python3 examples/train_ddp.py --steps 20
    torchrun --nnodes 1 --nproc-per-node 2 --standalone examples/train_ddp.py

On one machine set GLOO_SOCKET_IFNAME=lo.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


@record
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--fail-rank", type=int, default=-1,
                    help="raise on this rank while TORCHELASTIC_RESTART_COUNT is 0")
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    t0 = time.time()
    dist.init_process_group("gloo", init_method="env://")
    assert dist.get_rank() == rank and dist.get_world_size() == world
    if rank == args.fail_rank and restart == 0:
        raise RuntimeError(f"train_ddp: injected failure on rank {rank}")

    torch.manual_seed(0)
    true_w = torch.arange(1.0, 9.0).unsqueeze(1)  # the same target everywhere
    g = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard
    x = torch.randn(256, 8, generator=g)
    y = x @ true_w + 0.01 * torch.randn(256, 1, generator=g)

    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        # The mean loss over all ranks, so that every rank reports the same number.
        t = loss.detach().clone()
        dist.all_reduce(t)
        losses.append(t.item() / world)
        if rank == 0:
            print(f"step {step} loss {losses[-1]:.6f}", flush=True)
    dist.barrier()
    ok = losses[-1] < losses[0] * 0.5
    print(f"rank {rank}/{world} restart {restart}: first loss {losses[0]:.4f} "
          f"last loss {losses[-1]:.4f} {'decreased' if ok else 'DID NOT DECREASE'} "
          f"({time.time() - t0:.1f}s)", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    rc = main()
    # Leave without tearing down the gloo process group: torch 1.13's ProcessGroupGloo
    # destructor can deadlock at interpreter exit (a thread joining while it waits for the GIL),
    # which hangs about one run in four. Every rank has passed the barrier and printed its line.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
