#!/usr/bin/env python3
"""Seed 003 in the lab: real-time sessions over the Iridium scenario (docs/results/multipath.md,
"Seed 003 in the lab").

Subcommands:

  run       one `aerotp lab` session (AeroTP, kernel TCP, kernel MPTCP, or kernel TCP striped
            packet by packet over the channels as by the paper's teql), bounded by a timeout;
            samples the size of what the ground side has written every second (wall clock,
            aligned to the lab's epoch: the moment `aerotp lab` says "lab up") and writes
            DIR/NAME/{cmd.txt,timeline.csv,result.json,lab.json,lab.err,...}
  stream-recv / stream-send
            the kernel TCP / MPTCP ends used inside the lab's namespaces (no buffering: every
            received block is written at once, so the sampled size is what was delivered)
  pace      writes FILE to stdout at a given rate (an application offering R b/s to
            `aerotp send -`)
  summary   reads the run directories and prints their figures as CSV

Nothing here is a figure by itself: every number comes from the runs' files.
"""

import argparse
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

IPPROTO_MPTCP = 262
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)


# ---------------------------------------------------------------- kernel stream ends


def stream_recv(a):
    proto = IPPROTO_MPTCP if a.mptcp else 0
    host, port = a.listen.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(4)
    fd = os.open(a.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    total = 0
    while True:
        c, peer = s.accept()
        got = 0
        while True:
            b = c.recv(65536)
            if not b:
                break
            os.write(fd, b)
            got += len(b)
        c.close()
        total += got
        if got:  # a connection that carried nothing (a probe) does not end the receiver
            break
    os.close(fd)
    print(json.dumps({"received_bytes": total}), file=sys.stderr)


def stream_send(a):
    proto = IPPROTO_MPTCP if a.mptcp else 0
    host, port = a.to.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    if a.cc:
        s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, a.cc.encode())
    if a.bind:
        s.bind((a.bind, 0))
    t0 = time.time()
    s.connect((host, int(port)))
    sent = 0
    with open(a.file, "rb") as f:
        while True:
            b = f.read(65536)
            if not b:
                break
            s.sendall(b)
            sent += len(b)
    s.shutdown(socket.SHUT_WR)
    # Wait for the receiver to close: every byte is then acknowledged.
    while s.recv(4096):
        pass
    s.close()
    print(json.dumps({"sent_bytes": sent, "elapsed_s": time.time() - t0}), file=sys.stderr)


def pace(a):
    """FILE to stdout at a.rate bit/s, in a.chunk-byte pieces, for at most a.duration s."""
    per = a.chunk * 8.0 / a.rate
    out = sys.stdout.buffer
    t0 = time.monotonic()
    if a.start_file:
        with open(a.start_file, "w") as f:
            f.write(f"{time.time():.6f}\n")
    n = 0
    with open(a.file, "rb") as f:
        while True:
            due = t0 + n * per
            if due - t0 >= a.duration:
                break
            d = due - time.monotonic()
            if d > 0:
                time.sleep(d)
            b = f.read(a.chunk)
            if not b:
                break
            out.write(b)
            out.flush()
            n += 1


# ---------------------------------------------------------------- one lab session


def sha256_prefix(path, n):
    h = hashlib.sha256()
    left = n
    with open(path, "rb") as f:
        while left > 0:
            b = f.read(min(left, 1 << 20))
            if not b:
                break
            h.update(b)
            left -= len(b)
    return h.hexdigest()


def cut_scenario(src, n, dst):
    """The scenario file cut to its first n [[path]] entries (as the simulator's offered-rate
    table does)."""
    out, paths = [], 0
    with open(src) as f:
        for line in f:
            if line.strip() == "[[path]]":
                paths += 1
            if paths > n:
                break
            out.append(line)
    with open(dst, "w") as f:
        f.write("".join(out))


