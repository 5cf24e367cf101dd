"""Jepsen-style run: concurrent clients against musterd or etcd while it is killed -9 and
restarted, every operation recorded, the history checked by lincheck.py (docs/linearizability.md).

  harness.py --server musterd --musterd PATH [--fsync batch|always|off] --port P --dir DIR
  harness.py --server etcd [--etcd PATH] --port P --peer-port Q --dir DIR
  options: --kills N --clients N --keys N --key-life S --ttl S --seed N --snapshot-every N

Clients (threads) do quorum GETs, creates (prevExist=false), plain sets, sets and creates with a
TTL, compare-and-swap on prevValue or prevIndex and compare-and-delete on prevValue or
prevIndex, on a few keys at a time; every few seconds they move to fresh keys. Each operation is
recorded with its invocation and completion (time.monotonic_ns), the request and the reply, or
no reply when the connection broke or timed out after the request was sent (then it may or may
not have taken effect). A nemesis thread kills the server with SIGKILL at random moments (about
once a second) and restarts it on the same port and data dir, recording each kill (after the
process was reaped) and when the server answered again. DIR gets history.jsonl, the server logs
and the data dir. Exit status: 0 linearizable, 1 anomalies or the run failed, 2 usage.

Standard library only (runs under /usr/bin/python3).
"""
import argparse
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lincheck  # noqa: E402

now = time.monotonic_ns
TIMEOUT = 5.0  # seconds a client waits for a reply before calling it unknown


class HttpError(Exception):
    pass


class Conn:
    """One keep-alive HTTP/1.1 connection, reading replies by hand so that every failure is
    classified: before the request was sent (it had no effect) or after (unknown)."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.t = 0  # when the connection was made
        self.buf = b""

    def close(self):
        if self.sock is not None:
            try:
                # RST instead of FIN: no TIME_WAIT left behind by a long run
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.buf = b""

    def ready(self):
        """Makes sure a live connection exists. Returns: False if the server refused it."""
        if self.sock is not None:
            # readable while idle: the server closed it (or died); do not send on it
            r, _, _ = select.select([self.sock], [], [], 0)
            if r:
                self.close()
        if self.sock is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(TIMEOUT)
            try:
                s.connect(("127.0.0.1", self.port))
            except OSError:
                s.close()
                return False
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = s
            self.t = now()
            self.buf = b""
        return True

    def send(self, method, target, body):
        req = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (method, target, self.port)
        if body is not None:
            req += ("Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n"
                    % len(body))
        req += "\r\n" + (body or "")
        self.sock.sendall(req.encode())

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise HttpError("connection closed")
        self.buf += d

    def reply(self):
        """Returns: (status, headers dict with lower-case names, body bytes)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._fill()
                size_line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    self._fill()
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
                if size == 0:
                    break
        else:
            n = int(hdrs.get("content-length", "0"))
            while len(self.buf) < n:
                self._fill()
            body, self.buf = self.buf[:n], self.buf[n:]
        if hdrs.get("connection", "").lower() == "close":
            self.close()
        return status, hdrs, body


def node_view(n):
    return {"v": n.get("value"), "mi": n["modifiedIndex"], "ci": n["createdIndex"]}


def interpret(f, status, hdrs, body):
    """Turns a reply into the history's result. Returns: (result or None for unknown, why)."""
    try:
        return _interpret(f, status, json.loads(body))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return None, "HTTP %d that does not parse (%s): %r" % (status, e, body[:120])


def _interpret(f, status, d):
    if status in (200, 201) and "node" in d:
        n = d["node"]
        r = {"ok": 1, "mi": n["modifiedIndex"], "ci": n["createdIndex"]}
        if f != "cad":
            r["v"] = n.get("value")
            r["ttl"] = "expiration" in n  # for the workload only (popped before recording)
        if f != "get" and d.get("prevNode") is not None:
            r["prev"] = node_view(d["prevNode"])
        return r, None
    code = d.get("errorCode")
    if code == 100:
        return ({"ok": 1, "nf": 1} if f == "get" else {"ok": 0, "code": 100}), None
    if code in (101, 105):
        return {"ok": 0, "code": code, "cause": d.get("cause", "")}, None
    # 300 raft internal error, 301 during leader election, 5xx...: may or may not have happened
    return None, "HTTP %d %s" % (status, json.dumps(d)[:120])


