//! Confirmed delivery (`ConnectionConfig::confirm_delivery`, docs/spec.md §4) in virtual
//! time: the sender hears only what the receiving application confirmed, its half ends only
//! once the end is confirmed, a lost final confirmation is asked for again (from the live
//! connection, and from the tombstone after the receiver released it), and `confirm` is
//! clamped. Two endpoints over a fixed-delay link with a filter that drops chosen datagrams.

use aerotp_proto::{
    CloseOutcome, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, EndpointError,
    Event, Mode,
};
use aerotp_wire::Flags;
use std::time::Duration;

mod harness;

use harness::addr_b;
use harness::confirmed;
use harness::filtered;

const DELAY: Duration = Duration::from_millis(10);
const PORT: u16 = 7;

/// A sends; B's application reads everything and confirms what the test allows. The link is
/// `harness::filtered` (its `drop` chooses what is lost).
struct Link {
    net: filtered::Link,
    /// A's connection and what happened to it.
    h: ConnectionHandle,
    a_closed: Option<CloseOutcome>,
    a_closed_at: Option<Duration>,
    a_confirmed_events: usize,
    /// B's connection, the bytes its application read, and what it may confirm: bytes, and
    /// whether it confirms the end (then closes its side) once it has read to EOF.
    hb: Option<ConnectionHandle>,
    b_read: u64,
    b_closed: Option<CloseOutcome>,
    b_closed_at: Option<Duration>,
    allow: u64,
    allow_end: bool,
    /// B's AFINACKs sent (flags AFIN | ACK), and when the first went.
    b_afinacks: usize,
    first_afinack: Option<Duration>,
}

impl std::ops::Deref for Link {
    type Target = filtered::Link;
    fn deref(&self) -> &filtered::Link {
        &self.net
    }
}

impl std::ops::DerefMut for Link {
    fn deref_mut(&mut self) -> &mut filtered::Link {
        &mut self.net
    }
}

impl Link {
    fn new(mode: Mode, bytes: usize) -> Link {
        let mut a = Endpoint::new(EndpointConfig::default(), 1);
        let mut b = Endpoint::new(EndpointConfig::default(), 2);
        b.listen(PORT, confirmed(mode)).unwrap();
        let h = a
            .connect(Duration::ZERO, addr_b(), PORT, confirmed(mode))
            .unwrap();
        let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        assert_eq!(a.write(h, &data).unwrap(), bytes);
        a.close(h).unwrap();
        Link {
            net: filtered::Link::new(a, b, DELAY),
            h,
            a_closed: None,
            a_closed_at: None,
            a_confirmed_events: 0,
            hb: None,
            b_read: 0,
            b_closed: None,
            b_closed_at: None,
            allow: 0,
            allow_end: false,
            b_afinacks: 0,
            first_afinack: None,
        }
    }

    fn applications(&mut self) {
        while let Some(e) = self.net.a.poll_event() {
            match e {
                Event::Closed(h, o) if h == self.h => {
                    self.a_closed = Some(o);
                    self.a_closed_at = Some(self.net.now);
                }
                Event::Confirmed(h) if h == self.h => self.a_confirmed_events += 1,
                _ => {}
            }
        }
        while let Some(e) = self.net.b.poll_event() {
            match e {
                Event::Accepted(h) => self.hb = Some(h),
                Event::Closed(h, o) => {
                    self.b_closed = Some(o);
                    self.b_closed_at = Some(self.net.now);
                    // As a driver does: a closed connection is released (a tombstone).
                    self.net.b.release(h);
                }
                _ => {}
            }
        }
        // A's application reads B's (empty) direction and confirms its end: both halves
        // confirm, so A's AFINACK waits for this too.
        let mut buf = [0u8; 4096];
        while let Ok(1..) = self.net.a.read(self.h, &mut buf) {}
        if self.a_closed.is_none() && self.net.a.at_eof(self.h) {
            let now = self.net.now;
            self.net.a.confirm(self.h, now, 0, true).unwrap();
        }
        let Some(hb) = self.hb else { return };
        while let Ok(k @ 1..) = self.net.b.read(hb, &mut buf) {
            self.b_read += k as u64;
        }
        if self.b_closed.is_none() {
            let end = self.allow_end && self.net.b.at_eof(hb);
            let now = self.net.now;
            let v = self.net.b.confirm(hb, now, self.allow, end).unwrap();
            if end && v == self.b_read + 1 {
                self.net.b.close(hb).unwrap();
            }
        }
    }

