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

import hashlib
import json
import random
import struct
import sys

from AcraNetwork import iNET

import replay


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


def gen(path, n, seed):
    rng = random.Random(seed)
    ms = [message(i, rng) for i in range(n)]
    for m in ms:
        if not check(m)[1]:
            sys.exit("generated a message AcraNetwork does not read back")
    with open(path, "wb") as f:
        for m in ms:
            f.write(m)
    sizes = sorted(len(m) for m in ms)
    print(json.dumps({"messages": len(ms), "bytes": sum(sizes), "min": sizes[0], "max": sizes[-1]}))


def unwrap(d):
    return record(d)


if __name__ == "__main__":
    replay.main(__doc__, 400, gen, read_messages, lambda seq, m: m, unwrap,
                lambda seq, m: record(m))