def stripe_setup(side, paths):
    """Shell commands that stripe every IP packet to the peer round robin over the lab's
    `paths` channels, in one namespace (`side`: "air" or "ground"); for --kind tcp-striped.

    The paper ran TCP over Linux `teql` (a round-robin queueing discipline over the channels'
    devices, on both hosts). This kernel has no sch_teql (CONFIG_NET_SCH_TEQL is not set), so
    the same per-packet round robin is built from nftables and policy routing: a chain of type
    route at the output hook marks every packet to the peer 1, 2, ... `paths` in turn (`numgen
    inc`), and `ip rule fwmark i` sends mark i to a table that routes the peer's path-0 address
    over channel i-1 (the kernel re-routes a locally sent packet whose mark a route chain
    changed). The receiving side accepts the peer's packets on any channel: rp_filter is off,
    and Linux accepts a packet for any of its addresses on any device. GSO is off
    (gso_max_segs 1) so that each TCP segment is routed on its own, as teql saw them. Data go
    air -> ground, ACKs ground -> air: both sides stripe, as teql did on both hosts.
    One difference from teql remains: teql skips a device that is down, and a dropped
    channel's TUN device here stays up, so a third of the packets still go into it
    during a call drop (as into a channel whose drop the modem has not noticed yet)."""
    devs = [f"atp-{side}{'' if i == 0 else i}" for i in range(paths)]
    rp = " ".join(
        f"net.ipv4.conf.{x}.rp_filter=0" for x in ["all", "default"] + devs
    )
    cmds = [f"sysctl -qw {rp}"]
    for i, dev in enumerate(devs):
        cmds.append(f"ip link set dev {dev} gso_max_segs 1")
        cmds.append(f"ip route add $AEROTP_PEER_ADDR dev {dev} table {101 + i}")
        cmds.append(f"ip rule add fwmark {i + 1} lookup {101 + i}")
    nft = [
        "add table ip stripe",
        "add chain ip stripe out { type route hook output priority mangle; }",
        f"add rule ip stripe out ip daddr $AEROTP_PEER_ADDR counter "
        f"meta mark set numgen inc mod {paths} offset 1",
    ] + [f"add rule ip stripe out meta mark {i + 1} counter" for i in range(paths)]
    # $AEROTP_PEER_ADDR must expand: double quotes around each nft command.
    cmds += [f'nft "{c}"' for c in nft]
    return " ; ".join(cmds)


def stripe_dump(side, d):
    """The striping counters (nft) and the devices' packet counts, into the run directory."""
    f = f"{d}/stripe-{side}.txt"
    return f"{{ nft list ruleset ; ip -s link ; }} > {f} 2>&1"


def build(a, d):
    """The --ground and --air commands of the lab, and the files they write."""
    me = os.path.abspath(__file__)
    recv_out = os.path.join(d, "recv.bin")
    port = 47000
    if a.kind == "aerotp":
        ground = (
            f"exec {a.aerotp} recv --insecure --listen 0.0.0.0:{port} -o - --once "
            f"> {recv_out} 2> {d}/recv.err"
        )
        dests = " ".join(f"--path $AEROTP_GROUND_ADDR_{i}:{port}" for i in range(1, a.paths))
        if a.offer:
            src = (
                f"python3 {me} pace {a.file} --rate {a.offer} --duration {a.duration} "
                f"--start-file {d}/air_start | "
            )
            inp = "-"
        else:
            src = f"date +%s.%N > {d}/air_start; "
            inp = a.file
        air = (
            f"{src}{a.aerotp} send {inp} --insecure --to $AEROTP_GROUND_ADDR_0:{port} {dests} "
            f"--mode reliable --rate {a.rate}bit --mtu {a.mtu} {a.send_args} --json "
            f"> {d}/send.json 2> {d}/send.err"
        )
        settle = "1s"
    else:
        mptcp = a.kind == "mptcp"
        # The SYN's round trip (3.1 s +- 1.8 s) outlasts TCP's first SYN timeout (1 s): by
        # default the kernel then retries without MP_CAPABLE and the connection falls back to
        # plain TCP (MPTcpExtMPCapableSYNTXDrop, MPTcpExtBlackhole), so that fallback is
        # switched off in both namespaces (their sysctls are their own).
        lim = (
            "sysctl -qw net.mptcp.syn_retrans_before_tcp_fallback=100 "
            "net.mptcp.blackhole_timeout=0 ; "
            f"ip mptcp limits set subflows {a.paths} add_addr_accepted {a.paths}"
        )
        sig = " ; ".join(
            f"ip mptcp endpoint add $AEROTP_GROUND_ADDR_{i} dev atp-ground{i} signal"
            for i in range(1, a.paths)
        )
        mflag = " --mptcp" if mptcp else ""
        g_setup = f"{lim} ; {sig} ; " if mptcp and a.paths > 1 else ""
        a_setup = f"{lim} ; " if mptcp and a.paths > 1 else ""
        g_exec, a_end = "exec ", ""
        if a.kind == "tcp-striped":
            g_setup = f"{stripe_setup('ground', a.paths)} ; "
            a_setup = f"{stripe_setup('air', a.paths)} ; "
            # The counters at the end: the air's when the sender ends or is cut by the
            # timeout (SIGINT), the ground's if its receiver returns before the teardown.
            g_exec = ""
            g_end = f" ; {stripe_dump('ground', d)}"
            a_end = f" ; {stripe_dump('air', d)}"
            a_setup = f"trap '{stripe_dump('air', d)} ; exit 130' INT TERM ; {a_setup}"
        # Each side sets its own devices' MTU (the same IP packet size as AeroTP's).
        g_mtu = " ; ".join(
            f"ip link set dev atp-ground{'' if i == 0 else i} mtu {a.ip_mtu}" for i in range(a.paths)
        )
        a_mtu = " ; ".join(
            f"ip link set dev atp-air{'' if i == 0 else i} mtu {a.ip_mtu}" for i in range(a.paths)
        )
        ground = (
            f"{g_mtu} ; {g_setup}{g_exec}python3 {me} stream-recv --listen 0.0.0.0:{port}{mflag} "
            f"-o {recv_out} 2> {d}/recv.err"
        )
        if g_exec == "":
            ground += g_end
        air = (
            f"{a_mtu} ; {a_setup}date +%s.%N > {d}/air_start; "
            f"python3 {me} stream-send {a.file} --to $AEROTP_GROUND_ADDR_0:{port}{mflag} "
            f"--cc {a.cc} 2> {d}/send.err{a_end}"
        )
        settle = "2s"
    air = f"timeout -s INT {a.timeout} sh -c {shlex.quote(air)}"
    return ground, air, settle, recv_out


