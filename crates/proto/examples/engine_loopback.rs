//! The engine's own cost of a reliable transfer, without sockets: two endpoints joined in memory
//! (no loss, no delay) in virtual time, 1500-byte datagrams, paced at 20 Gbit/s. Deterministic,
//! so `valgrind --tool=callgrind` instruction counts compare engine versions exactly (see
//! docs/results/loopback.md).
//!
//! The one driver that does not run on `aerotp_pair::Pair`, on purpose: it measures the engine
//! alone, and the link model's bookkeeping would add 41 % to the count it exists to measure
//! (callgrind, 100 MB: 1.705 G instructions on `Pair` over an ideal link against 1.212 G here).
//!
//! Usage: `cargo run --release -p aerotp-proto --example engine_loopback -- [MB]` (default 100).

use aerotp_proto::{ConnectionConfig, Endpoint, EndpointConfig, Event, Mode};
use std::net::SocketAddr;
use std::time::Duration;

fn main() {
    let mb: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let size = mb * 1_000_000;
    let a_addr: SocketAddr = "127.0.0.1:5001".parse().expect("address");
    let b_addr: SocketAddr = "127.0.0.1:5002".parse().expect("address");
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    let cfg = ConnectionConfig {
        mode: Mode::Reliable,
        rate_bps: 20_000_000_000,
        mtu: 1500,
        ..Default::default()
    };
    b.listen(1, cfg.clone()).expect("listen");
    let mut now = Duration::ZERO;
    let h = a.connect(now, b_addr, 1, cfg).expect("connect");
    let chunk = vec![0x5Au8; 1 << 20];
    let (mut written, mut got, mut datagrams) = (0u64, 0u64, 0u64);
    let mut closing = false;
    let mut rh = None;
    let mut buf = Vec::new();
    // Until the receiver has every byte and the AFIN.
    for turn in 0u64.. {
        assert!(turn < 100_000_000, "transfer stalled at {now:?}");
        while written < size {
            let n = (size - written).min(chunk.len() as u64) as usize;
            let took = a.write(h, &chunk[..n]).expect("write");
            if took == 0 {
                break;
            }
            written += took as u64;
        }
        if written == size && !closing {
            a.close(h).expect("close");
            closing = true;
        }
        let mut moved = false;
        loop {
            buf.clear();
            if a.poll_transmit(now, &mut buf).is_none() {
                break;
            }
            b.handle_datagram(now, a_addr, &buf);
            datagrams += 1;
            moved = true;
        }
        loop {
            buf.clear();
            if b.poll_transmit(now, &mut buf).is_none() {
                break;
            }
            a.handle_datagram(now, b_addr, &buf);
            datagrams += 1;
            moved = true;
        }
        while let Some(e) = b.poll_event() {
            if let Event::Accepted(x) = e {
                rh = Some(x);
            }
        }
        while a.poll_event().is_some() {}
        if let Some(r) = rh {
            while let Ok(Some(d)) = b.read_chunk(r) {
                got += d.data.len() as u64;
            }
            if b.at_eof(r) {
                break;
            }
        }
        // The engine's deadline contract (`Endpoint::poll_timeout`): after its timers ran and
        // what was due went out, the next deadline lies ahead, so time always moves here.
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or_else(|| panic!("no deadline before the end of the transfer at {now:?}"));
        assert!(
            moved || next > now,
            "engine livelock at {now:?}: a deadline that has passed and nothing sent"
        );
        now = now.max(next);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    let s = a.stats(h).unwrap_or_default();
    println!(
        "{got} of {size} bytes delivered, {datagrams} datagrams, {} TPDUs sent, {} retransmitted, virtual time {:?}",
        s.sender.tpdus_sent, s.sender.tpdus_retransmitted, now
    );
    assert_eq!(got, size, "every byte delivered");
}
