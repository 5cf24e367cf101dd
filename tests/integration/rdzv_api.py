"""The /v1 rendezvous API against a real musterd (driven by rdzv_api.sh).

usage: rdzv_api.py URL
Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
"""
import json
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, __import__("os").path.dirname(__file__))
from etcd_compat import until  # noqa: E402

URL = sys.argv[1].rstrip("/")
FAILS = 0


def check(name, cond, detail=""):
    global FAILS
    if cond:
        print("ok - " + name)
    else:
        FAILS += 1
        print("not ok - %s %s" % (name, detail))
    sys.stdout.flush()


# Each node's session from its join answer (docs/rendezvous.md, "Sessions"): call() sends it
# with every later call that names the node, as the node's own client does.
SESSIONS = {}


def speaker(path, body):
    """(run, node) a call names, or None."""
    m = re.match(r"/v1/runs/([^/?]+)/(join|heartbeat|watch|leave|report|health)(\?.*)?$", path)
    if not m:
        return None
    node = None
    if isinstance(body, dict):
        node = body.get("node_id")
    q = re.search(r"[?&]node_id=([^&]*)", path)
    if q:
        node = q.group(1)
    return (m.group(1), node) if isinstance(node, str) else None


def call(method, path, body=None, timeout=10, raw=False):
    """Returns (status, parsed JSON or raw bytes)."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    if method == "POST" and data is not None:
        req.add_header("Content-Type", "application/json")  # /v1 POSTs carry JSON
    who = speaker(path, body)
    if who in SESSIONS:
        req.add_header("X-Muster-Session", SESSIONS[who])
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        out = e.read()
        status = e.code
    if raw:
        return status, out
    try:
        parsed = json.loads(out) if out else None
    except ValueError:
        return status, out
    if who is not None and isinstance(parsed, dict) and isinstance(parsed.get("session"), str):
        SESSIONS[who] = parsed["session"]
    return status, parsed


def join(run, node, min_nodes, max_nodes=None, lws=2, **kw):
    body = {"node_id": node, "addr": "127.0.0.%d" % (1 + sum(map(ord, node)) % 200),
            "local_world_size": lws, "master_port": 29400, "min_nodes": min_nodes}
    if max_nodes is not None:
        body["max_nodes"] = max_nodes
    body.update(kw)
    return call("POST", "/v1/runs/%s/join" % run, body, timeout=kw.get("join_timeout_ms", 10000) / 1000 + 5)


def in_threads(fns):
    """Runs each fn in a thread at once; returns their results in order."""
    res = [None] * len(fns)

    def run(i, f):
        res[i] = f()
    ts = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return res


def metric(name):
    """The value of a musterd gauge or counter in /metrics (0 when absent)."""
    _, text = call("GET", "/metrics", raw=True)
    m = re.search(rb"^%s (\d+)$" % name.encode(), text, re.M)
    return int(m.group(1)) if m else 0


def started(fn):
    """Starts fn in a thread; returns a getter that waits for its result."""
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()))
    t.start()

    def get(timeout=30):
        t.join(timeout)
        return box.get("r")
    get.thread = t
    return get


# -- 1. Concurrent join of four nodes: the round closes at max ---------------------------------
t0 = time.time()
res = in_threads([lambda n=n: join("conc", "n%d" % n, 2, 4, lws=n + 1, last_call_ms=5000)
                  for n in range(4)])
elapsed = time.time() - t0
check("four concurrent joins all answered 200", all(s == 200 for s, _ in res), res)
ranks = sorted(b["node_rank"] for s, b in res if s == 200)
check("node ranks are 0..3", ranks == [0, 1, 2, 3], ranks)
check("closed at max without waiting for last call", elapsed < 4, "%.2fs" % elapsed)
if all(s == 200 for s, _ in res):
    by_rank = {b["node_rank"]: b for _, b in res}
    off = 0
    good = True
    for r in range(4):
        b = by_rank[r]
        good = good and b["rank_offset"] == off and b["world_size"] == 10 and b["nnodes"] == 4
        off += b["local_world_size"]
    check("rank offsets and world size add up", good, by_rank)
    check("master is node rank 0", all(b["master_addr"] == by_rank[0]["members"][0]["addr"]
                                       for b in by_rank.values()))
    check("members listed in rank order",
          [m["node_id"] for m in by_rank[0]["members"]] ==
          [by_rank[r]["members"][r]["node_id"] for r in range(4)])

# -- 2. A newcomer makes the watch fire "waiting"; the next round includes it ------------------
a, b = in_threads([lambda: join("grow", "a", 1, 3, last_call_ms=300),
                   lambda: join("grow", "b", 1, 3, last_call_ms=300)])
check("grow: round 1 has a and b", a[0] == 200 and a[1]["nnodes"] == 2, (a, b))
w = started(lambda: call("GET", "/v1/runs/grow/watch?node_id=a&round=1&timeout_ms=10000",
                         timeout=15))
check("grow: the watch is open", until(lambda: metric("muster_rdzv_pending_watches") == 1))
c = started(lambda: join("grow", "c", 1, 3, last_call_ms=300))
ws, wb = w()
check("watch fires 'waiting' for a newcomer", ws == 200 and wb["event"] == "waiting"
      and wb["waiting"] == 1, (ws, wb))
a2, b2 = in_threads([lambda: join("grow", "a", 1, 3, last_call_ms=300),
                     lambda: join("grow", "b", 1, 3, last_call_ms=300)])
c2 = c()
check("round 2 has three nodes, old ranks kept, newcomer last",
      a2[0] == 200 and c2[0] == 200 and a2[1]["round"] == 2 and a2[1]["nnodes"] == 3
      and a2[1]["node_rank"] == a[1]["node_rank"] and b2[1]["node_rank"] == b[1]["node_rank"]
      and c2[1]["node_rank"] == 2, (a2, b2, c2))
s, body = call("GET", "/v1/runs/grow/watch?node_id=a&round=1&timeout_ms=10000")
check("a watch on an old round says 'superseded'", body.get("event") == "superseded", body)

# -- 3. Heartbeats keep a lease; a silent member expires and breaks the round -------------------
in_threads([lambda: join("lease", "a", 2, lease_ttl_ms=700),
            lambda: join("lease", "b", 2, lease_ttl_ms=700)])
w = started(lambda: call("GET", "/v1/runs/lease/watch?node_id=a&round=1&timeout_ms=10000",
                         timeout=15))
t0 = time.time()
hb = []
while time.time() - t0 < 3 and w.thread.is_alive():
    hb.append(call("POST", "/v1/runs/lease/heartbeat", {"node_id": "a"})[0])
    time.sleep(0.2)
ws, wb = w(1)
check("heartbeats of a live member answer 200", all(s == 200 for s in hb), hb)
check("b's lease expired: watch says 'broken'", ws == 200 and wb["event"] == "broken", (ws, wb))
s, body = call("POST", "/v1/runs/lease/heartbeat", {"node_id": "b"})
check("heartbeat after expiry is 404 not_member", s == 404 and body["error"] == "not_member",
      (s, body))
s, body = call("POST", "/v1/runs/lease/heartbeat", {"node_id": "a"})
check("survivor's heartbeat reports the broken round", s == 200 and body["state"] == "broken",
      body)

# -- 4. Barriers -------------------------------------------------------------------------------
join("work", "solo", 1)
res = in_threads([lambda i=i: call("POST", "/v1/runs/work/barrier/start",
                                   {"count": 3, "id": "r%d" % i, "timeout_ms": 5000})
                  for i in range(3)])
check("barrier opens for three arrivals", all(s == 200 and b["generation"] == 1
                                              for s, b in res), res)
res = in_threads([lambda i=i: call("POST", "/v1/runs/work/barrier/start",
                                   {"count": 3, "id": "r%d" % i, "timeout_ms": 5000})
                  for i in range(3)])
check("barrier is reusable (generation 2)", all(s == 200 and b["generation"] == 2
                                                for s, b in res), res)
s, body = call("POST", "/v1/runs/work/barrier/lonely", {"count": 2, "id": "x", "timeout_ms": 300})
check("a barrier short of arrivals times out with 408",
      s == 408 and body["error"] == "barrier_timeout", (s, body))

# -- 5. KV ------------------------------------------------------------------------------------
s, body = call("PUT", "/v1/runs/work/kv/addr/0", b"10.0.0.1:4000")
check("kv put", s == 200 and body["version"] >= 1, (s, body))
s, val = call("GET", "/v1/runs/work/kv/addr/0", raw=True)
check("kv get returns the raw value", s == 200 and val == b"10.0.0.1:4000", (s, val))
g = started(lambda: call("GET", "/v1/runs/work/kv/addr/1?wait_ms=5000", raw=True, timeout=10))
# No counter shows a KV wait; the answer is the same if the write comes first (the wait
# path is then not taken), so this short pause only makes the wait path likely.
time.sleep(0.2)
call("PUT", "/v1/runs/work/kv/addr/1", b"\x00binary\xff")
s, val = g()
check("kv get with wait_ms answers when the key is set", s == 200 and val == b"\x00binary\xff",
      (s, val))
s, body = call("GET", "/v1/runs/work/kv/never?wait_ms=200")
check("kv wait times out with 408", s == 408 and body["error"] == "kv_timeout", (s, body))
res = in_threads([lambda: call("POST", "/v1/runs/work/kv/ctr?add=1") for _ in range(10)])
s, body = call("POST", "/v1/runs/work/kv/ctr?add=0")
check("kv add counts ten concurrent increments", body == {"value": 10}, body)
s, body = call("POST", "/v1/runs/work/kv/addr/0?add=1")
check("kv add on a non-integer is 409", s == 409 and body["error"] == "not_a_counter", body)
s, _ = call("DELETE", "/v1/runs/work/kv/addr/0")
s2, body = call("GET", "/v1/runs/work/kv/addr/0")
check("kv delete, then 404", s == 200 and s2 == 404 and body["error"] == "no_such_key", body)

# -- 6. Leave, close, shutdown ------------------------------------------------------------------
in_threads([lambda: join("fin", "a", 2), lambda: join("fin", "b", 2)])
call("POST", "/v1/runs/fin/leave", {"node_id": "a", "status": "succeeded"})
s, body = call("GET", "/v1/runs/fin")
check("run stays open until every member left", body["state"] == "open", body)
call("POST", "/v1/runs/fin/leave", {"node_id": "b", "status": "succeeded"})
s, body = call("GET", "/v1/runs/fin")
check("run closed when every member left with success", body["state"] == "closed", body)

p = started(lambda: join("cl", "a", 3))
check("cl: the join is pending", until(lambda: metric("muster_rdzv_pending_joins") == 1))
s, body = call("POST", "/v1/runs/cl/close", {"reason": "job finished"})
check("close answers 200", s == 200 and body["state"] == "closed", (s, body))
s, body = p()
check("pending join gets 410 run_closed", s == 410 and body["error"] == "run_closed", (s, body))
s, body = join("cl", "late", 3)
check("a late join gets 410 with the reason",
      s == 410 and body["reason"] == "job finished" and "closed" in body["message"], (s, body))

in_threads([lambda: join("sh", "a", 1)])
w = started(lambda: call("GET", "/v1/runs/sh/watch?node_id=a&round=1&timeout_ms=10000",
                         timeout=15))
check("sh: the watch is open", until(lambda: metric("muster_rdzv_pending_watches") == 1))
s, body = call("POST", "/v1/runs/sh/shutdown", {"reason": "rank 3 failed"})
ws, wb = w()
check("shutdown fires watches with 'shut'", ws == 200 and wb["event"] == "shut", (ws, wb))
s, body = call("POST", "/v1/runs/sh/close")
check("closing a shut run is 410", s == 410, (s, body))

# -- 7. A client that goes away withdraws its join --------------------------------------------
sock = socket.create_connection(("127.0.0.1", int(URL.rsplit(":", 1)[1])))
body = json.dumps({"node_id": "ghost", "addr": "h", "min_nodes": 2}).encode()
sock.sendall(b"POST /v1/runs/ghost/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: %d\r\n\r\n%s"
             % (len(body), body))
until(lambda: call("GET", "/v1/runs/ghost")[1].get("waiting") == 1)
s, info = call("GET", "/v1/runs/ghost")
pending_before = info["waiting"]
sock.close()
until(lambda: call("GET", "/v1/runs/ghost")[1].get("waiting") == 0)
s, info = call("GET", "/v1/runs/ghost")
check("a disconnected client's join is withdrawn", pending_before == 1 and info["waiting"] == 0,
      (pending_before, info))

# -- 8. Bad requests: a clear 4xx each, and the server keeps serving ----------------------------
bad = [
    ("POST", "/v1/runs/x/join", b"{not json", 400, "not a JSON object"),
    ("POST", "/v1/runs/x/join", {"addr": "h", "min_nodes": 1}, 400, "'node_id' is missing"),
    ("POST", "/v1/runs/x/join", {"node_id": "n", "addr": "h", "min_nodes": "2"}, 400,
     "'min_nodes' must be an integer"),
    ("POST", "/v1/runs/x/join", {"node_id": "n", "addr": "h", "min_nodes": 3, "max_nodes": 2},
     400, "max_nodes"),
    ("POST", "/v1/runs/x/join", {"node_id": "has space", "addr": "h", "min_nodes": 1}, 400,
     "node_id"),
    ("POST", "/v1/runs/bad!id/join", {"node_id": "n", "addr": "h", "min_nodes": 1}, 400,
     "run id"),
    ("POST", "/v1/runs/conc/join", {"node_id": "n9", "addr": "h", "min_nodes": 3}, 409,
     "config_mismatch"),
    ("GET", "/v1/runs/x/join", None, 405, "use POST"),
    ("GET", "/v1/runs/work/nonsense", None, 404, "no endpoint"),
    ("GET", "/v1/runs/nope", None, 404, "no_such_run"),
    ("GET", "/v1/runs/work/watch?node_id=a&round=zero", None, 400, "'round'"),
    ("POST", "/v1/runs/work/barrier/b", {"count": 0}, 400, "'count'"),
    ("POST", "/v1/runs/work/leave", {"node_id": "solo", "status": "meh"}, 400, "'status'"),
    ("POST", "/v1/runs/work/kv/k?add=x", None, 400, "'add'"),
]
for method, path, body, want, needle in bad:
    s, out = call(method, path, body)
    text = json.dumps(out) if not isinstance(out, bytes) else out.decode("latin-1")
    check("%s %s -> %d" % (method, path[:40], want), s == want and needle in text, (s, text[:300]))
# Over the body cap: the server may answer 413 and close before the body is sent, so use a raw
# socket that tolerates the early close.
big = socket.create_connection(("127.0.0.1", int(URL.rsplit(":", 1)[1])))
big.settimeout(10)
n = 1024 * 1024 + 1
big.sendall(b"PUT /v1/runs/work/kv/big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n)
try:
    big.sendall(b"x" * n)
except OSError:
    pass
resp = b""
try:
    while not resp.endswith(b"}") and len(resp) < 65536:
        chunk = big.recv(65536)
        if not chunk:
            break
        resp += chunk
except OSError:
    pass
big.close()
check("PUT over 1 MiB -> 413", resp.startswith(b"HTTP/1.1 413"), resp[:200])
s, _ = call("GET", "/healthz")
check("musterd still serving after bad requests", s == 200, s)
s, body = join("after", "n", 1)
check("and still joins", s == 200 and body["round"] == 1, (s, body))

s, body = call("GET", "/v1/runs")
ids = {r["run_id"] for r in body["runs"]}
check("GET /v1/runs lists the runs", {"conc", "grow", "lease", "work", "fin"} <= ids, ids)

print("# %s" % ("all passed" if FAILS == 0 else "%d failed" % FAILS))
sys.exit(1 if FAILS else 0)
