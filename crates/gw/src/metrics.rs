//! Prometheus text metrics over HTTP (`--metrics ADDR`), per gateway and per flow.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::gateway::Gateway;

/// The metrics text of a gateway now.
pub fn render(gw: &Gateway) -> String {
    let r = &gw.reg;
    let mut s = String::new();
    let role = r.role;
    let g = |s: &mut String, name: &str, help: &str, v: u64| {
        let _ = writeln!(
            s,
            "# HELP aerotp_gw_{name} {help}\n# TYPE aerotp_gw_{name} gauge"
        );
        let _ = writeln!(s, "aerotp_gw_{name}{{role=\"{role}\"}} {v}");
    };
    let flows = r.snapshot();
    // Gateway-wide gauges: (name, help, value).
    let gauges = [
        ("flows_active", "TCP flows in progress", flows.len() as u64),
        (
            "flows_total",
            "TCP flows opened",
            r.flows_total.load(Ordering::Relaxed),
        ),
        (
            "flows_completed",
            "TCP flows completed",
            r.flows_completed.load(Ordering::Relaxed),
        ),
        (
            "flows_reset",
            "TCP flows reset or abandoned",
            r.flows_reset.load(Ordering::Relaxed),
        ),
        (
            "resumes",
            "flow sessions resumed on a new connection",
            r.resumes.load(Ordering::Relaxed),
        ),
        (
            "custody_bytes",
            "bytes held, not yet confirmed",
            gw.budget.held.load(Ordering::Relaxed),
        ),
        (
            "custody_capacity_bytes",
            "custody bound",
            gw.budget.capacity,
        ),
        (
            "udp_in",
            "UDP datagrams taken in",
            r.udp_in.load(Ordering::Relaxed),
        ),
        (
            "udp_out",
            "UDP datagrams given out",
            r.udp_out.load(Ordering::Relaxed),
        ),
        (
            "udp_dropped",
            "UDP datagrams dropped (not allowed, no destination, full send queue)",
            r.udp_dropped.load(Ordering::Relaxed),
        ),
        (
            "udp_policed",
            "UDP datagrams of datagram-mode routes dropped over their class's share of the link",
            r.udp_policed.load(Ordering::Relaxed),
        ),
        (
            "udp_lost",
            "UDP datagrams lost on the air link (sequence gaps seen here, stream-mode flows)",
            r.udp_lost.load(Ordering::Relaxed),
        ),
        (
            "link_rate_bps",
            "configured air link rate",
            gw.sched.total(),
        ),
    ];
    for (name, help, v) in gauges {
        g(&mut s, name, help, v);
    }
    let per = [
        ("flow_bytes_read", "bytes read from this side's TCP socket"),
        (
            "flow_bytes_confirmed",
            "bytes the peer confirmed written to its TCP socket",
        ),
        (
            "flow_bytes_delivered",
            "bytes of the peer's direction written to this side's TCP socket",
        ),
        ("flow_bytes_sent", "bytes sent over AeroTP (with resends)"),
        ("flow_rate_bps", "current rate share"),
        ("flow_resumes", "sessions resumed"),
        ("flow_srtt_us", "smoothed RTT of the current connection"),
        (
            "flow_retransmissions",
            "TPDUs retransmitted on the current connection",
        ),
    ];
    for (name, help) in per {
        let _ = writeln!(
            s,
            "# HELP aerotp_gw_{name} {help}\n# TYPE aerotp_gw_{name} gauge"
        );
        for f in &flows {
            let st = f.lock();
            let conn = f.conn.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let cs = conn.map(|c| c.stats());
            let v = match name {
                "flow_bytes_read" => st.end,
                "flow_bytes_confirmed" => st.base,
                "flow_bytes_delivered" => st.in_delivered,
                "flow_bytes_sent" => st.bytes_sent,
                "flow_rate_bps" => f.rate.load(Ordering::Relaxed),
                "flow_resumes" => st.resumes,
                "flow_srtt_us" => cs.as_ref().map_or(0, |c| c.srtt.as_micros() as u64),
                _ => cs.as_ref().map_or(0, |c| c.sender.tpdus_retransmitted),
            };
            let _ = writeln!(
                s,
                "aerotp_gw_{name}{{role=\"{role}\",flow=\"{:016x}\",class=\"{}\",dest=\"{}\"}} {v}",
                f.id,
                f.class.name(),
                f.dest.replace('"', "")
            );
        }
    }
    s
}

/// Serves `GET /metrics` (any path) on `addr` until the gateway is dropped.
pub async fn serve(gw: Arc<Gateway>, addr: SocketAddr) -> Result<SocketAddr> {
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
