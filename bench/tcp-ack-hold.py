#!/usr/bin/env python3
"""What a kernel TCP socket acknowledges before its application has taken a byte.

Issue 17 §3 asks the reliable gateway to acknowledge a source's byte only once the
destination has it, and to choose the mechanism by measurement: kernel sockets with the
receive window held to what the egress confirmed, or a user-space TCP on a TUN. This
measures the first: a source sends as fast as it can to a receiver whose application
(the ingress, in the gateway) takes nothing, or peeks without consuming (`MSG_PEEK`, which
leaves the bytes in the kernel), with the receive buffer at the smallest size the kernel
allows. Every 10 ms the source's `tcpi_bytes_acked` (TCP_INFO) is read and set against
what the receiving application consumed. Any positive difference is bytes the source was
told arrived that no application has: the guarantee a held window cannot give.

Loopback only; no root. Prints one JSON line per case:

    python3 bench/tcp-ack-hold.py [--seconds 2]
"""

import argparse
import json
import socket
import struct
import threading
import time

# struct tcp_info (linux/tcp.h): tcpi_bytes_acked is the u64 at byte 120 (Linux >= 4.1).
BYTES_ACKED_OFFSET = 120


def bytes_acked(sock):
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    if len(info) < BYTES_ACKED_OFFSET + 8:
        raise SystemExit("TCP_INFO too short: this kernel has no tcpi_bytes_acked")
    # The counter includes the SYN's one sequence number.
    return struct.unpack_from("<Q", info, BYTES_ACKED_OFFSET)[0] - 1


def case(name, rcvbuf, consume, seconds):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    src = socket.create_connection(listener.getsockname())
    dst, _ = listener.accept()
    consumed = [0]
    stop = threading.Event()

    def app():
        # The receiving application: takes `consume` bytes every 10 ms (0: none), or peeks.
        while not stop.is_set():
            try:
                if consume > 0:
                    dst.settimeout(0.01)
                    consumed[0] += len(dst.recv(consume))
                elif consume < 0:
                    dst.recv(4096, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (BlockingIOError, socket.timeout):
                pass
            time.sleep(0.01)

    t = threading.Thread(target=app)
    t.start()
    src.setblocking(False)
    chunk = bytes(65536)
    sent = 0
    worst = 0
    samples = 0
    end = time.time() + seconds
    next_check = time.time()
    while time.time() < end:
        try:
            sent += src.send(chunk)
        except BlockingIOError:
            time.sleep(0.001)
        if time.time() >= next_check:
            acked = bytes_acked(src)
            worst = max(worst, acked - consumed[0])
            samples += 1
            next_check += 0.01
    stop.set()
    t.join()
    acked = bytes_acked(src)
    print(json.dumps({
        "case": name,
        "so_rcvbuf_asked": rcvbuf,
        "so_rcvbuf_got": dst.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        "sent_into_socket": sent,
        "acked_to_source": acked,
        "consumed_by_app": consumed[0],
        "worst_acked_minus_consumed": worst,
        "checks_every_10ms": samples,
    }))
    for s in (src, dst, listener):
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each case")
    a = ap.parse_args()
    case("takes nothing, smallest buffer", 1, 0, a.seconds)
    case("peeks only (MSG_PEEK), smallest buffer", 1, -1, a.seconds)
    case("takes 1 kB per 10 ms, smallest buffer", 1, 1024, a.seconds)
    case("takes nothing, default buffer", 131072, 0, a.seconds)


if __name__ == "__main__":
    main()
