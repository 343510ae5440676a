#!/usr/bin/env bash
# The engine issue's figures, one simulator command each (10 MB, 5 Mb/s, two nodes unless the
# line says otherwise), printed as a Markdown table with the command behind every row.
#   bash bench/engine-figures.sh [RUNS]      (default 4 runs per point; medians of the runs'
#                                            figures are what `aerotp sim --json` reports as
#                                            means — the table says which)
# Needs a release build: cargo build --release -p aerotp
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/aerotp
RUNS=${1:-4}
[ -x "$BIN" ] || { echo "error: $BIN missing: run cargo build --release -p aerotp first" >&2; exit 1; }

echo "| figure | mode | goodput / ceiling | from first arrival | retx (spurious) | wire fwd / rev | other | command |"
echo "|---|---|---|---|---|---|---|---|"

row() { # row LABEL EXTRA-PYTHON-EXPR -- sim args...
    local label=$1 extra=$2; shift 3
    local cmd="aerotp sim --size 10MB --topology two-node --runs $RUNS --json $*"
    # shellcheck disable=SC2086
    $BIN sim --size 10MB --topology two-node --runs "$RUNS" --json "$@" | LABEL="$label" CMD="$cmd" EXTRA="$extra" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
g, c = d["goodput_bps"], d["ceiling_bps"]
t = d["size"] * 8 / g if g else float("inf")
first = d["size"] * 8 / (t - d["setup_delay_s"]) / c if g and t > d["setup_delay_s"] else 0.0
extra = eval(os.environ["EXTRA"]) if os.environ["EXTRA"] else ""
print("| %s | %s | %.3f | %.3f | %.1f (%.1f) | %.2f MB / %.1f kB | %s | `%s` |" % (
    os.environ["LABEL"], d["mode"], g / c, first, d["retransmissions"],
    d["spurious_retransmissions"], d["wire_bytes_forward"] / 1e6, d["wire_bytes_reverse"] / 1e3,
    extra, os.environ["CMD"]))
'
}

for m in reliable near-reliable hybrid-nack-mack; do
    for dly in 600ms 3s; do
        row "BER 0, $dly one way" "" -- --mode "$m" --ber 0 --delay "$dly"
    done
    for dly in 10ms 500ms 3s; do
        row "BER 1e-5, $dly one way" "" -- --mode "$m" --ber 1e-5 --delay "$dly"
    done
    for l in 0.1 0.3; do
        row "random loss $l both ways" "'bytes / minimum %.3f' % (d['wire_bytes_forward'] / (d['size'] / (1 - $l) * 1528 / 1476))" -- --mode "$m" --ber 0 --loss "$l"
    done
    row "no jitter, 5 ms" "" -- --mode "$m" --ber 0 --delay 5ms
    row "jitter 35 ms reordering" "" -- --mode "$m" --ber 0 --delay 5ms --jitter 35ms --reorder
    row "BER 1e-5 symmetric" "" -- --mode "$m" --ber 1e-5
    row "BER 1e-5, return 1/500" "" -- --mode "$m" --ber 1e-5 --reverse-rate 10kbit
    row "no outage, BER 0" "'last byte at %.2f s' % (d['size'] * 8 / d['goodput_bps'])" -- --mode "$m" --ber 0
    row "30 min outage at 8 s" "'last byte at %.2f s + outage' % (d['size'] * 8 / d['goodput_bps'] - 1800)" -- --mode "$m" --ber 0 --outage 8s+1800s --cap 3600s
    row "interactive 100 B / 100 ms, BER 1e-5, 10 min" "'p50 %.1f ms, p99 %.1f ms' % (d['message_delay']['p50'] * 1e3, d['message_delay']['p99'] * 1e3)" -- --mode "$m" --ber 1e-5 --workload messages,size=100,interval=100ms,duration=600s
done
row "interactive, FEC off" "'p50 %.1f ms, p99 %.1f ms' % (d['message_delay']['p50'] * 1e3, d['message_delay']['p99'] * 1e3)" -- --mode reliable --fec off --ber 1e-5 --workload messages,size=100,interval=100ms,duration=600s
