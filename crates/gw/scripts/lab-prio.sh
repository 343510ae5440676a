#!/usr/bin/env bash
# AeroGW priorities under load in the TUN lab (docs/results/gw.md): root, `aerotp` built
# (AEROTP=path), python3. One lab; for each policy the gateways are started fresh:
#   idle      - the small flow alone (reference)
#   equal     - small flow and bulk flow in the same class (bulk): no priority
#   weighted  - small flow class control, weights 8:4:1
#   strict    - small flow class control, strict priority
# Bulk: a near-reliable upload of 40 MB started 3 s before the measurement (it saturates the
# gateways' rate for the whole window). During the window (DUR s), at once:
#  - control: a reliable TCP flow; a Python client sends a 200-byte message every 100 ms, the
#    ground echoes it; round-trip time per message at the client (p50, p95, max);
#  - telemetry: a reliable TCP flow offering TELE b/s of 1000-byte records, each stamped with
#    the time it was due; the ground receiver reports records received (of those produced),
#    goodput from the first record's due time to the last arrival, and the records' age at
#    arrival (same host clock in both namespaces; includes time held back by backpressure);
#  - the bulk flow's goodput at its destination over the same window.
# In "equal" all three flows are class bulk; else control/telemetry/bulk.
#  - with UDP=b/s set: a UDP flow in datagram mode (passthrough, class UDP_CLASS) of
#    1000-byte datagrams at that rate, each stamped with the time it was due; the ground
#    counts what arrived and its one-way delay.
# Usage: crates/gw/scripts/lab-prio.sh [RATE] [DELAY] [BER] [DUR_S]
# Env: TELE (default 3500000), GWRATE (gateways' --rate, default RATE), UDP (default 0: none),
#      UDP_CLASS (default telemetry).
set -euo pipefail
AEROTP=${AEROTP:-aerotp}
RATE=${1:-5mbit}; DELAY=${2:-10ms}; BER=${3:-1e-5}; DUR=${4:-10}
TELE=${TELE:-3500000}; GWRATE=${GWRATE:-$RATE}; UDP=${UDP:-0}; UDP_CLASS=${UDP_CLASS:-telemetry}
. "$(dirname "$0")/lab-up.sh"
need_number TELE "$TELE"
need_number UDP "$UDP"
need_number DUR_S "$DUR"
case $UDP_CLASS in control|telemetry|bulk) ;; *) echo "UDP_CLASS must be control, telemetry or bulk, not '$UDP_CLASS'" >&2; exit 2 ;; esac
W=$(mktemp -d /tmp/gw-prio.XXXX)
head -c 40000000 /dev/urandom > "$W/bulk"
TAG=gp$$
lab_up --rate "$RATE" --delay "$DELAY" --ber "$BER" --seed 11
echo "work dir $W; lab $RATE $DELAY BER $BER; gateways --rate $GWRATE; window $DUR s; telemetry offered $TELE b/s; UDP datagrams $UDP b/s ($UDP_CLASS)"

# Ground: echo server (small flow) and bulk sink (counts bytes into a file).
ground python3 -c '
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 7100)); s.listen(16)
def echo(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
' &
ground python3 -c '
import socket, threading, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
tot = [0]; lock = threading.Lock()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 7200)); s.listen(16)
def sink(c):
    while True:
        b = c.recv(65536)
        if not b: break
        with lock:
            tot[0] += len(b)
            os.pwrite(fd, ("%20d\n" % tot[0]).encode(), 0)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=sink, args=(c,), daemon=True).start()
' "$W/bulk.count" &
TELE_RX='
import socket, struct, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 7300)); s.listen(1); s.settimeout(60)
c, _ = s.accept(); c.settimeout(30)
buf = b""; d = []; n = 0; t0 = None; last = -1
while True:
    try:
        b = c.recv(65536)
    except socket.timeout:
        break
    if not b: break
    buf += b
    while len(buf) >= 1000:
        ts, i = struct.unpack(">dI", buf[:12]); buf = buf[1000:]
        now = time.time()
        if t0 is None: t0 = ts
        d.append((now - ts) * 1000); n += 1000; t1 = now; last = i
