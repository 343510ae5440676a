//! FEC decoding a spoofer cannot claim (docs/security.md, "State bounded under attack: FEC
//! decoding"): datagrams spoofed from a live sender's address, whose header checks and names
//! parity 254 while the sender uses 8, are refused before decoding past that source's small
//! budget, and the sender's own transfer completes intact. Two endpoints over a 10 ms link
//! (`harness::filtered`), A sending with parity 8; the spoofed datagrams are handed to B as
//! if from A.

mod harness;

use aerotp_proto::{
    CloseOutcome, ConnectionConfig, Endpoint, EndpointConfig, Event, FecSetting, Mode,
};
use aerotp_wire::{Flags, Header};
use harness::{addr_a, addr_b, filtered};
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

const PORT: u16 = 7;

/// A datagram that looks like A's: its header checks and names parity 254, its 1275 bytes
/// carry no parity at all, so the receiver can only find out by decoding (1.5 ms each).
fn spoofed(a: &Header, seq: u32) -> Vec<u8> {
    let h = Header {
        flags: Flags::empty(),
        seq,
        fec: 254,
        len: 0,
        ..*a
    };
    let mut out = Vec::new();
    aerotp_wire::emit_tpdu(h, &[0x5A; 1000], &mut out).unwrap();
    out.resize(1275, 0xA5);
    out
}

#[test]
fn spoofed_maximal_parity_is_refused_before_decoding_and_the_transfer_completes() {
    let cfg = ConnectionConfig {
        rate_bps: 20_000_000,
        fec: FecSetting::Parity(8),
        ..ConnectionConfig::with_mode(Mode::Reliable)
    };
    let a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    b.listen(PORT, cfg.clone()).unwrap();
    let mut link = filtered::Link::new(a, b, Duration::from_millis(10));
    let data = harness::pattern(4_000_000, 9);
    let h = link.a.connect(Duration::ZERO, addr_b(), PORT, cfg).unwrap();
    let seen: Rc<Cell<Option<Header>>> = Rc::default();
    let (mut written, mut got, mut hb) = (0usize, Vec::new(), None);
    let (mut a_done, mut injected, mut spent) = (None, 0u64, Duration::ZERO);
    let mut next_spoof = Duration::from_millis(100);
    let limit = Duration::from_secs(30);
    while link.now < limit && a_done.is_none() {
        let now = link.now;
        // 400 a second, from A's address, once A's header is known.
        if let Some(ah) = seen.get().filter(|_| now >= next_spoof) {
            let d = spoofed(&ah, ah.seq.wrapping_add(3));
            let t0 = Instant::now();
            link.b.handle_datagram(now, addr_a(), &d);
            spent += t0.elapsed();
            injected += 1;
            next_spoof += Duration::from_micros(2500);
        }
        while let Some(e) = link.b.poll_event() {
            if let Event::Accepted(c) = e {
                hb = Some(c);
            }
        }
        while let Some(e) = link.a.poll_event() {
            if let Event::Closed(_, o) = e {
                a_done = Some(o);
            }
        }
        if written < data.len() {
            written += link.a.write(h, &data[written..]).unwrap_or(0);
            if written == data.len() {
                link.a.close(h).unwrap();
            }
        }
        if let Some(c) = hb {
            let mut buf = [0u8; 65536];
            while let Ok(n @ 1..) = link.b.read(c, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            if link.b.at_eof(c) {
                let _ = link.b.close(c);
            }
        }
        let s = seen.clone();
        link.transmit(move |_, from_a, h| {
            if from_a && h.flags.is_data() {
                s.set(Some(*h));
            }
        });
        link.advance_within(limit.min(next_spoof));
    }
    let secs = link
        .now
        .saturating_sub(Duration::from_millis(100))
        .as_secs_f64();
    let refused = link.b.stats.fec_budget_refused;
    // The source's budget: its depth, then about four a second.
    let allowed = injected - refused;
    assert!(injected > 1000, "{injected} spoofed");
    assert!(
        (allowed as f64) <= 5.0 + 4.0 * secs,
        "{allowed} of {injected} decoded at parity 254 over {secs:.1} s"
    );
    assert!(
        matches!(a_done, Some(CloseOutcome::Finished { .. })),
        "{a_done:?}"
    );
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
    eprintln!(
        "figure: {injected} spoofed parity-254 datagrams over {secs:.1} s: {refused} refused \
         before decoding, {allowed} decoded; {:.1} us each on average to handle; 4 MB intact",
        spent.as_secs_f64() * 1e6 / injected as f64
    );
}
