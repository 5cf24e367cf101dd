#!/usr/bin/python3
"""python-etcd (Debian python3-etcd 0.4.5) against a server: the client torch uses.

usage: etcd_python_etcd.py URL
Read/write/CAS (test_and_set, prevIndex, update()), TTL expiry, watches (wait=True with an
index, recursive, blocking, timeout), in-order keys (append), delete, directory listings,
the exception mapping (errorCode -> class), X-Etcd-Cluster-Id, etcd_index.
Prints ok/not ok per check and "N passed, N failed"; exits 1 on any failure.
"""
import logging
import os
import sys
import threading
import time
import urllib.parse

import etcd

sys.path.insert(0, os.path.dirname(__file__))
from etcd_compat import check, tap_done, until  # noqa: E402


def eq(name, got, want):
    check(name, got == want, "got %r, want %r" % (got, want))


def raises(name, exc, fn, *a, **kw):
    try:
        r = fn(*a, **kw)
    except exc:
        check(name, True)
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, "raised %s: %s, want %s" % (type(e).__name__, e, exc.__name__))
        return
    check(name, False, "returned %r, want %s" % (r, exc.__name__))


class WarnCounter(logging.Handler):
    def __init__(self):
        super().__init__()
        self.msgs = []

    def emit(self, record):
        self.msgs.append(record.getMessage())


def watchers(url):
    """The number of blocked watchers the server counts (/v2/stats/store, etcd's and musterd's)."""
    import json
    import urllib.request
    with urllib.request.urlopen(url + "/v2/stats/store", timeout=5) as r:
        return json.load(r)["watchers"]


