#!/usr/bin/env python3
"""The engine-multipath figures of docs/results/multipath.md, in the simulator.

Usage: python3 bench/multipath_figures.py [--bin target/release/aerotp] [--plots DIR]

Prints Markdown tables, each row with the command that produced it. Every figure is a
ratio to a ceiling (link rate x payload share x survival) or to a peer in the same run.
With --plots DIR it also writes the delivery timelines and the offered-rate points as CSV
(for bench/plot_multipath.py).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

TRACES = "bench/traces"
SESSION_S = 2820  # 47 minutes
# Seed 003's channels while up, after headers, at MTU 512: 2400 b/s x each channel's mean up
# share x (512 - 24) / (512 + 28) (docs/results/multipath.md, "Ceiling").
UP_SHARES = [180 / 227.5, 324 / 371.5, 1800 / 1847.5]


def ceiling_seed003(channels, mtu=512):
    share = (mtu - 24) / (mtu + 28)
    return sum(2400 * u for u in UP_SHARES[:channels]) * share


def sim(binary, args, timeline=None):
    cmd = [binary, "sim"] + args + ["--json"]
    if timeline:
        cmd += ["--timeline", timeline]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out), "aerotp sim " + " ".join(args)


def at(rows, t):
    b = 0
    for x, y in rows:
        if x <= t:
            b = y
        else:
            break
    return b


def read_timeline(path):
    with open(path) as f:
        return [(float(r["time_s"]), int(r["delivered_bytes"])) for r in csv.DictReader(f)]


def first_path_file(src, n, dst):
    """The scenario `src` cut to its first `n` [[path]] entries."""
    text = open(src).read()
    head, *paths = text.split("[[path]]")
    with open(dst, "w") as f:
        f.write(head + "".join("[[path]]" + p for p in paths[:n]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/aerotp")
    ap.add_argument("--plots", default=None)
    a = ap.parse_args()
    b = a.bin
    tmp = tempfile.mkdtemp(prefix="mpfig")
    plots = a.plots
    if plots:
        os.makedirs(plots, exist_ok=True)

    print("### Two unequal paths (5 Mb/s each, 10 ms and 40 ms one way)\n")
    print("| mode | goodput | ceiling | ratio | retransmissions (spurious) | command |")
    print("|---|---|---|---|---|---|")
    for mode in ["reliable", "hybrid-nack-mack", "near-reliable"]:
        args = ["--scenario", f"{TRACES}/two-paths-10-40.toml", "--mode", mode,
                "--size", "10MB", "--runs", "4", "--topology", "two-node"]
        d, c = sim(b, args)
        print(f"| {mode} | {d['goodput_bps']/1e6:.3f} Mb/s | {d['ceiling_bps']/1e6:.3f} Mb/s | "
              f"{d['goodput_bps']/d['ceiling_bps']:.3f} | {d['retransmissions']:.0f} "
              f"({d['spurious_retransmissions']:.0f}) of {d['data_tpdus']:.0f} data TPDUs | `{c}` |")

    print("\n### Failover: one of three equal 1 Mb/s paths dies at 5 s\n")
    print("| striping | goodput | retransmissions | survivors' rate, 5-6 s | from 1 s + a round trip after the death, for 1 s | 6-14 s | command |")
    print("|---|---|---|---|---|---|---|")
    survivors = None
    for label, extra in [("engine", []), ("below (teql)", ["--stripe-below"])]:
        args = ["--scenario", f"{TRACES}/three-paths-failover.toml", "--mode", "reliable",
                "--size", "4MB", "--runs", "2", "--topology", "two-node"] + extra
        tl = os.path.join(plots or tmp, f"failover-{'engine' if not extra else 'below'}.csv")
        d, c = sim(b, args, tl)
        # Two of the three equal paths: two thirds of the three paths' ceiling.
        survivors = d["ceiling_bps"] * 2 / 3
        rows = read_timeline(tl)
        r0 = (at(rows, 6.0) - at(rows, 5.0)) * 8 / 1.0
        # 1 s plus a round trip (2 x 20 ms one way, and serialisation) after the death at 5 s.
        t = 5.0 + 1.0 + 0.045
        r1 = (at(rows, t + 1.0) - at(rows, t)) * 8 / 1.0
        r2 = (at(rows, 14) - at(rows, 6)) * 8 / 8.0
        print(f"| {label} | {d['goodput_bps']/1e6:.3f} Mb/s | {d['retransmissions']:.0f} | "
              f"{r0/1e6:.3f} Mb/s ({r0/survivors:.2f}) | {r1/1e6:.3f} Mb/s ({r1/survivors:.2f}) | "
              f"{r2/1e6:.3f} Mb/s ({r2/survivors:.2f}) | `{c} --timeline F` |")
    print(f"\n(survivors' ceiling {survivors/1e6:.3f} Mb/s: two thirds of the three paths' "
          "ceiling the simulator reports; ratios in brackets)\n")

    print("### Seed 003: three Iridium channels with call drops, 47 min, bulk, MTU 512\n")
    print("| striping | delivered (mean of 8) | ceiling | ratio | retransmissions | mean delay | command |")
    print("|---|---|---|---|---|---|---|")
    for label, extra in [("engine", []), ("below (teql)", ["--stripe-below"])]:
        args = ["--scenario", f"{TRACES}/seed003-iridium.toml", "--mode", "reliable",
                "--size", "3MB", "--mtu", "512", "--cap", "2820s", "--runs", "8",
                "--topology", "two-node"] + extra
        d, c = sim(b, args)
        rate = d["delivered_bytes"] * 8 / SESSION_S
        ceil = ceiling_seed003(3)
        print(f"| {label} | {rate:,.0f} b/s | {ceil:,.0f} b/s | {rate/ceil:.3f} | "
              f"{d['retransmissions']:.0f} | {d['mean_delay_s']:.1f} s | `{c}` |")

    print("\n### Seed 003: delivered against offered rate (their Figs. 3-5), engine striping\n")
    print("| offered | 1 channel | 2 channels | 3 channels |")
    print("|---|---|---|---|")
    files = {}
    for n in (1, 2, 3):
        f = os.path.join(tmp, f"seed003-{n}.toml")
        first_path_file(f"{TRACES}/seed003-iridium.toml", n, f)
        files[n] = f
    points = []
    for offered in (1024, 2048, 4096, 6144, 8192):
        cells = []
        for n in (1, 2, 3):
            args = ["--scenario", files[n], "--mode", "reliable", "--mtu", "512",
                    "--workload", f"stream,rate={offered}bit,duration=2820s,chunk=512",
                    "--cap", "2820s", "--runs", "4", "--topology", "two-node"]
            d, _ = sim(b, args)
            rate = d["delivered_bytes"] * 8 / SESSION_S
            cells.append(f"{rate:,.0f} ({d['mean_delay_s']:.0f} s)")
            points.append((offered, n, rate, d["mean_delay_s"]))
        print(f"| {offered:,} b/s | " + " | ".join(cells) + " |")
    print("\n(delivered b/s over 47 min (mean delay), 4 runs; `aerotp sim --scenario F --mode "
          "reliable --mtu 512 --workload stream,rate=R,duration=2820s,chunk=512 --cap 2820s "
          "--runs 4 --topology two-node --json`, F = bench/traces/seed003-iridium.toml cut to "
          "its first 1, 2 or 3 `[[path]]` entries)\n")
    if plots:
        with open(os.path.join(plots, "offered.csv"), "w") as f:
            w = csv.writer(f)
            w.writerow(["offered_bps", "channels", "delivered_bps", "mean_delay_s"])
            w.writerows(points)

    print("### Seed 003 with total blackouts (all channels down from 5 min)\n")
    print("| blackout | complete runs | mean completion | first delivery after the blackout (run 0) | retransmissions | command |")
    print("|---|---|---|---|---|---|")
    for m in (10, 20, 30):
        args = ["--scenario", f"{TRACES}/seed003-blackout-{m}min.toml", "--mode", "reliable",
                "--size", "600kB", "--mtu", "512", "--cap", "2820s", "--runs", "8",
                "--topology", "two-node"]
        tl = os.path.join(plots or tmp, f"blackout-{m}.csv")
        d, c = sim(b, args, tl)
        rows = read_timeline(tl)
        end = 300 + 60 * m
        after = next((x for x, _ in rows if x >= end), None)
        resume = f"{after - end:.1f} s after it ends" if after is not None else "none"
        print(f"| {m} min | {d['complete_runs']}/{d['runs']} | {d['elapsed_s']/60:.1f} min | "
              f"{resume} | {d['retransmissions']:.0f} | `{c} --timeline F` |")


if __name__ == "__main__":
    sys.exit(main())
