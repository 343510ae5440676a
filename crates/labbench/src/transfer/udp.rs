//! Plain UDP paced at the link rate; the receiver stops after a second of silence.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use tokio::time::timeout_at;

use super::io::{deadline_of, report_bound, Ready};
use super::spec::UDP_BLOCK;
use crate::payload::{Clock, Sink, Source};

/// Plain UDP: the receiver stops after this long without a datagram.
const UDP_IDLE: Duration = Duration::from_secs(1);

pub(super) async fn recv_udp(
    addr: SocketAddr,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
) -> Result<Instant> {
    let bound = aerotp_net::udp_socket(addr).map(|s| (s, None));
    let sock = report_bound(bound, &format!("bind {addr}"), &ready)?;
    let deadline = deadline_of(cap);
    let mut buf = vec![0u8; 65536];
    loop {
        let wait = match sink.first_arrival {
            None => deadline,
            Some(_) => deadline.min(tokio::time::Instant::now() + UDP_IDLE),
        };
        match timeout_at(wait, sock.recv_from(&mut buf)).await {
            Err(_) => {
                return Ok(sink.last_new.unwrap_or_else(Instant::now));
            }
            Ok(Err(e)) => return Err(e.into()),
            Ok(Ok((n, _))) => {
                sink.datagram(&clock, Instant::now(), &buf[..n]);
                if sink.complete() {
                    return Ok(Instant::now());
                }
            }
        }
    }
}

pub(super) async fn send_udp(
    local: SocketAddr,
    remote: SocketAddr,
    rate_bps: u64,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let sock = aerotp_net::udp_socket(local)?;
    // One IP packet (20 IP + 8 UDP + payload) per block, paced at the link rate.
    let interval = Duration::from_secs_f64((UDP_BLOCK + 28) as f64 * 8.0 / rate_bps as f64);
    let mut next = tokio::time::Instant::now();
    let mut buf = Vec::with_capacity(UDP_BLOCK);
    while !src.done() {
        if next >= deadline {
            bail!("time cap reached while sending");
        }
        tokio::time::sleep_until(next).await;
        buf.clear();
        src.take(&clock, 1, &mut buf);
        sock.send_to(&buf, remote).await?;
        next += interval;
    }
    Ok(())
}
