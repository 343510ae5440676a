//! The silence (outage) timer in virtual time: silence counts only while data is unanswered.
//! A sparse connection — one small message every 2 s, echoed by the peer, whose confirmed
//! acknowledgement is held `CONFIRM_WAIT` (2 ms) behind the echo, as between the gateways —
//! declares no outage and repeats nothing; a link cut under a sparse connection and under a
//! busy one is still declared an outage within about the silence threshold of the first
//! TPDU left unanswered. Two endpoints over a 10 ms link whose filter drops what the test
//! says (`harness::filtered`).

mod harness;

use aerotp_proto::{ConnectionHandle, Endpoint, EndpointConfig, ErrorControl, Event, Mode};
use harness::addr_b;
use harness::confirmed;
use harness::filtered;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

const DELAY: Duration = Duration::from_millis(10);
const PORT: u16 = 7;
/// A gateway's interactive flow: one 100-byte message every 2 s.
const INTERVAL: Duration = Duration::from_secs(2);
const MESSAGE: usize = 100;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A writes what the test asks; B's application reads, confirms and echoes everything back
/// at once; A reads and confirms the echoes. `cut_from`: from then on every datagram either
/// way is lost.
struct Echo {
    net: filtered::Link,
    h: ConnectionHandle,
    hb: Option<ConnectionHandle>,
    a_read: u64,
    b_read: u64,
    cut_from: Rc<Cell<Duration>>,
    /// When A's outage count first went up.
    a_outage_at: Option<Duration>,
    /// Bytes A's application still has to write, written as the send buffer frees.
    a_pending: usize,
}

impl Echo {
    fn new(mode: Mode) -> Echo {
        let mut a = Endpoint::new(EndpointConfig::default(), 1);
        let mut b = Endpoint::new(EndpointConfig::default(), 2);
        b.listen(PORT, confirmed(mode)).unwrap();
        let h = a
            .connect(Duration::ZERO, addr_b(), PORT, confirmed(mode))
            .unwrap();
        let mut net = filtered::Link::new(a, b, DELAY);
        let cut_from = Rc::new(Cell::new(Duration::MAX));
        let cut = cut_from.clone();
        net.drop = Box::new(move |now, _, _| now >= cut.get());
        Echo {
            net,
            h,
            hb: None,
            a_read: 0,
            b_read: 0,
            cut_from,
            a_outage_at: None,
            a_pending: 0,
        }
    }

    fn write(&mut self, bytes: usize) {
        let data = vec![0x5a; bytes];
        assert_eq!(self.net.a.write(self.h, &data).unwrap(), bytes);
    }

    /// A's application writes `bytes` more than its send buffer takes at once: the rest as
    /// it frees (`applications`).
    fn write_backlog(&mut self, bytes: usize) {
        self.a_pending += bytes;
        self.write_pending();
    }

    fn write_pending(&mut self) {
        let data = vec![0x5a; self.a_pending.min(1 << 16)];
        while self.a_pending > 0 {
            let n = self
                .net
                .a
                .write(self.h, &data[..self.a_pending.min(data.len())]);
            match n.unwrap() {
                0 => break,
                n => self.a_pending -= n,
            }
        }
    }

    fn applications(&mut self) {
        let now = self.net.now;
        while let Some(e) = self.net.b.poll_event() {
            if let Event::Accepted(h) = e {
                self.hb = Some(h);
            }
        }
        while self.net.a.poll_event().is_some() {}
        self.write_pending();
        let mut buf = vec![0u8; 65536];
        if let Some(hb) = self.hb {
            while let Ok(k @ 1..) = self.net.b.read(hb, &mut buf) {
                self.b_read += k as u64;
                self.net.b.confirm(hb, now, self.b_read, false).unwrap();
                assert_eq!(self.net.b.write(hb, &buf[..k]).unwrap(), k, "echo");
            }
        }
        while let Ok(k @ 1..) = self.net.a.read(self.h, &mut buf) {
            self.a_read += k as u64;
            self.net.a.confirm(self.h, now, self.a_read, false).unwrap();
        }
        let outages = self.net.a.stats(self.h).map_or(0, |s| s.outages);
        if outages > 0 {
            self.a_outage_at.get_or_insert(now);
        }
    }

    /// Runs until `limit` of virtual time.
    fn run(&mut self, limit: Duration) {
        for _ in 0..2_000_000 {
            self.applications();
            self.net.transmit(|_, _, _| {});
            if !self.net.advance_within(limit) {
                self.applications();
                return;
            }
        }
        panic!("no end by {limit:?}");
    }

    fn stats_a(&self) -> aerotp_proto::ConnectionStats {
        self.net.a.stats(self.h).expect("A's connection lives")
    }

    fn stats_b(&self) -> aerotp_proto::ConnectionStats {
        self.net
            .b
            .stats(self.hb.expect("accepted"))
            .expect("B's connection lives")
    }
}