    /// Runs until `limit` of virtual time (or nothing is left to do).
    fn run(&mut self, limit: Duration) {
        for _ in 0..2_000_000 {
            self.applications();
            let (afinacks, first) = (&mut self.b_afinacks, &mut self.first_afinack);
            self.net.transmit(|now, from_a, h| {
                if !from_a && h.flags.contains(Flags::AFIN | Flags::ACK) {
                    *afinacks += 1;
                    first.get_or_insert(now);
                }
            });
            // The deadline contract (crates/proto/tests/deadlines.rs): after handling `now`
            // and draining what is due, no deadline is at or before `now`.
            let now = self.net.now;
            for (side, t) in [
                ("A", self.net.a.poll_timeout()),
                ("B", self.net.b.poll_timeout()),
            ] {
                assert!(
                    t.is_none_or(|t| t > now) || now.is_zero(),
                    "{side} reports {t:?} at {now:?}"
                );
            }
            if !self.net.advance_within(limit) {
                self.applications();
                return;
            }
        }
        panic!("no end by {limit:?}");
    }

    fn peer_delivered(&self) -> u64 {
        self.net.a.peer_delivered(self.h).unwrap_or_else(|| {
            panic!("A's connection released ({:?})", self.a_closed);
        })
    }
}

const BYTES: usize = 50_000;

#[test]
fn the_sender_hears_only_what_the_receiving_application_confirmed() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let mut link = Link::new(mode, BYTES);
        // B reads everything and confirms nothing for 30 s: longer than the close timeout
        // (10 s), which must not end A's half while B answers.
        link.run(Duration::from_secs(30));
        assert_eq!(link.b_read, BYTES as u64, "{mode}");
        assert_eq!(link.peer_delivered(), 0, "{mode}");
        assert_eq!(link.a_closed, None, "{mode}: A ended unconfirmed");
        assert_eq!(
            link.b_afinacks, 0,
            "{mode}: AFINACK before the end was confirmed"
        );
        let asked = link.a.stats(link.h).unwrap().sender.keepalives;
        assert!(asked >= 10, "{mode}: A asked {asked} times in 30 s");

        // Part confirmed: A hears it within the acknowledgement delay (near-reliable's
        // periodic ACK: 200 ms).
        link.allow = 20_000;
        let t = link.now;
        link.run(t + Duration::from_millis(400));
        assert_eq!(link.peer_delivered(), 20_000, "{mode}");
        assert!(link.a_confirmed_events >= 1, "{mode}");
        assert_eq!(link.a_closed, None, "{mode}");

        // Every byte but not the end: still open.
        link.allow = BYTES as u64;
        link.run(link.now + Duration::from_secs(1));
        assert_eq!(link.peer_delivered(), BYTES as u64, "{mode}");
        assert_eq!(
            link.a_closed, None,
            "{mode}: A ended before the end was confirmed"
        );

        // The end: the AFINACK carries it and A's half is done.
        link.allow_end = true;
        let t = link.now;
        link.run(t + Duration::from_secs(20));
        let confirmed = aerotp_proto::ErrorControl::for_mode(mode).delivers_everything();
        assert_eq!(
            link.a_closed,
            Some(CloseOutcome::Finished { confirmed }),
            "{mode}"
        );
        assert_eq!(link.b_afinacks, 1, "{mode}");
        let took = link.first_afinack.unwrap() - t;
        assert!(
            took < Duration::from_millis(5),
            "{mode}: AFINACK {took:?} after"
        );
        assert!(matches!(link.b_closed, Some(CloseOutcome::Finished { .. })));
    }
}

