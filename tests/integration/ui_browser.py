#!/usr/bin/env python3
"""Drives Debian's headless Chromium through its DevTools protocol (a small WebSocket client on
the standard library) against musterd's status page. Used by ui_browser.sh.

  ui_browser.py URL RUN_ID KILL_MARKER OUT_DIR
  ui_browser.py --many URL OUT_DIR
  ui_browser.py --rebind URL SECRET OUT_DIR

Opens URL, waits until the page shows run RUN_ID in round 1 (active) with both members, marks
the page (window.__muster_mark), kills the oldest process whose command line is exactly
`sleep KILL_MARKER` (one worker of one node), then waits until the page shows round 1 broken
and a later round active, and checks that the mark survived (no reload). Screenshots of the
page at 1280x800 and 390x844 go to OUT_DIR. --many and --rebind: see their functions. Prints
"ok - ..." / "not ok - ..." lines; exits 1 when a check failed.
"""
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, client-side masking."""

    def __init__(self, url):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError("DevTools refused the WebSocket: " + head.decode(errors="replace"))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        head = bytearray([0x81])
        n = len(data)
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        mask = os.urandom(4)
        head += mask
        self.sock.sendall(bytes(head) + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode in (0x9, 0xA):  # ping/pong: not used by DevTools
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()


class Page:
    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        return r.get("result", {}).get("value")

    def wait_for(self, expr, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.eval(expr):
                return True
            time.sleep(0.1)  # how often we look at the page, not how the page updates
        return False

    def screenshot(self, path, width, height, mobile):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)
        time.sleep(0.3)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


FAILS = 0


def check(name, ok, detail=""):
    global FAILS
    if ok:
        print(f"ok - {name}")
    else:
        FAILS += 1
        print(f"not ok - {name}{': ' + detail if detail else ''}")
    sys.stdout.flush()


def start_browser(out_dir, extra=()):
    """Headless Chromium with its DevTools port. Returns: (process, profile dir, Page)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    profile = tempfile.mkdtemp(prefix="mu-chromium-")
    proc = subprocess.Popen(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", "--disable-background-networking", "--remote-debugging-port=0",
         "--remote-allow-origins=*", f"--user-data-dir={profile}", "--window-size=1280,800",
         *extra, "about:blank"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(out_dir, "chromium.log"), "w"),
        start_new_session=True)
    try:
        # chromium creates the file, then writes the port into it: wait for the port itself
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        port = None
        # chromium creates the file before it writes the port: wait for the number itself
        while port is None and time.monotonic() < deadline:
            try:
                with open(port_file) as f:
                    line = f.readline().strip()
                port = int(line) if line.isdigit() else None
            except OSError:
                pass
            if port is None:
                time.sleep(0.1)
        if port is None:
            raise RuntimeError(f"chromium wrote no port to {port_file} in 60 s")
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = Page(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
        page.call("Page.enable")
    except BaseException:
        stop_browser(proc, profile)
        raise
    return proc, profile, page


def stop_browser(proc, profile):
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    shutil.rmtree(profile, ignore_errors=True)


def main():
    if sys.argv[1] == "--many":
        return many(*sys.argv[2:4])
    if sys.argv[1] == "--rebind":
        return rebind(*sys.argv[2:5])
    if sys.argv[1] == "--text":
        return text(*sys.argv[2:8])
    url, run_id, marker, out_dir = sys.argv[1:5]
    proc, profile, page = start_browser(out_dir)
    try:
        page.call("Page.navigate", url=url)
        run = f'document.querySelector(\'.run[data-run="{run_id}"]\')'
        ok = page.wait_for(f"{run} && {run}.dataset.round === '1' && "
                           f"{run}.dataset.roundState === 'active' && "
                           f"{run}.querySelectorAll('tr.member').length === 2", 60)
        check("the page shows the run, round 1 active, with both members", ok,
              str(page.eval("document.body.innerText")))
        c10d = 'document.querySelector(\'.c10d-run[data-run="job-c10d"]\')'
        check("the page shows the TCPStore (c10d) run, its round and keys",
              page.wait_for(f"!!{c10d} && /round 2/.test({c10d}.textContent) && "
                            f"/2 keys/.test({c10d}.textContent)", 30),
              str(page.eval("document.querySelector('#c10d').innerText")))
        check("the page is live (long poll)",
              page.wait_for("document.querySelector('#live').textContent === 'live'", 30),
              str(page.eval("document.querySelector('#live').textContent")))
        check("each member's lease is shown",
              page.eval(f"[...{run}.querySelectorAll('tr.member td:last-child')].every("
                        "td => /live|seen|joining/.test(td.textContent))"))
        check("the round's events are listed",
              page.eval("!!document.querySelector('#events .ev[data-kind=\"round\"]')"))
        page.screenshot(os.path.join(out_dir, "ui-1280x800.png"), 1280, 800, False)
        page.screenshot(os.path.join(out_dir, "ui-phone.png"), 390, 844, True)
        page.call("Emulation.clearDeviceMetricsOverride")
        page.eval("window.__muster_mark = 42")

        pids = subprocess.run(["pgrep", "-o", "-x", "-f", f"sleep {marker}"],
                              capture_output=True, text=True).stdout.split()
        check("found a worker to kill", len(pids) == 1, str(pids))
        if pids:
            os.kill(int(pids[0]), signal.SIGKILL)
        ok = page.wait_for("!!document.querySelector('#events .ev[data-kind=\"broken\"]')", 60)
        check("the page shows the round breaking", ok, str(page.eval("document.body.innerText")))
        ok = page.wait_for(f"{run} && Number({run}.dataset.round) >= 2 && "
                           f"{run}.dataset.roundState === 'active' && "
                           f"{run}.querySelectorAll('tr.member').length === 2", 90)
        check("the page shows the next round, active with both members", ok,
              str(page.eval("document.body.innerText")))
        check("without a reload", page.eval("window.__muster_mark") == 42)
        page.screenshot(os.path.join(out_dir, "ui-after-restart.png"), 1280, 800, False)
    finally:
        stop_browser(proc, profile)
    return 1 if FAILS else 0


def text(url, run_id, selector, want, name, out_dir):
    """The page shows `want` in the element `selector` of run `run_id`'s card (issue 21: an
    unhealthy node with its check's output, standbys, the run's restarts and timings)."""
    proc, profile, page = start_browser(out_dir)
    try:
        page.call("Page.navigate", url=url)
        el = f'document.querySelector(\'.run[data-run="{run_id}"] {selector}\')'
        ok = page.wait_for(f"!!{el} && {el}.innerText.includes({json.dumps(want)})", 60)
        check(name, ok, str(page.eval("document.body.innerText"))[:1000])
        page.screenshot(os.path.join(out_dir, f"ui-{run_id}.png"), 1280, 800, False)
    finally:
        stop_browser(proc, profile)
    return 1 if FAILS else 0


def post(url, path, obj):
    req = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(obj).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status


def v1_requests(url):
    """The /v1 requests musterd has answered (its /metrics counters, every status class)."""
    text = urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=30).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith('musterd_http_requests_total{route="v1"'))


