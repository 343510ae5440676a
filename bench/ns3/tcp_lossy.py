#!/usr/bin/env python3
"""ns-3 peers of the AeroTP papers' lossy-link comparison (seeds 000/002 §IV-C/D, 004).

Topology (all point-to-point, 1500-byte MTU):

    A --10 Gb/s-- R1 ==5 Mb/s, one-way delay D, RateErrorModel(BER, bit units)== R2 --10 Gb/s-- B

A runs a BulkSend of --size bytes over TCP to a PacketSink on B, with one of:

  newreno   ns3::TcpNewReno          (the papers' baseline)
  westwood  ns3::TcpWestwoodPlus     (ns-3 3.44 has only Westwood+; the papers used Westwood)
  vegas     ns3::TcpVegas            (STAND-IN for SCPS-TP: SCPS-TP uses Vegas congestion
                                      control, but its corruption/outage handling, SNACK and
                                      header compression are not modelled in ns-3)

Every figure printed or written comes from an ns-3 run; see docs/results/ns3.md for the
definitions of the columns and the choices (error model in both directions by default,
no SACK + classic NewReno recovery by default, DropTail 100-packet device queues, no qdisc).
"""

import argparse
import json
import math
import os
import sys
import time

VARIANTS = {
    "newreno": ("tcp-newreno", "ns3::TcpNewReno"),
    "westwood": ("tcp-westwood+", "ns3::TcpWestwoodPlus"),
    "vegas": ("tcp-vegas", "ns3::TcpVegas"),
}
DEFAULT_BERS = [0, 1e-8, 1e-7, 1e-6, 1e-5, 2.5e-5, 3.5e-5, 5e-5, 7.5e-5, 1e-4]
CSV_COLUMNS = [
    "protocol", "ber", "delay_s", "run", "delivered_bytes", "goodput_bps",
    "mean_delay_s", "overhead_bytes", "complete", "elapsed_s",
]
MSS = 1448  # 1500 B IP packet = 20 IP + 20 TCP + 12 timestamp option + 1448 payload
PORT = 50000

# C++ trace sinks (compiled once by cppyy): Python callbacks per packet would be slow.
_CPP = r"""
#include <map>
namespace aerons {
using namespace ns3;
struct Seg { double firstTx; uint32_t len; };
static std::string g_ccName;
static double g_closedAt = -1.0;   // sender socket reached CLOSED (finished or gave up)
static double g_lastTx = -1.0;     // last segment the sender's TCP transmitted
static uint64_t g_linkBytes = 0;     // bytes handed to the 5 Mb/s link, both directions
static uint64_t g_linkPackets = 0;
static uint64_t g_rxBytes = 0;       // in-order bytes delivered to the sink application
static double g_lastRx = -1.0;       // time the last byte reached the application
static double g_firstRx = -1.0;
static std::map<uint32_t, Seg> g_segs;  // first transmission of each data segment by seq
static bool g_haveBase = false;
static uint32_t g_base = 0;             // seq of the first data byte
static uint64_t g_acctOff = 0;          // segments below this offset are accounted
static double g_delaySum = 0.0;
static uint64_t g_delayCount = 0;

void Reset() {
  g_linkBytes = 0; g_linkPackets = 0; g_rxBytes = 0; g_lastRx = -1.0; g_firstRx = -1.0;
  g_segs.clear(); g_haveBase = false; g_base = 0; g_acctOff = 0;
  g_delaySum = 0.0; g_delayCount = 0; g_ccName.clear(); g_closedAt = -1.0; g_lastTx = -1.0;
}
void OnLinkTx(Ptr<const Packet> p) { g_linkBytes += p->GetSize(); g_linkPackets++; }
void OnTcpTx(Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase> s) {
  uint32_t len = p->GetSize();
  g_lastTx = Simulator::Now().GetSeconds();
  if (len == 0) return;
  uint32_t seq = h.GetSequenceNumber().GetValue();
  if (!g_haveBase) { g_haveBase = true; g_base = seq; }
  uint32_t off = seq - g_base;
  if (g_segs.find(off) == g_segs.end()) {
    g_segs[off] = Seg{Simulator::Now().GetSeconds(), len};
  }
}
void OnSinkRx(Ptr<const Packet> p, const Address& a) {
  double now = Simulator::Now().GetSeconds();
  if (g_firstRx < 0) g_firstRx = now;
  g_rxBytes += p->GetSize();
  g_lastRx = now;
  // every segment whose last byte is now delivered in order: delay = now - first tx
  while (true) {
    auto it = g_segs.lower_bound(g_acctOff);
    if (it == g_segs.end() || (uint64_t)it->first + it->second.len > g_rxBytes) break;
    g_delaySum += now - it->second.firstTx;
    g_delayCount++;
    g_acctOff = (uint64_t)it->first + it->second.len;
  }
}
void OnState(TcpSocket::TcpStates_t from, TcpSocket::TcpStates_t to) {
  if (to == TcpSocket::CLOSED && g_closedAt < 0) g_closedAt = Simulator::Now().GetSeconds();
}
double ClosedAt() { return g_closedAt; }
double LastTx() { return g_lastTx; }
void HookSender(Ptr<Application> app) {
  Ptr<Socket> s = DynamicCast<BulkSendApplication>(app)->GetSocket();
  if (!s) return;
  s->TraceConnectWithoutContext("Tx", MakeCallback(&OnTcpTx));
  s->TraceConnectWithoutContext("State", MakeCallback(&OnState));
  PointerValue cc;
  s->GetAttribute("CongestionOps", cc);
  g_ccName = cc.Get<Object>()->GetInstanceTypeId().GetName();
}
std::string CcName() { return g_ccName; }
void Attach(Ptr<NetDevice> l1, Ptr<NetDevice> l2, Ptr<Application> sink,
            Ptr<Application> src, double srcStart) {
  Reset();
  l1->TraceConnectWithoutContext("PhyTxBegin", MakeCallback(&OnLinkTx));
  l2->TraceConnectWithoutContext("PhyTxBegin", MakeCallback(&OnLinkTx));
  sink->TraceConnectWithoutContext("Rx", MakeCallback(&OnSinkRx));
  // BulkSend creates its socket in StartApplication (and sends the SYN there); data
  // segments wait for the SYN-ACK, so hooking 1 ns later sees every data segment.
  Simulator::Schedule(Seconds(srcStart) + NanoSeconds(1), &HookSender, src);
}
uint64_t SinkTotalRx(Ptr<Application> a) { return DynamicCast<PacketSink>(a)->GetTotalRx(); }
uint64_t LinkBytes() { return g_linkBytes; }
uint64_t LinkPackets() { return g_linkPackets; }
uint64_t RxBytes() { return g_rxBytes; }
double LastRx() { return g_lastRx; }
double DelaySum() { return g_delaySum; }
uint64_t DelayCount() { return g_delayCount; }
}
"""

