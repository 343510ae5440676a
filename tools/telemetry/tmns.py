#!/usr/bin/env python3
"""IRIG 106 Chapter 24 TmNS messages for the gateway tests and benches (docs/telemetry.md).

  tmns.py gen FILE [--messages N] [--seed S]  write N TmNS messages (Chapter 24 message
                                              header and packages of sensor data, built with
                                              AcraNetwork's iNET classes; 48 B to about 9 KB)
  tmns.py send FILE HOST:PORT [--rate BPS]    send them, one message per UDP datagram, paced;
                                              writes FILE.index (one JSON line per message)
  tmns.py recv HOST:PORT OUT --count N [--idle S]
                                              receive, unpack each message with AcraNetwork
                                              and check that it packs back to the same bytes;
                                              one JSON line per datagram to OUT, with `t`, the
                                              wall-clock time of arrival (sent: of sending)

FILE holds the messages back to back (each carries its length). Needs AcraNetwork
(scripts/telemetry-deps.sh).
"""

import argparse
import hashlib
import json
import random
import socket
import struct
import sys
import time

from AcraNetwork import iNET


def message(seq, rng):
    m = iNET.iNET()
    m.type = 0
    m.definition_ID = 0x1000 + seq % 16
    m.sequence = seq
    m.ptptimeseconds = 1_700_000_000 + seq // 100
    m.ptptimenanoseconds = (seq % 100) * 10_000_000
    for i in range(rng.choice([1, 4, 12, 40, 90])):
        p = iNET.iNETPackage()
        p.definitionID = 0x2000 + i
        p.flags = 0
        p.timedelta = i * 1000
        p.payload = bytes(rng.getrandbits(8) for _ in range(4 * rng.randint(1, 24)))
        m.packages.append(p)
    return m.pack()


def check(b):
    """(sequence, valid): unpacked by AcraNetwork and packed back to the same bytes."""
    m = iNET.iNET()
    try:
        m.unpack(b)
        return m.sequence, m.pack() == b and m._length == len(b)
    except Exception:
        return None, False


def record(b):
    seq, ok = check(b)
    return {"seq": seq, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest(), "valid": ok}


def addr(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def read_messages(path):
    data = open(path, "rb").read()
    out, i = [], 0
    while i < len(data):
        (length,) = struct.unpack_from(">I", data, i + 12)
        if length < 24:
            sys.exit("%s: a message of %d bytes at byte %d" % (path, length, i))
        out.append(data[i:i + length])
        i += length
    return out


def cmd_gen(a):
    rng = random.Random(a.seed)
    ms = [message(i, rng) for i in range(a.messages)]
    for m in ms:
        if not check(m)[1]:
            sys.exit("generated a message AcraNetwork does not read back")
    with open(a.file, "wb") as f:
        for m in ms:
            f.write(m)
    sizes = sorted(len(m) for m in ms)
    print(json.dumps({"messages": len(ms), "bytes": sum(sizes), "min": sizes[0], "max": sizes[-1]}))


def cmd_send(a):
    ms = read_messages(a.file)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    dest = addr(a.dest)
    start, sent = time.monotonic(), 0
    with open(a.file + ".index", "w") as idx:
        for m in ms:
            due = start + sent * 8 / a.rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            s.sendto(m, dest)
            sent += len(m)
            r = record(m)
            r["t"] = time.time()
            idx.write(json.dumps(r) + "\n")
    print(json.dumps({"sent": len(ms), "bytes": sent, "seconds": round(time.monotonic() - start, 3)}))


def cmd_recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(addr(a.listen))
    s.settimeout(a.idle)
    n = 0
    with open(a.out, "w") as out:
        while n < a.count:
            try:
                d, _ = s.recvfrom(70000)
            except socket.timeout:
                break
            r = record(d)
            r["t"] = time.time()
            out.write(json.dumps(r) + "\n")
            out.flush()
            n += 1
    print(json.dumps({"received": n}))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("file")
    g.add_argument("--messages", "--packets", type=int, default=400, dest="messages")
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
    {"gen": cmd_gen, "send": cmd_send, "recv": cmd_recv}[a.cmd](a)


if __name__ == "__main__":
    main()
