#!/usr/bin/env bash
# The memory cost of issue 15's defences: RSS of musterd with N idle keep-alive connections
# (each made one GET /version, then stays open), for a musterd BEFORE the defences and this
# build's (AFTER). Prints one summary line.
#
#   bench/bench_idle_rss.sh   env: BEFORE (a musterd binary without the defences; required),
#                                  MU_BUILD_DIR (./build), CONNS (10000)
# Not a test.
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-10000}
[ -n "${BEFORE:-}" ] || die "set BEFORE=/path/to/musterd (a build without the defences)"
bench_need_exe "$BEFORE" musterd
bench_need_exe "$MUSTERD" musterd

one() { # binary [option...] (the per-address share only exists after the defences)
  local bin=$1
  shift
  MUSTERD=$bin t_start_musterd --max-connections $((CONNS + 100)) "$@" ||
    die "musterd did not start: $(tail -3 "$T_DIR/musterd.log")"
  "$PY" - "$MUSTERD_PORT" "$MUSTERD_PID" "$CONNS" <<'PY'
import socket, sys, time
port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def rss():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
base = rss()
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    socks.append(s)
for s in socks:
    s.settimeout(5)
    if not s.recv(4096).startswith(b"HTTP/1.1 200"):
        sys.exit("no answer")
time.sleep(0.5)
full = rss()
print("%d %d %.0f" % (base, full, (full - base) * 1024.0 / n))
PY
  kill "$MUSTERD_PID"; wait "$MUSTERD_PID" 2>/dev/null
}
b=$(one "$BEFORE") || die "the run before failed"
a=$(one "$MUSTERD" --max-connections-per-address $((CONNS + 100))) || die "the run after failed"
read -r b0 b1 bper <<<"$b"
read -r a0 a1 aper <<<"$a"
echo "idle_rss: $CONNS idle connections: before the defences RSS $((b0 / 1024)) -> $((b1 / 1024)) MB ($bper B/conn); after $((a0 / 1024)) -> $((a1 / 1024)) MB ($aper B/conn)"
