#!/usr/bin/env bash
# AeroGW with many flows through one gateway pair in the TUN lab (docs/results/gw.md, "Many
# flows"): root, `aerotp` built (AEROTP=path), python3.
#   1. the gateways start; a control flow (reliable, class control) measures its echo round
#      trip alone for DUR s: the idle figure;
#   2. FLOWS TCP flows (reliable, class telemetry) open through the ingress, each proving
#      itself with one echoed message, and UDP UDP flows (datagram mode, class telemetry)
#      start one 200-byte datagram a second each; the gateways' RSS is read with all of them
#      open and idle: memory per idle flow = (RSS now - RSS before) / (FLOWS + UDP);
#   3. BULK flows (near-reliable, class bulk) each upload BULK_BYTES; half of the TCP flows
#      send a 100-byte message every 2 s (the other half stay idle); 3 s in, the control flow
#      measures its round trip for DUR s again: the loaded figure;
#   4. when the uploads are done, every TCP flow sends a last message and closes.
# Checks (exit 1 if one fails): every flow opened; every echo, upload and datagram that
# arrived intact; each gateway's peak RSS <= RSS_MAX_MB; loaded control p50 <= 1.2 x idle.
# Usage: crates/gw/scripts/lab-flows.sh [RATE] [DELAY] [BER] [DUR_S]
# Env: FLOWS (default 950), BULK (50), BULK_BYTES (262144), UDP (100), PRIO (strict or
#      weighted; default strict), RSS_MAX_MB (200).
set -euo pipefail
AEROTP=${AEROTP:-aerotp}
RATE=${1:-5mbit}; DELAY=${2:-10ms}; BER=${3:-1e-5}; DUR=${4:-10}
FLOWS=${FLOWS:-950}; BULK=${BULK:-50}; BULK_BYTES=${BULK_BYTES:-262144}; UDP=${UDP:-100}
PRIO=${PRIO:-strict}; RSS_MAX_MB=${RSS_MAX_MB:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lab-up.sh"
for v in FLOWS BULK BULK_BYTES UDP DUR RSS_MAX_MB; do need_number "$v" "${!v}"; done
case $PRIO in strict|weighted) ;; *) echo "PRIO must be strict or weighted, not '$PRIO'" >&2; exit 2 ;; esac
NEED_FD=$((FLOWS + BULK + UDP + 256))
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge "$NEED_FD" ] ||
  { echo "the open-file limit (ulimit -Hn $(ulimit -Hn)) is below the $NEED_FD this run needs" >&2; exit 2; }
ulimit -n "$NEED_FD"
W=$(mktemp -d /tmp/gw-flows.XXXX)
TAG=gf$$
lab_up --rate "$RATE" --delay "$DELAY" --ber "$BER" --seed 11
echo "work dir $W; lab $RATE $DELAY BER $BER; priority $PRIO; $FLOWS TCP flows (half interactive), $BULK uploads of $BULK_BYTES B, $UDP UDP flows; control window $DUR s"

ground python3 "$HERE/flows/ground.py" 10.77.0.2 "$W/ground.json" &
GRD=$!
mkdir -p "$W/store-in" "$W/store-eg"
cat > "$W/ingress.toml" <<TOML
peer = "10.77.0.2:9000"
insecure = true   # keyless in the lab namespaces, as docs/results/gw.md was measured
rate = "$RATE"
store = "$W/store-in"
priority = "$PRIO"
max_connections = $((FLOWS + BULK + 64))
metrics = "127.0.0.1:9464"
[[flow]]
tcp_listen = "127.0.0.1:8100"
dest = "10.77.0.2:7100"
mode = "reliable"
class = "control"
[[flow]]
tcp_listen = "127.0.0.1:8500"
dest = "10.77.0.2:7500"
mode = "reliable"
class = "telemetry"
[[flow]]
tcp_listen = "127.0.0.1:8200"
dest = "10.77.0.2:7200"
mode = "near-reliable"
class = "bulk"
[[flow]]
udp_listen = "127.0.0.1:8400"
dest = "10.77.0.2:7400"
mode = "datagram"
class = "telemetry"
TOML
RUST_LOG=${GW_LOG:-warn} ip netns exec "$GROUND" "$AEROTP" gw egress --listen 10.77.0.2:9000 \
  --allow 10.77.0.2:7100 --allow 10.77.0.2:7200 --allow 10.77.0.2:7400 --allow 10.77.0.2:7500 \
  --rate "$RATE" --priority "$PRIO" --store "$W/store-eg" --max-connections $((FLOWS + BULK + 64)) --metrics 127.0.0.1:9465 --insecure \
  >"$W/egress.log" 2>&1 &
