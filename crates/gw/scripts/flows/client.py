"""Air side of crates/gw/scripts/lab-flows.sh: many flows into the ingress on 127.0.0.1
(lab-tun.sh: from an application namespace to the ground's ports, FLOWS_DEST=10.77.0.2).

  client.py rtt PORT SECONDS
      One TCP flow: a 200-byte message every 100 ms, echoed; prints one JSON line with the
      round-trip times (n, p50, p95, max, in ms).
  client.py load WORKDIR FLOWS BULK BULK_BYTES UDP HOLD
      Opens FLOWS TCP flows to 127.0.0.1:8500 (echo), each proving itself with one echoed
      message, and UDP sockets to 127.0.0.1:8400; writes WORKDIR/opened (JSON: how long the
      opening took) and waits (at most 120 s) for WORKDIR/go. Then, for at least HOLD seconds
      and until the bulk flows are done: BULK flows to 127.0.0.1:8200 each send BULK_BYTES
      (checked at the ground, which answers b"1"), half of the TCP flows send a 100-byte
      message every 2 s (interactive; the other half stay idle), every UDP socket sends a
      200-byte datagram every second. Finally every TCP flow sends one more message and
      closes. Writes WORKDIR/load.json; every echo is compared byte for byte.
Limits: every wait is bounded (connect 60 s, each echo 60 s, the bulk phase 600 s).
"""

import asyncio
import json
import os
import random
import resource
import struct
import sys
import time

HOST = os.environ.get("FLOWS_DEST", "127.0.0.1")
# FLOWS_DEST set (lab-tun.sh): the flows go to the ground's own ports, intercepted on the way
# (no listener in the air namespace); else to the ingress's explicit listeners.
GROUND_PORT = {8100: 7100, 8500: 7500, 8200: 7200, 8400: 7400}
port_of = (lambda p: GROUND_PORT[p]) if HOST != "127.0.0.1" else (lambda p: p)


def quantiles(v):
    v = sorted(v)
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")
    return {"n": len(v), "p50": q(0.5), "p95": q(0.95), "max": v[-1] if v else float("nan")}


async def rtt(port, dur):
    r, w = await asyncio.wait_for(asyncio.open_connection(HOST, port_of(port)), 60)
    w.get_extra_info("socket").setsockopt(6, 1, 1)
    msg = b"m" * 200
    rtts = []
    end = time.monotonic() + dur
    while time.monotonic() < end:
        t = time.monotonic()
        w.write(msg)
        got = await asyncio.wait_for(r.readexactly(len(msg)), 60)
        if got != msg:
            raise SystemExit("control echo differs from what was sent")
        rtts.append((time.monotonic() - t) * 1000)
        await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - t)))
    w.close()
    print(json.dumps(quantiles(rtts)))


class Tally:
    def __init__(self):
        self.t = {
            "flows_opened": 0,
            "open_failed": 0,
            "echo_ok": 0,
            "echo_bad": 0,
            "final_ok": 0,
            "final_bad": 0,
            "bulk_ok": 0,
            "bulk_bad": 0,
            "udp_sent": 0,
            "errors": [],
        }

    def error(self, what):
        if len(self.t["errors"]) < 10:
            self.t["errors"].append(what)


async def exchange(r, w, fid, seq):
    msg = struct.pack(">II", fid, seq) + random.Random(fid * 1000003 + seq).randbytes(92)
    w.write(msg)
    got = await asyncio.wait_for(r.readexactly(len(msg)), 60)
    return got == msg


async def open_flow(fid, tally, sem):
    async with sem:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(HOST, port_of(8500)), 60)
            ok = await exchange(r, w, fid, 0)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            tally.t["open_failed"] += 1
            tally.error(f"flow {fid} open: {e!r}")
            return None
    tally.t["flows_opened"] += 1
    tally.t["echo_ok" if ok else "echo_bad"] += 1
    return (r, w)


