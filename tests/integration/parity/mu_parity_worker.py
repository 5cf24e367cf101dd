#!/usr/bin/python3
"""A worker for agent_torchrun_parity.sh: writes what its launcher gave it (the environment,
sys.argv and the process's own command line) to $MU_PARITY_OUT/rank<RANK>.json, and exits 0.
It imports no torch, so that the launchers' own work is what the test times. Runs as a script,
as a module (-m mu_parity_worker, with this folder on PYTHONPATH) and as a program
(--no_python: the #! line)."""
import json
import os
import sys

with open("/proc/self/cmdline", "rb") as f:
    cmdline = [a.decode() for a in f.read().split(b"\0")[:-1]]
out = os.environ["MU_PARITY_OUT"]
dump = {"env": dict(os.environ), "argv": sys.argv, "cmdline": cmdline}
path = os.path.join(out, "rank%s.json" % os.environ.get("RANK", "none"))
with open(path + ".tmp", "w") as f:
    json.dump(dump, f, indent=1, sort_keys=True)
os.rename(path + ".tmp", path)