class Workload:
    """The keys in use and what clients last saw on them (shared; races are harmless)."""

    def __init__(self, args, run):
        self.a = args
        self.run = run
        self.t0 = time.monotonic()
        self.last = {}  # key -> (value, modifiedIndex, has a TTL) last seen by any client

    def keys(self):
        """Returns: (hot keys, cooling keys). Hot keys get the full mix; the previous
        generation's keys cool down for one more key life with reads and TTL'd creates only,
        so that TTL'd versions live long enough to expire under the readers' eyes."""
        gen = int((time.monotonic() - self.t0) / self.a.key_life)
        hot = ["/lin/%s/g%03dk%d" % (self.run, gen, j) for j in range(self.a.keys)]
        cool = ["/lin/%s/g%03dk%d" % (self.run, gen - 1, j) for j in range(self.a.keys)]
        return hot, (cool if gen > 0 else [])


KINDS = [("get", 26), ("create", 10), ("create_ttl", 4), ("set", 9), ("set_ttl", 8),
         ("cas_pv", 15), ("cas_pi", 11), ("cad_pv", 10), ("cad_pi", 7)]


def client(cid, wl, port, stop, out, seed):
    hist = []
    out[cid] = hist  # whatever happens to this thread, its history is kept
    try:
        _client(cid, wl, port, stop, hist, seed)
    except Exception as e:  # a bug of the harness: stop the run, loudly
        out["error"] = "client %d: %s: %s" % (cid, type(e).__name__, e)
        stop.set()


def _client(cid, wl, port, stop, hist, seed):
    rnd = random.Random(seed)
    c = Conn(port)
    names = [k for k, _ in KINDS]
    weights = [w for _, w in KINDS]
    seq = 0
    while not stop.is_set():
        hot, cool = wl.keys()
        seq += 1
        v = "c%dn%d" % (cid, seq)
        if cool and rnd.random() < 0.25:
            key = rnd.choice(cool)
            last = wl.last.get(key)
            if last is not None and not last[2] and rnd.random() < 0.3:
                kind = "cad_pi"  # a version without a TTL: delete it to start the TTL cycle
            else:
                kind = "create_ttl" if rnd.random() < 0.15 else "get"
        else:
            key = rnd.choice(hot)
            kind = rnd.choices(names, weights)[0]
            last = wl.last.get(key)
        guess_v, guess_i, _ = last if last is not None else ("c0n0", 1, False)
        if rnd.random() < 0.2:  # sometimes a stale guess, to exercise failed compares
            guess_v, guess_i = "c%dn%d" % (rnd.randrange(cid + 1), rnd.randrange(seq + 1)), \
                max(1, guess_i - rnd.randrange(1, 20))
        q = {}
        form = None
        args = {}
        if kind == "get":
            f, method, q = "get", "GET", {"quorum": "true"}
        elif kind.startswith("create") or kind.startswith("set"):
            f = "create" if kind.startswith("create") else "set"
            method = "PUT"
            if f == "create":
                q = {"prevExist": "false"}
            form = {"value": v}
            args["v"] = v
            if kind.endswith("_ttl"):
                form["ttl"] = str(wl.a.ttl)
                args["ttl"] = wl.a.ttl
        else:  # compare-and-swap (PUT) or compare-and-delete (DELETE)
            f = kind[:3]
            method = "PUT" if f == "cas" else "DELETE"
            if f == "cas":
                form = {"value": v}
                args["v"] = v
            if kind.endswith("_pv"):
                q = {"prevValue": guess_v}
                args["pv"] = guess_v
            else:
                q = {"prevIndex": str(guess_i)}
                args["pi"] = guess_i
        target = "/v2/keys" + key + ("?" + urllib.parse.urlencode(q) if q else "")
        body = urllib.parse.urlencode(form) if form is not None else None
        rec = {"client": cid, "key": key, "f": f, "args": args}
        if not c.ready():
            t = now()
            rec.update(inv=t, comp=t, res={"refused": 1})
            hist.append(rec)
            time.sleep(0.01 + rnd.random() * 0.01)
            continue
        rec["conn"] = c.t
        rec["inv"] = now()
        try:
            c.send(method, target, body)
            status, hdrs, rbody = c.reply()
        except (OSError, HttpError, ValueError, IndexError) as e:
            rec.update(comp=None, res=None, err=type(e).__name__ + ": " + str(e)[:80])
            c.close()
            hist.append(rec)
            continue
        rec["comp"] = now()
        res, why = interpret(f, status, hdrs, rbody)
        has_ttl = res.pop("ttl", False) if res is not None else False
        rec["res"] = res
        if why is not None:
            rec["err"] = why
            rec["comp"] = None  # an answer that does not say what happened
            c.close()
        xi = hdrs.get("x-etcd-index")
        if xi is not None and xi.isdigit() and res is not None:
            rec["xi"] = int(xi)
        if res is not None and res.get("ok") and "mi" in res and "v" in res:
            wl.last[key] = (res["v"], res["mi"], has_ttl)
        hist.append(rec)
    c.close()


