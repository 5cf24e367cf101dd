"""One script of TCPStore calls, run by torch 2.x's own client (in a torch root, see
scripts/torch-roots.sh) against a server; c10d_torch2.sh runs it against musterd's
--c10d-listen and against torch's own server and diffs the two transcripts line by line.

  c10d_torch2_diff.py host            torch's own server (TCPStore is_master=True): prints
                                      "port N", serves until killed
  c10d_torch2_diff.py calls PORT      the calls; one line per call: "name: result"

Results are values, not timings. Lines starting with "server:" are where the servers may
answer differently by design (docs/c10d.md says which); the test checks those apart.
Every public method of this torch's TCPStore is either called here or named in NOT_CALLED
with the reason; a method this script does not know is a failure, so a new torch's new
query is noticed.
"""
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

# Methods with no query of their own, or ones a non-libuv server refuses (tested with the C
# client, tests/fixtures/c10d/c10d_client.c, against docs/c10d.md).
NOT_CALLED = {
    "host", "port", "timeout", "set_timeout", "has_extended_api", "libuvBackend", "clone",
    "queue_push", "queue_pop", "queue_len", "wait_for_workers", "check_key",
}
CALLED = {
    "set", "get", "add", "compare_set", "check", "wait", "delete_key", "num_keys", "append",
    "multi_get", "multi_set", "list_keys", "barrier",
}


def store(port, timeout=20):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=timeout))


def out(name, value):
    print(f"{name}: {value!r}", flush=True)


def err(e):
    # the kind of error, not its text (which names ports and times)
    return f"error {type(e).__name__}"


def calls(port):
    s = store(port)
    methods = sorted(m for m in dir(s) if not m.startswith("_"))
    unknown = [m for m in methods if m not in CALLED | NOT_CALLED]
    out("torch-methods-unknown", unknown)
    has = {m: hasattr(s, m) for m in ("append", "multi_get", "list_keys", "barrier")}
    n0 = s.num_keys()
    s.set("k", "v1")
    out("get", s.get("k"))
    s.set("k", b"\x00bin\xff")
    out("get-binary", s.get("k"))
    out("add-new", s.add("c", 5))
    out("add-neg", s.add("c", -7))
    out("get-counter", s.get("c"))
    out("cs-swap", s.compare_set("k", b"\x00bin\xff", "v2"))
    out("cs-mismatch", s.compare_set("k", "nope", "x"))
    out("cs-missing-expected", s.compare_set("absent", "exp", "x"))
    out("check-after-cs-missing", s.check(["absent"]))
    out("cs-create", s.compare_set("made", "", "fresh"))
    out("check-present", s.check(["k", "c"]))
    out("check-absent", s.check(["k", "nothing"]))
    s.wait(["k", "c"], timedelta(seconds=5))
    out("wait-present", "returned")
    try:
        s.wait(["never"], timedelta(seconds=1))
        out("wait-timeout", "returned")
    except Exception as e:  # noqa: BLE001 - the kind is the result
        out("wait-timeout", err(e))
    out("get-after-timeout", s.get("k"))  # the connection is still in step
    out("delete-present", s.delete_key("made"))
    out("delete-absent", s.delete_key("made"))
    out("num-keys-delta", s.num_keys() - n0)
    if has["append"]:
        s.append("ap", "a")
        s.append("ap", "b")
        out("append", s.get("ap"))
    if has["multi_get"]:
        s.multi_set(["m1", "m2"], ["x", "y"])
        out("multi-get", s.multi_get(["m1", "m2"]))
    if has["list_keys"]:
        out("list-keys", sorted(k for k in s.list_keys() if not k.startswith("/init")))
    if has["barrier"]:
        barrier(port, s)
    woke(port, s)
    out("num-keys-end-delta", s.num_keys() - n0)


def barrier(port, s):
    s.barrier("b1", 1, timedelta(seconds=5))
    out("barrier-world-1", "returned")
    out("barrier-counter", s.get("b1"))
    got = []
    def other():
        t = store(port)
        t.barrier("b2", 3, timedelta(seconds=20))
        got.append(time.monotonic())
    th = [threading.Thread(target=other) for _ in range(2)]
    for t in th:
        t.start()
    deadline = time.monotonic() + 20
    while counter(s, "b2") < 2 and time.monotonic() < deadline:  # both others arrived
        time.sleep(0.05)
    out("barrier-before-last", len(got))
    s.barrier("b2", 3, timedelta(seconds=20))
    for t in th:
        t.join(25)
    out("barrier-world-3-all-released", len(got))
    out("barrier-counter-3", s.get("b2"))
    try:
        s.barrier("b3", 2, timedelta(seconds=1))
        out("barrier-timeout", "returned")
    except Exception as e:  # noqa: BLE001
        out("barrier-timeout", err(e))
    out("get-after-barrier-timeout", s.get("k"))
    released_by_add(port, s)


def counter(s, key):
    """A barrier's arrivals so far, read without writing the key (a write wakes its waiters on
    torch's classic server: released_by_add)."""
    return int(s.get(key)) if s.check([key]) else 0


def released_by_add(port, s):
    """Does a write to a barrier's key release the waiters before the last arrival? (server:)
    torch's classic server parks a barrier's waiters as WAIT waiters on its key, so any write
    to the key wakes them; musterd releases them only when the count reaches the world size."""
    res = []
    def waiter():
        w = store(port)
        try:
            w.barrier("b4", 3, timedelta(seconds=3))
            res.append("released")
        except Exception as e:  # noqa: BLE001
            res.append(err(e))
    t = threading.Thread(target=waiter)
    t.start()
    deadline = time.monotonic() + 20
    while counter(s, "b4") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    s.add("b4", 0)
    t.join(10)
    print(f"server: barrier-released-by-add: {res[0] if res else 'hung'!r}", flush=True)


def woke(port, s):
    """Does a compare_set that creates a key wake a client waiting on it? (server: line)"""
    res = []
    def waiter():
        w = store(port)
        try:
            w.wait(["cs-wake"], timedelta(seconds=4))
            res.append("woken")
        except Exception as e:  # noqa: BLE001
            res.append(err(e))
    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(1)  # the waiter has sent its WAIT (it cannot be observed from here)
    s.compare_set("cs-wake", "", "v")
    t.join(10)
    print(f"server: compare-set-create-wakes: {res}", flush=True)


def host():
    s = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=60))
    print(f"port {s.port}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    print(f"# torch {torch.__version__}", file=sys.stderr)
    if sys.argv[1] == "host":
        host()
    else:
        calls(int(sys.argv[2]))
