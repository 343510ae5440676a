#!/usr/bin/env bash
# Every gateway figure of docs/results/gw.md, measured again with one build: the 10 MB
# download against kernel TCP cubic, the priorities (a UDP flood; 3.5 Mb/s of telemetry),
# the many-flows bench, and through the TUN device unmodified curl, a BBR upload and the
# 1,000-flow mix with 50 uploads and 100 UDP flows. Needs root (the lab builds network
# namespaces; each script removes what it made). About 15 minutes.
#
#   bash bench/gw-figures.sh [OUT_DIR]       (AEROTP=path/to/aerotp, default target/release)
#
# Each bench's whole output goes to OUT_DIR/NAME.log with the command that made it in
# OUT_DIR/NAME.cmd; the summary printed here is the end of each log. SEEDS (default "1 2 3")
# sets the download's bit-error seeds. One lab at a time: do not run two of these at once.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/aerotp-gw-figures.$(date +%Y%m%d-%H%M%S)}
AEROTP=${AEROTP:-target/release/aerotp}
SEEDS=${SEEDS:-1 2 3}
[ "$(id -u)" = 0 ] || { echo "gw-figures: the lab needs root (network namespaces); run it as root" >&2; exit 2; }
[ -x "$AEROTP" ] || { echo "gw-figures: no aerotp binary at $AEROTP; build it (cargo build --release -p aerotp) or set AEROTP" >&2; exit 2; }
AEROTP=$(readlink -f "$AEROTP")
export AEROTP
mkdir -p "$OUT"
S=crates/gw/scripts
failed=0

# run NAME TAIL_LINES ENV_AND_COMMAND...: one bench, its log and command kept.
run() {
  local name=$1 lines=$2
  shift 2
  echo "$*" > "$OUT/$name.cmd"
  echo "== $name: $* ($(date -u +%H:%M:%S) UTC)"
  if env "$@" > "$OUT/$name.log" 2>&1; then :; else
    echo "   FAILED (exit $?); see $OUT/$name.log"
    failed=$((failed + 1))
  fi
  tail -n "$lines" "$OUT/$name.log" | sed 's/^/   /'
}

for s in $SEEDS; do
  run "download-seed$s" 6 GW_FEC=auto DOWNLOAD_ONLY=1 CCS=cubic SEED="$s" bash $S/lab-gw.sh 5mbit 10ms 1e-5 10
done
run prio-flood 16 UDP=8000000 UDP_CLASS=bulk TELE=1000000 bash $S/lab-prio.sh 5mbit 10ms 1e-5 10
run prio-telemetry 16 TELE=3500000 bash $S/lab-prio.sh 5mbit 10ms 1e-5 10
run many-flows 12 bash $S/lab-flows.sh 5mbit 10ms 1e-5 10
run tun-curl 6 bash $S/lab-tun.sh curl 5mbit 10ms 1e-5 10
run tun-upload-bbr 6 APP_CC=bbr bash $S/lab-tun.sh upload 5mbit 10ms 1e-5 10
run tun-flows 14 BULK=50 UDP=100 UDP_CLASS=telemetry 'TCP_CLASS=control=*:7100' bash $S/lab-tun.sh flows 5mbit 10ms 1e-5 950
echo "logs in $OUT; $failed bench(es) failed"
[ "$failed" = 0 ]
