#!/usr/bin/env bash
# The TUN path (`--transparent-tun`, reliable end to end: docs/gateway.md §TCP reliable) in the
# TUN lab (docs/results/gw.md, "The TUN path measured"): root, `aerotp` built (AEROTP=path),
# python3, curl, nft. An application namespace behind the air namespace (a veth, default
# route through it; nothing in it knows of a gateway); `aerotp gw rules install --tcp-tun`
# routes its TCP into the ingress's TUN device; the egress on the ground connects to the
# destinations.
#   curl RATE DELAY BER SIZE_MB: `python3 -m http.server` on the ground serves a SIZE_MB
#       random file; an unmodified curl in the application namespace downloads it from
#       http://10.77.0.2:8000/ through the gateways; prints the time, goodput and whether the
#       file is identical (exit 1 if not).
#   upload RATE DELAY BER SIZE_MB: the other direction, where the source's bytes are the ones
#       acknowledged end to end: a Python source in the application namespace sends SIZE_MB
#       random bytes to 10.77.0.2:8600 and closes its side; the ground receiver answers the
#       SHA-256 of what it got once the source's stream ended; prints the time from connect to
#       that answer, the goodput and whether the digests match (exit 1 if not), and when the
#       destination saw the connection, the first byte and the end of the stream.
#   flows RATE DELAY BER FLOWS: FLOWS TCP flows open from the application namespace to the
#       ground's echo server (crates/gw/scripts/flows/, FLOWS_DEST=10.77.0.2), each proving
#       itself with one echoed message; the ingress's and the egress's RSS with all of them
#       open and idle: memory per idle flow = (RSS now - RSS before) / FLOWS; then BULK flows
#       (default 10) upload BULK_BYTES each, half of the flows send a message every 2 s, and
#       every flow sends a last message and closes (every byte checked; exit 1 if one is not
#       intact or a flow did not open). The control round trip (one more flow through the
#       TUN, to the ground's 7100: the flows' class, bulk, unless TCP_CLASS gives it its
#       own) idle and loaded. With UDP
#       set, that many UDP flows too (intercepted by TPROXY, `--transparent-udp`, to the
#       ground's 7400/udp), one 200-byte datagram a second each during the load; the ground
#       checks every datagram (exit 1 if one is damaged or a flow never arrived).
# Env: VIA (tun, the default; or, to compare, the kernel TPROXY listener: tproxy-reliable
#      or tproxy-near for near-reliable with a custody store), WINDOW (the ingress's
#      --window, default its own 256 KiB), SEED (lab seed, 7),
#      BULK (10), BULK_BYTES (262144), GW_LOG (warn), APP_LOSS (per mille of the TCP
#      packets from the application namespace dropped as they reach the air namespace, before
#      the ingress sees them: losses on the ingress's own side; default 0), APP_CC (the
#      upload source's congestion control, e.g. cubic; default the namespace's: bbr here),
#      SS_TRACE (upload: a file to which the source socket's `ss -tin` is appended every
#      0.2 s, a time stamp before each sample), APP_TS (0: the application namespace's TCP
#      offers no timestamps, net.ipv4.tcp_timestamps=0, so only D-SACK can undo its timeouts;
#      default: the kernel's, on), UDP_CLASS (flows with UDP: the intercepted UDP flows'
#      class, --transparent-udp-class, e.g. telemetry; default the flows' class, bulk),
#      TCP_CLASS (space-separated CLASS=PREFIX[:PORTS] rules, each a --transparent-tcp-class,
#      e.g. control=*:7100 for the control flow's port; default none: every intercepted TCP
#      flow in the one class, bulk).
#      GW_RATE (the gateways' --rate; default 97 % of RATE for flows, RATE for curl and
#      upload: gw_rate in lab-up.sh says why).
set -euo pipefail
AEROTP=${AEROTP:-aerotp}
WHAT=${1:?curl or flows}; RATE=${2:-5mbit}; DELAY=${3:-10ms}; BER=${4:-1e-5}; N=${5:-10}
SEED=${SEED:-7}; BULK=${BULK:-10}; BULK_BYTES=${BULK_BYTES:-262144}; VIA=${VIA:-tun}
APP_LOSS=${APP_LOSS:-0}; UDP=${UDP:-0}
case $VIA in
  tun) ING_ARGS=(--transparent-tun aetp0 --transparent-mode reliable); RULE_ARGS=(--tcp-tun aetp0) ;;
  tproxy-reliable) ING_ARGS=(--transparent-tcp 0.0.0.0:7400 --transparent-mode reliable); RULE_ARGS=(--tcp-port 7400) ;;
  tproxy-near) ING_ARGS=(--transparent-tcp 0.0.0.0:7400 --transparent-mode near-reliable); RULE_ARGS=(--tcp-port 7400) ;;
  *) echo "VIA is tun, tproxy-reliable or tproxy-near, not '$VIA'" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lab-up.sh"