#[test]
fn a_lost_final_confirmation_is_asked_for_again() {
    for (mode, release) in [
        (Mode::Reliable, false),
        (Mode::Reliable, true),
        (Mode::NearReliable, true),
    ] {
        let mut link = Link::new(mode, BYTES);
        link.allow = BYTES as u64;
        link.run(Duration::from_secs(1));
        assert_eq!(link.peer_delivered(), BYTES as u64, "{mode}");
        // Now the end is confirmed and all B's feedback is lost for 1 s (B still lingers),
        // or (`release`) for 8 s, while its AFIN gets through: B finishes and releases the
        // connection meanwhile. A's PROBEs (a NACK with no entries) are counted.
        link.allow_end = true;
        let until = link.now + Duration::from_secs(if release { 8 } else { 1 });
        let probes = std::rc::Rc::new(std::cell::Cell::new(0));
        let counted = probes.clone();
        link.drop = Box::new(move |now, from_a, h| {
            if from_a && h.flags == Flags::NACK && h.len == 2 {
                counted.set(counted.get() + 1);
            }
            !from_a && h.flags.intersects(Flags::ACK | Flags::MACK) && now < until
        });
        link.run(Duration::from_secs(60));
        let what = format!("{mode}, release {release}");
        assert_eq!(
            link.a_closed,
            Some(CloseOutcome::Finished {
                confirmed: aerotp_proto::ErrorControl::for_mode(mode).delivers_everything()
            }),
            "{what}"
        );
        if release {
            // B finished first; A's PROBE was answered from its tombstone, with the count.
            assert!(
                link.b_closed_at < link.a_closed_at,
                "{what}: B {:?} at {:?}, A at {:?}, probes {}",
                link.b_closed,
                link.b_closed_at,
                link.a_closed_at,
                probes.get()
            );
            assert!(
                link.b.stats.stray >= 1,
                "{what}: B at {:?}, A at {:?}, probes {}",
                link.b_closed_at,
                link.a_closed_at,
                probes.get()
            );
        }
        assert!(probes.get() >= 1, "{what}: A never asked again");
    }
}

#[test]
fn lossy_links_and_late_confirmations_end_with_everything_confirmed() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        for seed in 1..=6u64 {
            let mut link = Link::new(mode, 200_000);
            // 5 % of datagrams lost each way, chosen by a fixed generator.
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            link.drop = Box::new(move |_, _, _| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % 20 == 0
            });
            // B's application confirms what it had read one step (37–222 ms) earlier.
            let mut t = Duration::ZERO;
            let mut read_before = 0;
            while link.a_closed.is_none() && t < Duration::from_secs(120) {
                t += Duration::from_millis(37 * seed);
                link.allow = read_before;
                link.allow_end = read_before == 200_000;
                read_before = link.b_read;
                link.run(t);
            }
            let what = format!("{mode}, seed {seed}");
            assert_eq!(link.b_read, 200_000, "{what}");
            assert_eq!(
                link.a_closed,
                Some(CloseOutcome::Finished {
                    confirmed: aerotp_proto::ErrorControl::for_mode(mode).delivers_everything()
                }),
                "{what} at {:?}",
                link.now
            );
        }
    }
}

#[test]
fn confirm_is_clamped_to_what_was_read_and_never_goes_back() {
    let mut link = Link::new(Mode::Reliable, BYTES);
    link.run(Duration::from_secs(1));
    let (hb, now) = (link.hb.unwrap(), link.now);
    let b = &mut link.net.b;
    assert!(b.at_eof(hb));
    let all = BYTES as u64;
    assert_eq!(
        b.confirm(hb, now, 100, true).unwrap(),
        100,
        "an end with bytes unconfirmed"
    );
    assert_eq!(
        b.confirm(hb, now, 1 << 40, false).unwrap(),
        all,
        "more than was read"
    );
    assert_eq!(b.confirm(hb, now, 10, false).unwrap(), all, "going back");
    assert_eq!(b.confirm(hb, now, all, true).unwrap(), all + 1);
    assert_eq!(
        b.confirm(hb, now, 0, false).unwrap(),
        all + 1,
        "the end stays"
    );
}

#[test]
fn without_confirmed_delivery_confirm_changes_nothing() {
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let h = a
        .connect(
            Duration::ZERO,
            addr_b(),
            PORT,
            ConnectionConfig::with_mode(Mode::Reliable),
        )
        .unwrap();
    assert_eq!(a.confirm(h, Duration::ZERO, 100, true).unwrap(), 0);
}

#[test]
fn confirmed_delivery_needs_a_mode_that_acknowledges() {
    for mode in [Mode::QuasiReliable, Mode::HybridNack, Mode::Unreliable] {
        let mut a = Endpoint::new(EndpointConfig::default(), 1);
        let e = a
            .connect(Duration::ZERO, addr_b(), PORT, confirmed(mode))
            .unwrap_err();
        assert!(matches!(e, EndpointError::Config(_)), "{mode}: {e}");
        assert!(e.to_string().contains("confirm_delivery"), "{mode}: {e}");
        assert!(a.listen(PORT, confirmed(mode)).is_err(), "{mode}");
    }
}
