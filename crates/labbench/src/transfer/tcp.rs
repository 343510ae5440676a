//! Kernel TCP (cubic, reno, bbr) and kernel MPTCP through tokio sockets. An MPTCP socket is a
//! TCP socket opened with `IPPROTO_MPTCP` (262): the same stream API, and the kernel's path
//! manager adds a subflow per address the peer announces (`crate::multipath` sets that up).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout_at;

use super::io::{deadline_of, report_bound, write_blocks, Ready};
use super::spec::Cc;
use crate::payload::{Clock, Sink, Source};

/// `IPPROTO_MPTCP` (linux/in.h); not in the libc crate's constants for every target.
const IPPROTO_MPTCP: i32 = 262;

/// Kernel transport of a stream transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    Tcp,
    Mptcp,
}

impl Stack {
    fn socket(self) -> Result<socket2::Socket> {
        let proto = match self {
            Stack::Tcp => socket2::Protocol::TCP,
            Stack::Mptcp => socket2::Protocol::from(IPPROTO_MPTCP),
        };
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, Some(proto))
            .with_context(|| match self {
                Stack::Tcp => "TCP socket".to_string(),
                Stack::Mptcp => "MPTCP socket (is net.mptcp.enabled = 1?)".to_string(),
            })?;
        s.set_nonblocking(true)?;
        Ok(s)
    }
}

pub(super) async fn recv_tcp(
    addr: SocketAddr,
    stack: Stack,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
) -> Result<Instant> {
    // MPTCP: joins arrive at the addresses the path manager announces, so the listener takes
    // the port on every address (a listener bound to one address refuses them with a reset).
    let bind = match stack {
        Stack::Tcp => addr,
        Stack::Mptcp => SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), addr.port()),
    };
    let bound = stack.socket().and_then(|s| {
        s.set_reuse_address(true)?;
        s.bind(&bind.into())?;
        s.listen(16)?;
        Ok(tokio::net::TcpListener::from_std(s.into())?)
    });
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
    stack: Stack,
    cc: Cc,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let sock = tokio::net::TcpSocket::from_std_stream(stack.socket()?.into());
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