for v in N SEED BULK BULK_BYTES APP_LOSS UDP; do need_number "$v" "${!v}"; done
GW_RATE=${GW_RATE:-$(gw_rate "$WHAT" "$RATE")}  # the gateways' --rate (lab-up.sh, gw_rate)
if [ "$UDP" -gt 0 ]; then
  ING_ARGS+=(--transparent-udp 0.0.0.0:7401); RULE_ARGS+=(--udp-port 7401)
  [ -z "${UDP_CLASS:-}" ] || ING_ARGS+=(--transparent-udp-class "$UDP_CLASS")
fi
read -r -a TCP_RULES <<<"${TCP_CLASS:-}"  # split on spaces, no glob (`*:7100`)
for r in "${TCP_RULES[@]}"; do ING_ARGS+=(--transparent-tcp-class "$r"); done
case $WHAT in curl|upload|flows) ;; *) echo "the first argument is curl, upload or flows, not '$WHAT'" >&2; exit 2 ;; esac
if [ "$WHAT" = flows ]; then
  NEED_FD=$((N + BULK + UDP + 256))
  [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge "$NEED_FD" ] ||
    { echo "the open-file limit (ulimit -Hn $(ulimit -Hn)) is below the $NEED_FD this run needs" >&2; exit 2; }
  ulimit -n "$NEED_FD"
fi
W=$(mktemp -d /tmp/gw-tun.XXXX)
TAG=gt$$
APP=aerotp-app-$$-$TAG
lab_up --rate "$RATE" --delay "$DELAY" --ber "$BER" --seed "$SEED"
echo "work dir $W; lab $RATE $DELAY BER $BER seed $SEED; gateways at $GW_RATE; $WHAT $N; via $VIA; window ${WINDOW:-default}${TCP_CLASS:+; TCP classes $TCP_CLASS}"

ip netns add "$APP"
ip -n "$AIR" link add tpgw0 type veth peer name tpapp0
ip -n "$AIR" link set tpapp0 netns "$APP"
ip -n "$AIR" addr add 10.78.0.1/24 dev tpgw0
ip -n "$AIR" link set tpgw0 up
ip -n "$APP" addr add 10.78.0.2/24 dev tpapp0
ip -n "$APP" link set tpapp0 up
ip -n "$APP" link set lo up
ip -n "$APP" route add default via 10.78.0.1
[ -z "${APP_TS:-}" ] || ip netns exec "$APP" sysctl -qw net.ipv4.tcp_timestamps="$APP_TS"
app() { ip netns exec "$APP" "$@"; }

mkdir -p "$W/srv" "$W/store-eg" "$W/store-in"
MAXC=$((N + BULK + UDP + 64))
RUST_LOG=${GW_LOG:-warn} ip netns exec "$GROUND" "$AEROTP" gw egress --listen 10.77.0.2:9000 --allow-any \
  --rate "$GW_RATE" --store "$W/store-eg" --max-connections "$MAXC" --insecure >"$W/egress.log" 2>&1 &
EG=$!
RUST_LOG=${GW_LOG:-warn} ip netns exec "$AIR" "$AEROTP" gw ingress --peer 10.77.0.2:9000 --rate "$GW_RATE" \
  "${ING_ARGS[@]}" --store "$W/store-in" --max-connections "$MAXC" --insecure \
  ${WINDOW:+--window "$WINDOW"} >"$W/ingress.log" 2>&1 &
