"""A worker for agent_file_timer.sh: uses torch.distributed.elastic.timer's FileTimerClient on
the pipe its launcher named in TORCHELASTIC_TIMER_FILE.

    timer_worker.py OUTDIR MODE
MODE intime: a timer of 1 s released after 0.2 s, then 2.5 s of work past its expiry; rank 0
             first writes a line that is not JSON, a line over 4096 bytes and a timer for
             $MU_VICTIM_PID (not a worker: the agent must refuse it) straight into the pipe.
             Writes OUTDIR/done.RANK.
MODE slow:   rank 1 runs `with expires(after=2, scope="slow-step"): time.sleep(600)` after
             writing the time it acquired to OUTDIR/acquired; rank 0 ends at once."""
import json
import os
import sys
import time

from torch.distributed.elastic.timer import FileTimerClient, configure, expires

out, mode = sys.argv[1], sys.argv[2]
rank = os.environ["RANK"]
path = os.environ["TORCHELASTIC_TIMER_FILE"]
configure(FileTimerClient(path))


def raw(text):
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "w") as f:
        f.write(text)


if mode == "intime":
    if rank == "0":
        victim = int(os.environ["MU_VICTIM_PID"])
        raw("this is not json\n")
        raw('{"pid": %d, "scope_id": "%s"}\n' % (os.getpid(), "x" * 5000))  # over PIPE_BUF
        raw(json.dumps({"version": 1, "pid": victim, "scope_id": "not-mine",
                        "expiration_time": time.time() - 1, "signal": 9}) + "\n")
    with expires(after=1, scope="quick-step"):
        time.sleep(0.2)
    time.sleep(2.5)  # past the released timer's expiry: a release that did not work kills here
elif mode == "slow" and rank == "1":
    with open(os.path.join(out, "acquired.tmp"), "w") as f:
        f.write("%.3f\n" % time.time())
    os.rename(os.path.join(out, "acquired.tmp"), os.path.join(out, "acquired"))
    with expires(after=2, scope="slow-step"):
        time.sleep(600)
with open(os.path.join(out, "done." + rank), "w") as f:
    f.write("ok\n")
