"""PyTorch's own TCPStore client (Debian's torch 1.13, is_master=False) against musterd's c10d
listener: c10d_store.sh runs it. Prints TAP lines ("ok - ..." / "not ok - ...").

  c10d_torch_client.py PORT before   set, get, add, compare_set, wait woken by a second client,
                                     delete_key, num_keys; leaves keys for after the restart
  c10d_torch_client.py PORT after N  the keys 'before' left are back, N keys in all (musterd
                                     was killed -9 and restarted on the same --data-dir)
  c10d_torch_client.py host          PyTorch's own store: prints its port, serves until killed
"""
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist

FAILS = 0


def check(what, got, want):
    global FAILS
    if got == want:
        print(f"ok - {what}")
    else:
        FAILS += 1
        print(f"not ok - {what}: got {got!r}, want {want!r}")


def store(port, timeout=15):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=timeout))


def before(port):
    s = store(port)
    s.set("greeting", "hello")
    check("get answers what set stored", s.get("greeting"), b"hello")
    blob = bytes(range(256)) * 4
    s.set("blob", blob)
    check("a binary value (every byte value, NULs too) comes back whole", s.get("blob"), blob)
    check("add on a new key starts from 0", s.add("counter", 5), 5)
    check("add adds (a negative amount too)", s.add("counter", -2), 3)
    check("the added value is stored as decimal text", s.get("counter"), b"3")
    check("compare_set with the current value swaps", s.compare_set("greeting", "hello", "hi"),
          b"hi")
    check("compare_set with another value answers the current one",
          s.compare_set("greeting", "nope", "x"), b"hi")
    check("compare_set on a missing key with an expected value answers it (torch's way)",
          s.compare_set("absent", "expected", "x"), b"expected")
    check("compare_set on a missing key with '' creates it",
          s.compare_set("created", "", "fresh"), b"fresh")
    check("num_keys counts every key", s.num_keys(), 4)
    other = store(port)
    woke = {}

    def setter():
        time.sleep(0.5)
        other.set("late", "arrived")

    t = threading.Thread(target=setter)
    t0 = time.time()
    t.start()
    s.wait(["late"])
    woke["after"] = time.time() - t0
    t.join()
    check("wait returns once another client sets the key (after ~0.5 s, not at once)",
          woke["after"] >= 0.4, True)
    check("get after the wait", s.get("late"), b"arrived")
    check("delete_key deletes", s.delete_key("late"), True)
    check("delete_key of a missing key answers False", s.delete_key("late"), False)
    check("num_keys after the delete", s.num_keys(), 4)
    try:
        s.wait(["never"], timedelta(seconds=1))
        check("wait on a key nobody sets times out", "returned", "timed out")
    except RuntimeError as e:
        check("wait on a key nobody sets times out", "timed out" if "imeout" in str(e) else str(e),
              "timed out")
    s2 = store(port)
    s2.set("persist/a", blob)
    s2.add("persist/n", 41)


def after(port, nkeys):
    s = store(port, timeout=30)
    check("after kill -9 and a restart: a binary value is back", s.get("persist/a"),
          bytes(range(256)) * 4)
    check("after kill -9 and a restart: the counter is back", s.add("persist/n", 1), 42)
    check("after kill -9 and a restart: every key is back", s.num_keys(), nkeys)
    check("after kill -9 and a restart: compare_set sees the old value",
          s.compare_set("greeting", "hi", "again"), b"again")


def host():
    """PyTorch's own store (is_master=True): prints its port, serves until killed."""
    s = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    print("listening on 127.0.0.1:%d" % s.port, flush=True)
    time.sleep(1 << 30)


if __name__ == "__main__":
    if sys.argv[1] == "host":
        host()
    port = int(sys.argv[1])
    if sys.argv[2] == "before":
        before(port)
    else:
        after(port, int(sys.argv[3]))
    sys.exit(1 if FAILS else 0)
