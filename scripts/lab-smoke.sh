#!/usr/bin/env bash
# End-to-end smoke test of `aerotp lab` (needs root): an HTTP download of 200 kB from the
# ground namespace to the air namespace over 5 Mb/s up / 1 Mb/s down, 10 ms. Checks the
# SHA-256, the time floor (200 kB × 8 / 1 Mb/s = 1.6 s), the exit status and that no lab
# namespace is left. Traffic stays inside the namespaces the lab creates.
# Usage: scripts/lab-smoke.sh [path/to/aerotp]   (default: builds it into target-lab)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "lab-smoke: must run as root (network namespaces need CAP_SYS_ADMIN)" >&2
    exit 1
fi
for tool in ip python3 curl sha256sum; do
    command -v "$tool" >/dev/null || { echo "lab-smoke: $tool missing: run scripts/lab-deps.sh" >&2; exit 1; }
done

BIN="${1:-}"
if [ -z "$BIN" ]; then
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/work/target-lab}" cargo build -q -p aerotp
    BIN="${CARGO_TARGET_DIR:-/work/target-lab}/debug/aerotp"
fi

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
head -c 200000 /dev/urandom > "$dir/blob"
want="$(sha256sum < "$dir/blob" | cut -d' ' -f1)"

start=$(date +%s.%N)
timeout 60 "$BIN" lab --rate 5mbit --reverse-rate 1mbit --delay 10ms --name smoke \
    --ground-port 8000 \
    --ground "exec python3 -m http.server -b \$AEROTP_GROUND_ADDR -d '$dir' 8000 2>/dev/null" \
    --air "curl -sf -o '$dir/got' -w '%{time_total}\n' http://\$AEROTP_GROUND_ADDR:8000/blob > '$dir/time'"
end=$(date +%s.%N)

got="$(sha256sum < "$dir/got" | cut -d' ' -f1)"
t="$(cat "$dir/time")"
[ "$got" = "$want" ] || { echo "lab-smoke: SHA-256 mismatch ($got != $want)" >&2; exit 1; }
python3 -c "import sys; t=float('$t'); sys.exit(0 if 1.6 <= t < 10 else 1)" \
    || { echo "lab-smoke: transfer took ${t}s, outside [1.6 s, 10 s)" >&2; exit 1; }
if ip netns list | grep -q -- '-smoke'; then
    echo "lab-smoke: namespaces left behind: $(ip netns list | grep -- '-smoke')" >&2
    exit 1
fi
echo "lab-smoke: OK: 200000 B in ${t}s (floor 1.6 s), SHA-256 matches, run $(python3 -c "print(round($end-$start,2))") s, nothing left"