d.sort()
q = lambda p: d[min(len(d) - 1, int(p * len(d)))]
print("telemetry %d records (of %d due), goodput %.2f Mb/s, age p50 %.0f ms p95 %.0f ms max %.0f ms" % (len(d), last + 1, n * 8 / max(1e-9, t1 - t0) / 1e6, q(0.5), q(0.95), d[-1]))
'
TELE_TX='
import socket, struct, sys, time
rate = float(sys.argv[1]); dur = float(sys.argv[2])
s = socket.create_connection(("127.0.0.1", 8300), timeout=60)
per = 1000 * 8 / rate
t0 = time.time(); i = 0
while time.time() - t0 < dur:
    due = t0 + i * per
    time.sleep(max(0.0, due - time.time()))
    # Stamped with the time it was due, not when sendall returned: a producer held back by
    # backpressure shows up as age at the receiver.
    s.sendall(struct.pack(">dI", due, i) + b"t" * 988)
    i += 1
s.close()
'
sleep 1

ECHO_CLIENT='
import socket, time, sys
dur = float(sys.argv[1])
s = socket.create_connection(("127.0.0.1", 8100), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg = b"m" * 200
rtts = []
end = time.time() + dur
while time.time() < end:
    t = time.time()
    s.sendall(msg)
    got = 0
    while got < len(msg):
        b = s.recv(len(msg) - got)
        if not b: raise SystemExit("echo connection closed")
        got += len(b)
    rtts.append((time.time() - t) * 1000)
    time.sleep(max(0.0, 0.1 - (time.time() - t)))
rtts.sort()
q = lambda p: rtts[min(len(rtts) - 1, int(p * len(rtts)))]
print("%d msgs  p50 %.1f ms  p95 %.1f ms  max %.1f ms" % (len(rtts), q(0.5), q(0.95), rtts[-1]))
'
UDP_RX='
import math, socket, struct, sys, time
dur = float(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.77.0.2", 7400))
s.settimeout(0.5)
d = []; last = -1; end = time.time() + dur
while time.time() < end:
    try:
        b = s.recv(2048)
    except socket.timeout:
        continue
    ts, i = struct.unpack(">dI", b[:12])
    d.append((time.time() - ts) * 1000); last = max(last, i)
d.sort()
q = lambda p: d[min(len(d) - 1, int(p * len(d)))] if d else math.nan
print("udp datagrams %d received (of %d sent up to the last), delay p50 %.0f ms p95 %.0f ms max %.0f ms" % (len(d), last + 1, q(0.5), q(0.95), q(1.0)))
'
UDP_TX='
import socket, struct, sys, time
rate = float(sys.argv[1]); dur = float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
per = 1000 * 8 / rate
t0 = time.time(); i = 0
while time.time() - t0 < dur:
    due = t0 + i * per
    time.sleep(max(0.0, due - time.time()))
    s.sendto(struct.pack(">dI", due, i) + b"u" * 988, ("127.0.0.1", 8400))
    i += 1
'
# gwudp NETNS PORT KEY: the gateway's aerotp_gw_udp_KEY_total counter, summed over its labels
# (dropped has one sample per reason; metrics on 127.0.0.1:PORT; docs/stats.md).
gwudp() {
  ip netns exec "$1" "$AEROTP" gw stats --metrics "127.0.0.1:$2" 2>/dev/null |
    awk -v k="aerotp_gw_udp_$3_total" 'index($1, k "{") == 1 {n += $2} END {print n + 0}'
}
printf "%20d\n" 0 > "$W/bulk.count"
count() { tr -d ' \n' < "$W/bulk.count"; }

for POLICY in idle equal weighted strict; do
  case $POLICY in
    strict) PRIO=strict; CLASS=control; TCLASS=telemetry ;;
    weighted) PRIO=weighted; CLASS=control; TCLASS=telemetry ;;
    idle) PRIO=weighted; CLASS=control; TCLASS=telemetry ;;
    *) PRIO=weighted; CLASS=bulk; TCLASS=bulk ;;
  esac
  rm -rf "$W/store-in" "$W/store-eg"; mkdir -p "$W/store-in" "$W/store-eg"
  cat > "$W/ingress.toml" <<TOML
