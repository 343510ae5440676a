#!/usr/bin/env python3
"""DLEP soak: a router session against MIT-LL's LL-DLEP for a long run, then modem restarts.

Runs LL-DLEP as a modem on 127.0.0.1 (heartbeat 1 s) and the router side of crates/dlep (the
`watch` example: `aerotp_dlep::spawn` with the default ClientConfig, heartbeat 5 s, reconnect
backoff 100 ms doubling to 2 s) against it. It brings one destination up and changes its
Current Data Rate (Tx) every --sample seconds, so the session carries updates as well as
heartbeats; at every sample it reads the router's resident set (VmRSS from /proc/PID/status).
A session lost during the soak is a failure. Then, --cycles times: the modem is killed
(SIGKILL), a new one is started on the same port after a delay (0, 0.5, 2, 5 s, ...), and the
time from the new modem's start (and from the kill) to the router's SessionUp is measured.

    scripts/build-ll-dlep.sh                       # once
    python3 bench/dlep-soak.py --minutes 30        # builds the example (debug profile) first

Prints one line per sample and a Markdown summary at the end. The binary is $AEROTP_LL_DLEP or
${AEROTP_CACHE:-~/.cache/aerotp}/ll-dlep-184e148/bin/Dlep (its protocol configuration in
$AEROTP_LL_DLEP_ETC or <bin>/../../etc/dlep), as in crates/dlep/tests/ll_dlep.rs.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

MAC = "00:11:22:33:44:55"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ll_dlep():
    b = os.environ.get("AEROTP_LL_DLEP")
    if not b:
        cache = os.environ.get("AEROTP_CACHE") or os.path.expanduser("~/.cache/aerotp")
        b = os.path.join(cache, "ll-dlep-184e148/bin/Dlep")
    if not os.access(b, os.X_OK):
        sys.exit(f"dlep-soak: LL-DLEP not found at {b}: run scripts/build-ll-dlep.sh")
    etc = os.environ.get("AEROTP_LL_DLEP_ETC") or os.path.join(
        os.path.dirname(os.path.dirname(b)), "etc/dlep")
    if not os.path.isfile(os.path.join(etc, "dlep-rfc-8175.xml")):
        sys.exit(f"dlep-soak: LL-DLEP protocol configuration not found in {etc}")
    return b, etc


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


class Modem:
    def __init__(self, binary, etc, workdir, port, n):
        d = os.path.join(workdir, f"modem{n}")
        os.makedirs(d)
        cfg = os.path.join(d, "modem.xml")
        with open(cfg, "w") as f:
            f.write(f"""<?xml version="1.0" ?>
<config><params>
  <local-type>modem</local-type>
  <discovery-enable>0</discovery-enable>
  <session-address>127.0.0.1</session-address>
  <session-port>{port}</session-port>
  <heartbeat-interval>1</heartbeat-interval>
  <heartbeat-threshold>2</heartbeat-threshold>
  <peer-type>ll-dlep-modem</peer-type>
  <log-file>{d}/dlep-modem.log</log-file>
  <log-level>2</log-level>
  <protocol-config-file>{etc}/dlep-rfc-8175.xml</protocol-config-file>
  <protocol-config-schema>{etc}/protocol-config.xsd</protocol-config-schema>
