#!/usr/bin/env python3
"""A PyTorch (gloo) worker for the job-progress tests (tests/integration/agent_progress.sh).

Every step all-reduces a tensor and checks the sum. Only the ranks named by --talk make progress
the agent can see (a line per step, or the heartbeat file with --heartbeat); the others print
nothing at all, as most DDP scripts' ranks 1..N do. Faults and shapes:

  --talk R,R            the ranks that print a line per step (default: 0)
  --import-s S          sleep S s before anything (a slow `import torch`, a compilation)
  --hang-rank R --hang-after K   rank R sleeps forever after step K (first attempt only)
  --heartbeat           the talking ranks write "step N" to MUSTER_HEARTBEAT_FILE instead
  --noise               the talking ranks also print a line that is no step between steps
  --never               no rank ever makes progress: every rank sleeps (first attempts too)
  --fail-at K           rank 0 raises at step K in the first attempt
  --checkpoint-every K  with --heartbeat: "checkpoint N" instead of "step N" every K steps,
                        then 1 s more (the agent reads the file's last line every tick)
  --total               with --heartbeat: "step N/T" (T the job's total, --steps): the ETA
  --kill-at K           rank 0 kills itself (SIGKILL) at step K in the first attempt
  --ckpt-file PATH      every checkpoint's step is saved there, and a restart resumes after it
                        (bench/bench_goodput.sh's checkpoint part)
"""
import argparse
import os
import signal
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step-ms", type=int, default=200)
    ap.add_argument("--talk", default="0")
    ap.add_argument("--once", default="")  # ranks that print their first step only
    ap.add_argument("--import-s", type=float, default=0)
    ap.add_argument("--hang-rank", type=int, default=-1)
    ap.add_argument("--hang-after", type=int, default=5)
    ap.add_argument("--heartbeat", action="store_true")
    ap.add_argument("--noise", action="store_true")
    ap.add_argument("--never", action="store_true")
    ap.add_argument("--fail-at", type=int, default=-1)
    ap.add_argument("--checkpoint-every", type=int, default=0)
    ap.add_argument("--total", action="store_true")
    ap.add_argument("--kill-at", type=int, default=-1)
    ap.add_argument("--ckpt-file", default="")
    args = ap.parse_args()
    if args.never:
        time.sleep(10 ** 9)
    time.sleep(args.import_s)
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    talk = rank in [int(r) for r in args.talk.split(",") if r != ""]
    once = rank in [int(r) for r in args.once.split(",") if r != ""]
    dist.init_process_group("gloo", init_method="env://")
    first = 1
    if args.ckpt_file and os.path.exists(args.ckpt_file):
        with open(args.ckpt_file) as f:
            first = int(f.read().strip() or 0) + 1  # resume after the checkpoint
    hb = os.environ.get("MUSTER_HEARTBEAT_FILE")  # none under torchrun
    for i in range(first, args.steps + 1):
        if rank == 0 and restart == 0 and i == args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == args.hang_rank and restart == 0 and i == args.hang_after + 1:
            time.sleep(10 ** 9)  # the hang: rank R in its own code
        if rank == 0 and restart == 0 and i == args.fail_at:
            raise RuntimeError(f"progress_worker: injected failure at step {i}")
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t)
        if t[0].item() != world * (world + 1) / 2:
            raise RuntimeError(f"rank {rank}: all-reduce gave {t[0].item()}")
        ck = args.checkpoint_every and i % args.checkpoint_every == 0
        if ck and args.ckpt_file and rank == 0:
            with open(args.ckpt_file + ".tmp", "w") as f:
                f.write(f"{i}\n")
            os.replace(args.ckpt_file + ".tmp", args.ckpt_file)
        if talk and args.heartbeat and hb:
            with open(hb, "w") as f:
                total = f"/{args.steps}" if args.total else ""
                f.write(f"checkpoint {i}\n" if ck else f"step {i}{total}\n")
        if ck and args.heartbeat:
            time.sleep(1.0)  # a checkpoint takes a while: the agent reads the last line
        elif talk or (once and i == first):
            print(f"rank {rank} step {i} restart {restart}", flush=True)
        if talk and args.noise:
            print(f"rank {rank} some other line", flush=True)
        time.sleep(args.step_ms / 1000)
    dist.barrier()
    if talk:
        print(f"rank {rank}: done, world {world} restart {restart} steps {args.steps}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # as goodput_worker.py: leave without tearing down gloo (torch 1.13)


if __name__ == "__main__":
    main()
