#!/usr/bin/env python3
"""AeroTP's rate discovery beside kernel TCP on the same emulated link (issue 37's figures
"Shared link: AeroTP beside a kernel TCP flow" and "Against the best peer on the same steps";
docs/results/rate.md, "Beside kernel TCP (lab)").

Each run is one `aerotp lab` (two namespaces, air and ground, joined by the user-space link; the
lab removes them when the run ends). Data flows air -> ground:

  static   5 Mb/s, 10 ms, the link's default 150 kB drop-tail queue, BER 0 and 1e-5 (both
           directions); each run lasts --duration s and goodput is counted over the window
           [--warmup, --duration) from the senders' start:
             tcp-cubic, tcp-bbr     kernel TCP alone (a Python socket, TCP_CONGESTION)
             aerotp                 `aerotp send --mode reliable --insecure`, no rate: discovery
             cubic+aerotp, bbr+aerotp   both at once, started together
  steps    the trace bench/traces/rate-steps.csv (5 -> 1 -> 2.5 -> 5 Mb/s at 4, 12, 20 s), its
           ber column set to the run's BER; bbr alone and AeroTP alone, --steps-duration s from
           the senders' start, goodput over the whole run and the queueing delay of the
           bottleneck (the lab's forward link: only the one flow crosses it) from `--json`.

Goodput is what the receiving application got: the ground side logs the bytes each receiver
has read every 50 ms (CLOCK_MONOTONIC, which both namespaces share) and the window's bytes are
taken from that log. AeroTP's receiver writes to stdout (`recv -o -`), read by a pipe.
Medians over --runs runs (each run printed); run i of every case uses lab seed i, so the cases
see the same bit errors draws per seed (the flows differ, so not the same errored packets).

    cargo build --release -p aerotp          # the default (dev) build has `aerotp lab`
    sudo python3 bench/lab-vs-tcp.py [--runs 3] [--aerotp target/release/aerotp]

Python 3 standard library only. Needs root, iproute2 (scripts/lab-deps.sh) and the kernel's
bbr and cubic. Exits 2 with the reason when it cannot run; 0 when it ran (whether the targets
are met is printed, not the exit status).
"""

import argparse
import csv
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SELF = os.path.abspath(__file__)
TRACE = os.path.join(ROOT, "bench/traces/rate-steps.csv")
TCP_PORT = 5201
AEROTP_PORT = 47000
SAMPLE_S = 0.05
BLOB_BYTES = 64_000_000  # more than 5 Mb/s carries in any run here


# ---------------------------------------------------------------- inside the namespaces


def ground_main(a):
    """Receivers in the ground namespace: a TCP sink on TCP_PORT (every connection counted;
    the lab's readiness probe carries nothing) and, with --aerotp-bin, `aerotp recv -o -` read
    by a pipe. Appends `flow monotonic_s bytes` lines to --log every SAMPLE_S until killed
    (the lab kills it when the air side ends) or --deadline s pass."""
    counts = {"tcp": 0, "aerotp": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + a.deadline
    procs = []

    if a.aerotp_bin:
        err = open(a.log + ".recv.err", "wb")
        p = subprocess.Popen(
            [a.aerotp_bin, "recv", "--listen", f"{a.addr}:{AEROTP_PORT}", "-o", "-",
             "--insecure"],
            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        procs.append(p)

        def pump():
            while True:
                b = p.stdout.read1(1 << 16)
                if not b:
                    return
                with lock:
                    counts["aerotp"] += len(b)

        threading.Thread(target=pump, daemon=True).start()
    # Let `aerotp recv` bind before the lab's probe finds the ground side ready; slept in every
    # case, so that every sender starts at the same time of the lab's (the trace's) clock.
    time.sleep(0.3)

    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.addr, TCP_PORT))
    srv.listen(8)

    def serve(c):
        with c:
            while True:
                try:
                    b = c.recv(1 << 16)
                except OSError:
                    return
                if not b:
                    return
                with lock:
                    counts["tcp"] += len(b)

    def accept():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()

    def stop(*_):
        for p in procs:
            if p.poll() is None:
                p.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(a.log, "a", buffering=1) as log:
        while time.monotonic() < deadline:
            with lock:
                snap = dict(counts)
            now = time.monotonic()
            for k, v in snap.items():
                log.write(f"{k} {now:.4f} {v}\n")
            time.sleep(SAMPLE_S)
    stop()


