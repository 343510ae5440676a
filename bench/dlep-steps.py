#!/usr/bin/env python3
"""Rate steps told by a real modem: `aerotp link --trace bench/traces/rate-steps.csv` steps its
rate 5 -> 1 -> 2.5 -> 5 Mb/s at 4, 12 and 20 s, while MIT-LL's LL-DLEP, driven in step, announces
each rate as its destination's Current Data Rate (Transmit); `aerotp send --dlep` follows it
(issue 38's figure; docs/results/dlep.md). Prints the transfer's time against the ideal 27.0 s
(80 Mbit over the trace's capacity at the payload share of a full datagram), the wire bytes the
relay saw forward and its queueing delay; with the modem, the sender's --qlog trace gives, for
each rate step the modem announces, the time from writing the command to LL-DLEP's CLI to the
engine's `aerotp:radio_updated` event of the new rate in force (its time on the wall clock
through the header's reference_time), against the sender's smoothed round trip then (the
latest `aerotp:metrics_updated` before it).

    scripts/build-ll-dlep.sh                  # once
    cargo build --release -p aerotp
    python3 bench/dlep-steps.py [--runs 3] [--rate 5mbit|auto] [--no-dlep]

LL-DLEP is found as by bench/dlep-soak.py ($AEROTP_LL_DLEP or the cache). Every process is
stopped on exit; every wait is bounded.
"""

import argparse
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from importlib import import_module  # noqa: E402

soak = import_module("dlep-soak")

MAC = soak.MAC
TRACE = os.path.join(ROOT, "bench/traces/rate-steps.csv")
STEPS = [(4.0, 1_000_000), (12.0, 2_500_000), (20.0, 5_000_000)]
SIZE = 10_000_000
IDEAL_S = 27.0


def free_udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def radio_in_force(qlog_dir, commands):
    """For each (wall-clock s, rate) command: (ms from the command to the trace's first
    radio_updated event saying that rate after it, the smoothed RTT in ms then, the pacing
    rate in force b/s)."""
    files = glob.glob(os.path.join(qlog_dir, "send-*.sqlog"))
    if len(files) != 1:
        raise SystemExit(f"expected one send trace in {qlog_dir}: {files}")
    with open(files[0], "rb") as f:
        records = [json.loads(r) for r in f.read().split(b"\x1e") if r.strip()]
    ref_ms = records[0]["trace"]["common_fields"]["reference_time"]
    if not ref_ms:
        raise SystemExit("the trace has no wall-clock reference_time")
    out = []
    for at_s, r in commands:
        cmd_ms = at_s * 1e3
        srtt = None
        for e in records[1:]:
            if e["name"] == "aerotp:metrics_updated":
                srtt = e["data"]["smoothed_rtt_ms"]
                continue
            d = e["data"]
            if (e["name"] == "aerotp:radio_updated" and d["signal"] == "rate"
                    and d.get("radio_rate_bps") == r and ref_ms + e["time"] >= cmd_ms - 2):
                out.append((ref_ms + e["time"] - cmd_ms, srtt, d["rate_bps"]))
                break
        else:
            raise SystemExit(f"no radio_updated event of {r} b/s after its command")
    return out


