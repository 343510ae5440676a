//! The source's out-of-order bytes of one user-space TCP connection, kept until the hole
//! before them fills (docs/gateway.md §TCP reliable: end-to-end semantics).
//!
//! A segment lost between the source and the TUN device (a full device queue, a busy
//! ingress) used to make the ingress drop every later segment, so the source resent the
//! whole window behind it. Here the later segments' bytes wait, by stream offset, and are
//! handed to the flow when the missing segment arrives; the connection reports them to a
//! source that offered SACK (RFC 2018) as SACK blocks, so it resends only the hole.
//!
//! Bounded twice: per connection by `cap` bytes (the flow's window: nothing beyond the
//! advertised right edge is kept anyway), and over every connection by the shared [`Pool`]
//! ([`POOL_BYTES`] in the ingress). A segment that does not fit is dropped, as before (the
//! source resends it). Overlaps and duplicates are cut to the bytes not already held, so the
//! held count is exact and a byte is never handed on twice.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Out-of-order bytes the ingress keeps over all its user-space TCP connections (a full
/// window for 64 connections at the default 256 KiB; more connections with holes at once
/// drop out-of-order segments until room is freed).
pub const POOL_BYTES: usize = 16 << 20;

/// Most SACK blocks put in one acknowledgement (4 fit in the 40 option bytes with no
/// timestamps, which the ingress never offers).
pub const MAX_BLOCKS: usize = 4;

/// Room for out-of-order bytes shared by every connection.
#[derive(Debug)]
pub struct Pool {
    used: AtomicUsize,
    cap: usize,
}

impl Pool {
    pub fn new(cap: usize) -> Arc<Pool> {
        Arc::new(Pool {
            used: AtomicUsize::new(0),
            cap,
        })
    }

    /// Bytes held now over every connection (read by the tests).
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn reserve(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                (u + n <= self.cap).then_some(u + n)
            })
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// What [`Reasm::insert`] did with a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// Bytes newly held (0: all of it was held already).
    Held(usize),
    /// Not kept: the connection's or the pool's bound would be passed.
    Full,
}

/// One connection's out-of-order bytes, by stream offset.
#[derive(Debug)]
pub struct Reasm {
    /// Start offset → bytes; pieces never overlap (adjacent ones may).
    pieces: BTreeMap<u64, Vec<u8>>,
    held: usize,
    cap: usize,
    pool: Arc<Pool>,
    /// The stream offset of the source's FIN, when it came out of order.
    pub fin: Option<u64>,
    /// A byte of the most recently kept segment (its block is the first SACK block).
    recent: Option<u64>,
}

impl Reasm {
    pub fn new(cap: usize, pool: Arc<Pool>) -> Reasm {
        Reasm {
            pieces: BTreeMap::new(),
            held: 0,
            cap,
            pool,
            fin: None,
            recent: None,
        }
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Keeps `data`, which starts at stream offset `at`, except the bytes already held.
    /// All or nothing: a segment that would pass a bound is not kept at all.
    pub fn insert(&mut self, at: u64, data: &[u8]) -> Inserted {
        let end = at + data.len() as u64;
        // The parts of [at, end) no piece covers.
        let mut gaps = Vec::new();
        let mut cur = at;
        let first = self
            .pieces
            .range(..=at)
            .next_back()
            .map(|(&s, _)| s)
            .unwrap_or(at);
        for (&s, p) in self.pieces.range(first..end) {
            let e = s + p.len() as u64;
            if s > cur {
                gaps.push((cur, s));
            }
            cur = cur.max(e);
            if cur >= end {
                break;
            }
        }
        if cur < end {
            gaps.push((cur, end));
        }
        let new: usize = gaps.iter().map(|(s, e)| (e - s) as usize).sum();
        if new == 0 {
            self.recent = Some(at);
            return Inserted::Held(0);
        }
        if self.held + new > self.cap || !self.pool.reserve(new) {
            return Inserted::Full;
        }
        for (s, e) in gaps {
            let from = (s - at) as usize;
            let to = (e - at) as usize;
            self.pieces.insert(s, data[from..to].to_vec());
        }
        self.held += new;
        self.recent = Some(at);
        Inserted::Held(new)
    }

    /// The held bytes that start exactly at `at` (the next the flow needs), if any: one
    /// piece (the caller takes what it can, [`Reasm::advance`]s, and asks again).
    pub fn front(&self, at: u64) -> Option<&[u8]> {
        let (&s, p) = self.pieces.range(..=at).next_back()?;
        let e = s + p.len() as u64;
        (e > at).then(|| &p[(at - s) as usize..])
    }

    /// Forgets every byte below `to` (handed to the flow, or taken in order meanwhile).
    pub fn advance(&mut self, to: u64) {
        let mut freed = 0;
        while let Some(mut entry) = self.pieces.first_entry() {
            let s = *entry.key();
            if s >= to {
                break;
            }
            let len = entry.get().len() as u64;
            if s + len <= to {
                freed += len as usize;
                entry.remove();
            } else {
                let cut = (to - s) as usize;
                let rest = entry.get_mut().split_off(cut);
                freed += cut;
                entry.remove();
                self.pieces.insert(to, rest);
                break;
            }
        }
        self.held -= freed;
        self.pool.release(freed);
    }

    /// The held bytes as contiguous ranges [start, end) for SACK: the one holding the most
    /// recently kept segment first, then the others from the lowest; at most
    /// [`MAX_BLOCKS`].
    pub fn blocks(&self) -> Vec<(u64, u64)> {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (&s, p) in &self.pieces {
            let e = s + p.len() as u64;
            match merged.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => merged.push((s, e)),
            }
        }
        if let Some(r) = self.recent {
            if let Some(i) = merged.iter().position(|&(s, e)| s <= r && r < e) {
                let b = merged.remove(i);
                merged.insert(0, b);
            }
        }
        merged.truncate(MAX_BLOCKS);
        merged
    }
}