def air_main(a):
    """Senders in the air namespace, started together; each runs --duration s and is then
    stopped. Writes {"start": monotonic_s, "tcp": {...}, "aerotp": {...}} to --out."""
    res = {}
    stop_at = None
    threads = []
    procs = []
    start = time.monotonic()
    stop_at = start + a.duration
    res["start"] = start

    if a.tcp_cc:
        info = {"cc": a.tcp_cc, "sent": 0, "error": None}
        res["tcp"] = info

        def tcp_send():
            buf = os.urandom(1 << 16)
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.tcp_cc.encode())
                got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
                info["cc_in_force"] = got.rstrip(b"\0").decode()
                s.settimeout(1.0)
                s.connect((a.peer, TCP_PORT))
                while time.monotonic() < stop_at:
                    try:
                        info["sent"] += s.send(buf)
                    except socket.timeout:
                        pass
                s.close()
            except OSError as e:
                info["error"] = str(e)

        t = threading.Thread(target=tcp_send)
        t.start()
        threads.append(t)

    if a.aerotp_bin:
        out = open(a.out + ".send.json", "wb")
        err = open(a.out + ".send.err", "wb")
        p = subprocess.Popen(
            [a.aerotp_bin, "send", a.blob, "--to", f"{a.peer}:{AEROTP_PORT}", "--mode",
             "reliable", "--insecure", "--json"] + shlex.split(a.send_args or ""),
            stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        procs.append(p)
        res["aerotp"] = {"pid": p.pid}

    while time.monotonic() < stop_at:
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            res["aerotp"]["ended"] = "stopped at the end of the run"
        else:
            res["aerotp"]["ended"] = f"exited {p.returncode} before the end of the run"
    for t in threads:
        t.join(timeout=5)
    for p in procs:
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=3)
    time.sleep(0.3)  # what was in flight reaches the ground log
    res["end"] = time.monotonic()
    with open(a.out, "w") as f:
        json.dump(res, f)


# ---------------------------------------------------------------- one lab run


def load_log(path):
    series = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 3:
                    continue
                series.setdefault(parts[0], []).append((float(parts[1]), int(parts[2])))
    except FileNotFoundError:
        pass
    return series


def bytes_at(samples, t):
    """Cumulative bytes at monotonic time t: the last sample at or before t."""
    got = 0
    for ts, b in samples:
        if ts > t:
            break
        got = b
    return got


def steps_trace(outdir, ber):
    """rate-steps.csv with its ber column set to `ber` (the trace's ber replaces --ber)."""
    path = os.path.join(outdir, f"rate-steps-ber{ber:g}.csv")
    with open(TRACE) as f:
        lines = f.read().splitlines()
    body = [l for l in lines if l and not l.startswith("#")]
    rows = list(csv.reader(body))
    i = rows[0].index("ber")
    with open(path, "w") as f:
        f.write(f"# {os.path.relpath(TRACE, ROOT)} with ber = {ber:g} (written by lab-vs-tcp.py)\n")
        f.write(",".join(rows[0]) + "\n")
        for r in rows[1:]:
            r[i] = f"{ber:g}"
            f.write(",".join(r) + "\n")
    return path