ING=$!
SRV=""
cleanup() {
  "$AEROTP" gw rules remove --netns "$AIR" --iif tpgw0 "${RULE_ARGS[@]}" --ipv4-only 2>/dev/null || true
  kill "$ING" "$EG" ${SRV:-} ${LOAD:-} 2>/dev/null || true
  wait "$ING" "$EG" ${SRV:-} 2>/dev/null || true
  ip netns del "$APP" 2>/dev/null || true
  lab_down
}
trap cleanup EXIT
for _ in $(seq 50); do { [ "$VIA" != tun ] || air ip link show aetp0 >/dev/null 2>&1; } && break; sleep 0.1; done
"$AEROTP" gw rules install --netns "$AIR" --iif tpgw0 "${RULE_ARGS[@]}" --ipv4-only
if [ "$APP_LOSS" -gt 0 ]; then
  # Before the rules' chain (priority -150: mangle), so a dropped segment never reaches the
  # ingress.
  air nft -f - <<NFT
table inet aerotp_app_loss {
  chain pre { type filter hook prerouting priority -300; iifname "tpgw0" meta l4proto tcp numgen random mod 1000 < $APP_LOSS counter drop; }
}
NFT
fi
sleep 1

if [ "$WHAT" = curl ]; then
  head -c $((N * 1000000)) /dev/urandom > "$W/srv/blob"
  ground python3 -m http.server -b 10.77.0.2 -d "$W/srv" 8000 >/dev/null 2>&1 &
  SRV=$!
  sleep 1
  OUT=$(app curl -sS --max-time 900 -o "$W/got" -w "%{time_total} %{size_download}" http://10.77.0.2:8000/blob)
  read -r SECS SIZE <<<"$OUT"
  SAME=no; cmp -s "$W/got" "$W/srv/blob" && SAME=yes
  awk -v s="$SECS" -v n="$SIZE" -v same="$SAME" 'BEGIN {
    printf "curl through the gateways: %d B in %.2f s = %.3f Mb/s; identical: %s\n", n, s, n * 8 / s / 1e6, same }'
  grep -E "^(forward|reverse)" "$W/lab.log" || true
  [ "$SAME" = yes ] || exit 1
  exit 0
fi

if [ "$WHAT" = upload ]; then
  ground python3 -c '
import hashlib, socket, sys, time
l = socket.create_server(("10.77.0.2", 8600)); c, _ = l.accept(); h = hashlib.sha256()
t = [time.time(), None, None]
while True:
    b = c.recv(1 << 16)
    if not b: break
    t[1] = t[1] or time.time()
    h.update(b)
t[2] = time.time()
open(sys.argv[1], "w").write(" ".join(map(str, t)))
c.sendall(h.hexdigest().encode()); c.close()' "$W/dest-times" &
  SRV=$!
  sleep 1
  if [ -n "${SS_TRACE:-}" ]; then
    # ss from a loop in the application namespace, until the run's cleanup kills it.
    app bash -c 'while :; do echo "t $(date +%s.%N)"; ss -tinH dst 10.77.0.2:8600; sleep 0.2; done' \
      >>"$SS_TRACE" 2>&1 &
    LOAD=$!
  fi
  app python3 -c '
import hashlib, os, socket, sys, time
n = int(sys.argv[1]); blob = os.urandom(n); t = time.monotonic()
open(sys.argv[2], "w").write(str(time.time()))
s = socket.socket(); s.settimeout(900)
if sys.argv[3]:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, sys.argv[3].encode())
s.connect(("10.77.0.2", 8600))
cc = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
s.sendall(blob); s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(100)
    if not b: break
    got += b
