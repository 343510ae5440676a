#!/usr/bin/env python3
"""IRIG 106 Chapter 10 telemetry for the gateway tests and benches (docs/telemetry.md).

  ch10.py gen FILE [--packets N] [--seed S]   write a recording: TMATS, time, 1553, ARINC-429
                                              and PCM-like packets of 60 B to 16 KiB, built
                                              and checked with pychapter10
  ch10.py send FILE HOST:PORT [--rate BPS]    replay it as a Chapter 10 UDP stream: one packet
                                              per datagram behind a UDP transfer header
                                              (format 1, non-segmented, IRIG 106-17 10.3.1.1),
                                              paced at BPS; prints one JSON line at the end
  ch10.py recv HOST:PORT OUT --count N [--idle S]
                                              receive until N datagrams or S seconds of
                                              silence; each datagram's header is checked,
                                              its packet parsed and validated with
                                              pychapter10; writes one JSON line per datagram
                                              to OUT (udp seq, channel, type, bytes, sha256,
                                              valid)

The sender writes FILE.index (the same JSON lines for what it sent), so a test compares
sent and received packet by packet. Needs pychapter10 (scripts/telemetry-deps.sh).
"""

import hashlib
import io
import json
import random
import struct
import sys

import chapter10

import replay
from chapter10 import arinc429, computer, ms1553, time as c10time, analog

# UDP transfer header, format 1: version 1, type 0 (full packets), 24-bit sequence number,
# one little-endian 32-bit word as Chapter 10 data is.
UDP_VERSION = 1


def udp_header(seq):
    return struct.pack("<I", UDP_VERSION | (0 << 4) | ((seq & 0xFFFFFF) << 8))


def parse_udp_header(b):
    if len(b) < 4:
        raise ValueError("datagram shorter than the UDP transfer header")
    (w,) = struct.unpack("<I", b[:4])
    if w & 0xF != UDP_VERSION or (w >> 4) & 0xF != 0:
        raise ValueError("not a format 1 full-packet UDP transfer header: %08x" % w)
    return w >> 8


def tmats(seq):
    text = "G\\DSI\\N:4;G\\106:17;" + "".join(
        "R-1\\DSI-%d:CH%d;R-1\\CDT-%d:1553IN;" % (i, i, i) for i in range(1, 60))
    p = computer.ComputerF1(channel_id=0, data_type=0x01, sequence_number=seq % 256,
                            rtc=seq * 1000, data=text.encode())
    p.version = 12
    return p


def time_packet(seq):
    p = c10time.TimeF1(channel_id=1, data_type=0x11, sequence_number=seq % 256, rtc=seq * 1000)
    return p


def bus_1553(seq, rng, messages):
    p = ms1553.MS1553F1(channel_id=2, data_type=0x19, sequence_number=seq % 256,
                        rtc=seq * 1000, data_checksum=2)
    for i in range(messages):
        words = rng.randint(1, 32)
        data = bytes(rng.getrandbits(8) for _ in range(2 * (words + 2)))
        p.append(ms1553.MS1553F1.Message(ipts=seq * 1000 + i, bus=i % 2,
                                         length=len(data), data=data))
    p.count = messages
    return p


def arinc(seq, rng, words):
    p = arinc429.ARINC429F0(channel_id=3, data_type=0x38, sequence_number=seq % 256,
                            rtc=seq * 1000)
    for i in range(words):
        p.append(arinc429.ARINC429F0.Message(gap_time=10, bus=i % 4,
                                             data=rng.getrandbits(32).to_bytes(4, "little")))
    p.count = words
    return p


def packets(n, seed):
    rng = random.Random(seed)
    out = [tmats(0)]
    for seq in range(1, n):
        k = seq % 10
        if k == 0:
            p = time_packet(seq)
        elif k in (1, 2, 3, 4, 5):
            # 1553 packets of 1 to 120 messages: 60 B to about 9 KB.
            p = bus_1553(seq, rng, rng.choice([1, 4, 16, 40, 120]))
        elif k in (6, 7):
            p = arinc(seq, rng, rng.choice([8, 64, 500]))
        elif k == 8:
            # A large bus packet: about 16 KB, over ten MTU-sized datagrams' worth.
            p = bus_1553(seq, rng, 220)
        else:
            p = tmats(seq)
        out.append(bytes(p))
    return [bytes(p) if not isinstance(p, bytes) else p for p in out]


def check_packet(b):
    """(channel, type name, valid) of one Chapter 10 packet's bytes, parsed by pychapter10."""
    got = list(chapter10.C10(io.BytesIO(b)))
    if len(got) != 1:
        return None, None, False
    p = got[0]
    ok = p.validate(silent=True) and p.packet_length == len(b) and bytes(p) == b
    return p.channel_id, type(p).__name__, ok


def gen(path, n, seed):
    ps = packets(n, seed)
    with open(path, "wb") as f:
        for p in ps:
            ch, kind, ok = check_packet(p)
            if not ok:
                sys.exit("generated an invalid %s packet (pychapter10 refused it)" % kind)
            f.write(p)
    sizes = sorted(len(p) for p in ps)
    print(json.dumps({"packets": len(ps), "bytes": sum(sizes), "min": sizes[0],
                      "max": sizes[-1]}))


def read_recording(path):
    with open(path, "rb") as f:
        data = f.read()
    out, i = [], 0
    while i < len(data):
        if data[i:i + 2] != b"\x25\xeb":
            sys.exit("%s: no Chapter 10 sync pattern at byte %d" % (path, i))
        (length,) = struct.unpack_from("<I", data, i + 4)
        out.append(data[i:i + length])
        i += length
    return out


def record(seq, p):
    ch, kind, ok = check_packet(p)
    return {"seq": seq, "channel": ch, "type": kind, "bytes": len(p),
            "sha256": hashlib.sha256(p).hexdigest(), "valid": ok}


def unwrap(d):
    return record(parse_udp_header(d), d[4:])


if __name__ == "__main__":
    replay.main(__doc__, 600, gen, read_recording, lambda seq, p: udp_header(seq) + p,
                unwrap, record)
