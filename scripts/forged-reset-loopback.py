#!/usr/bin/env python3
"""Forged RST / AFIN (no key) into a live `aerotp send` -> `aerotp recv` transfer on loopback
(issue 39 item 4; docs/results/security.md). A 20 MB reliable transfer at 20 Mb/s; 3 s in,
ports, tag and TPDU numbers are learnt by sniffing lo, TPDUs are forged with
`examples/forge_tpdu` and sent from the other end's address through a raw socket (root):
  blind  200 RSTs each way, random TPDU numbers and timestamps
  inwin  200 RSTs each way, TPDU numbers just above the latest seen, random timestamps
  afin   one empty AFIN 3000 TPDUs ahead of the sender's latest (inside the window)
  none   no forgery
Prints whether the file arrived intact and when and how each end exited.
Build first: cargo build --release -p aerotp && cargo build --release -p aerotp-proto --example forge_tpdu
usage: sudo scripts/forged-reset-loopback.py CASE"""
import os, random, socket, struct, subprocess, sys, threading, time, hashlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AEROTP = os.environ.get("AEROTP", os.path.join(ROOT, "target/release/aerotp"))
FORGE = os.path.join(ROOT, "target/release/examples/forge_tpdu")
case = sys.argv[1]
port = 9400 + random.randint(0, 500)
d = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"aerotp-forged-{case}")
subprocess.run(["rm", "-rf", d]); os.makedirs(d + "/out")
data = os.urandom(20_000_000)
open(d + "/file", "wb").write(data)
seen = {}  # direction -> (udp sport, udp dport, aero header fields)
stop = False

def sniff():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
    s.bind(("lo", 0)); s.settimeout(0.2)
    while not stop:
        try:
            pkt = s.recv(70000)
        except socket.timeout:
            continue
        ip = pkt[14:]
        if len(ip) < 48 or ip[9] != 17:
            continue
        ihl = (ip[0] & 15) * 4
        sp, dp = struct.unpack("!HH", ip[ihl:ihl + 4])
        a = ip[ihl + 8:]
        if len(a) < 20:
            continue
        fl = a[1]; asp, adp = struct.unpack("!HH", a[2:6]); seq, ts = struct.unpack("!II", a[6:14]); tag = a[15]
        key = "to_recv" if dp == port else ("to_send" if sp == port else None)
        if key:
            seen[key] = (sp, dp, asp, adp, seq, ts, tag, fl)
threading.Thread(target=sniff, daemon=True).start()

def raw_send(sport, dport, payload):
    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                      socket.inet_aton("127.0.0.1"), socket.inet_aton("127.0.0.1"))
    r.sendto(iph + udp, ("127.0.0.1", 0))

def forge(kind, asp, adp, seq, ts, tag):
    h = subprocess.run([FORGE, kind, str(asp), str(adp), str(seq & 0xffffffff), str(ts & 0xffffffff), str(tag)],
                       capture_output=True, text=True, check=True).stdout.strip()
    return bytes.fromhex(h)

t0 = time.time()
recv = subprocess.Popen([AEROTP, "recv", "--insecure", "--listen", f"127.0.0.1:{port}", "-o", d + "/out", "--once"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
time.sleep(0.3)
send = subprocess.Popen([AEROTP, "send", "--insecure", "--to", f"127.0.0.1:{port}", "--mode", "reliable", "--rate", "20mbit", d + "/file"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
time.sleep(3.0)
at = time.time()
n = 0
if case != "none":
    sr = seen.get("to_recv"); ss = seen.get("to_send")
    if not sr or not ss:
        print("nothing sniffed", seen); sys.exit(1)
    if case == "blind":
        for k in range(200):
            for (dirn, tgt) in ((sr, "recv"), (ss, "send")):
                sp, dp, asp, adp, seq, ts, tag, fl = dirn
                raw_send(sp, dp, forge("rst", asp, adp, random.getrandbits(32), random.getrandbits(32), tag)); n += 1
    elif case == "inwin":
        for k in range(200):
            sr = seen["to_recv"]; ss = seen["to_send"]
            for dirn in (sr, ss):
                sp, dp, asp, adp, seq, ts, tag, fl = dirn
                raw_send(sp, dp, forge("rst", asp, adp, seq + 1 + k % 4, random.getrandbits(32), tag)); n += 1
            time.sleep(0.005)
    elif case == "afin":
        sp, dp, asp, adp, seq, ts, tag, fl = seen["to_recv"]
        raw_send(sp, dp, forge("afin", asp, adp, seq + 3000, ts, tag)); n += 1
ends = {}
def wait(name, p):
    out, _ = p.communicate(timeout=40)
    ends[name] = (time.time() - at, p.returncode, out.strip().splitlines()[-3:])
for name, p in (("send", send), ("recv", recv)):
    try:
        wait(name, p)
    except subprocess.TimeoutExpired:
        p.kill(); ends[name] = ("no exit within 40 s", None, [])
stop = True
files = os.listdir(d + "/out")
intact = any(open(os.path.join(d, "out", f), "rb").read() == data for f in files if not f.endswith(".partial"))
print(f"case {case}: {n} forged; file intact: {intact}; files {files}")
for k, v in ends.items():
    print(f"  {k}: exit {v[1]} at {v[0] if isinstance(v[0], str) else round(v[0], 2)} s after the forgery: {v[2]}")
# The 20 MB file and what arrived are this run's only: nothing is left behind.
subprocess.run(["rm", "-rf", d])
