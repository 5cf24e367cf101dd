"""A torchrun worker for the rendezvous tests (run by /usr/bin/torchrun, Debian torch 1.13).

Joins the gloo process group that torchrun set up, runs two all_reduces and a barrier,
checks the results, and writes <outdir>/rank<RANK>.<id> with "ok <world> <restart>" or
"bad ...". With MU_FAIL_RANK set, that global rank exits 3 on the first attempt
(TORCHELASTIC_RESTART_COUNT == 0) right after joining the group, to force a re-rendezvous.
With MU_WANT_WORLD set, a worker in a smaller world waits (up to 10 min) for the agent to
restart it into a bigger one: the elastic cases' first round, before their late node.
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> int:
    outdir = sys.argv[1]
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "?")
    print(f"worker rank={rank} world={world} local_rank={os.environ.get('LOCAL_RANK')} "
          f"group_rank={os.environ.get('GROUP_RANK')} restart={restart} run_id={run_id} "
          f"master={os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}", flush=True)
    want = os.environ.get("MU_WANT_WORLD")
    if want is not None and world < int(want):
        # an elastic case's first round, before its late node: wait to be restarted into the
        # bigger world (the agent stops this worker when the node arrives)
        print(f"worker rank={rank}: world {world} < {want}, waiting for the late node", flush=True)
        time.sleep(600)
        return 1
    dist.init_process_group("gloo")
    fail_rank = os.environ.get("MU_FAIL_RANK")
    if fail_rank is not None and int(fail_rank) == rank and restart == 0:
        print(f"worker rank={rank}: failing on purpose (attempt 0)", flush=True)
        os._exit(3)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    v = torch.arange(8, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(v)
    vwant = torch.arange(8, dtype=torch.float64) * want
    dist.barrier()
    ok = t.item() == want and torch.equal(v, vwant)
    line = ("ok" if ok else "bad") + f" {world} {restart} {t.item()} {want}"
    path = os.path.join(outdir, f"rank{rank}.{run_id}")
    with open(path + ".tmp", "w") as f:
        f.write(line + "\n")
    os.rename(path + ".tmp", path)
    dist.destroy_process_group()
    print(f"worker rank={rank}: {line}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
