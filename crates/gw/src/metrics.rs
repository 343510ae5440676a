//! The gateways' Prometheus families (`--metrics ADDR`), per gateway and per flow. Written with
//! and served by `aerotp_net::metrics` (the workspace's one exposition writer and HTTP server);
//! names `aerotp_gw_*`, in the same scheme as the endpoint's (docs/stats.md §Gateway).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use aerotp_net::metrics::{family, sample, serve_with, Kind, Render, Value};
use anyhow::Result;

use crate::ctx::{Ctx, DropReason};
use crate::flow::Flow;

/// Fetches a gateway's metrics text (for `aerotp gw stats`): the endpoint's client, one copy.
pub use aerotp_net::metrics::fetch;

/// The metrics text of a gateway now (names and meanings: docs/stats.md §Gateway).
pub fn render(ctx: &Ctx) -> String {
    let r = &ctx.reg;
    let mut s = String::new();
    let role = r.role.name();
    let flows = r.snapshot();
    let c = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let ep = ctx.ep.stats();
    let gateway = [
        ("flows_active", Kind::Gauge, "TCP flows in progress", flows.len() as u64),
        ("flows_opened_total", Kind::Counter, "TCP flows opened", c(&r.flows_total)),
        ("flows_completed_total", Kind::Counter, "TCP flows completed", c(&r.flows_completed)),
        ("flows_reset_total", Kind::Counter, "TCP flows reset or abandoned", c(&r.flows_reset)),
        ("resumes_total", Kind::Counter, "TCP flow sessions resumed on a new AeroTP connection", c(&r.resumes)),
        ("custody_bytes", Kind::Gauge, "bytes held for the peer, not yet confirmed", c(&ctx.budget.held)),
        ("custody_capacity_bytes", Kind::Gauge, "bound of custody_bytes", ctx.budget.capacity),
        ("udp_in_total", Kind::Counter, "UDP datagrams received from local UDP sockets (ingress: clients; egress: destinations' replies), before any drop", c(&r.udp_in)),
        ("udp_out_total", Kind::Counter, "UDP datagrams written to local UDP sockets (ingress: replies to clients; egress: to destinations)", c(&r.udp_out)),
        ("udp_policed_total", Kind::Counter, "datagram-mode datagrams dropped at the ingress over their class's share of the link", c(&r.udp_policed)),
        ("udp_lost_total", Kind::Counter, "UDP datagrams the air link lost on their way to this gateway (sequence gaps)", c(&r.udp_lost)),
        ("udp_repairs_sent_total", Kind::Counter, "repair datagrams sent on datagram routes that repair (erasure = RATIO)", ep.datagram_repairs_sent),
        ("udp_rebuilt_total", Kind::Counter, "datagram-route fragments the air link lost and repairs rebuilt at this gateway", ep.datagrams_rebuilt),
    ];
    for (name, kind, help, v) in gateway {
        let full = format!("aerotp_gw_{name}");
        family(&mut s, &full, kind, help);
        sample(&mut s, &full, &[("role", role)], v);
    }
    // Prometheus' base unit is bytes (`promtool check metrics` refuses bits).
    let link = "aerotp_gw_link_rate_bytes_per_second";
    family(
        &mut s,
        link,
        Kind::Gauge,
        "air link rate the flows share: the fixed rate, or the cap of discovered ones, bytes per second",
    );
    sample(
        &mut s,
        link,
        &[("role", role)],
        ctx.settings.link.rate as f64 / 8.0,
    );
    let dropped = "aerotp_gw_udp_dropped_total";
    family(
        &mut s,
        dropped,
        Kind::Counter,
        "UDP datagrams this gateway dropped, by reason (each reason logged, at most once per 10 s)",
    );
    for reason in DropReason::ALL {
        let labels = [("role", role), ("reason", reason.label())];
        sample(&mut s, dropped, &labels, r.dropped(reason));
    }
    per_flow(&mut s, role, &flows);
    // The radio's word on the air link (`--dlep`), as the endpoints show it (docs/stats.md).
    let snapshot = ctx.ep.metrics_source().snapshot();
    let radio = aerotp_net::metrics::render_radio(&snapshot, "aerotp_gw_", &[("role", role)]);
    s.push_str(&radio);
    s
}