def run(a):
    d = os.path.abspath(os.path.join(a.out, a.name))
    os.makedirs(d, exist_ok=True)
    scenario = a.scenario
    if a.cut:
        scenario = os.path.join(d, "scenario.toml")
        cut_scenario(a.scenario, a.paths, scenario)
    ground, air, settle, recv_out = build(a, d)
    argv = [
        a.aerotp, "lab", "--scenario", scenario, "--seed", str(a.seed), "--json",
        "--name", a.name.replace("-", "_")[:32], "--settle", settle,
        "--ground", ground, "--air", air,
    ]
    with open(os.path.join(d, "cmd.txt"), "w") as f:
        f.write(" ".join(shlex.quote(x) for x in argv) + "\n")
    launch = time.time()
    lab_out = open(os.path.join(d, "lab.json"), "w")
    err_path = os.path.join(d, "lab.err")
    p = subprocess.Popen(argv, stdout=lab_out, stderr=subprocess.PIPE, text=True)
    epoch = {"t": None}

    def pump():
        with open(err_path, "w") as ef:
            for line in p.stderr:
                if epoch["t"] is None and line.startswith("lab up"):
                    epoch["t"] = time.time()
                ef.write(line)
                ef.flush()

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    samples = []
    last = -1
    tl = open(os.path.join(d, "timeline.csv"), "w")
    tl.write("unix_s,bytes\n")
    while p.poll() is None:
        try:
            n = os.path.getsize(recv_out)
        except OSError:
            n = 0
        now = time.time()
        if n != last:
            tl.write(f"{now:.3f},{n}\n")
            tl.flush()
            samples.append((now, n))
            last = n
        time.sleep(a.sample)
    end = time.time()
    th.join(timeout=5)
    try:
        n = os.path.getsize(recv_out)
    except OSError:
        n = 0
    if n != last:
        tl.write(f"{end:.3f},{n}\n")
        samples.append((end, n))
    tl.close()
    lab_out.close()
    ep = epoch["t"] if epoch["t"] is not None else launch
    # What had arrived by `measure` s after the lab's epoch.
    at = 0
    for t, b in samples:
        if t - ep <= a.measure:
            at = b
    size = os.path.getsize(a.file)
    got = n
    intact = got <= size and sha256_prefix(a.file, got) == sha256_prefix(recv_out, got)
    air_start = None
    try:
        with open(os.path.join(d, "air_start")) as f:
            air_start = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    res = {
        "name": a.name, "kind": a.kind, "paths": a.paths, "seed": a.seed,
        "scenario": a.scenario, "cc": a.cc if a.kind != "aerotp" else None,
        "rate_bps": a.rate if a.kind == "aerotp" else None,
        "offer_bps": a.offer, "duration_s": a.duration,
        "launch_unix_s": launch, "epoch_unix_s": ep, "air_start_unix_s": air_start,
        "end_unix_s": end, "lab_exit": p.returncode,
        "file_bytes": size, "received_bytes": got, "measure_s": a.measure,
        "received_by_measure": at, "prefix_intact": intact,
        "complete": got == size and intact,
    }
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    if not a.keep:
        # The received copy is checked; keep the disk free.
        os.remove(recv_out)
    print(json.dumps(res))


