#!/usr/bin/env python3
"""The seed 003 lab figures of docs/results/multipath.md from the run directories that
bench/seed003_lab.py wrote (each: cmd.txt, result.json, timeline.csv, lab.json, send.json).

Usage: python3 bench/seed003_lab_figures.py DIR [--bin target/release/aerotp] [--csv OUT]

DIR holds long/ (the 47-minute sessions, kernel TCP, MPTCP and striped TCP beside AeroTP, and
the blackouts), offered/ (delivered against offered rate, 10-minute sessions) and
offered-47min/ (the same at 47 minutes); a run's timeline may be gzipped (timeline.csv.gz,
as committed). Prints Markdown tables; with --csv OUT writes the rows as CSV
(lab-sessions.csv, lab-blackouts.csv, lab-offered.csv, lab-offered-47min.csv) and the
delivery timelines of the long runs at 10 s steps (lab-timelines.csv).

Ceiling: the channels a run uses, while up, after headers: 2400 b/s x (each channel's up
time in the window) / window x 488/540 (a 512-byte AeroTP datagram with its 24 bytes of
header and CRC, 28 of IPv4 and UDP; kernel TCP with timestamps at IP MTU 540 carries the
same 488 of 540). The down intervals are the lab's own: `aerotp lab --outages-until`
with the run's scenario and seed (the schedule depends on the seed and time only), or the
lab's --json `outages` where it has them.
"""

import argparse
import csv
import gzip
import json
import os
import subprocess
import sys

RATE = 2400
SHARE = 488 / 540
OFFERED_CSV = ["run", "channels", "seed", "offered_bps", "duration_s", "delivered_bytes",
               "delivered_bps", "ceiling_bps", "mean_delay_s", "intact", "ratio"]


def load(d):
    r = json.load(open(os.path.join(d, "result.json")))
    tl = []
    p = os.path.join(d, "timeline.csv")
    opener = (lambda: gzip.open(p + ".gz", "rt")) if not os.path.exists(p) else (lambda: open(p))
    with opener() as f:
        for row in csv.DictReader(f):
            tl.append((float(row["unix_s"]), int(row["bytes"])))
    r["timeline"] = tl
    r["dir"] = d
    for name in ("lab.json", "send.json"):
        p = os.path.join(d, name)
        try:
            txt = open(p).read().strip()
            r[name] = json.loads(txt.splitlines()[-1]) if txt else None
        except (OSError, ValueError):
            r[name] = None
    return r


def outages(r, binary, until):
    lab = r.get("lab.json") or {}
    if "outages" in lab:
        return [p["forward"] for p in lab["outages"]]
    scen = os.path.join(r["dir"], "scenario.toml")
    if not os.path.exists(scen):
        scen = r["scenario"]
    if not os.path.exists(scen):
        # The run's work tree is gone: the same file in this one (bench/traces/).
        scen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "traces",
                            os.path.basename(scen))
    out = subprocess.run(
        [binary, "lab", "--scenario", scen, "--seed", str(r["seed"]),
         "--outages-until", f"{until}s"],
        check=True, capture_output=True, text=True).stdout
    return [p["forward"] for p in json.loads(out)["paths"]]


def down_in(intervals, a, b):
    return sum(max(0.0, min(e, b) - max(s, a)) for s, e in intervals)


def ceiling(downs, paths, a, b):
    up = sum((b - a) - down_in(downs[i], a, b) for i in range(paths))
    return RATE * up / (b - a) * SHARE


def at(tl, t):
    v = 0
    for x, y in tl:
        if x <= t:
            v = y
        else:
            break
    return v


def drops_seen(downs, paths, a, b):
    """Call drops beginning in [a, b) per channel used."""
    return [sum(1 for s, e in downs[i] if a <= s < b) for i in range(paths)]


def fmt(x):
    return f"{x:,.0f}"


def declared_per_channel(r):
    """AeroTP's down declarations per channel, in channel order. `aerotp send --json` lists
    paths in the order the engine validated them, which is not the channels' (seed 4's second
    path was channel 2): each is matched to its channel by the peer's address
    (`ground_addr` in the lab's JSON)."""
    s = r.get("send.json") or {}
    lab = r.get("lab.json") or {}
    ground = [p.get("ground_addr") for p in lab.get("paths", [])]
    by_addr = {p["remote"].rsplit(":", 1)[0]: p.get("downs") for p in s.get("paths", [])}
    if not by_addr:
        return []
    if not ground:
        return [p.get("downs") for p in s.get("paths", [])]
    return [by_addr.get(a, "-") for a in ground[:len(by_addr)]]