async def interactive(fid, rw, tally, stop):
    r, w = rw
    seq = 1
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 2.0)
            break
        except asyncio.TimeoutError:
            pass
        try:
            ok = await exchange(r, w, fid, seq)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            tally.t["echo_bad"] += 1
            tally.error(f"flow {fid} message {seq}: {e!r}")
            return
        tally.t["echo_ok" if ok else "echo_bad"] += 1
        seq += 1


async def final(fid, rw, tally):
    r, w = rw
    try:
        ok = await exchange(r, w, fid, 999999)
        w.close()
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
        ok = False
        tally.error(f"flow {fid} final message: {e!r}")
    tally.t["final_ok" if ok else "final_bad"] += 1


async def bulk(fid, n, tally):
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(HOST, port_of(8200)), 60)
        w.write(struct.pack(">II", fid, n))
        data = random.Random(fid).randbytes(n)
        for i in range(0, n, 65536):
            w.write(data[i : i + 65536])
            await w.drain()
        verdict = await asyncio.wait_for(r.read(1), 600)
        w.close()
    except (OSError, asyncio.TimeoutError) as e:
        verdict = b""
        tally.error(f"bulk {fid}: {e!r}")
    tally.t["bulk_ok" if verdict == b"1" else "bulk_bad"] += 1


class UdpOut(asyncio.DatagramProtocol):
    pass


async def udp_flow(fid, tally, stop):
    loop = asyncio.get_running_loop()
    tr, _ = await loop.create_datagram_endpoint(UdpOut, remote_addr=(HOST, port_of(8400)))
    seq = 0
    await asyncio.sleep(random.Random(fid).random())  # spread the flows over the second
    while not stop.is_set():
        tr.sendto(struct.pack(">HI", fid, seq) + random.Random(fid << 32 | seq).randbytes(194))
        tally.t["udp_sent"] += 1
        seq += 1
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
    tr.close()


async def load(wd, flows, nbulk, bulk_bytes, nudp, hold):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = flows + nbulk + nudp + 64
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(need, soft), hard), hard))
    tally = Tally()
    t0 = time.monotonic()
    sem = asyncio.Semaphore(128)
    conns = await asyncio.gather(*(open_flow(i, tally, sem) for i in range(flows)))
    opened = time.monotonic() - t0
    stop = asyncio.Event()
    udp = [asyncio.create_task(udp_flow(i, tally, stop)) for i in range(nudp)]
    with open(os.path.join(wd, "opened"), "w") as f:
        json.dump({"seconds": opened, "flows": tally.t["flows_opened"]}, f)
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(wd, "go")):
        if time.monotonic() > deadline:
            raise SystemExit("no go signal within 120 s")
        await asyncio.sleep(0.1)
    inter = [
        asyncio.create_task(interactive(i, c, tally, stop))
        for i, c in enumerate(conns)
        if c is not None and i % 2 == 0
    ]
    t1 = time.monotonic()
    bulks = asyncio.gather(*(bulk(i, bulk_bytes, tally) for i in range(nbulk)))
    await asyncio.wait_for(bulks, 600)
    tally.t["bulk_seconds"] = time.monotonic() - t1
    await asyncio.sleep(max(0.0, hold - (time.monotonic() - t1)))
    stop.set()
    await asyncio.gather(*inter, *udp)
    await asyncio.gather(*(final(i, c, tally) for i, c in enumerate(conns) if c is not None))
    tally.t["open_seconds"] = opened
    with open(os.path.join(wd, "load.json"), "w") as f:
        json.dump(tally.t, f)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "rtt" and len(sys.argv) == 4:
        asyncio.run(rtt(int(sys.argv[2]), float(sys.argv[3])))
    elif len(sys.argv) >= 2 and sys.argv[1] == "load" and len(sys.argv) == 8:
        wd = sys.argv[2]
        flows, nbulk, bulk_bytes, nudp = (int(x) for x in sys.argv[3:7])
        asyncio.run(load(wd, flows, nbulk, bulk_bytes, nudp, float(sys.argv[7])))
    else:
        raise SystemExit(__doc__)


main()