_ns = None


def load_ns():
    """Import the ns-3 bindings (slow the first time) and compile the trace sinks."""
    global _ns
    if _ns is None:
        from ns import ns  # noqa: F401  (pip package ns3)
        ns.cppyy.cppdef(_CPP)
        _ns = ns
    return _ns


def run_one(variant, ber, delay_s, run, size, cap, forward_only=False, sack=False,
            buf=131072, seed=1):
    """One ns-3 simulation; returns a dict with the CSV columns."""
    ns = load_ns()
    cpp = ns.cppyy.gbl.aerons
    name, tid = VARIANTS[variant]

    ns.RngSeedManager.SetSeed(seed)
    ns.RngSeedManager.SetRun(run)
    # Auto-assigned stream numbers count up across simulations in one process; reset them
    # so a run's result depends only on (seed, run, parameters), not on what ran before.
    ns.RngSeedManager.ResetNextStreamIndex()
    ns.Ipv4AddressGenerator.Reset()
    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue(tid))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(MSS))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(buf))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(buf))
    ns.Config.SetDefault("ns3::TcpSocketBase::Sack", ns.BooleanValue(sack))
    ns.Config.SetDefault(
        "ns3::TcpL4Protocol::RecoveryType",
        ns.StringValue("ns3::TcpPrrRecovery" if sack else "ns3::TcpClassicRecovery"))

    nodes = ns.NodeContainer()
    nodes.Create(4)  # 0 = A, 1 = R1, 2 = R2, 3 = B
    lan = ns.PointToPointHelper()
    lan.SetDeviceAttribute("DataRate", ns.StringValue("10Gbps"))
    lan.SetChannelAttribute("Delay", ns.TimeValue(ns.Seconds(0)))
    lossy = ns.PointToPointHelper()
    lossy.SetDeviceAttribute("DataRate", ns.StringValue("5Mbps"))
    lossy.SetChannelAttribute("Delay", ns.TimeValue(ns.Seconds(delay_s)))
    # Device queues: DropTail, 100 packets (the p2p default); no traffic-control qdisc below.
    for h in (lan, lossy):
        h.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue("100p"))

    d_a = lan.Install(nodes.Get(0), nodes.Get(1))
    d_l = lossy.Install(nodes.Get(1), nodes.Get(2))
    d_b = lan.Install(nodes.Get(2), nodes.Get(3))

    stack = ns.InternetStackHelper()
    stack.Install(nodes)
    addr = ns.Ipv4AddressHelper()
    ifaces = []
    for i, d in enumerate((d_a, d_l, d_b)):
        addr.SetBase(ns.Ipv4Address(f"10.0.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        ifaces.append(addr.Assign(d))
    tch = ns.TrafficControlHelper()
    for d in (d_a, d_l, d_b):
        tch.Uninstall(d)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    # Bit errors on the lossy link: a receive error model on R2 (forward, data) and,
    # unless forward_only, on R1 (reverse, ACKs).
    ems = []
    targets = [d_l.Get(1)] if forward_only else [d_l.Get(1), d_l.Get(0)]
    for i, dev in enumerate(targets):
        em = ns.CreateObject[ns.RateErrorModel]()
        em.SetUnit(ns.RateErrorModel.ERROR_UNIT_BIT)
        em.SetRate(float(ber))
        uv = ns.CreateObject[ns.UniformRandomVariable]()
        uv.SetStream(i)  # forward = stream 0, reverse = stream 1 (substream = RngRun)
        em.SetRandomVariable(uv)
        dev.SetAttribute("ReceiveErrorModel", ns.PointerValue(em))
        ems.append((em, uv))

    sink_h = ns.PacketSinkHelper(
        "ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), PORT).ConvertTo())
    sink_apps = sink_h.Install(nodes.Get(3))
    sink_apps.Start(ns.Seconds(0))
    src_h = ns.BulkSendHelper(
        "ns3::TcpSocketFactory", ns.InetSocketAddress(ifaces[2].GetAddress(1), PORT).ConvertTo())
    src_h.SetAttribute("MaxBytes", ns.UintegerValue(size))
    src_h.SetAttribute("SendSize", ns.UintegerValue(MSS))
    src_apps = src_h.Install(nodes.Get(0))
    start = 0.0
    src_apps.Start(ns.Seconds(start))

    cpp.Attach(d_l.Get(0), d_l.Get(1), sink_apps.Get(0), src_apps.Get(0), start)
    ns.Simulator.Stop(ns.Seconds(cap))
    ns.Simulator.Run()

    delivered = int(cpp.SinkTotalRx(sink_apps.Get(0)))  # PacketSink total rx
    if delivered != int(cpp.RxBytes()):
        raise RuntimeError(f"sink trace saw {int(cpp.RxBytes())} B, PacketSink {delivered} B")
    link = int(cpp.LinkBytes())
    last = float(cpp.LastRx())
    complete = delivered >= size
    # Goodput denominator: first send (SYN at `start`) to the last byte at the sink for a
    # complete transfer; for an incomplete one, the whole time it was given (the cap), so a
    # connection that gives up early is not credited with its early rate.
    elapsed = (last - start) if complete else (cap - start)
    goodput = delivered * 8 / elapsed if elapsed > 0 else 0.0
    closed_at = float(cpp.ClosedAt())
    last_tx = float(cpp.LastTx())
    cc = str(cpp.CcName())
    if cc != tid:
        raise RuntimeError(f"sender socket runs {cc!r}, expected {tid!r}")
    dcount = int(cpp.DelayCount())
    mean_delay = float(cpp.DelaySum()) / dcount if dcount else float("nan")
    ns.Simulator.Destroy()
    del ems
    return {
        "protocol": name,
        "ber": float(ber),
        "delay_s": float(delay_s),
        "run": run,
        "delivered_bytes": delivered,
        "goodput_bps": goodput,
        "mean_delay_s": mean_delay,
        "overhead_bytes": link - delivered,
        "complete": complete,
        "elapsed_s": elapsed,
        # not a CSV column: when the sender's socket closed (NaN: still open at the cap);
        # closed while incomplete = TCP gave up (retry limits).
        "closed_at_s": closed_at if closed_at >= 0 else float("nan"),
        "last_tx_s": last_tx,
    }


def _fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v) if v == 0 or abs(v) < 1e-3 else f"{v:.6g}"
    return str(v)


def aggregate(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["protocol"], r["delay_s"], r["ber"]), []).append(r)
    out = []
    for (proto, delay, ber), rs in groups.items():
        delays = [r["mean_delay_s"] for r in rs if not math.isnan(r["mean_delay_s"])]
        n = len(rs)
        out.append({
            "protocol": proto,
            "ber": ber,
            "delay_s": delay,
            "runs": n,
            "complete_runs": sum(1 for r in rs if r["complete"]),
            "delivered_bytes": sum(r["delivered_bytes"] for r in rs) / n,
            "goodput_bps": sum(r["goodput_bps"] for r in rs) / n,
            "mean_delay_s": sum(delays) / len(delays) if delays else None,
            "overhead_bytes": sum(r["overhead_bytes"] for r in rs) / n,
        })
    return out


def print_table(summary, f=sys.stdout):
    hdr = (f"{'protocol':<14} {'delay_s':>7} {'ber':>8} {'runs':>4} {'compl':>5} "
           f"{'delivered_B':>11} {'goodput_kbps':>12} {'delay_ms':>9} {'overhead_B':>10}")
    print(hdr, file=f)
    for s in summary:
        d = "-" if s["mean_delay_s"] is None else f"{s['mean_delay_s'] * 1e3:.1f}"
        print(f"{s['protocol']:<14} {s['delay_s']:>7g} {s['ber']:>8g} {s['runs']:>4} "
              f"{s['complete_runs']:>5} {s['delivered_bytes']:>11.0f} "
              f"{s['goodput_bps'] / 1e3:>12.1f} {d:>9} {s['overhead_bytes']:>10.0f}", file=f)


def parse_size(s):
    s = s.strip()
    mult = {"kib": 1024, "mib": 1 << 20, "kb": 1000, "mb": 1000000, "k": 1000, "m": 1000000,
            "b": 1}
    low = s.lower()
    for suf in sorted(mult, key=len, reverse=True):
        if low.endswith(suf):
            return int(float(low[: -len(suf)]) * mult[suf])
    return int(float(s))


def parse_floats(s):
    return [float(x) for x in s.split(",") if x.strip()]


def parse_delay(s):
    s = s.strip().lower()
    if s.endswith("ms"):
        return float(s[:-2]) / 1e3
    if s.endswith("s"):
        return float(s[:-1])
    return float(s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ber", type=parse_floats, default=DEFAULT_BERS,
                    help="comma-separated BER list (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=20, help="runs per point (RngRun 1..N)")
    ap.add_argument("--delay", type=parse_delay, default=0.010,
                    help="one-way delay of the lossy link, seconds or '10ms' (default 10ms)")
    ap.add_argument("--delays", type=lambda s: [parse_delay(x) for x in s.split(",") if x],
                    default=None, help="delay sweep, e.g. 0,10ms,50ms,100ms,300ms,500ms "
                    "(overrides --delay)")
    ap.add_argument("--size", type=parse_size, default=1000000,
                    help="bytes to transfer: 1000000, 1MB, 100kB, 1MiB (default 1 MB = 1e6)")
    ap.add_argument("--cap", type=float, default=120.0, help="simulated time cap, s")
    ap.add_argument("--variants", default="newreno,westwood,vegas",
                    help="comma list of newreno, westwood (Westwood+), vegas (SCPS-TP stand-in)")
    ap.add_argument("--forward-only", action="store_true",
                    help="bit errors on the data direction only (default: both directions)")
    ap.add_argument("--sack", action="store_true",
                    help="enable SACK + PRR recovery (ns-3 3.44 defaults); default off: "
                    "plain NewReno-style recovery as in the papers")
    ap.add_argument("--buf", type=parse_size, default=131072,
                    help="TCP send/receive buffer bytes (ns-3 default 131072)")
    ap.add_argument("--seed", type=int, default=1, help="RngSeed (runs vary RngRun)")
    ap.add_argument("--out", help="CSV path for per-run rows")
    ap.add_argument("--json", action="store_true",
                    help="print the summary as JSON lines (keys as `aerotp sim --json`)")
    ap.add_argument("--quiet", action="store_true", help="no per-run progress on stderr")
    a = ap.parse_args(argv)

    variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    delays = a.delays if a.delays else [a.delay]

    t0 = time.time()
    load_ns()
    t_import = time.time() - t0
    rows = []
    out = None
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        out = open(a.out, "w")
        out.write(",".join(CSV_COLUMNS) + "\n")
    for v in variants:
        for d in delays:
            for ber in a.ber:
                for run in range(1, a.runs + 1):
                    ts = time.time()
                    r = run_one(v, ber, d, run, a.size, a.cap, forward_only=a.forward_only,
                                sack=a.sack, buf=a.buf, seed=a.seed)
                    rows.append(r)
                    if out:
                        out.write(",".join(_fmt(r[c]) for c in CSV_COLUMNS) + "\n")
                        out.flush()
                    if not a.quiet:
                        print(f"{r['protocol']} delay={d:g} ber={ber:g} run={run}: "
                              f"{r['delivered_bytes']} B, {r['goodput_bps'] / 1e3:.1f} kb/s, "
                              f"complete={r['complete']} closed_at={r['closed_at_s']:.2f} "
                              f"last_tx={r['last_tx_s']:.2f} "
                              f"({time.time() - ts:.2f} s wall)",
                              file=sys.stderr)
    if out:
        out.close()
    summary = aggregate(rows)
    if a.json:
        for s in summary:
            print(json.dumps(s))
    else:
        print_table(summary)
    print(f"wall time: {time.time() - t0:.1f} s (ns-3 import {t_import:.1f} s), "
          f"{len(rows)} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