</params></config>
""")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [binary, "config-file", cfg], cwd=d, stdin=subprocess.PIPE,
            stdout=open(os.path.join(d, "stdout.txt"), "w"),
            stderr=open(os.path.join(d, "stderr.txt"), "w"), text=True)

    def cli(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


class Router:
    """The watch example; every line it prints is kept with its arrival time."""

    def __init__(self, binary, port, workdir):
        env = dict(os.environ, RUST_LOG="aerotp_dlep=info")
        self.proc = subprocess.Popen(
            [binary, f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
            stderr=open(os.path.join(workdir, "router-stderr.txt"), "w"), text=True, env=env)
        self.lines = []
        self.cond = threading.Condition()
        self.log = open(os.path.join(workdir, "router-events.txt"), "w")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            self.log.write(f"{t:.3f} {line}")
            self.log.flush()
            with self.cond:
                self.lines.append((t, line))
                self.cond.notify_all()

    def count(self, prefix):
        with self.cond:
            return sum(1 for _, l in self.lines if l.startswith(prefix))

    def wait_for(self, prefix, after, timeout):
        """Arrival time of the first line starting with `prefix` that arrived after `after`."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for t, l in self.lines:
                    if t > after and l.startswith(prefix):
                        return t
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self.cond.wait(left)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="soak length (default 30)")
    p.add_argument("--sample", type=float, default=10.0, help="seconds between RSS samples")
    p.add_argument("--cycles", type=int, default=5, help="modem kill/restart cycles after")
    p.add_argument("--no-build", action="store_true", help="use target/debug/examples/watch as is")
    p.add_argument("--workdir", help="where logs go (default: a new temporary directory)")
    a = p.parse_args()

    binary, etc = ll_dlep()
    if not a.no_build:
        subprocess.run(["cargo", "build", "-q", "-p", "aerotp-dlep", "--example", "watch"],
                       cwd=ROOT, check=True)
    watch = os.path.join(ROOT, "target/debug/examples/watch")
    workdir = a.workdir or tempfile.mkdtemp(prefix="dlep-soak-")
    os.makedirs(workdir, exist_ok=True)
    port = free_port()
    print(f"# workdir {workdir}, modem port {port}", flush=True)

    modems = [Modem(binary, etc, workdir, port, 0)]
    time.sleep(0.5)
    router = Router(watch, port, workdir)
    failures = []
    try:
        if router.wait_for("SessionUp", 0, 15) is None:
            sys.exit("dlep-soak: no session with the modem within 15 s")
        modems[-1].cli(f"dest up {MAC} Current_Data_Rate_Transmit 5000000")
        if router.wait_for("DestinationUp", 0, 5) is None:
            sys.exit("dlep-soak: the destination did not come up")
        rss = []
        start = time.monotonic()
        n = 0
        while True:
            elapsed = time.monotonic() - start
            kib = rss_kib(router.proc.pid)
            rss.append((elapsed, kib))
            print(f"t={elapsed:7.1f} s  rss={kib} KiB  updates={router.count('DestinationUpdate')}"
                  f"  lost={router.count('SessionLost')}", flush=True)
            if elapsed >= a.minutes * 60:
                break
            n += 1
            rate = 1_000_000 * (1 + n % 5)
            modems[-1].cli(f"dest update {MAC} Current_Data_Rate_Transmit {rate}")
            time.sleep(max(0.0, start + n * a.sample - time.monotonic()))
        lost_in_soak = router.count("SessionLost")
        if lost_in_soak:
            failures.append(f"{lost_in_soak} session(s) lost during the soak")

        delays = [0.0, 0.5, 2.0, 5.0, 1.0, 0.0, 3.0, 0.25]
        cycles = []
        for i in range(a.cycles):
            delay = delays[i % len(delays)]
            killed = time.monotonic()
            modems[-1].kill()
            lost = router.wait_for("SessionLost", killed, 10)
            time.sleep(max(0.0, killed + delay - time.monotonic()))
            modems.append(Modem(binary, etc, workdir, port, i + 1))
            restarted = modems[-1].started
            up = router.wait_for("SessionUp", restarted, 30)
            if up is None:
                failures.append(f"cycle {i}: no session within 30 s of the restart")
                cycles.append((delay, None, None, None))
                continue
            cycles.append((delay, None if lost is None else lost - killed, up - restarted,
                           up - killed))
            print(f"cycle {i}: restart {delay:.2f} s after the kill; lost noticed "
                  f"{'-' if lost is None else f'{(lost - killed) * 1e3:.0f} ms'}; session up "
                  f"{(up - restarted) * 1e3:.0f} ms after the restart "
                  f"({(up - killed) * 1e3:.0f} ms after the kill)", flush=True)
            modems[-1].cli(f"dest up {MAC} Current_Data_Rate_Transmit 5000000")
            time.sleep(2)
        end_kib = rss_kib(router.proc.pid)
    finally:
        router.proc.send_signal(signal.SIGINT)
        try:
            router.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            router.proc.kill()
        for m in modems:
            if m.proc.poll() is None:
                m.cli("quit")
                try:
                    m.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    m.kill()

    kibs = [k for _, k in rss]
    # The first modem's own log: the heartbeats it got from the router and sent to it.
    with open(os.path.join(workdir, "modem0", "dlep-modem.log"), errors="replace") as f:
        log = f.read()
    hb_in = log.count("handle_peer_signal signal id=16(Heartbeat)")
    hb_out = log.count("Send Heartbeat to peer")
    first_after_warmup = next((k for t, k in rss if t >= 60), kibs[0])
    ups = [c[2] for c in cycles if c[2] is not None]
    print()
    print("| figure | value |")
    print("|---|---|")
    print(f"| soak | {a.minutes:g} min, {len(rss)} RSS samples every {a.sample:g} s, "
          f"{router.count('DestinationUpdate')} destination updates, sessions lost in the soak: "
          f"{lost_in_soak} |")
    print(f"| heartbeats (first modem's log) | {hb_in} from the router, {hb_out} to it |")
    print(f"| router RSS (VmRSS) | start {kibs[0]} KiB, after 1 min {first_after_warmup} KiB, "
          f"end of soak {kibs[-1]} KiB, max {max(kibs)} KiB, min {min(kibs)} KiB; "
          f"after the restarts {end_kib} KiB |")
    for d, lost, up_r, up_k in cycles:
        lost_s = "-" if lost is None else f"{lost * 1e3:.0f} ms"
        up_s = ("none" if up_r is None else
                f"{up_r * 1e3:.0f} ms after the restart ({up_k * 1e3:.0f} ms after the kill)")
        print(f"| modem killed, restarted {d:g} s later | loss noticed {lost_s}; "
              f"session up {up_s} |")
    if ups:
        print(f"| reconnect after restart | max {max(ups) * 1e3:.0f} ms, "
              f"over {len(ups)} cycles (target 5 s) |")
    if failures or len(ups) < a.cycles or (ups and max(ups) > 5.0):
        print("FAILED: " + "; ".join(failures or ["a reconnect took more than 5 s"]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