/// One message every 2 s for a minute, each echoed 2 ms ahead of its acknowledgement: no
/// outage, no outage probe, no timeout and no repeat at either end. Counting silence from the
/// last TPDU heard (2 s before each message) made every message an outage the moment it
/// left, and the echo, heard first, then resent it (docs/results/gw.md).
#[test]
fn a_sparse_echoed_connection_declares_no_outage_and_repeats_nothing() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let mut e = Echo::new(mode);
        let messages = 30u32;
        for k in 0..messages {
            e.run(INTERVAL * k);
            e.write(MESSAGE);
        }
        e.run(INTERVAL * messages);
        let total = u64::from(messages) * MESSAGE as u64;
        assert_eq!(e.b_read, total, "{mode}: B read");
        assert_eq!(e.a_read, total, "{mode}: A read the echoes");
        let (a, b) = (e.stats_a(), e.stats_b());
        assert_eq!(e.net.a.peer_delivered(e.h), Some(total), "{mode}");
        for (side, s) in [("A", &a), ("B", &b)] {
            let what = format!(
                "{mode}, {side}: outages {}, probes {}, timeouts {}, repeats {} of {} TPDUs",
                s.outages,
                s.sender.probes,
                s.sender.timeouts,
                s.sender.tpdus_retransmitted,
                s.sender.tpdus_sent
            );
            assert_eq!(s.outages, 0, "{what}");
            assert_eq!(s.sender.probes, 0, "{what}");
            assert_eq!(s.sender.timeouts, 0, "{what}");
            assert_eq!(s.sender.tpdus_retransmitted, 0, "{what}");
        }
    }
}

/// The silence threshold as the engine computes it, given the RTO before any backoff: at
/// least twice the RTO and the mode's floor (`ErrorControl::min_silence`: 100 ms, 600 ms in
/// near-reliable, whose periodic ACK may wait 200 ms), and at most twice the RTO after its
/// one doubling (a timeout of the unanswered TPDU before the threshold doubles it).
fn threshold_bounds(mode: Mode, rto: Duration) -> (Duration, Duration) {
    let floor = ErrorControl::for_mode(mode).min_silence;
    ((rto * 2).max(floor), (rto * 4).max(floor))
}

/// The link is cut one second after a message of a sparse connection: the next message is
/// the first TPDU unanswered, and the outage is declared the silence threshold after it —
/// not at once (its last TPDU heard is 2 s old), and not later.
#[test]
fn a_cut_under_a_sparse_connection_is_an_outage_a_threshold_after_the_next_message() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let mut e = Echo::new(mode);
        for k in 0..5 {
            e.run(INTERVAL * k);
            e.write(MESSAGE);
        }
        let cut = INTERVAL * 4 + ms(1_000);
        e.cut_from.set(cut);
        let sent = INTERVAL * 5;
        e.run(sent);
        assert_eq!(
            e.a_outage_at, None,
            "{mode}: an outage before any data was unanswered"
        );
        let rto = e.stats_a().rto;
        e.write(MESSAGE);
        e.run(sent + ms(3_000));
        let at = e
            .a_outage_at
            .unwrap_or_else(|| panic!("{mode}: no outage within 3 s of the cut"));
        let (low, high) = threshold_bounds(mode, rto);
        let took = at - sent;
        eprintln!("{mode}: outage {took:?} after the first unanswered TPDU, RTO {rto:?}");
        assert!(
            took >= low && took <= high + ms(1),
            "{mode}: outage {took:?} after the first unanswered TPDU, RTO {rto:?}: \
             expected {low:?}..{high:?}"
        );
        assert_eq!(e.stats_a().outages, 1, "{mode}");
    }
}

/// A bulk transfer whose link is cut mid-flight: the first unanswered TPDU goes right after
/// the last acknowledgement heard, so the outage is declared within the silence threshold of
/// the last acknowledgement (sent before the cut, heard one delay after it), as before the
/// silence timer counted from the first unanswered TPDU.
#[test]
fn a_cut_under_a_busy_connection_is_an_outage_a_threshold_after_the_last_feedback() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let mut e = Echo::new(mode);
        e.write_backlog(2_000_000);
        let cut = ms(800);
        e.cut_from.set(cut);
        e.run(cut);
        let rto = e.stats_a().rto;
        assert!(
            e.stats_a().sender.tpdus_sent > 100 && e.a_outage_at.is_none(),
            "{mode}: not busy before the cut"
        );
        e.run(cut + ms(3_000));
        let at = e
            .a_outage_at
            .unwrap_or_else(|| panic!("{mode}: no outage within 3 s of the cut"));
        let (_, high) = threshold_bounds(mode, rto);
        let took = at - cut;
        eprintln!("{mode}: outage {took:?} after the cut, RTO {rto:?}");
        assert!(
            took <= high + DELAY + ms(1),
            "{mode}: outage {took:?} after the cut, RTO {rto:?}: expected at most {:?}",
            high + DELAY
        );
    }
}