def one_run(aerotp, binary, etc, work, n, rate, dlep):
    src = os.path.join(work, "f10")
    if not os.path.exists(src):
        with open(src, "wb") as f:
            f.write(os.urandom(SIZE))
    out = os.path.join(work, f"rx{n}")
    os.makedirs(out)
    modem = None
    procs = []
    try:
        mport = soak.free_port()
        if dlep:
            modem = soak.Modem(binary, etc, work, mport, n)
            modem.cli(f"dest up {MAC} Current_Data_Rate_Transmit 5000000")
        rport, lport = free_udp(), free_udp()
        recv = subprocess.Popen(
            [aerotp, "recv", "--insecure", "--listen", f"127.0.0.1:{rport}", "-o", out,
             "--once"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(recv)
        link = subprocess.Popen(
            [aerotp, "link", "--listen", f"127.0.0.1:{lport}", "--to", f"127.0.0.1:{rport}",
             "--trace", TRACE, "--queue", "150000", "--stats-interval", "0s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(link)
        t0 = time.monotonic()
        commands = []  # (wall-clock s, rate) of each step, taken as its command is written
        if dlep:
            def drive():
                for at, r in STEPS:
                    time.sleep(max(0.0, t0 + at - time.monotonic()))
                    modem.cli(f"dest update {MAC} Current_Data_Rate_Transmit {r}")
                    commands.append((time.time(), r))
            threading.Thread(target=drive, daemon=True).start()
        time.sleep(0.3)
        cmd = [aerotp, "send", "--insecure", src, "--to", f"127.0.0.1:{lport}", "--mode",
               "reliable", "--rate", rate, "--json"]
        qlog = os.path.join(work, f"qlog{n}")
        if dlep:
            cmd += ["--dlep", f"127.0.0.1:{mport}", "--dlep-map", f"{MAC}=127.0.0.1",
                    "--qlog", qlog]
        start = time.monotonic()
        send = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        took = time.monotonic() - t0
        if send.returncode != 0:
            raise SystemExit(f"send failed ({send.returncode}): {send.stderr}")
        link.send_signal(signal.SIGINT)
        lout, lerr = link.communicate(timeout=20)
        stats = json.loads(lout)
        fwd = stats["paths"][0]["forward"] if "paths" in stats else stats["forward"]
        q = fwd["queue_delay"]
        sj = json.loads(send.stdout.strip().splitlines()[-1])
        steps = radio_in_force(qlog, commands) if dlep else []
        if dlep and len(steps) != len(STEPS):
            raise SystemExit(f"{len(steps)} of {len(STEPS)} steps announced during the run")
        return {
            "in_force_ms": [round(s[0], 3) for s in steps],
            "srtt_ms": [s[1] for s in steps],
            "in_force_over_srtt": [round(s[0] / s[1], 4) if s[1] else None for s in steps],
            "rate_in_force_bps": [s[2] for s in steps],
            "send_s": time.monotonic() - start,
            "from_trace_start_s": took,
            "time_over_ideal": took / IDEAL_S,
            "wire_forward_mb": fwd.get("offered_bytes", 0) / 1e6,
            "queue_p50_ms": q["p50"] * 1e3,
            "queue_p99_ms": q["p99"] * 1e3,
            "queue_max_ms": q["max"] * 1e3,
            "drops": fwd.get("dropped_queue_packets"),
            "goodput_mbps": sj.get("goodput_bps", 0) / 1e6,
            "retransmitted": sj.get("tpdus_retransmitted"),
        }
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        if modem:
            modem.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", default="5mbit", help="send --rate: 5mbit (fixed) or auto")
    ap.add_argument("--no-dlep", action="store_true", help="the same without the modem")
    ap.add_argument("--aerotp", default=os.path.join(ROOT, "target/release/aerotp"))
    a = ap.parse_args()
    binary, etc = soak.ll_dlep()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlep-steps-") as work:
        for n in range(a.runs):
            r = one_run(a.aerotp, binary, etc, work, n, a.rate, not a.no_dlep)
            print(json.dumps(r), flush=True)
            rows.append(r)
    for k in ["time_over_ideal", "wire_forward_mb", "queue_p99_ms", "queue_max_ms", "drops"]:
        vals = sorted(r[k] for r in rows)
        print(f"median {k}: {vals[len(vals) // 2]:.3f}")
    if not a.no_dlep:
        for i, (at, r) in enumerate(STEPS):
            for k in ["in_force_ms", "srtt_ms", "in_force_over_srtt"]:
                vals = sorted(row[k][i] for row in rows)
                print(f"step {i + 1} ({r / 1e6:g} Mb/s at {at:g} s) median {k}: "
                      f"{vals[len(vals) // 2]:.4f}")


if __name__ == "__main__":
    main()
