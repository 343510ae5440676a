#!/usr/bin/env bash
# The erasure issue's figures (simulator), one command each, printed as a Markdown table with
# the command behind every row. Figures are means over the runs of one command (`aerotp sim
# --json`); "residual" is TPDUs lost for good / data TPDUs sent, "wire/data" is (data TPDUs +
# repair TPDUs) / data TPDUs, "max delay" the longest first-send-to-delivery of any TPDU.
#   bash bench/erasure-figures.sh [RUNS]     (default 8 runs per point)
# Needs a release build: cargo build --release -p aerotp
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/aerotp
RUNS=${1:-8}
[ -x "$BIN" ] || { echo "error: $BIN missing: run cargo build --release -p aerotp first" >&2; exit 1; }

echo "| figure | complete | goodput (min) | lost on link / rebuilt / lost for good | residual | wire/data | max delay | command |"
echo "|---|---|---|---|---|---|---|---|"

row() { # row LABEL -- sim args...
    local label=$1; shift 2
    local cmd="aerotp sim --runs $RUNS --json $*"
    $BIN sim --runs "$RUNS" --json "$@" | LABEL="$label" CMD="$cmd" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
n = d["data_tpdus"] or 1
md = d["max_delay_s"]
print("| %s | %d/%d | %.3f (%.3f) Mb/s | %.1f / %.1f / %.1f | %.1e | %.3f | %s | `%s` |" % (
    os.environ["LABEL"], d["complete_runs"], d["runs"], d["goodput_bps"] / 1e6,
    d["goodput"]["min"] / 1e6, d["wire_lost"], d["tpdus_rebuilt"], d["tpdus_lost"],
    d["tpdus_lost"] / n, (n + d["repairs_sent"]) / n,
    "%.0f ms" % (md * 1e3) if md is not None else "-", os.environ["CMD"]))
'
}

row "quasi-reliable, papers' link, BER 1e-4, 1 MB" -- --mode quasi-reliable --ber 1e-4
row "quasi-reliable, BER 1e-4, --max-delay 1s" -- --mode quasi-reliable --ber 1e-4 --max-delay 1s
row "quasi-reliable, BER 1e-4, erasure off (the papers' mode)" -- --mode quasi-reliable --ber 1e-4 --erasure off
row "10 % loss, no feedback, fixed 1.25x" -- --mode quasi-reliable --ber 0 --loss 0.1 --reverse-loss 1 --erasure 1.25 --size 10MB
row "10 % loss, auto (reports)" -- --mode quasi-reliable --ber 0 --loss 0.1 --size 10MB
row "GE 3 %, burst 10, fixed 1.29x, 500 ms" -- --mode quasi-reliable --ber 0 --burst good=323,bad=10 --erasure 1.29 --max-delay 500ms --size 10MB
row "GE 3 %, burst 10, auto, 500 ms" -- --mode quasi-reliable --ber 0 --burst good=323,bad=10 --max-delay 500ms --size 10MB
row "clean link, quasi-reliable auto, 3 MB" -- --mode quasi-reliable --ber 0 --size 3MB
row "clean link, quasi-reliable auto, 10 MB" -- --mode quasi-reliable --ber 0 --size 10MB
for e in off auto; do
    row "hybrid-nack-mack 500 ms, 2 % loss, erasure $e" -- --mode hybrid-nack-mack --ber 0 --loss 0.02 --delay 500ms --size 10MB --topology two-node --erasure "$e"
done
row "hybrid-nack-mack 500 ms, loss-free" -- --mode hybrid-nack-mack --ber 0 --delay 500ms --size 10MB --topology two-node
for m in reliable hybrid-nack-mack; do
    for e in off auto; do
        row "$m, BER 1e-5, 3 s one way, erasure $e" -- --mode "$m" --ber 1e-5 --delay 3s --size 10MB --topology two-node --erasure "$e"
    done
done
