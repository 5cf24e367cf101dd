#!/usr/bin/python3
"""A recursive GET and DELETE of a big tree do not stall musterd (issue 15, "no stalls").

Usage: bigtree.py URL NKEYS
  URL    a musterd started with --max-output-bytes large enough for the whole tree's answer
       bigtree.py too_large URL NKEYS   (see too_large_main())

Builds NKEYS keys under /big (dirs of 5,000 keys), then:
  - GET /big?recursive=true (and a sorted GET of one dir) while another client (a process of
    its own) sends small GETs one after another: each small GET is answered within BOUND_MS
    (more on a loaded machine: bound_ms), some of them while the big answer is being rendered
    (before its first byte), and the big answer is complete (NKEYS values) and consistent (the
    tree at its X-Etcd-Index: a PUT sent meanwhile is in it exactly when its index is not above
    it);
  - DELETE /big?recursive=true under the same probe: one event at one index, watchers of a key
    inside the tree and of the tree itself woken with it, /big gone, the key count back.
Prints "ok - what" / "not ok - what: why" lines. Python 3 standard library, raw sockets.
"""
import json
import select
import socket
import subprocess
import sys
import time
import urllib.parse

BOUND_MS = 50.0  # a behaviour check: a stalled loop takes seconds; generous under load
# On a loaded machine every small GET is slower, the slowest the most (a time slice of another
# process): the bound grows with the machine's own pace, to BOUND_PACE times the slowest small
# GET of the BASELINE_S before the big request. A window to the first byte too short for nine
# median small GETs cannot show whether the loop yields: such a run is tried again.
BASELINE_S = 0.3
BOUND_PACE = 3
PER_DIR = 5000  # over the store's sort run (2048): a sorted GET of one sorts in steps


def out(ok, what, why=""):
    print(("ok - " if ok else "not ok - ") + what + ("" if ok else ": " + why), flush=True)
    return ok


class Conn:
    """One keep-alive HTTP/1.1 connection with a response reader (Content-Length or chunked).
    Reads into one bytearray with a read position: no copy per piece (the reader shares the GIL
    with the probe thread, whose latencies must be the server's)."""

    def __init__(self, url, timeout=30.0):
        u = urllib.parse.urlsplit(url)
        self.s = socket.create_connection((u.hostname, u.port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0
        self.first_byte = None  # time.monotonic() of the first byte of the last response

    def send(self, method, path):
        self.s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\n\r\n" % (method, path)).encode())

    def _more(self):
        if self.pos > (1 << 20) and self.pos * 2 > len(self.buf):
            del self.buf[:self.pos]
            self.pos = 0
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError("connection closed")
        if self.first_byte is None:
            self.first_byte = time.monotonic()
        self.buf += d

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i])
                self.pos = i + 2
                return line
            self._more()

    def _take(self, n):
        while len(self.buf) - self.pos < n:
            self._more()
        d = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return d

    def response(self):
        """Returns: (status, headers dict with lower-case names, body bytes)."""
        self.first_byte = None if self.pos == len(self.buf) else time.monotonic()
        status = int(self._line().split()[1])
        headers = {}
        while True:
            line = self._line()
            if not line:
                break
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            return status, headers, self._take(int(headers["content-length"]))
        parts = []
        while True:
            n = int(self._line().split(b";")[0], 16)
            if n == 0:
                self._line()
                break
            parts.append(self._take(n))
            self._take(2)
        return status, headers, b"".join(parts)

    def call(self, method, path):
        self.send(method, path)
        return self.response()

    def close(self):
        self.s.close()