peer = "10.77.0.2:9000"
insecure = true   # keyless in the lab namespaces, as docs/results/gw.md was measured
rate = "$GWRATE"
store = "$W/store-in"
priority = "$PRIO"
metrics = "127.0.0.1:9464"
[[flow]]
tcp_listen = "127.0.0.1:8100"
dest = "10.77.0.2:7100"
mode = "reliable"
class = "$CLASS"
[[flow]]
tcp_listen = "127.0.0.1:8300"
dest = "10.77.0.2:7300"
mode = "reliable"
class = "$TCLASS"
[[flow]]
tcp_listen = "127.0.0.1:8200"
dest = "10.77.0.2:7200"
mode = "near-reliable"
class = "bulk"
TOML
  if [ "$UDP" != 0 ]; then
    printf '[[flow]]\nudp_listen = "127.0.0.1:8400"\ndest = "10.77.0.2:7400"\nmode = "datagram"\nclass = "%s"\n' "$UDP_CLASS" >> "$W/ingress.toml"
  fi
  RUST_LOG=warn ip netns exec "$GROUND" "$AEROTP" gw egress --listen 10.77.0.2:9000 --allow 10.77.0.2:7100 \
    --allow 10.77.0.2:7200 --allow 10.77.0.2:7300 --allow 10.77.0.2:7400 --rate "$GWRATE" --priority "$PRIO" --store "$W/store-eg" --metrics 127.0.0.1:9465 --insecure >>"$W/egress-$POLICY.log" 2>&1 &
  EG=$!
  RUST_LOG=warn ip netns exec "$AIR" "$AEROTP" gw ingress --config "$W/ingress.toml" >>"$W/ingress-$POLICY.log" 2>&1 &
  ING=$!
  sleep 1
  BULK=""
  if [ "$POLICY" != idle ]; then
    air python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", 8200))
s.sendall(open(sys.argv[1], "rb").read())
s.shutdown(socket.SHUT_WR)
s.recv(1)
' "$W/bulk" >/dev/null 2>&1 &
    BULK=$!
    sleep 3
  fi
  ground python3 -c "$TELE_RX" > "$W/tele-$POLICY.out" 2>&1 &
  TRX=$!
  sleep 0.3
  air python3 -c "$TELE_TX" "$TELE" "$DUR" >/dev/null 2>&1 &
  TTX=$!
  if [ "$UDP" != 0 ]; then
    ground python3 -c "$UDP_RX" "$(echo "$DUR + 3" | bc)" > "$W/udp-$POLICY.out" 2>&1 &
    URX=$!
    air python3 -c "$UDP_TX" "$UDP" "$DUR" >/dev/null 2>&1 &
  fi
  C0=$(count); T0=$(date +%s.%N)
  R=$(air python3 -c "$ECHO_CLIENT" "$DUR" 2>&1 || true)
  C1=$(count); T1=$(date +%s.%N)
  G=$(echo "($C1 - $C0) * 8 / ($T1 - $T0) / 1000000" | bc -l)
  wait "$TTX" 2>/dev/null || true
  timeout 40 tail --pid="$TRX" -f /dev/null || kill "$TRX" 2>/dev/null || true
  printf "%-9s priority %-8s control (class %s): %s\n" "$POLICY" "$PRIO" "$CLASS" "$R"
  printf "%-9s          %-8s %s (class %s)\n" "" "" "$(cat "$W/tele-$POLICY.out")" "$TCLASS"
  printf "%-9s          %-8s bulk goodput %.2f Mb/s\n" "" "" "$G"
  if [ "$UDP" != 0 ]; then
    wait "$URX" 2>/dev/null || true
    printf "%-9s          %-8s %s (class %s)\n" "" "" "$(cat "$W/udp-$POLICY.out")" "$UDP_CLASS"
    # The gateways' own UDP counters: received from the client, policed and dropped at the
    # ingress; handed to the destination at the egress.
    printf "%-9s          %-8s gateways: ingress received %s, policed %s, dropped %s; egress delivered %s\n" "" "" \
      "$(gwudp "$AIR" 9464 in)" "$(gwudp "$AIR" 9464 policed)" "$(gwudp "$AIR" 9464 dropped)" \
      "$(gwudp "$GROUND" 9465 out)"
  fi
  [ -n "$BULK" ] && { kill "$BULK" 2>/dev/null || true; wait "$BULK" 2>/dev/null || true; }
  kill "$ING" "$EG" 2>/dev/null || true
  wait "$ING" "$EG" 2>/dev/null || true
  sleep 2
done