EG=$!
RUST_LOG=${GW_LOG:-warn} ip netns exec "$AIR" "$AEROTP" gw ingress --config "$W/ingress.toml" >"$W/ingress.log" 2>&1 &
ING=$!
cleanup() {
  kill "$ING" "$EG" "$GRD" ${LOAD:-} 2>/dev/null || true
  wait "$ING" "$EG" "$GRD" 2>/dev/null || true
  lab_down
}
trap cleanup EXIT
sleep 1

flows_phase air "" "$DUR" "$FLOWS" "$BULK" "$BULK_BYTES" "$UDP" $((DUR + 6))
sleep 2
HIN=$(rss "$ING" VmHWM); HEG=$(rss "$EG" VmHWM)
# The gateways' own counters (docs/stats.md), kept in the work directory.
air "$AEROTP" gw stats --metrics 127.0.0.1:9464 > "$W/ingress.prom" 2>&1 || true
ground "$AEROTP" gw stats --metrics 127.0.0.1:9465 > "$W/egress.prom" 2>&1 || true
python3 - "$W" "$IDLE" "$LOADED" "$FLOWS" "$BULK" "$UDP" "$RIN0" "$RIN1" "$REG0" "$REG1" "$HIN" "$HEG" "$RSS_MAX_MB" <<'PY'
import json, sys
w, idle, loaded = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
flows, bulk, udp, rin0, rin1, reg0, reg1, hin, heg, rss_max = map(int, sys.argv[4:])
ld = json.load(open(f"{w}/load.json")); gr = json.load(open(f"{w}/ground.json"))
per_in = (rin1 - rin0) / (flows + udp); per_eg = (reg1 - reg0) / (flows + udp)
print(f"flows opened {ld['flows_opened']} of {flows} in {ld['open_seconds']:.1f} s; echoes intact "
      f"{ld['echo_ok']} (bad {ld['echo_bad']}); last messages intact {ld['final_ok']} (bad {ld['final_bad']})")
print(f"uploads intact {ld['bulk_ok']} of {bulk} in {ld['bulk_seconds']:.1f} s (ground: intact "
      f"{gr['bulk_intact']}, bad {gr['bulk_bad']})")
print(f"udp datagrams sent {ld['udp_sent']}, received {gr['udp_received']} (intact {gr['udp_intact']}, "
      f"bad {gr['udp_bad']}) from {gr['udp_flows']} of {udp} flows")
print(f"memory per idle flow: ingress {per_in:.1f} kB, egress {per_eg:.1f} kB; peak RSS ingress "
      f"{hin / 1024:.1f} MB, egress {heg / 1024:.1f} MB")
ratio = loaded["p50"] / idle["p50"]
print(f"control round trip p50: idle {idle['p50']:.1f} ms, loaded {loaded['p50']:.1f} ms "
      f"({ratio:.2f}x); p95 {idle['p95']:.1f} -> {loaded['p95']:.1f} ms")
for e in ld["errors"]:
    print("error:", e)
fails = []
if ld["flows_opened"] != flows: fails.append("not every flow opened")
if ld["echo_bad"] or ld["final_bad"] or ld["final_ok"] != ld["flows_opened"]: fails.append("an echo was lost or differed")
if ld["bulk_ok"] != bulk or gr["bulk_bad"]: fails.append("an upload was not intact")
if gr["udp_bad"] or gr["udp_flows"] != udp: fails.append("a datagram was damaged or a UDP flow never arrived")
if max(hin, heg) > rss_max * 1024: fails.append(f"peak RSS over {rss_max} MB")
if ratio > 1.2: fails.append("loaded control p50 over 1.2x idle")
print("checks:", "all met" if not fails else "FAILED: " + "; ".join(fails))
sys.exit(1 if fails else 0)
PY
