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

use aerotp_proto::{ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, Mode};
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
    let mut writer = Writer {
        chunk: vec![0x5Au8; 1 << 20],
        size,
        written: 0,
        closing: false,
    };
    let (mut got, mut datagrams) = (0u64, 0u64);
    let mut rh = None;
    let mut buf = Vec::new();
    // Until the receiver has every byte and the AFIN.
    for turn in 0u64.. {
        assert!(turn < 100_000_000, "transfer stalled at {now:?}");
        writer.feed(&mut a, h);
        let sent = exchange(now, &mut a, a_addr, &mut b, &mut buf);
        let answered = exchange(now, &mut b, b_addr, &mut a, &mut buf);
        datagrams += sent + answered;
        let moved = sent + answered > 0;
        while a.poll_event().is_some() {}
        if read_all(&mut b, &mut rh, &mut got) {
            break;
        }
        now = next_time(now, moved, &a, &b);
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

/// The sending application: writes `size` bytes as fast as the connection takes them, then
/// closes.
struct Writer {
    chunk: Vec<u8>,
    size: u64,
    written: u64,
    closing: bool,
}

impl Writer {
    fn feed(&mut self, a: &mut Endpoint, h: ConnectionHandle) {
        while self.written < self.size {
            let n = (self.size - self.written).min(self.chunk.len() as u64) as usize;
            let took = a.write(h, &self.chunk[..n]).expect("write");
            if took == 0 {
                break;
            }
            self.written += took as u64;
        }
        if self.written == self.size && !self.closing {
            a.close(h).expect("close");
            self.closing = true;
        }
    }
}

/// Every datagram `from` (at `from_addr`) has to send now, handed to `to`; how many.
fn exchange(
    now: Duration,
    from: &mut Endpoint,
    from_addr: SocketAddr,
    to: &mut Endpoint,
    buf: &mut Vec<u8>,
) -> u64 {
    let mut n = 0;
    loop {
        buf.clear();
        if from.poll_transmit(now, buf).is_none() {
            return n;
        }
        to.handle_datagram(now, from_addr, buf);
        n += 1;
    }
}

/// The receiving application: takes the accepted connection and reads what it delivered into
/// `got`; true once it has read the end.
fn read_all(b: &mut Endpoint, rh: &mut Option<ConnectionHandle>, got: &mut u64) -> bool {
    while let Some(e) = b.poll_event() {
        if let Event::Accepted(x) = e {
            *rh = Some(x);
        }
    }
    let Some(r) = *rh else {
        return false;
    };
    while let Ok(Some(d)) = b.read_chunk(r) {
        *got += d.data.len() as u64;
    }
    b.at_eof(r)
}

/// The next virtual time: the earlier endpoint deadline. The engine's deadline contract
/// (`Endpoint::poll_timeout`): after its timers ran and what was due went out, the next
/// deadline lies ahead, so time always moves here.
fn next_time(now: Duration, moved: bool, a: &Endpoint, b: &Endpoint) -> Duration {
    let next = [a.poll_timeout(), b.poll_timeout()]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or_else(|| panic!("no deadline before the end of the transfer at {now:?}"));
    assert!(
        moved || next > now,
        "engine livelock at {now:?}: a deadline that has passed and nothing sent"
    );
    now.max(next)
}