def run_lab(a, case, ber, seed, outdir):
    """One lab run of `case` (dict: tcp cc or None, aerotp bool, steps bool). Returns a dict
    of results, or raises RuntimeError with the lab's stderr."""
    tag = f"{case['name'].replace('+', '_')}-b{ber:g}-s{seed}".replace("-", "_")
    base = os.path.join(outdir, tag)
    for suffix in ("", ".log", ".air.json", ".air.json.send.json", ".air.json.send.err",
                   ".log.recv.err", ".lab.json", ".lab.err"):
        try:
            os.remove(base + suffix)
        except FileNotFoundError:
            pass
    duration = a.steps_duration if case["steps"] else a.duration
    py = sys.executable
    ground = (f"exec {py} {SELF} _ground --addr $AEROTP_GROUND_ADDR --log {base}.log"
              f" --deadline {duration + 30}")
    air = (f"exec {py} {SELF} _air --peer $AEROTP_GROUND_ADDR --out {base}.air.json"
           f" --duration {duration} --blob {a.blob}")
    if case["aerotp"]:
        ground += f" --aerotp-bin {a.aerotp}"
        air += f" --aerotp-bin {a.aerotp}"
    if case["tcp"]:
        air += f" --tcp-cc {case['tcp']}"
    if case["aerotp"] and a.send_args:
        air += f" --send-args={shlex.quote(a.send_args)}"
    cmd = [a.aerotp, "lab", "--delay", "10ms", "--seed", str(seed), "--name", "lvt" + str(seed),
           "--json", "--ground-port", str(TCP_PORT), "--ground", ground, "--air", air]
    if case["steps"]:
        cmd += ["--trace", steps_trace(outdir, ber), "--ber", f"{ber:g}"]
    else:
        cmd += ["--rate", "5mbit", "--ber", f"{ber:g}"]
    with open(base + ".cmd", "w") as f:
        f.write(" ".join(cmd) + "\n")
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=duration + 60)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{tag}: the lab did not end within {duration + 60} s") from e
    with open(base + ".lab.err", "wb") as f:
        f.write(p.stderr)
    with open(base + ".lab.json", "wb") as f:
        f.write(p.stdout)
    if p.returncode != 0:
        raise RuntimeError(f"{tag}: aerotp lab exited {p.returncode}:\n"
                           + p.stderr.decode(errors="replace")[-2000:])
    lab = json.loads(p.stdout.decode().strip().splitlines()[-1])
    with open(base + ".air.json") as f:
        air_res = json.load(f)
    series = load_log(base + ".log")
    start = air_res["start"]
    if case["steps"]:
        w0, w1 = start, start + duration
    else:
        w0, w1 = start + a.warmup, start + duration
    out = {"seed": seed, "window_s": w1 - w0}
    for flow in ("tcp", "aerotp"):
        if (flow == "tcp" and not case["tcp"]) or (flow == "aerotp" and not case["aerotp"]):
            continue
        s = series.get(flow, [])
        got = bytes_at(s, w1) - bytes_at(s, w0)
        out[flow + "_mbps"] = got * 8 / (w1 - w0) / 1e6
        out[flow + "_bytes_total"] = s[-1][1] if s else 0
    if case["tcp"]:
        t = air_res.get("tcp", {})
        if t.get("error"):
            raise RuntimeError(f"{tag}: TCP sender: {t['error']}")
        if t.get("cc_in_force") != case["tcp"]:
            raise RuntimeError(f"{tag}: TCP_CONGESTION is {t.get('cc_in_force')}, not {case['tcp']}")
    if case["aerotp"]:
        out["aerotp_ended"] = air_res.get("aerotp", {}).get("ended")
    fwd = lab["forward"]
    q = fwd["queue_delay"]
    out["q_p50_ms"] = q["p50"] * 1e3
    out["q_p99_ms"] = q["p99"] * 1e3
    out["q_max_ms"] = q["max"] * 1e3
    out["queue_drops"] = fwd["dropped_queue_packets"]
    out["corrupted"] = fwd["corrupted_packets"]
    out["checksum_drops"] = lab["checksum_drops"]["forward"]
    return out


# ---------------------------------------------------------------- driver


CASES_STATIC = [
    {"name": "tcp-cubic", "tcp": "cubic", "aerotp": False, "steps": False},
    {"name": "tcp-bbr", "tcp": "bbr", "aerotp": False, "steps": False},
    {"name": "aerotp", "tcp": None, "aerotp": True, "steps": False},
    {"name": "cubic+aerotp", "tcp": "cubic", "aerotp": True, "steps": False},
    {"name": "bbr+aerotp", "tcp": "bbr", "aerotp": True, "steps": False},
]
CASES_STEPS = [
    {"name": "steps-bbr", "tcp": "bbr", "aerotp": False, "steps": True},
    {"name": "steps-aerotp", "tcp": None, "aerotp": True, "steps": True},
]


