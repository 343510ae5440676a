//! Two endpoints joined by hand in virtual time: datagrams move only when a test moves them,
//! so it can look at either end between any two steps.

use super::{addr_a, addr_b};
use aerotp_proto::{ConnectionConfig, ConnectionHandle, Endpoint, Event};
use std::time::Duration;

/// Everything `e` offers at `now`, one datagram each.
pub fn drain(e: &mut Endpoint, now: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for _ in 0..100_000 {
        let mut buf = Vec::new();
        match e.poll_transmit(now, &mut buf) {
            Some(t) => out.push(buf[..t.len].to_vec()),
            None => return out,
        }
    }
    panic!("an endpoint that never stops sending");
}

/// B listens on `port` with `configs.1`; A opens `n` connections to it with `configs.0`,
/// and set-up datagrams move (1 ms apart) until each is accepted. Returns A's handles and
/// B's, in the same order.
pub fn connect(
    a: &mut Endpoint,
    b: &mut Endpoint,
    port: u16,
    configs: (ConnectionConfig, ConnectionConfig),
    n: usize,
    now: &mut Duration,
) -> (Vec<ConnectionHandle>, Vec<ConnectionHandle>) {
    b.listen(port, configs.1).unwrap();
    let ha: Vec<_> = (0..n)
        .map(|_| a.connect(*now, addr_b(), port, configs.0.clone()).unwrap())
        .collect();
    let mut hb = Vec::new();
    for _ in 0..1000 {
        *now += Duration::from_millis(1);
        a.handle_timeout(*now);
        b.handle_timeout(*now);
        for d in drain(a, *now) {
            b.handle_datagram(*now, addr_a(), &d);
        }
        for d in drain(b, *now) {
            a.handle_datagram(*now, addr_b(), &d);
        }
        while let Some(e) = b.poll_event() {
            if let Event::Accepted(h) = e {
                hb.push(h);
            }
        }
        while a.poll_event().is_some() {}
        if hb.len() == n {
            return (ha, hb);
        }
    }
    panic!("not connected: {} of {n} accepted", hb.len());
}
