"""What the telemetry tools (ch10.py, tmns.py) share: one packet per UDP datagram, sent paced
with an index of what went, received into one JSON line per datagram, and the command line
(gen / send / recv). A stream plugs in how it frames a packet into a datagram (`wrap`), how
it reads one back (`unwrap`: datagram -> record dict, raising on a damaged datagram), and
how it describes a packet it sent (`record`)."""

import argparse
import json
import socket
import time


def addr(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def send(packets, dest, rate, index_path, wrap, record):
    """Sends `packets` (bytes) to `dest` at `rate` bits/s (datagram bytes; the gateway paces
    its own side), one per datagram as `wrap(seq, packet)` frames it; writes `record(seq,
    packet)` plus the send time `t` per packet to `index_path`; prints a JSON summary."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    dest = addr(dest)
    start, sent = time.monotonic(), 0
    with open(index_path, "w") as idx:
        for seq, p in enumerate(packets):
            d = wrap(seq, p)
            due = start + sent * 8 / rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            s.sendto(d, dest)
            sent += len(d)
            r = record(seq, p)
            r["t"] = time.time()
            idx.write(json.dumps(r) + "\n")
    print(json.dumps({"sent": len(packets), "bytes": sent,
                      "seconds": round(time.monotonic() - start, 3)}))


def receive(listen, out_path, count, idle, unwrap):
    """Receives until `count` datagrams or `idle` seconds of silence; writes `unwrap(datagram)`
    plus the arrival time `t` per datagram to `out_path` (a damaged datagram is a line with
    `valid: false` and the error, never fatal); prints a JSON summary."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # A telemetry receiver sized for its stream (docs/gateway.md: bursts after a held hole).
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(addr(listen))
    s.settimeout(idle)
    n = 0
    with open(out_path, "w") as out:
        while n < count:
            try:
                d, _ = s.recvfrom(70000)
            except socket.timeout:
                break
            t = time.time()
            try:
                r = unwrap(d)
            except Exception as e:
                r = {"seq": None, "valid": False, "error": str(e), "bytes": len(d)}
            r["t"] = t
            out.write(json.dumps(r) + "\n")
            out.flush()
            n += 1
    print(json.dumps({"received": n}))


def main(doc, gen_default, gen, read, wrap, unwrap, record):
    """The command line: `gen FILE [--packets N] [--seed S]`, `send FILE HOST:PORT [--rate
    BPS]`, `recv HOST:PORT OUT --count N [--idle S]`."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("file")
    g.add_argument("--packets", "--messages", type=int, default=gen_default, dest="packets")
    g.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("send")
    s.add_argument("file")
    s.add_argument("dest")
    s.add_argument("--rate", type=float, default=2e6)
    r = sub.add_parser("recv")
    r.add_argument("listen")
    r.add_argument("out")
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--idle", type=float, default=10.0)
    a = ap.parse_args()
    if a.cmd == "gen":
        gen(a.file, a.packets, a.seed)
    elif a.cmd == "send":
        send(read(a.file), a.dest, a.rate, a.file + ".index", wrap, record)
    else:
        receive(a.listen, a.out, a.count, a.idle, unwrap)