class Server:
    """The server under test: started, killed -9 and restarted on the same port and data dir."""

    def __init__(self, a):
        self.a = a
        self.proc = None
        self.n = 0
        self.events = []
        self.logs = []

    def cmd(self):
        a = self.a
        if a.server == "musterd":
            return [a.musterd, "--listen", "127.0.0.1:%d" % a.port, "--data-dir",
                    os.path.join(a.dir, "data"), "--fsync", a.fsync,
                    "--snapshot-every", str(a.snapshot_every)]
        cu = "http://127.0.0.1:%d" % a.port
        pu = "http://127.0.0.1:%d" % a.peer_port
        return [a.etcd, "--name", "lin", "--data-dir", os.path.join(a.dir, "etcd-data"),
                "--enable-v2=true", "--listen-client-urls", cu, "--advertise-client-urls", cu,
                "--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
                "--initial-cluster", "lin=" + pu, "--initial-cluster-state", "new",
                # a quicker election after each restart (timing only: safety does not depend on it)
                "--heartbeat-interval", "20", "--election-timeout", "200"]

    def start(self):
        self.n += 1
        log = os.path.join(self.a.dir, "server-%03d.log" % self.n)
        self.logs.append(log)
        with open(log, "wb") as lf:
            self.proc = subprocess.Popen(self.cmd(), stdout=lf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        self.events.append({"ev": "start", "t": now(), "pid": self.proc.pid})

    def probe(self):
        """One request that answers only when the server serves keys (etcd: through raft)."""
        c = Conn(self.a.port)
        try:
            if not c.ready():
                return False
            c.sock.settimeout(1.0)
            path = "/healthz" if self.a.server == "musterd" else "/v2/keys/?quorum=true"
            c.send("GET", path, None)
            status, _, _ = c.reply()
            return status in (200, 404)
        except (OSError, HttpError, ValueError, IndexError):
            return False
        finally:
            c.close()

    def wait_up(self, down_since=None, limit=60.0):
        t_end = time.monotonic() + limit
        while time.monotonic() < t_end:
            if self.proc.poll() is not None:
                raise RuntimeError("the server exited with status %d while starting; see %s"
                                   % (self.proc.returncode, self.logs[-1]))
            if self.probe():
                t = now()
                self.events.append({"ev": "up", "t": t,
                                    "down": None if down_since is None else t - down_since})
                return
            time.sleep(0.01)
        raise RuntimeError("the server did not answer within %.0f s; see %s"
                           % (limit, self.logs[-1]))

    def kill(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        t = now()
        self.events.append({"ev": "kill", "t": t, "pid": self.proc.pid})
        return t

    def stop(self):
        """A graceful stop at the end. Returns: the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            rc = "no exit within 15 s of SIGTERM"
        self.events.append({"ev": "stop", "t": now(), "pid": self.proc.pid})
        return rc


def nemesis(srv, a, stop, rnd, failure):
    try:
        for _ in range(a.kills):
            t_end = time.monotonic() + rnd.uniform(a.gap_min, a.gap_max)
            while time.monotonic() < t_end and not stop.is_set():
                time.sleep(0.01)
            if stop.is_set():
                return
            t = srv.kill()
            srv.start()
            srv.wait_up(t)
        time.sleep(a.tail)
    except Exception as e:  # reported by the main thread
        failure.append(str(e))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=("musterd", "etcd"), required=True)
    ap.add_argument("--musterd", default="build/musterd")
    ap.add_argument("--etcd", default="/usr/bin/etcd")
    ap.add_argument("--fsync", default="batch", choices=("batch", "always", "off"))
    ap.add_argument("--snapshot-every", type=int, default=400)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--peer-port", type=int, default=0)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--kills", type=int, default=25)
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--keys", type=int, default=3, help="keys in use at a time")
    ap.add_argument("--key-life", type=float, default=3.0, help="seconds before fresh keys")
    ap.add_argument("--ttl", type=int, default=1, help="TTL of the TTL'd writes, seconds")
    ap.add_argument("--gap-min", type=float, default=0.4, help="seconds up before a kill, min")
    ap.add_argument("--gap-max", type=float, default=1.2, help="seconds up before a kill, max")
    ap.add_argument("--tail", type=float, default=1.5, help="seconds of load after the last kill")
    ap.add_argument("--ttl-late", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--label", default=None)
    a = ap.parse_args(argv[1:])
    if a.server == "etcd" and a.peer_port == 0:
        ap.error("--server etcd needs --peer-port")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    label = a.label or (a.server + (" --fsync " + a.fsync if a.server == "musterd" else ""))
    os.makedirs(a.dir, exist_ok=True)
    rnd = random.Random(seed)
    srv = Server(a)
    stop = threading.Event()
    failure = []
    hist = {}
    threads = []
    t_run = time.monotonic()
    try:
        srv.start()
        srv.wait_up()
        wl = Workload(a, "r%d" % (time.time() * 1000))
        for cid in range(1, a.clients + 1):
            th = threading.Thread(target=client, args=(cid, wl, a.port, stop, hist,
                                                       rnd.randrange(1 << 30)))
            th.start()
            threads.append(th)
        nem = threading.Thread(target=nemesis, args=(srv, a, stop, rnd, failure))
        nem.start()
        nem.join()
        stop.set()
        for th in threads:
            th.join()
        rc = srv.stop() if not failure else None
    except (RuntimeError, OSError) as e:
        failure.append(str(e))
        rc = None
    finally:
        stop.set()
        for th in threads:
            th.join()
        if srv.proc is not None and srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
    t_run = time.monotonic() - t_run
    if "error" in hist:
        failure.append(hist.pop("error"))
    ops = []
    for cid in sorted(hist):
        ops.extend(hist[cid])
    ops.sort(key=lambda o: o["inv"])
    for i, o in enumerate(ops):
        o["id"] = i + 1
    path = os.path.join(a.dir, "history.jsonl")
    with open(path, "w") as f:
        for e in srv.events:
            f.write(json.dumps(e) + "\n")
        for o in ops:
            f.write(json.dumps(o, separators=(",", ":")) + "\n")
    if failure:
        print("%s: run failed: %s" % (label, failure[0]))
        return 1
    kills = sum(1 for e in srv.events if e["ev"] == "kill")
    downs = [e["down"] for e in srv.events if e["ev"] == "up" and e["down"] is not None]
    hops, events = lincheck.load(path)
    n, st = lincheck.check_history(hops, events, a.ttl_late)
    print("%s: %d kills in %.1f s (downtime mean %.0f ms, max %.0f ms), seed %d" % (
        label, kills, t_run, (sum(downs) / len(downs) / 1e6) if downs else 0,
        (max(downs) / 1e6) if downs else 0, seed))
    print("%s: %d operations (%d refused before sending), %d without reply (%d dropped: reads "
          "or sent to a dead server), %d keys" % (label, st["ops"] + st["refused"],
                                                  st["refused"], st["unknown"], st["dropped"],
                                                  st["keys"]))
    print("%s: linearizations placed %d TTL expiries and %d unanswered writes that took "
          "effect" % (label, st["expiries"], st["effects"]))
    print("%s: %d anomalies (%d of %d keys not linearizable, %d index anomalies); checker "
          "%.2f s, %d search nodes; history %s" % (label, n, st["bad_keys"], st["keys"],
                                                   st["bad_indexes"], st["seconds"],
                                                   st["nodes"], path))
    bad = n > 0
    if a.server == "musterd" and rc != 0:
        print("%s: musterd did not exit 0 on SIGTERM at the end: %s" % (label, rc))
        bad = True
    if st["ops"] - st["unknown"] < 100 * max(1, kills // 10):
        print("%s: too few answered operations to mean anything" % label)
        bad = True
    # keys cool down (TTL'd creates, reads) from one key life on: by three, expiries were seen
    # (the count means nothing on keys that failed: their search stopped early)
    if n == 0 and t_run >= 3 * a.key_life and st["expiries"] == 0:
        print("%s: no TTL expiry was observed: the workload no longer tests TTLs" % label)
        bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