impl Drop for Reasm {
    fn drop(&mut self) {
        self.pool.release(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(from: u64, to: u64) -> Vec<u8> {
        (from..to).map(|i| (i % 251) as u8).collect()
    }

    /// Hands on everything contiguous from `at`, as the connection does.
    fn drain(r: &mut Reasm, mut at: u64, out: &mut Vec<u8>) -> u64 {
        while let Some(p) = r.front(at) {
            out.extend_from_slice(p);
            at += p.len() as u64;
            r.advance(at);
        }
        at
    }

    #[test]
    fn shuffled_duplicated_and_overlapping_segments_come_out_once_in_order() {
        let pool = Pool::new(1 << 20);
        let mut r = Reasm::new(1 << 20, pool.clone());
        // Segments of 100 bytes over [100, 1000), given shuffled, some twice, plus pieces
        // straddling others; byte 0-99 (the hole) comes last.
        let order = [5u64, 2, 8, 5, 3, 9, 1, 7, 4, 6, 2];
        for i in order {
            let s = i * 100;
            r.insert(s, &bytes(s, s + 100));
        }
        assert_eq!(r.held(), 900);
        assert_eq!(r.insert(150, &bytes(150, 420)), Inserted::Held(0));
        assert_eq!(r.insert(950, &bytes(950, 1050)), Inserted::Held(50));
        assert_eq!(r.held(), 950);
        assert_eq!(pool.used(), 950);
        assert_eq!(r.blocks(), vec![(100, 1050)]);
        let mut out = Vec::new();
        assert_eq!(
            drain(&mut r, 0, &mut out),
            0,
            "nothing before the hole fills"
        );
        // The hole, with an overlap into what is held.
        out.extend_from_slice(&bytes(0, 130));
        r.advance(130);
        let end = drain(&mut r, 130, &mut out);
        assert_eq!(end, 1050);
        assert_eq!(out, bytes(0, 1050), "every byte once, in order");
        assert_eq!((r.held(), pool.used()), (0, 0));
        assert!(r.blocks().is_empty());
    }

    #[test]
    fn blocks_put_the_most_recent_first_and_merge_adjacent_pieces() {
        let mut r = Reasm::new(1 << 20, Pool::new(1 << 20));
        for s in [1000u64, 3000, 5000, 7000, 9000] {
            r.insert(s, &bytes(s, s + 500));
        }
        r.insert(3500, &bytes(3500, 3600));
        assert_eq!(
            r.blocks(),
            vec![(3000, 3600), (1000, 1500), (5000, 5500), (7000, 7500)],
            "the newest segment's block first, at most four"
        );
        r.insert(9200, &bytes(9200, 9300));
        assert_eq!(
            r.blocks()[0],
            (9000, 9500),
            "a duplicate still names its block"
        );
        // A partial advance keeps the rest of a piece.
        r.advance(1200);
        assert_eq!(r.front(1200), Some(&bytes(1200, 1500)[..]));
        assert_eq!(r.front(1100), None, "below what is held");
    }

    #[test]
    fn bounds_per_connection_and_over_all_connections_are_kept() {
        let pool = Pool::new(1000);
        let mut a = Reasm::new(600, pool.clone());
        let mut b = Reasm::new(600, pool.clone());
        assert_eq!(a.insert(100, &bytes(100, 600)), Inserted::Held(500));
        assert_eq!(
            a.insert(700, &bytes(700, 900)),
            Inserted::Full,
            "600 per connection"
        );
        assert_eq!(a.insert(600, &bytes(600, 700)), Inserted::Held(100));
        assert_eq!(b.insert(50, &bytes(50, 450)), Inserted::Held(400));
        assert_eq!(
            b.insert(500, &bytes(500, 501)),
            Inserted::Full,
            "1000 in the pool"
        );
        assert_eq!(pool.used(), 1000);
        a.advance(400);
        assert_eq!(pool.used(), 700, "advancing frees the pool");
        assert_eq!(b.insert(500, &bytes(500, 600)), Inserted::Held(100));
        drop(b);
        assert_eq!(pool.used(), 300, "a closed connection gives its bytes back");
        drop(a);
        assert_eq!(pool.used(), 0);
    }
}
