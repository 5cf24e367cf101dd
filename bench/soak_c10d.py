"""The hostile TCPStore soak (issue 33, "Acceptance"): for DURATION seconds, hostile clients
load a TCPStore server while normal clients use it; prints what the normal clients got and how
the server's memory moved. Driven by bench/bench_soak.sh --c10d (once against musterd's
--c10d-listen, once against torch's own TCPStore server); Python standard library for the
hostile side (raw sockets, torch 1.13's framing, docs/c10d.md), torch for the normal client.

  soak_c10d.py --label NAME --port C10D_PORT --pid SERVER_PID --duration S
               [--http-port P] [--torch-python PY] [--queues] [--skip idle,waits,big,churn]

Hostile load, all at once for the whole duration:
  idle     IDLE sockets (4 source addresses) that never send a byte, reopened when closed
  waits    4 connections each sending a WAIT of 1,000 missing keys every second (pipelined),
           reconnecting every 30 s
  big      2 connections SETting 4 MiB values under 32 keys in turn (128 MiB if all were kept)
  churn    40 new connections a second, each a small SET then closed
  queues   (--queues: torch 2.x numbering, which torch 1.13's server does not speak) 500
           QUEUE_PUSHes and 500 QUEUE_POPs pipelined in one write every 2 s on a 20k-item queue
Normal clients: a torch 1.13 TCPStore client (set, get, add in a loop, 20 ms apart; a failed
op reconnects) and, with --http-port, GET /health every 200 ms.
Prints one block: the normal clients' success rate and latency percentiles, the server's RSS
(first, max, last; sampled every 5 s) and the ratios, what the hostile side did.
"""
import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

SET, GET, WAIT = 0, 2, 5
V2_QPUSH, V2_QPOP = 14, 15
STOP = threading.Event()
STATS = {"idle_open": [], "idle_reopened": 0, "waits_sent": 0, "wait_conns_closed": 0,
         "big_sent": 0, "big_closed": 0, "churn": 0, "churn_failed": 0, "queue_rounds": 0,
         "queue_failed": 0}
LOCK = threading.Lock()


def bump(k, n=1):
    with LOCK:
        STATS[k] += n


def string(b):
    return struct.pack("<Q", len(b)) + b


def conn(port, source=None, timeout=10.0):
    s = socket.socket()
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def alive(s):
    """False when the server closed `s` (reads and drops anything it sent)."""
    try:
        s.settimeout(0)
        while True:
            if s.recv(65536) == b"":
                return False
    except (BlockingIOError, socket.timeout):
        return True
    except OSError:
        return False