def build(url, nkeys):
    """PUTs nkeys keys, 1,000 pipelined at a time. Returns: the last index."""
    c = Conn(url)
    last = 0
    for start in range(0, nkeys, PER_DIR):
        reqs = b"".join(
            ("PUT /v2/keys/big/d%d/k%d?value=v%d HTTP/1.1\r\nHost: x\r\n\r\n"
             % (i // PER_DIR, i % PER_DIR, i)).encode()
            for i in range(start, min(nkeys, start + PER_DIR)))
        c.s.sendall(reqs)
        for _ in range(min(nkeys, start + PER_DIR) - start):
            st, h, _b = c.response()
            if st != 201:
                raise RuntimeError("PUT answered %d" % st)
            last = int(h["x-etcd-index"])
    c.close()
    return last


def probe_main(url):
    """The probe process: small GETs one after another until its stdin closes; "ready" once the
    first is answered, then at the end one JSON line: [[sent, answered], ...] (time.monotonic(),
    the same clock in every process) or {"error": ...}. A process of its own: no GIL shared
    with the reader of the big answer."""
    c = Conn(url)
    times = []
    try:
        while not select.select([sys.stdin], [], [], 0)[0]:
            t0 = time.monotonic()
            st, _h, _b = c.call("GET", "/v2/keys/probe")
            if st != 200:
                raise RuntimeError("probe GET answered %d" % st)
            times.append((t0, time.monotonic()))
            if len(times) == 1:
                print("ready", flush=True)
        print(json.dumps(times), flush=True)
    except Exception as e:
        print(json.dumps({"error": repr(e)}), flush=True)


class Probe:
    """Runs probe_main() in another process: start() returns once it runs, finish() stops it
    and reads its times."""

    def __init__(self, url):
        self.url = url
        self.times = []
        self.error = None

    def start(self):
        self.p = subprocess.Popen([sys.executable, __file__, "probe", self.url],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if not select.select([self.p.stdout], [], [], 30)[0]:
            raise RuntimeError("the probe process did not start within 30 s")
        line = self.p.stdout.readline().decode().strip()
        if line != "ready":
            self.error = line or "the probe process ended"

    def finish(self):
        out, _ = self.p.communicate(b"stop\n", timeout=60)
        if self.error is not None:
            return
        r = json.loads(out.decode() or '{"error": "no output"}')
        if isinstance(r, dict):
            self.error = r["error"]
        else:
            self.times = r


def count_values(node):
    n = 0
    stack = [node]
    while stack:
        x = stack.pop()
        if "value" in x:
            n += 1
        stack.extend(x.get("nodes", []))
    return n


def find_key(node, key):
    stack = [node]
    while stack:
        x = stack.pop()
        if x.get("key") == key:
            return x
        stack.extend(x.get("nodes", []))
    return None


def slowest(p):
    """Returns: (the slowest small GET in ms, when it was sent), or (None, error text)."""
    if p.error:
        return None, "the probe failed: " + p.error
    if not p.times:
        return None, "no small GET was answered"
    return max(((b - a) * 1000, a) for a, b in p.times)


def baseline(p, t_start):
    """Returns: (the slowest, the median) small GET in ms before the big request, or (0, 0)."""
    ms = sorted((b - a) * 1000 for a, b in p.times if b <= t_start)
    return (ms[-1], ms[len(ms) // 2]) if ms else (0.0, 0.0)


def bound_ms(p, t_start):
    """The run's bound: BOUND_MS, or BOUND_PACE times the baseline's slowest if more."""
    return max(BOUND_MS, BOUND_PACE * baseline(p, t_start)[0])


def bounded(what, attempts, run):
    """Runs `run()` (-> (probe, t_start, t_first) after its own checks) until its slowest small
    GET is within its bound (bound_ms) and (t_first set) at least 3 small GETs were answered
    between the big request and the first byte of its answer (one in flight could be answered
    before a big answer made in one go; three in a row cannot), at most `attempts` times: a
    loaded machine can stall any process for a moment now and then, or make the render too
    short for three small GETs; a held loop fails every run. Checks the last run."""
    for attempt in range(1, attempts + 1):
        p, t_start, t_first = run()
        worst, at = slowest(p)
        if worst is None:
            return out(False, what, at)
        bound = bound_ms(p, t_start)
        during = None
        if t_first is not None:
            during = sum(1 for a, b in p.times if a >= t_start and b <= t_first)
            if (t_first - t_start) * 1000 < BOUND_PACE * 3 * baseline(p, t_start)[1]:
                during = None  # too short a window to tell (and too short a stall to matter)
        if (worst <= bound and (during is None or during >= 3)) or attempt == attempts:
            break
        print("# %s: the slowest small GET took %.1f ms (sent %.0f ms after the big request), "
              "%s small GETs before the first byte: once more"
              % (what, worst, (at - t_start) * 1000, during), flush=True)
    ok = out(worst <= bound, "%s: %d small GETs, the slowest in %.1f ms (bound %.0f ms, "
             "run %d)" % (what, len(p.times), worst, bound, attempt),
             "the loop was held (that GET was sent %.0f ms after the big request)"
             % ((at - t_start) * 1000))
    if during is None:
        return ok
    return out(during >= 3, "%s: %d small GETs answered before its first byte" % (what, during),
               "fewer than 3: the answer was made in one go") and ok


def get_run(url, nkeys, index, news):
    """One recursive GET of /big under the probe, with a PUT of /big/new<N> sent meanwhile,
    and the checks of its answer. `news` counts the /big/new keys written by earlier runs."""
    probe = Probe(url)
    probe.start()
    time.sleep(BASELINE_S)  # the machine's own pace, before the big request
    big, writer = Conn(url), Conn(url)
    t_start = time.monotonic()
    big.send("GET", "/v2/keys/big?recursive=true")
    new = "/big/new%d" % news
    writer.send("PUT", "/v2/keys%s?value=during" % new)
    st, h, body = big.response()
    t_first, t_end = big.first_byte, time.monotonic()
    wst, wh, wbody = writer.response()
    probe.finish()
    big.close()
    writer.close()
    print("# recursive GET: %d bytes, first byte after %.0f ms, all after %.0f ms"
          % (len(body), (t_first - t_start) * 1000, (t_end - t_start) * 1000), flush=True)
    if out(st == 200, "the recursive GET is answered 200", "status %d: %s" % (st, body[:200])):
        get_index = int(h["x-etcd-index"])
        tree = json.loads(body)["node"]
        put_index = json.loads(wbody)["node"]["modifiedIndex"] if wst == 201 else -1
        has_new = find_key(tree, new) is not None
        out(wst == 201, "a PUT sent during the GET is answered 201", "status %d" % wst)
        out(get_index in (index, index + 1) and has_new == (put_index <= get_index),
            "the answer is the tree at its X-Etcd-Index %d (the PUT at %d is %s)"
            % (get_index, put_index, "in it" if has_new else "not in it"),
            "a write shows half-way (the index before it was %d)" % index)
        want = nkeys + news + has_new
        out(count_values(tree) == want, "the answer holds every key (%d)"
            % count_values(tree), "expected %d" % want)
    return probe, t_start, t_first


def delete_run(url, nkeys, rebuild):
    """One recursive DELETE of /big (built again when `rebuild`) under the probe, with
    watchers inside and above it, and the checks of its answer and of the tree after it."""
    if rebuild:
        build(url, nkeys)
    w_in, w_dir = Conn(url), Conn(url)
    w_in.send("GET", "/v2/keys/big/d0/k7?wait=true")
    w_dir.send("GET", "/v2/keys/big?wait=true&recursive=true")
    probe = Probe(url)
    probe.start()
    time.sleep(BASELINE_S)  # the machine's own pace, before the big request
    for w in (w_in, w_dir):  # the watches are in place once the head of their answer is in
        w.s.settimeout(30)
        while b"\r\n\r\n" not in w.buf:
            w._more()
    d = Conn(url)
    t_start = time.monotonic()
    st, h, body = d.call("DELETE", "/v2/keys/big?recursive=true")
    time.sleep(0.3)  # a window, not a wait: the freeing in slices follows the answer
    probe.finish()
    if out(st == 200, "the recursive DELETE is answered 200", "status %d: %s" % (st, body[:200])):
        ev = json.loads(body)
        del_index = ev["node"]["modifiedIndex"]
        out(ev["action"] == "delete" and ev["node"]["key"] == "/big" and ev["node"].get("dir")
            and int(h["x-etcd-index"]) == del_index,
            "one delete event for /big at index %d" % del_index, body[:200].decode())
        for what, w in (("a watcher of /big/d0/k7", w_in), ("a recursive watcher of /big", w_dir)):
            wst, _wh, wb = w.response()
            wev = json.loads(wb) if wst == 200 else {}
            out(wev.get("action") == "delete" and wev.get("node", {}).get("modifiedIndex")
                == del_index, "%s is woken by that event" % what, "%d %s" % (wst, wb[:200]))
    w_in.close()
    w_dir.close()
    st, h, body = Conn(url).call("GET", "/v2/keys/big/d0/k7")
    out(st == 404 and json.loads(body)["errorCode"] == 100, "a key inside is gone (100)",
        "%d %s" % (st, body[:200]))
    return probe, t_start, None


def main():
    url, nkeys = sys.argv[1], int(sys.argv[2])
    t0 = time.monotonic()
    index = build(url, nkeys)
    Conn(url).call("PUT", "/v2/keys/probe?value=p")
    index += 1
    print("# %d keys in %.1f s, index %d" % (nkeys, time.monotonic() - t0, index), flush=True)

    runs = []

    def one_get():
        r = get_run(url, nkeys, index + len(runs), len(runs))
        runs.append(r)
        return r

    bounded("recursive GET of %d keys" % nkeys, 5, one_get)
    st, h, body = Conn(url).call("GET", "/v2/keys/big/d1?sorted=true")
    keys = [n["key"] for n in json.loads(body)["node"].get("nodes", [])] if st == 200 else []
    out(len(keys) == min(PER_DIR, nkeys - PER_DIR) and keys == sorted(keys),
        "a sorted GET of a dir of %d keys lists them in order" % len(keys),
        "%d %s" % (st, keys[:5]))

    deletes = []

    def one_delete():
        r = delete_run(url, nkeys, len(deletes) > 0)
        deletes.append(r)
        return r

    bounded("recursive DELETE of %d keys" % nkeys, 5, one_delete)
    st, h, body = Conn(url).call("PUT", "/v2/keys/big/d0/k7?value=again")
    out(st == 201 and json.loads(body)["node"]["createdIndex"] == int(h["x-etcd-index"]),
        "the same key can be created again", "%d %s" % (st, body[:200]))
    st, h, body = Conn(url).call("GET", "/v2/keys/big?recursive=true")
    tree = json.loads(body)["node"] if st == 200 else {}
    out(count_values(tree) == 1, "the tree holds only that key", "%d %s" % (st, body[:200]))


def too_large_main():
    """bigtree.py too_large URL NKEYS, against a musterd whose --max-output-bytes is below the
    tree's answer: the GET in slices is refused with a status naming the limit, nothing is
    half-sent, and the tree is writable again after it."""
    url, nkeys = sys.argv[2], int(sys.argv[3])
    build(url, nkeys)
    c = Conn(url)
    st, h, body = c.call("GET", "/v2/keys/big?recursive=true")
    out(st == 413 and b"max-output-bytes" in body and "content-length" in h,
        "a recursive GET of %d keys over --max-output-bytes is refused (413, naming it)" % nkeys,
        "%d %s %s" % (st, h, body[:200]))
    st, h, body = c.call("PUT", "/v2/keys/big/after?value=1")
    out(st == 201, "the same connection writes after it (the walk ended)", "%d %s" % (st, body[:200]))
    st, h, body = Conn(url).call("GET", "/v2/keys/big/d0/k1")
    out(st == 200 and json.loads(body)["node"]["value"] == "v1", "a small GET is answered",
        "%d %s" % (st, body[:200]))


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        probe_main(sys.argv[2])
    elif sys.argv[1] == "too_large":
        too_large_main()
    else:
        main()