secs = time.monotonic() - t
same = "yes" if got.decode() == hashlib.sha256(blob).hexdigest() else "no"
print(f"upload through the gateways: {n} B in {secs:.2f} s = {n * 8 / secs / 1e6:.3f} Mb/s; identical: {same}; source TCP {cc}")
sys.exit(0 if same == "yes" else 1)' $((N * 1000000)) "$W/src-time" "${APP_CC:-}"
  # When the destination saw the connection, its first byte and its end, from the connect().
  read -r T_ACC T_FIRST T_END < "$W/dest-times" || true  # one line, no newline
  awk -v s="$(cat "$W/src-time")" -v a="$T_ACC" -v f="$T_FIRST" -v e="$T_END" 'BEGIN {
    printf "destination: connection at +%.2f s, first byte +%.2f s, end of stream +%.2f s\n", a - s, f - s, e - s }'
  # The gateways' CPU time (user + system) over the whole run.
  cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
  echo "CPU: ingress $(cpu "$ING") s, egress $(cpu "$EG") s"
  [ "$APP_LOSS" -eq 0 ] || echo "dropped on the ingress's side: $(air nft list table inet aerotp_app_loss | grep -o 'packets [0-9]*')"
  # The source's TCP: retransmissions, timeouts, loss probes (its kernel's counters), and
  # whether it undid its timeouts (Eifel with timestamps: TCPLossUndo; F-RTO:
  # TCPSpuriousRTOs; D-SACK: TCPDSACKUndo, TCPDSACKRecv, TCPDSACKOfoRecv).
  app nstat -az TcpRetransSegs TcpExtTCPTimeouts TcpExtTCPLossProbes TcpExtTCPSpuriousRTOs \
    TcpExtTCPSackRecovery TcpExtTCPFastRetrans TcpExtTCPLossUndo TcpExtTCPDSACKUndo \
    TcpExtTCPDSACKRecv TcpExtTCPDSACKOfoRecv 2>/dev/null | awk 'NR > 1 {printf "%s %s  ", $1, $2} END {print ""}'
  # Packets the kernel dropped on the way into the ingress's TUN device (its queue full: the
  # ingress did not read fast enough), and on the application's veth.
  [ "$VIA" != tun ] || air ip -s link show aetp0 | awk '/qlen/ {for (i = 1; i < NF; i++) if ($i == "qlen") q = $(i + 1)}
    /TX:/ {getline; print "TUN device aetp0 (toward the ingress; queue " q "): " $2 " packets, dropped " $4}'
  [ "$VIA" != tun ] || air tc -s qdisc show dev aetp0 | awk '/dropped/ {print "  its qdisc: " $0}'
  air ip -s link show tpgw0 | awk '/RX:/ {getline; print "veth tpgw0 (from the source): " $2 " packets, dropped " $4}'
  grep -E "^(forward|reverse)" "$W/lab.log" || true
  exit 0
fi

ground python3 "$HERE/flows/ground.py" 10.77.0.2 "$W/ground.json" &
SRV=$!
sleep 1
flows_phase app 10.77.0.2 10 "$N" "$BULK" "$BULK_BYTES" "$UDP" 16
HIN=$(rss "$ING" VmHWM); HEG=$(rss "$EG" VmHWM)
sleep 2  # the ground writes its tallies every second
python3 - "$W" "$IDLE" "$LOADED" "$N" "$BULK" "$RIN0" "$RIN1" "$REG0" "$REG1" "$HIN" "$HEG" "$UDP" <<'PY'
import json, sys
w, idle, loaded = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
flows, bulk, rin0, rin1, reg0, reg1, hin, heg, udp = map(int, sys.argv[4:])
ld = json.load(open(f"{w}/load.json"))
gr = json.load(open(f"{w}/ground.json"))
print(f"flows opened {ld['flows_opened']} of {flows} in {ld['open_seconds']:.1f} s; echoes intact "
      f"{ld['echo_ok']} (bad {ld['echo_bad']}); last messages intact {ld['final_ok']} (bad {ld['final_bad']})")
print(f"uploads intact {ld['bulk_ok']} of {bulk} in {ld['bulk_seconds']:.1f} s")
print(f"memory per idle flow: ingress {(rin1 - rin0) / flows:.1f} kB, egress {(reg1 - reg0) / flows:.1f} kB; "
      f"peak RSS ingress {hin / 1024:.1f} MB, egress {heg / 1024:.1f} MB")
print(f"control round trip p50: idle {idle['p50']:.1f} ms, loaded {loaded['p50']:.1f} ms; "
      f"p95 {idle['p95']:.1f} -> {loaded['p95']:.1f} ms")
if udp:
    print(f"udp datagrams sent {ld['udp_sent']}, received {gr['udp_received']} (intact {gr['udp_intact']}, "
          f"bad {gr['udp_bad']}) from {gr['udp_flows']} of {udp} flows")
for e in ld["errors"]:
    print("error:", e)
fails = []
if udp and (gr["udp_bad"] or gr["udp_flows"] != udp): fails.append("a datagram was damaged or a UDP flow never arrived")
if ld["flows_opened"] != flows: fails.append("not every flow opened")
if ld["echo_bad"] or ld["final_bad"] or ld["final_ok"] != ld["flows_opened"]: fails.append("an echo was lost or differed")
if ld["bulk_ok"] != bulk: fails.append("an upload was not intact")
print("checks:", "all met" if not fails else "FAILED: " + "; ".join(fails))
sys.exit(1 if fails else 0)
PY