/// The per-flow families: name, type, help.
const FLOW_FAMILIES: [(&str, Kind, &str); 8] = [
    (
        "flow_read_bytes_total",
        Kind::Counter,
        "bytes read from this side's TCP socket",
    ),
    (
        "flow_confirmed_bytes_total",
        Kind::Counter,
        "bytes the peer confirmed written to its TCP socket",
    ),
    (
        "flow_delivered_bytes_total",
        Kind::Counter,
        "bytes of the peer's direction written to this side's TCP socket",
    ),
    (
        "flow_sent_bytes_total",
        Kind::Counter,
        "bytes sent over AeroTP, resends after a resume included",
    ),
    (
        "flow_rate_bytes_per_second",
        Kind::Gauge,
        "current rate share, bytes per second",
    ),
    (
        "flow_resumes_total",
        Kind::Counter,
        "sessions resumed on a new AeroTP connection",
    ),
    (
        "flow_srtt_seconds",
        Kind::Gauge,
        "smoothed round-trip time of the current connection (0: none)",
    ),
    (
        "flow_retransmissions_total",
        Kind::Counter,
        "TPDUs retransmitted on the current connection (restarts at 0 with a new connection)",
    ),
];

/// The value of the per-flow family `name` for `f`.
fn flow_value(f: &Flow, name: &str) -> Value {
    let (st, conn) = {
        let st = f.lock();
        let v = [
            st.end(),
            st.base(),
            st.in_delivered(),
            st.bytes_sent(),
            st.resumes(),
        ];
        (v, st.conn().cloned())
    };
    let cs = conn.map(|c| c.stats());
    match name {
        "flow_read_bytes_total" => st[0].into(),
        "flow_confirmed_bytes_total" => st[1].into(),
        "flow_delivered_bytes_total" => st[2].into(),
        "flow_sent_bytes_total" => st[3].into(),
        // The pacing rate the endpoint's link share gives the current connection.
        "flow_rate_bytes_per_second" => cs.as_ref().map_or(0.0, |c| c.rate_bps as f64 / 8.0).into(),
        "flow_resumes_total" => st[4].into(),
        "flow_srtt_seconds" => cs.as_ref().map_or(0.0, |c| c.srtt.as_secs_f64()).into(),
        _ => cs
            .as_ref()
            .map_or(0, |c| c.sender.tpdus_retransmitted)
            .into(),
    }
}

/// The per-flow families: one sample per live TCP flow.
fn per_flow(s: &mut String, role: &str, flows: &[Arc<Flow>]) {
    for (name, kind, help) in FLOW_FAMILIES {
        let full = format!("aerotp_gw_{name}");
        family(s, &full, kind, help);
        for f in flows {
            let id = format!("{:016x}", f.id);
            let labels = [
                ("role", role),
                ("flow", id.as_str()),
                ("class", f.class.name()),
                ("dest", f.dest.as_str()),
            ];
            sample(s, &full, &labels, flow_value(f, name));
        }
    }
}

/// Serves `GET /metrics` on `addr` until the gateway is dropped (the server holds the context
/// weakly, so it does not keep the gateway alive).
pub async fn serve(gw: Arc<Ctx>, addr: SocketAddr) -> Result<SocketAddr> {
    let w = Arc::downgrade(&gw);
    drop(gw);
    let render: Render = Arc::new(move || w.upgrade().map(|gw| render(&gw)));
    let server = serve_with(addr, render).await?;
    let local = server.local_addr();
    server.detach();
    Ok(local)
}