def main():
    url = sys.argv[1]
    u = urllib.parse.urlsplit(url)
    warns = WarnCounter()
    logging.getLogger("etcd.client").addHandler(warns)
    logging.getLogger("etcd.client").setLevel(logging.WARNING)

    # The constructor does GET /v2/machines (allow_reconnect) like torch's rendezvous.
    c = etcd.Client(host=u.hostname, port=u.port, protocol="http", allow_reconnect=True,
                    read_timeout=10)
    eq("machines", c.machines, [url])
    check("version", c.version is not None and c.version != "", repr(c.version))
    P = "/pyetcd"

    # write / read
    r = c.write(P + "/a", "hello")
    eq("write: action", r.action, "set")
    eq("write: newKey", r.newKey, True)
    eq("write: etcd_index = modifiedIndex", c.read(P + "/a").etcd_index, r.modifiedIndex)
    r2 = c.write(P + "/a", "hello2")
    eq("overwrite: newKey false", r2.newKey, False)
    eq("overwrite: createdIndex reset", r2.createdIndex, r2.modifiedIndex)
    eq("overwrite: prevNode value", r2._prev_node.value, "hello")
    eq("read", c.read(P + "/a").value, "hello2")
    eq("get", c.get(P + "/a").value, "hello2")
    raises("read missing -> EtcdKeyNotFound", etcd.EtcdKeyNotFound, c.read, P + "/missing")
    raises("create existing -> EtcdAlreadyExist", etcd.EtcdAlreadyExist,
           c.write, P + "/a", "x", prevExist=False)
    r = c.write(P + "/new", "n", prevExist=False)
    eq("create: action", r.action, "create")
    raises("update missing -> EtcdKeyNotFound", etcd.EtcdKeyNotFound,
           c.write, P + "/missing", "x", prevExist=True)
    state = '{"status": "joinable", "version": "1", "participants": [0, 1]}'
    c.write(P + "/json", state)
    eq("value with spaces and JSON", c.read(P + "/json").value, state)

    # CAS
    r = c.test_and_set(P + "/a", "v3", "hello2")
    eq("test_and_set: action", r.action, "compareAndSwap")
    raises("test_and_set wrong -> EtcdCompareFailed", etcd.EtcdCompareFailed,
           c.test_and_set, P + "/a", "v4", "hello2")
    cur = c.read(P + "/a")
    r = c.write(P + "/a", "v5", prevIndex=cur.modifiedIndex)
    eq("prevIndex CAS", (r.action, r.value), ("compareAndSwap", "v5"))
    raises("stale prevIndex -> EtcdCompareFailed", etcd.EtcdCompareFailed,
           c.write, P + "/a", "v6", prevIndex=cur.modifiedIndex)
    obj = c.read(P + "/a")
    obj.value = "via-update"
    r = c.update(obj)
    eq("update(): value", c.read(P + "/a").value, "via-update")
    raises("update() stale -> EtcdCompareFailed", etcd.EtcdCompareFailed, c.update, obj)
    # torch's legacy rendezvous: create-if-absent then CAS on the JSON value with a ttl
    c.write(P + "/av", '{"status": "setup"}', prevExist=False, ttl=5)
    r = c.test_and_set(P + "/av", '{"status": "joinable"}', '{"status": "setup"}', ttl=10)
    eq("CAS with ttl: ttl", r.ttl in (9, 10), True)
    r = c.test_and_set(P + "/av", '{"status": "final"}', '{"status": "joinable"}')
    eq("CAS without ttl makes the key permanent", (r.ttl, r.expiration), (None, None))

    # directories
    c.write(P + "/d", None, dir=True)
    c.write(P + "/d/x", "1")
    c.write(P + "/d/y", "2")
    c.write(P + "/d/sub/z", "3")
    c.write(P + "/d/_hidden", "h")
    r = c.read(P + "/d")
    eq("dir: dir flag", r.dir, True)
    eq("dir listing (direct children)", sorted(ch.key for ch in r.children),
       [P + "/d/sub", P + "/d/x", P + "/d/y"])
    r = c.read(P + "/d", recursive=True)
    eq("recursive leaves", sorted(ch.key for ch in r.leaves),
       [P + "/d/sub/z", P + "/d/x", P + "/d/y"])
    r = c.read(P + "/d", recursive=True, sorted=True)
    eq("sorted listing", [ch["key"] for ch in r._children], [P + "/d/sub", P + "/d/x", P + "/d/y"])
    eq("hidden key readable directly", c.read(P + "/d/_hidden").value, "h")
    raises("value on a dir -> EtcdNotFile", etcd.EtcdNotFile, c.write, P + "/d", "v")
    raises("key under a file -> EtcdNotDir", etcd.EtcdNotDir, c.write, P + "/a/b", "v")
    raises("delete dir without flags -> EtcdNotFile", etcd.EtcdNotFile, c.delete, P + "/d")
    raises("delete non-empty dir -> EtcdDirNotEmpty", etcd.EtcdDirNotEmpty,
           c.delete, P + "/d", dir=True)
    raises("write root -> EtcdRootReadOnly", etcd.EtcdRootReadOnly, c.write, "/", "v")
    c.write(P + "/empty", None, dir=True)
    r = c.read(P + "/empty")
    eq("empty dir: no children but itself", [ch.key for ch in r.children], [P + "/empty"])
    eq("empty dir: _children", r._children, [])

    # delete
    r = c.delete(P + "/d/x")
    eq("delete: action", r.action, "delete")
    raises("delete missing", etcd.EtcdKeyNotFound, c.delete, P + "/d/x")
    r = c.delete(P + "/d/y", prevValue="2")
    eq("delete prevValue: compareAndDelete", r.action, "compareAndDelete")
    raises("delete wrong prevValue", etcd.EtcdCompareFailed, c.delete, P + "/d/sub/z",
           prevValue="nope")
    r = c.delete(P + "/d", recursive=True)
    eq("recursive delete", r.action, "delete")
    raises("recursive delete: gone", etcd.EtcdKeyNotFound, c.read, P + "/d/sub/z")
    r = c.delete(P + "/empty", dir=True)
    eq("delete empty dir", r.action, "delete")

    # in-order keys
    keys = [c.write(P + "/queue", "job%d" % i, append=True).key for i in range(3)]
    eq("append: keys increase", keys == sorted(keys) and len(set(keys)) == 3, True)
    r = c.read(P + "/queue", sorted=True)
    eq("append: sorted values", [ch.value for ch in r.children], ["job0", "job1", "job2"])

    # TTL expiry
    r = c.write(P + "/ttl", "t", ttl=1)
    eq("ttl on write", r.ttl, 1)
    check("expiration on write", r.expiration is not None)
    eq("ttl=1 key readable at once", c.read(P + "/ttl").value, "t")

    def gone():
        try:
            c.read(P + "/ttl")
            return False
        except etcd.EtcdKeyNotFound:
            return True
    eq("ttl=1 key expires (within 5 s)", until(gone, 5), True)
    raises("ttl=1 key expired", etcd.EtcdKeyNotFound, c.read, P + "/ttl")
    c.write(P + "/rk", "", ttl=10)
    r = c.write(P + "/rk", None, ttl=30, refresh=True, prevExist=True)
    eq("refresh: ttl", r.ttl in (29, 30), True)
    eq("refresh: value kept", c.read(P + "/rk").value, "")

    # watches
    r = c.write(P + "/w", "w1")
    idx = r.modifiedIndex
    c.write(P + "/w", "w2")
    ev = c.watch(P + "/w", index=idx, timeout=5)
    eq("watch from history (index)", (ev.value, ev.modifiedIndex), ("w1", idx))
    ev = c.read(P + "/w", wait=True, waitIndex=idx + 1, timeout=5)
    eq("read(wait=True, waitIndex)", ev.value, "w2")
    got = {}

    def waiter(name, **kw):
        try:
            got[name] = c2.read(P + "/w" if name != "rec" else P, wait=True, timeout=10, **kw)
        except Exception as e:  # noqa: BLE001
            got[name] = e

    c2 = etcd.Client(host=u.hostname, port=u.port, protocol="http", read_timeout=10)
    t1 = threading.Thread(target=waiter, args=("key",))
    t1.start()
    eq("the blocking watch is registered", until(lambda: watchers(url) == 1), True)
    c.write(P + "/w", "w3")
    t1.join(10)
    eq("blocking watch wakes on write", getattr(got.get("key"), "value", got.get("key")), "w3")
    t2 = threading.Thread(target=waiter, args=("rec",), kwargs={"recursive": True})
    t2.start()
    eq("the recursive watch is registered", until(lambda: watchers(url) == 1), True)
    c.write(P + "/deep/er/key", "rec")
    t2.join(10)
    eq("recursive watch sees a deep child", getattr(got.get("rec"), "key", got.get("rec")),
       P + "/deep/er/key")
    raises("watch timeout -> EtcdWatchTimedOut", etcd.EtcdWatchTimedOut,
           c.watch, P + "/never", timeout=1)
    # the server must still answer after the client dropped a timed-out watch
    eq("read after a dropped watch", c.read(P + "/w").value, "w3")
    # expire events reach watchers (legacy rendezvous waits for them)
    r = c.write(P + "/lease/rank_0", "", ttl=1)
    ev = c.watch(P + "/lease", index=r.modifiedIndex + 1, recursive=True, timeout=5)
    eq("recursive watch gets the expire event", (ev.action, ev.key),
       ("expire", P + "/lease/rank_0"))
    # torch's pattern: the next waitIndex is etcd_index + 1
    r = c.read(P + "/w")
    t3 = threading.Thread(target=lambda: got.__setitem__(
        "next", c2.watch(P + "/w", index=r.etcd_index + 1, timeout=10)))
    t3.start()  # it waits for index etcd_index + 1, so the write may come before it is open
    c.write(P + "/w", "w4")
    t3.join(10)
    eq("watch at etcd_index + 1", getattr(got.get("next"), "value", None), "w4")

    # event index cleared (errorCode 401 must arrive as HTTP 400, not 401)
    start = c.write(P + "/busy", "0").modifiedIndex
    for i in range(1005):
        c.write(P + "/busy", str(i))
    raises("old waitIndex -> EtcdEventIndexCleared", etcd.EtcdEventIndexCleared,
           c.watch, P + "/busy", index=start, timeout=5)

    # concurrent CAS increments (torch's version_counter pattern): no lost update
    c.write(P + "/counter", "0")
    errors = []

    def incr(n):
        cl = etcd.Client(host=u.hostname, port=u.port, protocol="http", read_timeout=10)
        for _ in range(n):
            while True:
                cur = cl.read(P + "/counter")
                try:
                    cl.write(P + "/counter", str(int(cur.value) + 1),
                             prevIndex=cur.modifiedIndex)
                    break
                except etcd.EtcdCompareFailed:
                    continue
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))
                    return

    ts = [threading.Thread(target=incr, args=(40,)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    eq("4 clients x 40 CAS increments", (c.read(P + "/counter").value, errors), ("160", []))

    # cluster id: present and constant (python-etcd warns when missing)
    check("X-Etcd-Cluster-Id seen", bool(c.expected_cluster_id), repr(c.expected_cluster_id))
    missing = [m for m in warns.msgs if "cluster" in m.lower()]
    eq("no cluster-id warnings", missing, [])

    return tap_done()


if __name__ == "__main__":
    try:
        rc = main()
    except Exception:  # noqa: BLE001 - an unexpected exception is a failed check
        import traceback
        traceback.print_exc()
        print("not ok - unexpected exception (checks after it did not run)")
        rc = 1
    sys.exit(rc)
