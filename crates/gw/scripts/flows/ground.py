"""Ground side of crates/gw/scripts/lab-flows.sh: the destinations of many gateway flows.

Listens on the ground address (argv[1], e.g. 10.77.0.2) and writes its tallies as JSON to
argv[2] every second and on SIGTERM:
  7100/tcp  echo (the control flow whose round trip is measured)
  7500/tcp  echo (the interactive and idle flows)
  7200/tcp  bulk sink: each connection sends a header (flow id, length: two big-endian u32)
            then `length` bytes that must equal random.Random(id).randbytes(length); the sink
            answers one byte, b"1" if every byte matched, b"0" if not
  7400/udp  datagrams (flow id u16, sequence u32, body): the body must equal
            random.Random(id << 32 | seq).randbytes(len(body))
Every count is of what arrived here; the client compares them with what it sent.
"""

import asyncio
import json
import os
import random
import signal
import struct
import sys

HOST = sys.argv[1]
OUT = sys.argv[2]
T = {
    "echo_conns": 0,
    "echo_open": 0,
    "bulk_conns": 0,
    "bulk_intact": 0,
    "bulk_bad": 0,
    "bulk_bytes": 0,
    "udp_received": 0,
    "udp_intact": 0,
    "udp_bad": 0,
    "udp_flows": 0,
}
udp_seen = set()


def dump():
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        json.dump(T, f)
    os.replace(tmp, OUT)


async def echo(reader, writer):
    T["echo_conns"] += 1
    T["echo_open"] += 1
    try:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(6, 1, 1)  # TCP_NODELAY
        while True:
            b = await reader.read(65536)
            if not b:
                break
            writer.write(b)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        T["echo_open"] -= 1
        writer.close()


async def bulk(reader, writer):
    T["bulk_conns"] += 1
    ok = False
    try:
        head = await reader.readexactly(8)
        fid, n = struct.unpack(">II", head)
        want = random.Random(fid).randbytes(n)
        got = 0
        ok = True
        while got < n:
            b = await reader.read(min(65536, n - got))
            if not b:
                ok = False
                break
            if b != want[got : got + len(b)]:
                ok = False
            got += len(b)
            T["bulk_bytes"] += len(b)
        T["bulk_intact" if ok else "bulk_bad"] += 1
        writer.write(b"1" if ok else b"0")
        await writer.drain()
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        T["bulk_bad"] += 1
    finally:
        writer.close()


class Udp(asyncio.DatagramProtocol):
    def datagram_received(self, data, addr):
        T["udp_received"] += 1
        if len(data) < 6:
            T["udp_bad"] += 1
            return
        fid, seq = struct.unpack(">HI", data[:6])
        body = data[6:]
        if body == random.Random(fid << 32 | seq).randbytes(len(body)):
            T["udp_intact"] += 1
            if fid not in udp_seen:
                udp_seen.add(fid)
                T["udp_flows"] = len(udp_seen)
        else:
            T["udp_bad"] += 1


async def main():
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    servers = [
        await asyncio.start_server(echo, HOST, 7100, backlog=4096),
        await asyncio.start_server(echo, HOST, 7500, backlog=4096),
        await asyncio.start_server(bulk, HOST, 7200, backlog=4096),
    ]
    await loop.create_datagram_endpoint(Udp, local_addr=(HOST, 7400))
    dump()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
        dump()
    for s in servers:
        s.close()
    dump()


asyncio.run(main())
