//! Configs that use none of the newer keys (per-state BER, sojourns in packets or time,
//! random outages, traces) must keep giving the same outputs for the same seed, draw for
//! draw: results recorded with earlier versions stay reproducible. The digests below were
//! recorded before those keys were implemented; a change to them means the old random
//! stream was disturbed.

use std::time::Duration;

use aerotp_link::{GilbertElliott, Link, LinkConfig, Offer, Outage, PeriodicOutage};

/// FNV-1a over everything observable: offers, deliveries (time, tag, flips, bytes), stats.
fn digest(cfg: &LinkConfig, seed: u64, n: u64, gap: Duration) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    let mut link = Link::new(cfg.clone(), seed).unwrap();
    for i in 0..n {
        let now = gap * i as u32;
        let o = link.send_tagged(now, (0..600).map(|b| (b ^ i) as u8).collect(), i);
        let code: u64 = match o {
            Offer::Queued {
                arrival,
                flipped_bits,
                duplicated,
            } => {
                arrival.as_nanos() as u64 ^ (u64::from(flipped_bits) << 48) ^ u64::from(duplicated)
            }
            Offer::Dropped(r) => 1 + r as u64,
            Offer::Lost(r) => 10 + r as u64,
        };
        eat(&code.to_le_bytes());
        while let Some(d) = link.recv_delivery(now) {
            eat(&(d.arrival.as_nanos() as u64).to_le_bytes());
            eat(&d.tag.to_le_bytes());
            eat(&d.flipped_bits.to_le_bytes());
            eat(&d.packet);
        }
    }
    let s = link.stats();
    for v in [
        s.offered_packets,
        s.delivered_packets,
        s.dropped_queue_packets,
        s.lost_random,
        s.lost_burst,
        s.lost_outage,
        s.lost_header_corrupt,
        s.duplicated,
        s.corrupted_packets,
        s.bits_flipped,
    ] {
        eat(&v.to_le_bytes());
    }
    h
}

#[test]
fn old_configs_draw_as_before() {
    let full = LinkConfig {
        ber: 1e-4,
        loss: 0.05,
        jitter: Duration::from_millis(3),
        allow_reorder: true,
        duplicate: 0.05,
        protected_prefix: 28,
        per_packet_overhead: 28,
        burst: Some(GilbertElliott {
            loss_good: 0.01,
            ..GilbertElliott::per_packet(0.02, 0.3, 0.8)
        }),
        outages: vec![Outage {
            start: Duration::from_secs(1),
            duration: Duration::from_millis(300),
        }],
        periodic_outage: Some(PeriodicOutage {
            period: Duration::from_secs(2),
            duration: Duration::from_millis(100),
            offset: Duration::from_millis(500),
        }),
        ..LinkConfig::default()
    };
    let plain_ber = LinkConfig {
        ber: 1e-5,
        ..LinkConfig::default()
    };
    let got = [
        digest(&full, 99, 3000, Duration::from_micros(1100)),
        digest(&full, 7, 3000, Duration::from_micros(900)),
        digest(&plain_ber, 1, 2000, Duration::from_micros(1000)),
        digest(&LinkConfig::default(), 3, 2000, Duration::from_micros(500)),
    ];
    let recorded: [u64; 4] = [
        0xe9f2_c826_23ae_2f1b,
        0xd729_03e1_83f6_90b7,
        0xf492_4c30_7fdc_ad39,
        0x753f_a98c_31e5_d317,
    ];
    assert_eq!(got, recorded, "old configs no longer draw as they did");
}
