#!/usr/bin/env bash
# AeroGW in the TUN lab (docs/results/gw.md): root, `aerotp` built (AEROTP=path).
#  1. HTTP download of SIZE bytes with curl (air) from python3 -m http.server (ground):
#     through the near-reliable gateways, then over plain kernel TCP with each congestion
#     control in CCS (the sender is the ground's HTTP server: a fresh server per CC with
#     TCP_CONGESTION set on its listener, checked with ss), same lab, same run.
#  2. Upload of SIZE bytes through the gateways (near-reliable custody); the ingress is killed
#     with SIGKILL mid-transfer and restarted on the same store; the destination's file is
#     compared with the source's.
#  3. The same with the egress killed (SIGKILL) and restarted on its store: the destination
#     (appending every connection it gets, in order) must hold the file exactly.
# Usage: crates/gw/scripts/lab-gw.sh [RATE] [DELAY] [BER] [SIZE_MB] [LOSS]
# Env: CCS="cubic bbr reno" (kernel TCP congestion controls to compare), AEROTP=path,
#      GW_FEC=auto|off|N|pN (FEC of both gateways' sending directions; default auto, as the gateways),
#      DOWNLOAD_ONLY=1 (stop after the downloads: no kill -9 uploads),
#      SEED=7 (the link's bit-error generator; vary it to sample other error patterns).
set -euo pipefail
AEROTP=${AEROTP:-aerotp}
RATE=${1:-5mbit}; DELAY=${2:-10ms}; BER=${3:-1e-5}; MB=${4:-10}; LOSS=${5:-0}
CCS=${CCS:-cubic bbr reno}
GW_FEC=${GW_FEC:-auto}
SEED=${SEED:-7}
. "$(dirname "$0")/lab-up.sh"
need_number SEED "$SEED"
need_number SIZE_MB "$MB"
W=$(mktemp -d /tmp/gw-lab.XXXX)
mkdir -p "$W/srv" "$W/store" "$W/out"
head -c $((MB * 1000000)) /dev/urandom > "$W/srv/blob"
cat > "$W/ingress.toml" <<TOML
peer = "10.77.0.2:9000"
insecure = true   # keyless in the lab namespaces, as docs/results/gw.md was measured
rate = "$RATE"
store = "$W/store"
metrics = "127.0.0.1:9464"
fec = "$GW_FEC"
[[flow]]
tcp_listen = "127.0.0.1:8080"
mode = "near-reliable"
class = "bulk"
[[flow]]
tcp_listen = "127.0.0.1:8081"
dest = "10.77.0.2:7000"
mode = "near-reliable"
class = "bulk"
[[flow]]
tcp_listen = "127.0.0.1:8082"
dest = "10.77.0.2:7001"
mode = "near-reliable"
class = "bulk"
TOML
TAG=gw$$
lab_up --rate "$RATE" --delay "$DELAY" --ber "$BER" --loss "$LOSS" --seed "$SEED"
echo "work dir $W; lab $AIR / $GROUND: $RATE $DELAY BER $BER loss $LOSS seed $SEED"

ground python3 -m http.server -b 10.77.0.2 -d "$W/srv" 8000 >"$W/http.log" 2>&1 &
ground python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 7000)); s.listen(1)
c, _ = s.accept()
with open(sys.argv[1], "wb") as f:
    while True:
        b = c.recv(65536)
        if not b: break
        f.write(b)
c.close()
' "$W/out/upload" &
RECV=$!
# Appends every connection it accepts until SIZE bytes arrived (the egress-restart test).
ground python3 -c '
import socket, sys
total = int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 7001)); s.listen(4)
n = conns = 0
with open(sys.argv[1], "wb") as f:
    while n < total:
        c, _ = s.accept(); conns += 1
        while True:
            b = c.recv(65536)
            if not b: break
            f.write(b); n += len(b)
        c.close()
        print("destination connection %d ended at %d B" % (conns, n), flush=True)
' "$W/out/upload2" $((MB * 1000000)) >"$W/recv2.log" 2>&1 &
RECV2=$!
mkdir -p "$W/store-eg"
# Not through the shell function: $! must be the gateway itself (ip netns exec execs it).
start_egress() {
  RUST_LOG=${RUST_LOG:-info} ip netns exec "$GROUND" "$AEROTP" gw egress --listen 10.77.0.2:9000 \
    --tcp-connect 10.77.0.2:8000 --allow 10.77.0.2:7000 --allow 10.77.0.2:7001 --rate "$RATE" \
    --store "$W/store-eg" --metrics 127.0.0.1:9465 --fec "$GW_FEC" --insecure >>"$W/egress.log" 2>&1 &
  EG=$!
}
start_egress
# Not through the shell function: $! must be the gateway itself (ip netns exec execs it).
start_ingress() {
  RUST_LOG=${RUST_LOG:-info} ip netns exec "$AIR" "$AEROTP" gw ingress --config "$W/ingress.toml" >>"$W/ingress.log" 2>&1 &
  ING=$!
}
start_ingress
sleep 1

echo "== HTTP download $MB MB through the near-reliable gateways (FEC $GW_FEC)"
air curl -sS -o "$W/out/gw.bin" -w "gateway: %{time_total} s, %{size_download} B, %{speed_download} B/s\n" \
  http://127.0.0.1:8080/blob