def long_runs(rs, binary, window, w):
    print(f"\n### 47-minute sessions (delivered in the first {window} s of each lab)\n")
    print("| run | channels | delivered | ceiling | ratio | bytes intact | call drops "
          "(per channel) | down declared (per channel) | forward bytes per channel | "
          "whole transfer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        downs = outages(r, binary, window + 600)
        ep = r["epoch_unix_s"]
        by = at(r["timeline"], ep + window)
        bps = by * 8 / window
        ceil = ceiling(downs, r["paths"], 0, window)
        s = r.get("send.json") or {}
        downs_decl = declared_per_channel(r)
        whole = "cut at the window (timeout)"
        if r["complete"] and s:
            whole = (f"{r['received_bytes']:,} B complete in {s['elapsed_s']:.0f} s, "
                     f"{s['goodput_bps']:,.0f} b/s, {s['tpdus_retransmitted']} retransmitted")
        elif r["complete"]:
            whole = f"{r['received_bytes']:,} B complete"
        intact = "yes" if r["prefix_intact"] else "NO"
        lab = r.get("lab.json") or {}
        fb = [p["forward"]["delivered_bytes"] for p in lab.get("paths", [])][:r["paths"]]
        share = " / ".join(f"{100 * b / max(1, sum(fb)):.0f} %" for b in fb) if fb else "-"
        name = r["name"]
        print(f"| {name} | {r['paths']} | {fmt(bps)} b/s | {fmt(ceil)} b/s | {bps / ceil:.3f} | "
              f"{intact} ({by:,} B by {window} s) | "
              f"{' / '.join(map(str, drops_seen(downs, r['paths'], 0, window)))} | "
              f"{' / '.join(map(str, downs_decl)) if downs_decl else '-'} | {share} | {whole} |")
        if w:
            w.writerow([name, r["kind"], r.get("cc") or "", r["paths"], r["seed"], window, by,
                        round(bps), round(ceil), round(bps / ceil, 4), r["prefix_intact"],
                        r["complete"], r["received_bytes"],
                        ";".join(map(str, drops_seen(downs, r["paths"], 0, window))),
                        ";".join(map(str, downs_decl))])


def blackout_minutes(r):
    return int(r["name"].split("-")[1].replace("min", ""))


def blackouts(rs, binary, w):
    print("\n### Total blackouts (all three channels down from 5 min)\n")
    print("| blackout | run (seed) | complete, intact | completion | channels back (first) | "
          "first delivery after the blackout | retransmissions | down declared (per channel) |")
    print("|---|---|---|---|---|---|---|---|")
    per = {}
    for r in rs:
        m = blackout_minutes(r)
        b0, b1 = 300.0, 300.0 + 60 * m
        downs = outages(r, binary, 4000)
        # When the first channel is up again: the end of the merged interval holding b1.
        back = min(next((e for s, e in d if s <= b1 - 1 < e), b1) for d in downs)
        ep = r["epoch_unix_s"]
        before = at(r["timeline"], ep + b0)
        first = next((t - ep for t, y in r["timeline"] if t - ep > b1 and y > before), None)
        last = r["timeline"][-1][0] - ep if r["timeline"] else None
        s = r.get("send.json") or {}
        ok = r["complete"] and r["prefix_intact"] and s.get("guarantee_met", False)
        first_s = f"{first - b1:.1f} s after it ends ({first - back:.1f} s after a channel is back)" \
            if first is not None else "none"
        label = f"{m} min" + (", fixed send, default flags" if r["name"].endswith("fixed") else "")
        print(f"| {label} | {r['name']} ({r['seed']}) | {'yes' if ok else 'NO'} "
              f"({r['received_bytes']:,} of "
              f"{r['file_bytes']:,} B) | {last / 60:.1f} min | {back - b1:.0f} s after its end | "
              f"{first_s} | {s.get('tpdus_retransmitted', '-')} | "
              f"{' / '.join(map(str, declared_per_channel(r))) or '-'} |")
        per.setdefault(m, []).append((ok, last, first - b1 if first is not None else None))
        if w:
            w.writerow([m, ok, r["received_bytes"], r["file_bytes"], round(last, 1),
                        round(back - b1, 1), round(first - b1, 1) if first else "",
                        before, s.get("tpdus_retransmitted", ""), r["name"], r["seed"]])
    print("\n| blackout | runs complete and intact | completion (min-max) | "
          "first delivery after the blackout (min-max) |")
    print("|---|---|---|---|")
    for m in sorted(per):
        v = per[m]
        fs = [f for _, _, f in v if f is not None]
        fr = f"{min(fs):.1f}-{max(fs):.1f} s" if fs else "none"
        print(f"| {m} min | {sum(1 for ok, _, _ in v if ok)}/{len(v)} | "
              f"{min(x for _, x, _ in v) / 60:.1f}-{max(x for _, x, _ in v) / 60:.1f} min | "
              f"{fr} |")


def offered(rs, binary, w):
    mins = sorted({round(r["duration_s"] / 60) for r in rs})
    print(f"\n### Delivered against offered rate ({'/'.join(map(str, mins))}-minute sessions)\n")
    table = {}
    for r in rs:
        d = r["duration_s"]
        t0 = r["air_start_unix_s"]
        by = at(r["timeline"], t0 + d)
        # Mean delay: each delivered increment against when the pacer offered those bytes.
        tot, acc, prev = 0, 0.0, 0
        for t, y in r["timeline"]:
            if t - t0 > d or y <= prev:
                continue
            mid = (prev + y) / 2
            acc += (y - prev) * ((t - t0) - mid * 8 / r["offer_bps"])
            tot += y - prev
            prev = y
        delay = acc / tot if tot else float("nan")
        downs = outages(r, binary, d + 60)
        off = r["air_start_unix_s"] - r["epoch_unix_s"]
        ceil = ceiling(downs, r["paths"], off, off + d)
        table.setdefault(r["offer_bps"], {}).setdefault(r["paths"], []).append(
            (by * 8 / d, delay, ceil, r["prefix_intact"]))
        if w:
            w.writerow([r["name"], r["paths"], r["seed"], r["offer_bps"], d, by,
                        round(by * 8 / d), round(ceil), round(delay, 1), r["prefix_intact"],
                        round(by * 8 / d / ceil, 4)])
    offered_table(table, lambda b, dl, c, ok: f"{b:,.0f} ({dl:.0f} s){'' if ok else ' CORRUPT'}")
    print("\n(ratio to the ceiling of the run's channels while up, same cells:)\n")
    offered_table(table, lambda b, dl, c, ok: f"{b / c:.3f}")
    print("\n(delivered b/s (mean delay); ceilings while up, per run:)")
    for o in sorted(table):
        print(f"  {o}: " + ", ".join(
            f"{n}ch " + "/".join(f"{c:,.0f}" for _, _, c, _ in v) for n, v in sorted(table[o].items())))


def offered_table(table, cell):
    """Offered rate against 1-3 channels, each cell its runs' `cell(b, delay, ceiling, ok)`
    joined by " ; " ("-" without runs)."""
    print("| offered | 1 channel | 2 channels | 3 channels |")
    print("|---|---|---|---|")
    for o in sorted(table):
        cells = [" ; ".join(cell(*x) for x in table[o][n]) if table[o].get(n) else "-"
                 for n in (1, 2, 3)]
        print(f"| {o:,} b/s | " + " | ".join(cells) + " |")


def timelines(rs, out, step=10.0, until=2820):
    cols = [(r["name"], r) for r in rs]
    with open(os.path.join(out, "lab-timelines.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time_s"] + [n for n, _ in cols])
        t = 0.0
        end = max((r["timeline"][-1][0] - r["epoch_unix_s"]) for _, r in cols if r["timeline"])
        while t <= min(end, until + 1200):
            w.writerow([f"{t:.0f}"] + [at(r["timeline"], r["epoch_unix_s"] + t) for _, r in cols])
            t += step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--bin", default="target/release/aerotp")
    ap.add_argument("--csv", default="")
    ap.add_argument("--window", type=float, default=2820)
    a = ap.parse_args()

    def runs(sub):
        p = os.path.join(a.dir, sub)
        if not os.path.isdir(p):
            return []
        return [load(os.path.join(p, n)) for n in sorted(os.listdir(p))
                if os.path.exists(os.path.join(p, n, "result.json"))]

    lr = runs("long")
    sessions = [r for r in lr if not r["name"].startswith("blackout")]
    bl = [r for r in lr if r["name"].startswith("blackout")]
    bl = sorted(bl, key=lambda r: (blackout_minutes(r), r["name"]))
    key = lambda r: (r["paths"], r["offer_bps"], r["seed"])  # noqa: E731
    orun = sorted(runs("offered"), key=key)
    orun47 = sorted(runs("offered-47min"), key=key)
    files = {}
    if a.csv:
        os.makedirs(a.csv, exist_ok=True)
        for k, head in {
            "lab-sessions.csv": ["run", "kind", "cc", "channels", "seed", "window_s",
                                 "delivered_bytes", "delivered_bps", "ceiling_bps", "ratio",
                                 "intact", "complete", "received_bytes", "call_drops",
                                 "down_declared"],
            "lab-blackouts.csv": ["blackout_min", "complete_intact", "received_bytes",
                                  "file_bytes", "completion_s", "channel_back_after_s",
                                  "first_delivery_after_s", "bytes_before_blackout",
                                  "retransmissions", "run", "seed"],
            "lab-offered.csv": OFFERED_CSV,
            "lab-offered-47min.csv": OFFERED_CSV,
        }.items():
            f = open(os.path.join(a.csv, k), "w", newline="")
            files[k] = (f, csv.writer(f))
            files[k][1].writerow(head)
    g = lambda k: files[k][1] if k in files else None  # noqa: E731
    if sessions:
        long_runs(sessions, a.bin, a.window, g("lab-sessions.csv"))
    if bl:
        blackouts(bl, a.bin, g("lab-blackouts.csv"))
    if orun:
        offered(orun, a.bin, g("lab-offered.csv"))
    if orun47:
        offered(orun47, a.bin, g("lab-offered-47min.csv"))
    if a.csv and lr:
        timelines(sessions + bl, a.csv)
    for f, _ in files.values():
        f.close()


if __name__ == "__main__":
    sys.exit(main())
