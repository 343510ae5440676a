//! Kernel TCP (cubic, reno, bbr) through tokio sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout_at;

use super::io::{deadline_of, report_bound, write_blocks, Ready};
use super::spec::Cc;
use crate::payload::{Clock, Sink, Source};

pub(super) async fn recv_tcp(
    addr: SocketAddr,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
) -> Result<Instant> {
    let bound = tokio::net::TcpListener::bind(addr).await;
    let listener = report_bound(bound.map(|l| (l, None)), &format!("bind {addr}"), &ready)?;
    let deadline = deadline_of(cap);
    let (mut s, _) = timeout_at(deadline, listener.accept())
        .await
        .map_err(|_| anyhow!("no connection within the time cap"))??;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => bail!("time cap reached"),
            Ok(Err(e)) => return Err(e.into()),
            Ok(Ok(0)) => return Ok(Instant::now()),
            Ok(Ok(n)) => sink.stream(&clock, Instant::now(), &buf[..n]),
        }
    }
}

pub(super) async fn send_tcp(
    remote: SocketAddr,
    cc: Cc,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let sock = tokio::net::TcpSocket::new_v4()?;
    {
        let r = socket2::SockRef::from(&sock);
        r.set_tcp_congestion(cc.name().as_bytes())
            .with_context(|| format!("TCP_CONGESTION {}", cc.name()))?;
        let got = r.tcp_congestion()?;
        let got = String::from_utf8_lossy(&got);
        if got.trim_end_matches('\0') != cc.name() {
            bail!(
                "asked for TCP congestion control {} but the socket runs {got}",
                cc.name()
            );
        }
    }
    let mut s = timeout_at(deadline, sock.connect(remote))
        .await
        .map_err(|_| anyhow!("time cap reached while connecting"))?
        .context("connect")?;
    write_blocks(&mut s, src, clock, deadline).await?;
    timeout_at(deadline, s.shutdown())
        .await
        .map_err(|_| anyhow!("time cap reached at shutdown"))??;
    // Keep the socket until the receiver has read everything and closed.
    let mut b = [0u8; 64];
    let _ = timeout_at(deadline, s.read(&mut b)).await;
    Ok(())
}