def many(url, out_dir):
    """Issue 24, finding 7: the page follows 200 runs and 60 events incrementally: it fetches
    what the events name, not every run on every event (main's page: thousands of requests)."""
    nruns, nevents = 200, 60
    for i in range(nruns):
        post(url, f"/v1/runs/many{i:03d}/join", {"node_id": "n", "addr": "10.0.0.1",
                                                  "min_nodes": 1, "lease_ttl_ms": 600000})
    proc, profile, page = start_browser(out_dir)
    try:
        page.call("Page.navigate", url=url)
        ok = page.wait_for(f"document.querySelectorAll('#runs .run').length === {nruns} && "
                           "document.querySelector('#live').textContent === 'live'", 90)
        check(f"the page shows {nruns} runs", ok, str(page.eval("document.body.innerText"))[:300])
        before = v1_requests(url)
        t0 = time.monotonic()
        for i in range(nevents):  # one event every 100 ms: a refresh per event on main
            post(url, f"/v1/runs/many{i:03d}/shutdown", {"reason": f"event {i}"})
            time.sleep(max(0.0, t0 + 0.1 * (i + 1) - time.monotonic()))
        ok = page.wait_for("document.querySelectorAll('#runs .run[data-state=\"shut\"]').length === "
                           f"{nevents}", 60)
        check(f"the page shows the {nevents} runs shut down, the others active", ok and
              page.eval("document.querySelectorAll('#runs .run[data-state=\"open\"]').length") ==
              nruns - nevents, str(page.eval("document.querySelector('#runs').innerText"))[:300])
        time.sleep(2)  # and what the page asks for after the last event
        used = v1_requests(url) - before - nevents  # our own shutdowns are /v1 requests too
        check(f"{nevents} events over {nruns} runs cost the page {used:.0f} /v1 requests "
              "(bound 600; main's page asked for every run after each event)", used < 600,
              f"{used:.0f}")
    finally:
        stop_browser(proc, profile)
    return 1 if FAILS else 0


def fetch_in(page, path, method="GET"):
    """What the page's own script gets from fetch(path): [status, body], or [0, error]."""
    return page.call("Runtime.evaluate", awaitPromise=True, returnByValue=True, expression=(
        f"fetch({json.dumps(path)}, {{method: {json.dumps(method)}}})"
        ".then(r => r.text().then(t => [r.status, t]), e => [0, String(e)])"))["result"]["value"]


def rebind(url, secret, out_dir):
    """Issue 24, finding 3, DNS rebinding: a page of http://rebind.example:PORT, whose name now
    resolves to musterd's address (Chromium's --host-resolver-rules, as a rebinding DNS server
    answers), reads from its own origin. Chromium sends such a GET with neither Origin nor
    Sec-Fetch-* (those go to https:// and loopback URLs only), so musterd must know the browser
    by what it always sends. Main answered it 200 with every key."""
    port = url.rstrip("/").rsplit(":", 1)[1]
    rebound = f"http://rebind.example:{port}"
    proc, profile, page = start_browser(out_dir, [
        "--host-resolver-rules=MAP rebind.example 127.0.0.1", "--proxy-server=direct://"])
    try:
        page.call("Page.navigate", url=url.rstrip("/") + "/version")
        page.wait_for("document.readyState === 'complete'", 30)
        st, body = fetch_in(page, "/v2/keys/?recursive=true")
        check("musterd's own page (by its address) reads the keys: the browser can read",
              st == 200 and secret in body, f"{st} {body[:200]}")
        page.call("Page.navigate", url=rebound + "/version")
        page.wait_for("document.readyState === 'complete'", 30)
        check("the rebound page is of its own origin",
              page.eval("location.origin") == rebound, str(page.eval("location.origin")))
        for path in ("/v2/keys/?recursive=true", "/v1/runs", "/ui"):
            st, body = fetch_in(page, path)
            check(f"the rebound page's GET {path} is refused (421) and shows nothing",
                  st == 421 and secret not in body and "--allowed-origin" in body,
                  f"{st} {body[:200]}")
        st, body = fetch_in(page, "/v2/keys/rebound", "PUT")
        check("... and its PUT (421)", st == 421, f"{st} {body[:200]}")
    finally:
        stop_browser(proc, profile)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
