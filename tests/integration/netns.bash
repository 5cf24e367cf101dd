# The cluster in a box (sourced by the net_*.sh tests; not a test itself). Each host is a network
# namespace with its own address from 198.18.0.0/15 (a benchmarking range) on a veth into one
# bridge, and the bridge lives in a namespace of the test's own: there is no route out, and the
# machine's own interfaces are never touched (every link is made inside a namespace of ours).
# Faults are nft rules on the bridge (family bridge, chain forward), so they act on the wire
# between hosts: a cut host sends no FIN and no RST, its peers hear nothing at all.
#
#   net_up N             makes hosts h1..hN (198.18.0.1..N), sets NET_NS (name prefix)
#   net_ip I             the address of host hI
#   net_reach I J        hI hears from hJ (within 1 s)
#   net_spawn I NAME CMD...  runs CMD inside host hI as t_spawn NAME does (log $T_DIR/NAME.log)
#   net_cut I            host hI hears nothing and is heard by nobody (both ways)
#   net_cut_from I J     packets from hI to hJ are lost (one way); net_cut_to I J: from hJ to hI
#   net_heal [I]         removes every rule about hI (every rule without I)
#   net_kill_host I      SIGKILL to every process in host hI
#   net_link I up|down   takes hI's link down or up (the bridge port: carrier lost)
#
# Not here: delay and loss. This kernel has no netem (sch_netem); an NFQUEUE program would do
# it, and none is written yet.
#
# Names are unique per run (the shell's pid and a random part), so cases run side by side on
# separate clusters. Every namespace and every process in it goes on every exit path: the EXIT
# trap runs net_down before lib.sh's t_cleanup.

NET_NS=""
NET_HOSTS=0
NET_RULE=0

# Fails the test (exit 1, saying what is missing) when namespaces or nft cannot be used: a skip
# fails CI too, and this names the fix.
net_need() {
  if ! command -v nft >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "not ok - the net tests need nft and ip (scripts/install-deps.sh --test: nftables, iproute2)"
    exit 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "not ok - the net tests make network namespaces and need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    exit 1
  fi
}

net_ip() { echo "198.18.0.$1"; }

# net_reach I J: true when hI gets an answer from hJ within 1 s (a TCP connect to a closed port:
# its refusal is the answer; no ping on the machine).
net_reach() {
  ip netns exec "$(net__h "$1")" timeout 1 bash -c "exec 3<>/dev/tcp/$(net_ip "$2")/9" 2>/dev/null
  [ $? != 124 ]
}

net__br() { echo "${NET_NS}br"; }
net__h() { echo "${NET_NS}h$1"; }

net_up() {
  local n=$1 i br
  net_need
  NET_NS="mun$$x$RANDOM-"
  br=$(net__br)
  trap 'net_down; t_cleanup' EXIT
  ip netns add "$br" || { echo "not ok - ip netns add $br failed"; exit 1; }
  ip -n "$br" link set lo up
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  for ((i = 1; i <= n; i++)); do
    ip netns add "$(net__h "$i")" || { echo "not ok - ip netns add failed"; exit 1; }
    # the pair is made inside the bridge namespace, its far end moved at once into the host's
    ip -n "$br" link add "h$i" type veth peer name eth0 netns "$(net__h "$i")"
    ip -n "$br" link set "h$i" master br0 up
    ip -n "$(net__h "$i")" link set lo up
    ip -n "$(net__h "$i")" addr add "$(net_ip "$i")/24" dev eth0
    ip -n "$(net__h "$i")" link set eth0 up
  done
  NET_HOSTS=$n
  ip netns exec "$br" nft -f - <<'NFT' || { echo "not ok - nft (family bridge) does not work here"; exit 1; }
table bridge mu {
  chain forward { type filter hook forward priority 0; policy accept; }
}
NFT
  # every host reaches every other (ARP settles) before the test begins
  for ((i = 2; i <= n; i++)); do
    t_until 10 net_reach 1 "$i" ||
      { echo "not ok - h1 cannot reach h$i on the bridge"; exit 1; }
  done
}

# Adds one rule to the bridge's forward chain, commented "hI" for net_heal.
net__rule() { # comment rule...
  local tag=$1
  shift
  ip netns exec "$(net__br)" nft add rule bridge mu forward "$@" counter drop comment "\"$tag\""
}

net_cut() {
  net__rule "h$1" ip saddr "$(net_ip "$1")"
  net__rule "h$1" ip daddr "$(net_ip "$1")"
}
net_cut_from() { net__rule "h$1 h$2" ip saddr "$(net_ip "$1")" ip daddr "$(net_ip "$2")"; }
net_cut_to() { net__rule "h$1 h$2" ip saddr "$(net_ip "$2")" ip daddr "$(net_ip "$1")"; }

net_heal() {
  local br h handle
  br=$(net__br)
  if [ $# -eq 0 ]; then
    ip netns exec "$br" nft flush chain bridge mu forward
    return
  fi
  ip netns exec "$br" nft -a list chain bridge mu forward |
    sed -n 's/.*comment "\([^"]*\)".*# handle \([0-9]*\).*/\2 \1/p' |
    while read -r handle h; do # (a one-way rule's tag names two hosts: "hI hJ")
      case " $h " in *" h$1 "*) ip netns exec "$br" nft delete rule bridge mu forward handle "$handle" ;; esac
    done
}

net_kill_host() {
  local p
  for p in $(ip netns pids "$(net__h "$1")" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
}

net_link() { ip -n "$(net__br)" link set "h$1" "$2"; }

net_spawn() { # I NAME CMD...
  local i=$1 name=$2
  shift 2
  t_spawn "$name" ip netns exec "$(net__h "$i")" "$@"
}

# Every process in our namespaces gets SIGKILL, then the namespaces go (their links with them).
net_down() {
  local i ns p
  [ -n "$NET_NS" ] || return 0
  for ((i = 1; i <= NET_HOSTS; i++)); do
    ns=$(net__h "$i")
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  ip netns del "$(net__br)" 2>/dev/null
  NET_NS=""
}