def idle(port, n):
    socks = []
    per = max(1, n // 4)
    while not STOP.is_set():
        keep = [s for s in socks if alive(s)]
        for s in socks:
            if s not in keep:
                s.close()
        reopened = 0
        while len(keep) < n and not STOP.is_set():
            try:
                keep.append(conn(port, source="127.0.0.%d" % (21 + len(keep) // per)))
                reopened += 1
            except OSError:
                break
        if socks:
            bump("idle_reopened", reopened)
        socks = keep
        with LOCK:
            STATS["idle_open"].append(len(socks))
        STOP.wait(5)
    for s in socks:
        s.close()


def waits(port, idx):
    seq = 0
    while not STOP.is_set():
        try:
            s = conn(port, source="127.0.0.31")
            t0 = time.time()
            while not STOP.is_set() and time.time() - t0 < 30:
                keys = b"".join(string(b"/soak/missing/%d/%d/%06d" % (idx, seq, i))
                                for i in range(1000))
                s.sendall(bytes([WAIT]) + struct.pack("<Q", 1000) + keys)
                seq += 1
                bump("waits_sent")
                if not alive(s):
                    raise OSError("closed")
                s.settimeout(10)
                STOP.wait(1)
            s.close()
        except OSError:
            bump("wait_conns_closed")
            STOP.wait(1)


def big(port, idx):
    val = os.urandom(4 << 20)
    k = 0
    while not STOP.is_set():
        try:
            s = conn(port, source="127.0.0.41", timeout=30)
            while not STOP.is_set():
                s.sendall(bytes([SET]) + string(b"/soak/big/%d/%02d" % (idx, k % 16)) + string(val))
                k += 1
                bump("big_sent")
                if not alive(s):
                    raise OSError("closed")
                s.settimeout(30)
                STOP.wait(0.5)
        except OSError:
            bump("big_closed")
            STOP.wait(1)


def churn(port):
    while not STOP.is_set():
        t0 = time.time()
        for i in range(40):
            try:
                s = conn(port, source="127.0.0.51")
                s.sendall(bytes([SET]) + string(b"/soak/churn/%d" % (i % 100)) + string(b"x" * 64))
                s.close()
                bump("churn")
            except OSError:
                bump("churn_failed")
        STOP.wait(max(0.0, 1 - (time.time() - t0)))


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        chunk = s.recv(min(1 << 20, n - len(got)))
        if not chunk:
            raise OSError("closed")
        got += chunk
    return got


def queues(port):
    while not STOP.is_set():
        try:
            s = conn(port, source="127.0.0.61", timeout=60)
            s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))  # torch 2.x VALIDATE
            s.sendall(b"".join(bytes([V2_QPUSH]) + string(b"/soak/q") + string(b"%08d" % i)
                               for i in range(20000)))
            while not STOP.is_set():
                frames = b"".join(bytes([V2_QPUSH]) + string(b"/soak/q") + string(b"%08d" % i)
                                  for i in range(500))
                frames += (bytes([V2_QPOP]) + string(b"/soak/q")) * 500
                s.sendall(frames)
                for _ in range(500):  # each pop: u64 items queued, u64 length, the item
                    recv_exact(s, 8)
                    recv_exact(s, struct.unpack("<Q", recv_exact(s, 8))[0])
                bump("queue_rounds")
                STOP.wait(2)
            s.close()
        except OSError:
            bump("queue_failed")
            STOP.wait(1)


def health(port, lat, fails):
    while not STOP.is_set():
        t0 = time.time()
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=10).read()
            lat.append((time.time() - t0) * 1000)
        except OSError:
            fails.append(1)
        STOP.wait(0.2)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


NORMAL = r'''
import datetime, json, sys, time
import torch.distributed as dist
port, secs = int(sys.argv[1]), float(sys.argv[2])
lat, ok, failed, st = [], 0, 0, None
end = time.time() + secs
i = 0
while time.time() < end:
    try:
        if st is None:
            st = dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=5))
        for op in ("set", "get", "add"):
            t0 = time.time()
            if op == "set":
                st.set("normal/k%d" % (i % 50), "v%d" % i)
            elif op == "get":
                st.get("normal/k%d" % (i % 50))
            else:
                st.add("normal/ctr", 1)
            lat.append((time.time() - t0) * 1000)
            ok += 1
    except Exception as e:
        failed += 1
        st = None
        time.sleep(0.2)
    i += 1
    time.sleep(0.02)
print(json.dumps({"ok": ok, "failed": failed, "lat": lat}))
'''


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def lat_line(xs):
    return "p50=%.2f p90=%.2f p99=%.2f max=%.2f ms" % (pct(xs, 50), pct(xs, 90), pct(xs, 99),
                                                     max(xs) if xs else float("nan"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--duration", type=float, default=300)
    ap.add_argument("--http-port", type=int, default=0)
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--queues", action="store_true")
    ap.add_argument("--idle", type=int, default=1200)
    ap.add_argument("--skip", default="", help="hostile parts left out: idle,waits,big,churn")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    normal = subprocess.Popen([a.torch_python, "-c", NORMAL, str(a.port), str(a.duration)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    hlat, hfail = [], []
    ts = [] if "idle" in skip else [threading.Thread(target=idle, args=(a.port, a.idle))]
    if "waits" not in skip:
        ts += [threading.Thread(target=waits, args=(a.port, i)) for i in range(4)]
    if "big" not in skip:
        ts += [threading.Thread(target=big, args=(a.port, i)) for i in range(2)]
    if "churn" not in skip:
        ts.append(threading.Thread(target=churn, args=(a.port,)))
    if a.queues:
        ts.append(threading.Thread(target=queues, args=(a.port,)))
    if a.http_port:
        ts.append(threading.Thread(target=health, args=(a.http_port, hlat, hfail)))
    for t in ts:
        t.daemon = True
        t.start()
    rss, end, died = [], time.time() + a.duration, False
    while time.time() < end:
        try:
            rss.append(rss_kb(a.pid))
        except OSError:
            died = True
            break
        time.sleep(min(5, max(0, end - time.time())))
    try:
        rss.append(rss_kb(a.pid))
    except OSError:
        died = True
    STOP.set()
    try:
        res, err = normal.communicate(timeout=60)
        r = json.loads(res.decode().strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        normal.kill()
        r = {"ok": 0, "failed": -1, "lat": []}
        err = b""
        print("# normal client gave no result: %s" % err.decode(errors="replace")[-400:])
    for t in ts:
        t.join(timeout=15)
    total = r["ok"] + max(0, r["failed"])
    print("## %s (%.0f s)" % (a.label, a.duration))
    print("normal TCPStore client (torch 1.13: set/get/add): ok=%d failed=%d success=%.2f%% %s"
          % (r["ok"], r["failed"], 100.0 * r["ok"] / total if total else 0.0, lat_line(r["lat"])))
    if a.http_port:
        n = len(hlat) + len(hfail)
        print("normal HTTP GET /health: ok=%d failed=%d success=%.2f%% %s"
              % (len(hlat), len(hfail), 100.0 * len(hlat) / n if n else 0.0, lat_line(hlat)))
    if rss:
        print("server RSS: first=%d KB max=%d KB last=%d KB (max/first %.2f, last/first %.2f; %d "
              "samples)%s" % (rss[0], max(rss), rss[-1], max(rss) / rss[0], rss[-1] / rss[0],
                              len(rss), " SERVER DIED" if died else ""))
    io = STATS["idle_open"]
    print("hostile: idle sockets held median %d of %d (reopened %d); WAIT frames of 1,000 keys %d "
          "(connections closed %d); 4 MiB SETs %d (connections closed %d); churn connections %d "
          "(failed %d)%s" % (sorted(io)[len(io) // 2] if io else 0, a.idle, STATS["idle_reopened"],
                             STATS["waits_sent"], STATS["wait_conns_closed"], STATS["big_sent"],
                             STATS["big_closed"], STATS["churn"], STATS["churn_failed"],
                             "; queue rounds (500 push + 500 pop) %d (failed %d)"
                             % (STATS["queue_rounds"], STATS["queue_failed"]) if a.queues else ""))
    sys.stdout.flush()
    return 1 if died else 0


if __name__ == "__main__":
    sys.exit(main())
