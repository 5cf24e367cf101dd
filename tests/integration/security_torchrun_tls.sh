#!/usr/bin/env bash
# Unmodified torchrun (/usr/bin/torchrun, Debian torch 1.13) against musterd over TLS with
# client certificates: two agents x two workers, gloo all_reduce, every rank verifies.
#   etcd-v2 backend: --rdzv_conf protocol=https,ca_cert=...,ssl_cert=...,ssl_cert_key=...
#                    (the names torch 1.13's etcd_rendezvous_backend.py reads)
#   etcd backend:    --rdzv_conf protocol=https,cacert=...,cert=...,key=...
#                    (etcd_rendezvous.py's names); TR_TLS_CASES="etcd-v2 etcd" (default both)
# Then an agent without a client certificate: it cannot rendezvous and fails.
# Uses the same lock as the other torchrun tests (8 workers importing torch on 2 cores).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/security_lib.bash"

TORCHRUN=${TORCHRUN:-/usr/bin/torchrun}
# only ends an agent that hangs: torch 1.13's etcd-v2 over https (a TLS handshake a request)
# took over 150 s at a load of 10 on 2 cores
TR_TIMEOUT=${TR_TIMEOUT:-400}
TR_WORKER="$MU_SOURCE_DIR/tests/integration/torchrun_worker.py"
TR_TLS_CASES=${TR_TLS_CASES:-etcd-v2 etcd}
t_need_cmd "$TORCHRUN" python3-torch
t_need_py torch python3-torch
t_need_py etcd python3-etcd
t_torch_lock

P=$T_DIR/pki
sec_make_pki "$P" || t_done
sec_start_musterd --tls-cert "$P/server.pem" --tls-key "$P/server.key" \
  --tls-client-ca "$P/ca.pem" || { t_fail "musterd with TLS did not start"; t_done; }
export OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1
unset MU_FAIL_RANK

# tls_case BACKEND RDZV_CONF
tls_case() {
  local backend=$1 conf=$2 id="mutls$$${RANDOM}" out="$T_DIR/out-$1" a b rca rcb r line
  mkdir -p "$out"
  for ag in A B; do
    t_spawn "agent-$backend-$ag" timeout -k 5 "$TR_TIMEOUT" "$TORCHRUN" \
      --nproc_per_node=2 --nnodes=2 --max_restarts=0 --rdzv_backend="$backend" \
      --rdzv_endpoint="127.0.0.1:$MUSTERD_PORT" --rdzv_id="$id" --rdzv_conf="$conf" \
      --monitor_interval=1 --redirects=1 --tee=1 --log_dir="$T_DIR/logs-$backend-$ag" \
      "$TR_WORKER" "$out"
    if [ "$ag" = A ]; then a=$T_LAST_PID; else b=$T_LAST_PID; fi
  done
  wait "$a"; rca=$?
  wait "$b"; rcb=$?
  t_expect_eq "$backend over https: agent A exit status" "$rca" 0
  t_expect_eq "$backend over https: agent B exit status" "$rcb" 0
  for r in 0 1 2 3; do
    line=$(cat "$out/rank$r.$id" 2>/dev/null)
    t_expect_match "$backend over https: rank $r verified its all_reduce in a world of 4" \
      "$line" '^ok 4'
  done
  if [ "$rca$rcb" != 00 ]; then
    for ag in A B; do
      echo "# --- last lines of agent $ag ($backend)"
      tail -n 25 "$T_DIR/agent-$backend-$ag.log" | sed 's/^/#   /'
    done
  fi
}

for c in $TR_TLS_CASES; do
  case "$c" in
  etcd-v2)
    tls_case etcd-v2 "protocol=https,ca_cert=$P/ca.pem,ssl_cert=$P/client.pem,ssl_cert_key=$P/client.key,join_timeout=90"
    ;;
  etcd)
    tls_case etcd "protocol=https,cacert=$P/ca.pem,cert=$P/client.pem,key=$P/client.key,timeout=90"
    ;;
  *) t_fail "unknown case '$c' (cases: etcd-v2 etcd)" ;;
  esac
done

# an agent without a client certificate never gets in
t_spawn agent-nocert timeout -k 5 60 "$TORCHRUN" --nproc_per_node=1 --nnodes=1 \
  --rdzv_backend=etcd-v2 --rdzv_endpoint="127.0.0.1:$MUSTERD_PORT" --rdzv_id="nocert$$" \
  --rdzv_conf="protocol=https,ca_cert=$P/ca.pem,join_timeout=20" \
  --monitor_interval=1 --redirects=1 --tee=1 --log_dir="$T_DIR/logs-nocert" \
  "$TR_WORKER" "$T_DIR/out-nocert"
wait "$T_LAST_PID"; rc=$?
t_expect_eq "an agent without a client certificate fails" "$([ "$rc" -ne 0 ] && echo failed)" failed
t_expect_eq "  ... and no worker ran" "$(ls "$T_DIR/out-nocert" 2>/dev/null | wc -l)" 0
m=$(curl -s --max-time 10 --cacert "$P/ca.pem" --cert "$P/client.pem" --key "$P/client.key" \
  "https://127.0.0.1:$MUSTERD_PORT/metrics")
t_expect_match "musterd counted the refused handshakes" "$m" \
  'musterd_tls_handshakes_total\{result="failed"\} [1-9]'
sec_stop_musterd
t_done