def fail(msg):
    print(f"lab-vs-tcp: {msg}", file=sys.stderr)
    sys.exit(2)


def preflight(a):
    if os.geteuid() != 0:
        fail("needs root: `aerotp lab` creates network namespaces and TUN devices "
             "(run it with sudo)")
    if not (os.path.isfile(a.aerotp) and os.access(a.aerotp, os.X_OK)):
        fail(f"no aerotp binary at {a.aerotp}: build it with `cargo build --release -p aerotp` "
             "(the default build has the `dev` feature and so `aerotp lab`; docs/packaging.md), "
             "or give --aerotp PATH")
    h = subprocess.run([a.aerotp, "lab", "--help"], capture_output=True)
    if h.returncode != 0:
        fail(f"{a.aerotp} has no `lab` command (a field build, --no-default-features?): build "
             "the default one with `cargo build --release -p aerotp` (docs/packaging.md)")
    for tool in ("ip",):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            fail(f"`{tool}` is missing: scripts/lab-deps.sh installs the lab's tools (iproute2)")
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            avail = f.read().split()
    except OSError:
        avail = []
    for cc in ("cubic", "bbr"):
        if cc not in avail:
            subprocess.run(["modprobe", f"tcp_{cc}"], capture_output=True)
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        avail = f.read().split()
    missing = [cc for cc in ("cubic", "bbr") if cc not in avail]
    if missing:
        fail(f"kernel TCP congestion control {', '.join(missing)} not available "
             f"(have: {' '.join(avail)}; modprobe tcp_bbr)")


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def fmt_run(name, ber, r):
    parts = [f"{name:13s} ber {ber:<6g} seed {r['seed']}:"]
    if "tcp_mbps" in r:
        parts.append(f"tcp {r['tcp_mbps']:.3f} Mb/s")
    if "aerotp_mbps" in r:
        parts.append(f"aerotp {r['aerotp_mbps']:.3f} Mb/s")
    parts.append(f"queue p50/p99/max {r['q_p50_ms']:.1f}/{r['q_p99_ms']:.1f}/{r['q_max_ms']:.1f} ms")
    parts.append(f"queue drops {r['queue_drops']}, corrupted {r['corrupted']}, "
                 f"checksum drops {r['checksum_drops']}")
    if r.get("aerotp_ended") and not r["aerotp_ended"].startswith("stopped"):
        parts.append(f"(aerotp send {r['aerotp_ended']})")
    return " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aerotp", default=os.environ.get("AEROTP",
                    os.path.join(ROOT, "target/release/aerotp")),
                    help="aerotp binary with `lab` (default $AEROTP or target/release/aerotp)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=30.0,
                    help="static runs: seconds the senders run (default 30)")
    ap.add_argument("--warmup", type=float, default=5.0,
                    help="static runs: seconds from the start left out of the goodput window")
    ap.add_argument("--steps-duration", type=float, default=28.0,
                    help="steps runs: seconds the sender runs (default 28: every step, then 8 s "
                         "at 5 Mb/s; the lab's trace clock starts about 0.5 s earlier)")
    ap.add_argument("--ber", default="0,1e-5", help="comma-separated BERs (default 0,1e-5)")
    ap.add_argument("--only", default="static,steps", help="static, steps or both")
    ap.add_argument("--cases", default="",
                    help="comma-separated case names to run (default all of --only): "
                         + ", ".join(c["name"] for c in CASES_STATIC + CASES_STEPS))
    ap.add_argument("--send-args", default="",
                    help="more arguments for `aerotp send`, e.g. --send-args='--qlog DIR' "
                         "(send's default datagram, 1472 bytes over IPv4, fills the lab's "
                         "1500-byte MTU in one packet)")
    ap.add_argument("--out", default="/tmp/lab-vs-tcp", help="directory for logs and lab JSON")
    a = ap.parse_args()
    a.aerotp = os.path.abspath(a.aerotp)
    preflight(a)
    os.makedirs(a.out, exist_ok=True)
    a.blob = os.path.join(a.out, "blob")
    if not os.path.exists(a.blob) or os.path.getsize(a.blob) != BLOB_BYTES:
        with open(a.blob, "wb") as f:
            f.write(os.urandom(BLOB_BYTES))
    bers = [float(x) for x in a.ber.split(",")]
    cases = []
    if "static" in a.only:
        cases += CASES_STATIC
    if "steps" in a.only:
        cases += CASES_STEPS
    if a.cases:
        want = a.cases.split(",")
        unknown = set(want) - {c["name"] for c in CASES_STATIC + CASES_STEPS}
        if unknown:
            fail(f"unknown case(s) {', '.join(sorted(unknown))}")
        cases = [c for c in CASES_STATIC + CASES_STEPS if c["name"] in want]
    version = subprocess.run([a.aerotp, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# {shlex.join(sys.argv)}")
    print(f"# {version}; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"# static: 5 Mb/s, 10 ms, 150 kB queue, {a.duration:g} s runs, goodput over "
          f"[{a.warmup:g}, {a.duration:g}) s; steps: {os.path.relpath(TRACE, ROOT)}, "
          f"{a.steps_duration:g} s runs, goodput over the whole run; aerotp send --mode reliable "
          f"--insecure {a.send_args}".rstrip(), flush=True)

    results = {}  # (case name, ber) -> [run dicts]
    errors = []
    for ber in bers:
        for seed in range(1, a.runs + 1):
            for case in cases:
                try:
                    r = run_lab(a, case, ber, seed, a.out)
                except (RuntimeError, OSError, ValueError, KeyError) as e:
                    errors.append(str(e))
                    print(f"{case['name']:13s} ber {ber:<6g} seed {seed}: FAILED: {e}", flush=True)
                    continue
                results.setdefault((case["name"], ber), []).append(r)
                print(fmt_run(case["name"], ber, r), flush=True)

    print()
    print_tables(results, bers, a)
    if errors:
        print(f"\n{len(errors)} run(s) failed; the medians above leave them out.")
    print(f"\nlogs: {a.out}")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({f"{k[0]}@{k[1]:g}": v for k, v in results.items()}, f, indent=1)


def print_tables(results, bers, a):
    def m(name, ber, key):
        return med([r.get(key) for r in results.get((name, ber), [])])

    def n(name, ber):
        return len(results.get((name, ber), []))

    verdicts = []
    if any(k[0] in {c["name"] for c in CASES_STATIC} for k in results):
        print(f"Static 5 Mb/s link, goodput (Mb/s) over [{a.warmup:g}, {a.duration:g}) s, "
              "medians of runs; share = goodput / (the pair's sum / 2)")
        print(f"| BER | case | runs | TCP | AeroTP | TCP share | AeroTP share | TCP / TCP alone "
              "| queue p50 / p99 (ms) | queue drops |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for ber in bers:
            for name in ("tcp-cubic", "tcp-bbr", "aerotp", "cubic+aerotp", "bbr+aerotp"):
                if not n(name, ber):
                    continue
                tcp = m(name, ber, "tcp_mbps")
                atp = m(name, ber, "aerotp_mbps")
                shared = "+" in name
                cc = name.split("+")[0].replace("tcp-", "")
                alone = m(f"tcp-{cc}", ber, "tcp_mbps") if shared else float("nan")
                if shared:
                    # shares per run, then the median
                    rs = results[(name, ber)]
                    ts = med([2 * r["tcp_mbps"] / (r["tcp_mbps"] + r["aerotp_mbps"])
                              if r["tcp_mbps"] + r["aerotp_mbps"] > 0 else None for r in rs])
                    as_ = med([2 * r["aerotp_mbps"] / (r["tcp_mbps"] + r["aerotp_mbps"])
                               if r["tcp_mbps"] + r["aerotp_mbps"] > 0 else None for r in rs])
                    keep = tcp / alone if alone > 0 else float("nan")
                    if ber == 0:
                        ok = 0.5 <= ts <= 2 and 0.5 <= as_ <= 2
                        verdicts.append(f"BER 0, {cc} beside AeroTP: shares TCP {ts:.2f}, AeroTP "
                                        f"{as_:.2f} (target each 0.5-2): "
                                        + ("met" if ok else "NOT met"))
                    elif keep != keep:
                        verdicts.append(f"BER {ber:g}, {cc} beside AeroTP: TCP {tcp:.3f} Mb/s; "
                                        f"tcp-{cc} alone not run, so no ratio")
                    else:
                        ok = keep >= 0.5
                        verdicts.append(f"BER {ber:g}, {cc} beside AeroTP: TCP keeps {keep:.2f} of "
                                        f"its goodput alone ({tcp:.3f} of {alone:.3f} Mb/s; "
                                        "target >= 0.50): " + ("met" if ok else "NOT met"))
                    share_cols = f"{ts:.2f} | {as_:.2f} | {keep:.2f}"
                else:
                    share_cols = "| |"
                f = lambda x: "" if x != x else f"{x:.3f}"  # noqa: E731
                print(f"| {ber:g} | {name} | {n(name, ber)} | {f(tcp)} | {f(atp)} | {share_cols} "
                      f"| {m(name, ber, 'q_p50_ms'):.1f} / {m(name, ber, 'q_p99_ms'):.1f} "
                      f"| {m(name, ber, 'queue_drops'):.0f} |")
        print()
    if any(k[0].startswith("steps-") for k in results):
        print(f"Rate steps 5 -> 1 -> 2.5 -> 5 Mb/s, {a.steps_duration:g} s, one flow alone, "
              "medians of runs")
        print("| BER | sender | runs | goodput (Mb/s) | queue p50 / p99 / max (ms) | queue drops |")
        print("|---|---|---|---|---|---|")
        for ber in bers:
            for name, key in (("steps-bbr", "tcp_mbps"), ("steps-aerotp", "aerotp_mbps")):
                if not n(name, ber):
                    continue
                print(f"| {ber:g} | {name[6:]} | {n(name, ber)} | {m(name, ber, key):.3f} | "
                      f"{m(name, ber, 'q_p50_ms'):.1f} / {m(name, ber, 'q_p99_ms'):.1f} / "
                      f"{m(name, ber, 'q_max_ms'):.1f} | {m(name, ber, 'queue_drops'):.0f} |")
            if n("steps-bbr", ber) and n("steps-aerotp", ber):
                gb, ga = m("steps-bbr", ber, "tcp_mbps"), m("steps-aerotp", ber, "aerotp_mbps")
                qb, qa = m("steps-bbr", ber, "q_p99_ms"), m("steps-aerotp", ber, "q_p99_ms")
                verdicts.append(f"BER {ber:g}, steps: AeroTP goodput {ga:.3f} vs bbr {gb:.3f} Mb/s "
                                f"(target >=): {'met' if ga >= gb else 'NOT met'}; queue p99 "
                                f"{qa:.1f} vs bbr {qb:.1f} ms (target <=): "
                                f"{'met' if qa <= qb else 'NOT met'}")
        print()
    if verdicts:
        print("Targets (issue 37), on the medians:")
        for v in verdicts:
            print(f"- {v}")


def inner_args(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("role")
    ap.add_argument("--addr")
    ap.add_argument("--peer")
    ap.add_argument("--log")
    ap.add_argument("--out")
    ap.add_argument("--deadline", type=float, default=120)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--aerotp-bin")
    ap.add_argument("--tcp-cc")
    ap.add_argument("--blob")
    ap.add_argument("--send-args", default="")
    return ap.parse_args(argv)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_ground":
        ground_main(inner_args(sys.argv[1:]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_air":
        air_main(inner_args(sys.argv[1:]))
    else:
        main()
