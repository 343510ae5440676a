//! The endpoint's FEC decoding of what arrives: the parity each peer used last (the hint
//! that decodes a damaged header), the CPU budgets that bound decoding for peers never heard
//! intact and for known peers above their parity (`crate::decode_budget`), and the scratch
//! buffer the decoder works in. One owner, because each decode reads the hints and charges
//! the budgets, and each intact TPDU updates the hints the budgets follow.

use crate::codec::{self, Quality, Received, Undecodable};
use crate::decode_budget::{DecodeBudget, SourceBudgets};
use crate::table::{table, Table};
use std::net::SocketAddr;
use std::time::Duration;

/// Most peers whose last FEC parity is remembered (used to decode damaged headers).
const HINT_LIMIT: usize = 4096;

#[derive(Debug)]
pub(super) struct FecDecoding {
    /// The parity of each peer's last TPDU that was not corrupted, by its address.
    hints: Table<SocketAddr, u8>,
    /// Bounds FEC decoding for peers never heard intact (`crate::decode_budget`).
    strangers: DecodeBudget,
    /// Known peers' decoding above the parity they use, per source (`decode_budget`).
    sources: SourceBudgets,
    /// The decoder's working buffer, kept so that decoding allocates nothing once grown.
    scratch: Vec<u8>,
}

impl FecDecoding {
    pub(super) fn new(hints_seed: u64, sources_seed: u64) -> FecDecoding {
        FecDecoding {
            hints: table(hints_seed),
            strangers: DecodeBudget::new(),
            sources: SourceBudgets::new(sources_seed),
            scratch: Vec::new(),
        }
    }

    /// Decodes a datagram from `remote`. Decoding for a peer never heard intact is charged
    /// to the CPU budget; a known peer's above the parity it uses, to that source's own
    /// budget. Each attempt a budget refuses adds one to `refused`.
    pub(super) fn decode(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        source: codec::Source<'_>,
        refused: &mut u64,
    ) -> Result<Received, Undecodable> {
        let len = source.datagram().len();
        let hints = &self.hints;
        let hint = || hints.get(&remote).copied();
        let (strangers, sources) = (&mut self.strangers, &mut self.sources);
        let allow = |p: u8, uses: Option<u8>| {
            let cost = DecodeBudget::cost(len, p);
            let ok = match uses {
                Some(q) if p <= q => true,
                Some(_) => sources.charge(remote, now, cost),
                None => strangers.charge(now, cost),
            };
            *refused += u64::from(!ok);
            ok
        };
        codec::decode_within(source, hint, &mut self.scratch, allow)
    }

    /// Remembers the parity of `r` from `remote` for the next decode, if it had parity and
    /// was not corrupted (at `HINT_LIMIT` peers, all are forgotten before a new one is).
    pub(super) fn remember_parity(&mut self, remote: SocketAddr, r: &Received) {
        if r.parity > 0 && r.quality != Quality::Corrupted {
            if self.hints.len() >= HINT_LIMIT && !self.hints.contains_key(&remote) {
                self.hints.clear();
            }
            self.hints.insert(remote, r.parity);
        }
    }

    #[cfg(test)]
    fn hint(&self, remote: SocketAddr) -> Option<u8> {
        self.hints.get(&remote).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerotp_wire::{Flags, Header, Mode};

    fn header(fec: u8) -> Header {
        Header {
            mode: Mode::Reliable,
            flags: Flags::empty(),
            src_port: 1,
            dst_port: 2,
            seq: 3,
            timestamp: 0,
            fec,
            tag: 9,
            len: 0,
        }
    }

    fn addr(i: u32) -> SocketAddr {
        SocketAddr::from((std::net::Ipv4Addr::from(0x0a00_0000 + i), 9000))
    }

    #[test]
    fn an_intact_tpdu_with_parity_is_remembered_and_a_corrupted_one_is_not() {
        let mut d = FecDecoding::new(1, 2);
        let mut wire = Vec::new();
        codec::encode(header(8), b"hello", &mut wire).unwrap();
        let mut refused = 0;
        let r = d
            .decode(
                Duration::ZERO,
                addr(1),
                codec::Source::Borrowed(&wire),
                &mut refused,
            )
            .unwrap();
        assert_eq!(&r.body[..], b"hello");
        assert_eq!(refused, 0);
        d.remember_parity(addr(1), &r);
        assert_eq!(d.hint(addr(1)), Some(8));
        let mut corrupted = r.clone();
        corrupted.quality = Quality::Corrupted;
        corrupted.parity = 16;
        d.remember_parity(addr(1), &corrupted);
        assert_eq!(d.hint(addr(1)), Some(8), "a corrupted TPDU says nothing");
    }

    #[test]
    fn the_hints_are_forgotten_all_at_once_at_their_bound() {
        let mut d = FecDecoding::new(1, 2);
        let mut wire = Vec::new();
        codec::encode(header(4), b"x", &mut wire).unwrap();
        let mut refused = 0;
        let r = d
            .decode(
                Duration::ZERO,
                addr(0),
                codec::Source::Borrowed(&wire),
                &mut refused,
            )
            .unwrap();
        for i in 0..HINT_LIMIT as u32 {
            d.remember_parity(addr(i), &r);
        }
        assert_eq!(d.hint(addr(0)), Some(4));
        d.remember_parity(addr(0), &r);
        assert_eq!(d.hint(addr(1)), Some(4), "a known peer clears nothing");
        d.remember_parity(addr(HINT_LIMIT as u32), &r);
        assert_eq!(d.hint(addr(0)), None);
        assert_eq!(d.hint(addr(HINT_LIMIT as u32)), Some(4));
    }

    #[test]
    fn a_stranger_s_junk_is_charged_to_the_budget_until_it_refuses() {
        let mut d = FecDecoding::new(1, 2);
        // A stranger's TPDU at parity 128 with a damaged byte: every attempt to correct it
        // costs 1 codeword x 128 x 383 units, about 265 of them a second's budget.
        let mut wire = Vec::new();
        codec::encode(header(128), &[0u8; 100], &mut wire).unwrap();
        assert_eq!(Header::peek_fec(&wire), Some(128), "the parity fits");
        wire[aerotp_wire::HEADER_LEN + 10] ^= 0x5a;
        let mut refused = 0;
        let mut corrected = 0;
        for _ in 0..400 {
            let at = Duration::ZERO;
            let r = d.decode(at, addr(7), codec::Source::Borrowed(&wire), &mut refused);
            corrected += u64::from(r.is_ok_and(|r| r.quality != Quality::Corrupted));
        }
        assert!(
            corrected > 0,
            "the first attempts were made and corrected the byte"
        );
        assert!(
            refused > 0,
            "the budget refused some of 400 attempts at one instant"
        );
        assert_eq!(corrected + refused, 400);
    }
}