SRC_SHA=$(sha256sum "$W/srv/blob" | cut -d' ' -f1)
same() { [ "$(sha256sum "$1" 2>/dev/null | cut -d' ' -f1)" = "$SRC_SHA" ] && echo "identical" || echo "DIFFERS"; }
echo "gateway file: $(same "$W/out/gw.bin")"
PORT=8100
for CC in $CCS; do
  echo "== the same download over plain kernel TCP, $CC (sender: ground)"
  # python3's http.server with TCP_CONGESTION set on its listener (accepted sockets inherit
  # it). Not `sysctl net.ipv4.tcp_congestion_control` in the namespace: outside the initial
  # namespace the kernel lets the default be only one of tcp_allowed_congestion_control
  # (EPERM for cubic on this host), and the host-wide setting is not ours to change.
  ground python3 -c '
import functools, http.server, socket, sys
class S(http.server.ThreadingHTTPServer):
    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, sys.argv[1].encode())
        super().server_bind()
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
S(("10.77.0.2", int(sys.argv[3])), h).serve_forever()
' "$CC" "$W/srv" $PORT >"$W/http-$CC.log" 2>&1 &
  HS=$!
  sleep 1
  ( sleep 3; ground ss -tin "sport = :$PORT" | grep -oE "\b(cubic|bbr|reno)\b" | head -1 | sed "s/^/  CC seen by ss on the server socket: /" ) &
  air timeout 900 curl -sS -o "$W/out/tcp-$CC.bin" -w "kernel TCP $CC: %{time_total} s, %{size_download} B, %{speed_download} B/s\n" \
    http://10.77.0.2:$PORT/blob || echo "kernel TCP $CC: did not finish within 900 s"
  echo "kernel TCP $CC file: $(same "$W/out/tcp-$CC.bin")"
  kill "$HS" 2>/dev/null || true; wait "$HS" 2>/dev/null || true
  PORT=$((PORT + 1))
done

# The upload's source (air): writes the file to the ingress at 127.0.0.1:PORT, half-closes,
# then waits for the ingress to close (or reset) its connection. Sets SRC.
upload_source() {
  air python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
with open(sys.argv[1], "rb") as f:
    s.sendall(f.read())
s.shutdown(socket.SHUT_WR)
print("source: all bytes accepted by the ingress")
try:
    s.recv(1)
except OSError as e:
    print("source connection:", e)
' "$W/srv/blob" "$1" &
  SRC=$!
}

if [ "${DOWNLOAD_ONLY:-0}" = 1 ]; then echo "DOWNLOAD_ONLY=1: skipping the kill -9 uploads"; exit 0; fi
echo "== upload $MB MB through the gateways, ingress killed (SIGKILL) mid-transfer"
T0=$(date +%s.%N)
upload_source 8081
sleep 6
echo "destination has $(stat -c %s "$W/out/upload" 2>/dev/null || echo 0) B; kill -9 ingress (pid $ING)"
echo "killed: $(cat /proc/$ING/comm)"; kill -9 "$ING"; wait "$ING" 2>/dev/null || true
sleep 2
pgrep -f "gw ingress --config $W" >/dev/null && { echo "ingress still alive after SIGKILL"; exit 1; }
echo "store holds: $(du -sb "$W/store" | cut -f1) B; restarting the ingress on the same store"
start_ingress
wait "$RECV"
T1=$(date +%s.%N)
grep -q "cannot listen" "$W/ingress.log" && { echo "restarted ingress failed"; exit 1; }
echo "destination closed after $(echo "$T1 - $T0" | bc) s; resumes logged by ingress: $(grep -c 'flow resumed' "$W/ingress.log")"
sha256sum "$W/srv/blob" "$W/out/upload" | awk '{print $1}' | uniq -c
cmp "$W/srv/blob" "$W/out/upload" && echo "upload: identical ($(stat -c %s "$W/out/upload") B)"
wait "$SRC" 2>/dev/null || true
ground "$AEROTP" gw stats --metrics 127.0.0.1:9465 | grep -E "^aerotp_gw_(flows|resumes)" || true

echo "== upload $MB MB through the gateways, egress killed (SIGKILL) mid-transfer"
T0=$(date +%s.%N)
upload_source 8082
sleep 6
echo "destination has $(stat -c %s "$W/out/upload2" 2>/dev/null || echo 0) B; kill -9 egress (pid $EG)"
echo "killed: $(cat /proc/$EG/comm)"; kill -9 "$EG"; wait "$EG" 2>/dev/null || true
sleep 2
pgrep -f "gw egress --listen 10.77.0.2:9000" >/dev/null && { echo "egress still alive after SIGKILL"; exit 1; }
echo "egress store: $(ls "$W/store-eg" | wc -l) files; restarting the egress on the same store"
start_egress
timeout 300 tail --pid="$RECV2" -f /dev/null || echo "destination did not finish within 300 s"
T1=$(date +%s.%N)
cat "$W/recv2.log"
echo "destination done after $(echo "$T1 - $T0" | bc) s; egress log: $(grep -cE 'continues on a new destination connection' "$W/egress.log") continued, $(grep -c 'cannot continue' "$W/egress.log") refused"
echo "upload after egress kill: $(same "$W/out/upload2") ($(stat -c %s "$W/out/upload2") B)"
wait "$SRC" 2>/dev/null || true
ground "$AEROTP" gw stats --metrics 127.0.0.1:9465 | grep -E "^aerotp_gw_(flows|resumes)" || true
kill "$ING" "$EG" 2>/dev/null || true
