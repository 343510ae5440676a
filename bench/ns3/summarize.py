#!/usr/bin/env python3
"""Markdown tables from a tcp_lossy.py CSV (no ns-3 import needed).

  summarize.py FILE.csv            per protocol x delay x BER summary
  summarize.py FILE.csv --pivot    goodput (kb/s) pivot: rows protocol x delay, columns BER
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcp_lossy import aggregate  # noqa: E402


def read_rows(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append({
                "protocol": r["protocol"],
                "ber": float(r["ber"]),
                "delay_s": float(r["delay_s"]),
                "run": int(r["run"]),
                "delivered_bytes": int(r["delivered_bytes"]),
                "goodput_bps": float(r["goodput_bps"]),
                "mean_delay_s": float(r["mean_delay_s"]) if r["mean_delay_s"] else float("nan"),
                "overhead_bytes": int(r["overhead_bytes"]),
                "complete": r["complete"] == "1",
                "elapsed_s": float(r["elapsed_s"]) if r["elapsed_s"] else float("nan"),
            })
    return rows


def table(summary):
    print("| protocol | delay (ms) | BER | runs | complete | delivered (B) | goodput (kb/s) "
          "| mean delay (ms) | overhead (B) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in summary:
        d = "–" if s["mean_delay_s"] is None else f"{s['mean_delay_s'] * 1e3:.1f}"
        print(f"| {s['protocol']} | {s['delay_s'] * 1e3:g} | {s['ber']:g} | {s['runs']} "
              f"| {s['complete_runs']} | {s['delivered_bytes']:.0f} "
              f"| {s['goodput_bps'] / 1e3:.1f} | {d} | {s['overhead_bytes']:.0f} |")


def pivot(summary):
    bers = sorted({s["ber"] for s in summary})
    keys = []
    for s in summary:
        k = (s["protocol"], s["delay_s"])
        if k not in keys:
            keys.append(k)
    by = {(s["protocol"], s["delay_s"], s["ber"]): s for s in summary}
    print("| protocol | delay (ms) | " + " | ".join(f"BER {b:g}" for b in bers) + " |")
    print("|---|---:|" + "---:|" * len(bers))
    for p, d in keys:
        cells = []
        for b in bers:
            s = by.get((p, d, b))
            cells.append("" if s is None else
                         f"{s['goodput_bps'] / 1e3:.1f} ({s['complete_runs']}/{s['runs']})")
        print(f"| {p} | {d * 1e3:g} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--pivot", action="store_true")
    a = ap.parse_args()
    summary = aggregate(read_rows(a.csv))
    (pivot if a.pivot else table)(summary)


if __name__ == "__main__":
    main()