def summary(a):
    import csv
    w = csv.writer(sys.stdout)
    w.writerow(["name", "kind", "paths", "seed", "received_by_measure", "measure_s",
                "delivered_bps", "received_bytes", "file_bytes", "complete", "prefix_intact",
                "lab_exit"])
    for name in sorted(os.listdir(a.dir)):
        f = os.path.join(a.dir, name, "result.json")
        if not os.path.exists(f):
            continue
        r = json.load(open(f))
        w.writerow([r["name"], r["kind"], r["paths"], r["seed"], r["received_by_measure"],
                    r["measure_s"], round(r["received_by_measure"] * 8 / r["measure_s"]),
                    r["received_bytes"], r["file_bytes"], r["complete"], r["prefix_intact"],
                    r["lab_exit"]])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("stream-recv")
    r.add_argument("--listen", required=True)
    r.add_argument("--mptcp", action="store_true")
    r.add_argument("-o", "--output", required=True)
    s = sub.add_parser("stream-send")
    s.add_argument("file")
    s.add_argument("--to", required=True)
    s.add_argument("--mptcp", action="store_true")
    s.add_argument("--cc", default="")
    s.add_argument("--bind", default="")
    p = sub.add_parser("pace")
    p.add_argument("file")
    p.add_argument("--rate", type=float, required=True, help="bit/s")
    p.add_argument("--duration", type=float, required=True, help="s")
    p.add_argument("--chunk", type=int, default=512)
    p.add_argument("--start-file", default="")
    u = sub.add_parser("run")
    u.add_argument("--name", required=True)
    u.add_argument("--out", required=True)
    u.add_argument("--kind", choices=["aerotp", "tcp", "mptcp", "tcp-striped"], required=True,
                   help="tcp-striped: kernel TCP over all --paths channels, per-packet round "
                   "robin below it (the paper's teql; needs nft)")
    u.add_argument("--scenario", required=True)
    u.add_argument("--cut", action="store_true", help="cut the scenario to its first --paths paths")
    u.add_argument("--seed", type=int, default=3)
    u.add_argument("--file", required=True)
    u.add_argument("--paths", type=int, default=3)
    u.add_argument("--rate", type=int, default=7200, help="aerotp send --rate, bit/s")
    u.add_argument("--mtu", type=int, default=512, help="aerotp send --mtu")
    u.add_argument("--ip-mtu", type=int, default=540, help="interface MTU for kernel TCP/MPTCP")
    u.add_argument("--cc", default="cubic")
    u.add_argument("--send-args", default="", help="more flags for aerotp send")
    u.add_argument("--offer", type=int, default=0, help="offered rate (bit/s) of a paced stream")
    u.add_argument("--duration", type=float, default=0, help="offered stream's length, s")
    u.add_argument("--timeout", type=int, required=True, help="bound of the air command, s")
    u.add_argument("--measure", type=float, required=True,
                   help="count what arrived by this many s after the lab's epoch")
    u.add_argument("--sample", type=float, default=1.0)
    u.add_argument("--aerotp", default="aerotp")
    u.add_argument("--keep", action="store_true")
    m = sub.add_parser("summary")
    m.add_argument("dir")
    a = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    {"stream-recv": stream_recv, "stream-send": stream_send, "pace": pace, "run": run,
     "summary": summary}[a.cmd](a)


if __name__ == "__main__":
    main()
