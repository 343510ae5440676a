//! Prometheus text metrics over HTTP (`--metrics ADDR`), per gateway and per flow.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::ctx::{Ctx, DropReason};
use crate::flow::Flow;

/// A metric's type in the exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

/// Writes one metric family's HELP and TYPE lines. Counters must be named `..._total`.
fn family(s: &mut String, name: &str, kind: Kind, help: &str) {
    debug_assert_eq!(kind == Kind::Counter, name.ends_with("_total"), "{name}");
    let t = match kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
    };
    let _ = writeln!(
        s,
        "# HELP aerotp_gw_{name} {help}\n# TYPE aerotp_gw_{name} {t}"
    );
}

/// A label value escaped as the exposition format wants (backslash, quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics text of a gateway now (names and meanings: docs/stats.md §Gateway).
pub fn render(ctx: &Ctx) -> String {
    let r = &ctx.reg;
    let mut s = String::new();
    let role = r.role.name();
    let flows = r.snapshot();
    let c = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
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
        ("link_rate_bps", Kind::Gauge, "configured air link rate, bits per second", ctx.sched.total()),
    ];
    for (name, kind, help, v) in gateway {
        family(&mut s, name, kind, help);
        let _ = writeln!(s, "aerotp_gw_{name}{{role=\"{role}\"}} {v}");
    }
    family(
        &mut s,
        "udp_dropped_total",
        Kind::Counter,
        "UDP datagrams this gateway dropped, by reason (each reason logged, at most once per 10 s)",
    );
    for reason in DropReason::ALL {
        let _ = writeln!(
            s,
            "aerotp_gw_udp_dropped_total{{role=\"{role}\",reason=\"{}\"}} {}",
            reason.label(),
            r.dropped(reason)
        );
    }
    per_flow(&mut s, role, &flows);
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
        "flow_rate_bps",
        Kind::Gauge,
        "current rate share, bits per second",
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
fn flow_value(f: &Flow, name: &str) -> String {
    let (st, conn) = {
        let st = f.lock();
        let v = [
            st.end,
            st.base,
            st.in_delivered,
            st.bytes_sent,
            st.rate,
            st.resumes,
        ];
        (v, st.conn.clone())
    };
    let cs = conn.map(|c| c.stats());
    match name {
        "flow_read_bytes_total" => st[0].to_string(),
        "flow_confirmed_bytes_total" => st[1].to_string(),
        "flow_delivered_bytes_total" => st[2].to_string(),
        "flow_sent_bytes_total" => st[3].to_string(),
        "flow_rate_bps" => st[4].to_string(),
        "flow_resumes_total" => st[5].to_string(),
        "flow_srtt_seconds" => cs
            .as_ref()
            .map_or(0.0, |c| c.srtt.as_secs_f64())
            .to_string(),
        _ => cs
            .as_ref()
            .map_or(0, |c| c.sender.tpdus_retransmitted)
            .to_string(),
    }
}

/// The per-flow families: one sample per live TCP flow.
fn per_flow(s: &mut String, role: &str, flows: &[Arc<Flow>]) {
    for (name, kind, help) in FLOW_FAMILIES {
        family(s, name, kind, help);
        for f in flows {
            let v = flow_value(f, name);
            let _ = writeln!(
                s,
                "aerotp_gw_{name}{{role=\"{role}\",flow=\"{:016x}\",class=\"{}\",dest=\"{}\"}} {v}",
                f.id,
                f.class.name(),
                label(&f.dest)
            );
        }
    }
}

/// Serves `GET /metrics` (any path) on `addr` until the gateway is dropped.
pub async fn serve(gw: Arc<Ctx>, addr: SocketAddr) -> Result<SocketAddr> {
    let l = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for metrics on {addr}"))?;
    let local = l.local_addr()?;
    let w = Arc::downgrade(&gw);
    drop(gw);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let Some(gw) = w.upgrade() else { return };
            tokio::spawn(async move {
                let mut req = vec![0u8; 8192];
                let mut n = 0;
                let read = async {
                    while n < req.len() {
                        match s.read(&mut req[n..]).await {
                            Ok(0) | Err(_) => break,
                            Ok(k) => n += k,
                        }
                        if req[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
                let body = render(&gw);
                let resp = format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    Ok(local)
}

/// Fetches a gateway's metrics text (for `aerotp gw stats`).
pub async fn fetch(addr: SocketAddr) -> Result<String> {
    let mut s = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .context("metrics endpoint: timeout")?
        .with_context(|| format!("cannot reach metrics endpoint {addr}"))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: gw\r\n\r\n")
        .await?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .context("metrics endpoint: timeout")??;
    let text = String::from_utf8_lossy(&out);
    Ok(text
        .split_once("\r\n\r\n")
        .map_or(text.to_string(), |(_, b)| b.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(label("host:80"), "host:80");
    }
}
