//! AeroTP through `aerotp-net`, in any mode and FEC setting.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aerotp_net::{ConnectionConfig, EndpointConfig, FecSetting, Mode};
use anyhow::{anyhow, bail, Result};
use tokio::time::timeout_at;

use super::io::{deadline_of, write_blocks, Ready, CLOSE_GRACE};
use super::spec::AeroStats;
use crate::payload::{Clock, Sink, Source};

fn aero_config(mode: Mode, fec: FecSetting, rate_bps: u64) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps,
        fec,
        ..ConnectionConfig::with_mode(mode)
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn recv_aero(
    addr: SocketAddr,
    mode: Mode,
    fec: FecSetting,
    rate_bps: u64,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
    rx_stats: &mut Option<aerotp_net::ConnectionStats>,
) -> Result<Instant> {
    let ep = match aerotp_net::Endpoint::bind(addr, EndpointConfig::default()).and_then(|ep| {
        ep.listen(aerotp_net::DEFAULT_PORT, aero_config(mode, fec, rate_bps))?;
        Ok(ep)
    }) {
        Ok(ep) => {
            let _ = ready.send(Ok(None));
            ep
        }
        Err(e) => {
            let msg = e.to_string();
            let _ = ready.send(Err(anyhow!("AeroTP endpoint on {addr}: {msg}")));
            bail!("AeroTP endpoint on {addr}: {msg}");
        }
    };
    let deadline = deadline_of(cap);
    let conn = timeout_at(deadline, ep.accept())
        .await
        .map_err(|_| anyhow!("no connection within the time cap"))?
        .ok_or_else(|| anyhow!("endpoint stopped"))?;
    let result = loop {
        match timeout_at(deadline, conn.read_chunk()).await {
            Err(_) => break Err(anyhow!("time cap reached")),
            Ok(Err(e)) => break Err(anyhow::Error::from(e)),
            Ok(Ok(None)) => break Ok(Instant::now()),
            Ok(Ok(Some(d))) => sink.stream(&clock, Instant::now(), &d.data),
        }
    };
    if result.is_ok() {
        // Close our (empty) half and let the close handshake finish, outside the measured
        // time: the sender's `finish` completes when both halves are closed.
        let _ = tokio::time::timeout(CLOSE_GRACE, conn.finish()).await;
    }
    *rx_stats = Some(conn.stats());
    result
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn send_aero(
    local: SocketAddr,
    remote: SocketAddr,
    extra: &[SocketAddr],
    mode: Mode,
    fec: FecSetting,
    rate_bps: u64,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
    aero: &mut Option<AeroStats>,
) -> Result<()> {
    let ep = aerotp_net::Endpoint::bind(local, EndpointConfig::default())?;
    let mut conn = ep.connect(
        remote,
        aerotp_net::DEFAULT_PORT,
        aero_config(mode, fec, rate_bps),
    )?;
    for &p in extra {
        conn.add_path(p)?;
    }
    let w = write_blocks(&mut conn, src, clock, deadline).await;
    let report = match w {
        Ok(()) => timeout_at(deadline, conn.finish()).await.ok(),
        Err(_) => None,
    };
    let st = conn.stats();
    *aero = Some(AeroStats {
        outcome: report
            .as_ref()
            .map_or_else(|| "time cap".to_owned(), |r| format!("{:?}", r.outcome)),
        guarantee_met: report.as_ref().is_some_and(|r| r.guarantee_met),
        tpdus_sent: st.sender.tpdus_sent,
        tpdus_retransmitted: st.sender.tpdus_retransmitted,
        timeouts: st.sender.timeouts,
        probes: st.sender.probes,
        nacks_received: st.sender.nacks_received,
        fec_parity: st.fec_parity,
        measured_ber: 0.0,
        rx_corrected: 0,
        rx_corrupted: 0,
        srtt_ms: st.srtt.as_secs_f64() * 1e3,
        outages: st.outages,
    });
    if report.is_none() {
        conn.abort("time cap");
    }
    w
}
