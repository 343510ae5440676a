//! Datagram-mode messages: one UDP datagram as one or more AeroTP datagrams (fragments), so a
//! UDP datagram larger than one AeroTP datagram is carried whole rather than dropped
//! (docs/gateway.md §UDP). Pure code: no sockets, no clock (times are passed in).
//!
//! Fragment (the body of one AeroTP datagram, covered by its CRC-32C):
//! `0xD6 | msg u32 | index u8 | count u8 | dest len u8 | dest | chunk`. `msg` numbers the
//! messages of one sender port from 0, so the receiver counts the messages that never
//! completed (a gap in `msg`) as lost. Written by hand: no crate fragments application
//! datagrams over a custom datagram transport.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

use crate::consts::MAX_UDP;

const MAGIC: u8 = 0xD6;
/// Fragment header without the destination.
pub const FRAG_HEADER: usize = 8;
/// Most fragments of one message.
pub const MAX_FRAGMENTS: usize = 255;
/// Bytes of partial messages a reassembler holds; past it the oldest partial is given up.
pub const REASSEMBLY_BYTES: usize = 4 << 20;
/// A message whose fragments have not all arrived after this long is given up (lost).
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest chunk of payload per fragment for an AeroTP datagram body of `max_body` bytes and a
/// destination of `dest_len` bytes; an error if a largest UDP datagram would not fit in
/// [`MAX_FRAGMENTS`] (a tiny MTU), naming the sizes.
pub fn chunk_size(max_body: usize, dest_len: usize) -> Result<usize, String> {
    let chunk = max_body.saturating_sub(FRAG_HEADER + dest_len);
    if chunk * MAX_FRAGMENTS < MAX_UDP {
        return Err(format!(
            "an AeroTP datagram carries {max_body} bytes here, {chunk} of them UDP payload after \
             the gateway's {FRAG_HEADER}-byte fragment header and the {dest_len}-byte \
             destination: a {MAX_UDP}-byte UDP datagram would need more than {MAX_FRAGMENTS} \
             fragments; raise mtu, lower fec, or shorten dest"
        ));
    }
    Ok(chunk)
}

/// Splits `payload` (at most [`MAX_UDP`] bytes) into the fragments of message `msg`.
pub fn fragment(msg: u32, dest: &[u8], payload: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    let dest = &dest[..dest.len().min(255)];
    let chunk = chunk.max(1);
    let count = payload.len().div_ceil(chunk).max(1);
    debug_assert!(count <= MAX_FRAGMENTS, "checked by chunk_size");
    let count = count.min(MAX_FRAGMENTS);
    (0..count)
        .map(|i| {
            let part =
                &payload[(i * chunk).min(payload.len())..((i + 1) * chunk).min(payload.len())];
            let mut b = Vec::with_capacity(FRAG_HEADER + dest.len() + part.len());
            b.push(MAGIC);
            b.extend_from_slice(&msg.to_be_bytes());
            b.push(i as u8);
            b.push(count as u8);
            b.push(dest.len() as u8);
            b.extend_from_slice(dest);
            b.extend_from_slice(part);
            b
        })
        .collect()
}

/// One parsed fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment<'a> {
    pub msg: u32,
    pub index: u8,
    pub count: u8,
    pub dest: &'a [u8],
    pub chunk: &'a [u8],
}

/// Parses a fragment; `None` for anything else (never panics).
pub fn parse(b: &[u8]) -> Option<Fragment<'_>> {
    if b.len() < FRAG_HEADER || b[0] != MAGIC {
        return None;
    }
    let (index, count, dl) = (b[5], b[6], usize::from(b[7]));
    if count == 0 || index >= count || b.len() < FRAG_HEADER + dl {
        return None;
    }
    Some(Fragment {
        msg: u32::from_be_bytes([b[1], b[2], b[3], b[4]]),
        index,
        count,
        dest: &b[FRAG_HEADER..FRAG_HEADER + dl],
        chunk: &b[FRAG_HEADER + dl..],
    })
}

/// A message being put together.
#[derive(Debug)]
struct Partial {
    parts: Vec<Option<Vec<u8>>>,
    have: usize,
    bytes: usize,
    dest: Vec<u8>,
    started: Instant,
}

/// A message this far behind the highest one completed is late (counted lost, taken back);
/// further behind, the sender has started a new numbering.
const LATE_WINDOW: u32 = 64;

/// Per sender, the message numbers seen: counts the gaps (from the first message that
/// completes; losses before it are not known).
#[derive(Debug, Default)]
struct Sequence {
    /// The highest message number completed.
    highest: Option<u32>,
}

/// Reassembles the messages of many senders (keyed by `K`), bounded in bytes
/// ([`REASSEMBLY_BYTES`]) and in time ([`REASSEMBLY_TIMEOUT`]); counts lost messages.
#[derive(Debug)]
pub struct Reassembler<K: Hash + Eq + Clone> {
    partial: HashMap<(K, u32), Partial>,
    order: VecDeque<(K, u32)>,
    bytes: usize,
    seqs: HashMap<K, Sequence>,
    /// Most senders tracked (the table of sequences is bounded too).
    max_senders: usize,
    /// Messages counted lost so far (gaps in the message numbers of a sender).
    pub lost: u64,
}

/// A whole message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub dest: Vec<u8>,
    pub payload: Vec<u8>,
}

impl<K: Hash + Eq + Clone> Reassembler<K> {
    pub fn new(max_senders: usize) -> Self {
        Reassembler {
            partial: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            seqs: HashMap::new(),
            max_senders,
            lost: 0,
        }
    }

    /// Bytes of partial messages held now (the tests' view of the bound).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.bytes
    }

    /// Takes one fragment from `from` at `now`; returns the message it completes.
    pub fn push(&mut self, from: K, f: &Fragment<'_>, now: Instant) -> Option<Message> {
        self.expire(now);
        if f.count == 1 {
            self.completed(&from, f.msg);
            return Some(Message {
                dest: f.dest.to_vec(),
                payload: f.chunk.to_vec(),
            });
        }
        let key = (from.clone(), f.msg);
        if !self.partial.contains_key(&key) {
            self.order.push_back(key.clone());
        }
        let p = self.partial.entry(key.clone()).or_insert_with(|| Partial {
            parts: vec![None; usize::from(f.count)],
            have: 0,
            bytes: 0,
            dest: f.dest.to_vec(),
            started: now,
        });
        let i = usize::from(f.index);
        if p.parts.len() != usize::from(f.count) || p.parts[i].is_some() {
            return None; // a duplicate, or a fragment that disagrees with the first: ignored
        }
        p.parts[i] = Some(f.chunk.to_vec());
        p.have += 1;
        p.bytes += f.chunk.len();
        self.bytes += f.chunk.len();
        if p.have < p.parts.len() {
            self.bound();
            return None;
        }
        let p = self.partial.remove(&key)?;
        self.order.retain(|k| k != &key);
        self.bytes -= p.bytes;
        self.completed(&from, f.msg);
        Some(Message {
            dest: p.dest,
            payload: p.parts.into_iter().flatten().flatten().collect(),
        })
    }

    /// Counts the messages skipped before `msg` of `from` as lost (one that arrives after a
    /// later one was counted lost when that one completed: it is taken back).
    fn completed(&mut self, from: &K, msg: u32) {
        if !self.seqs.contains_key(from) && self.seqs.len() >= self.max_senders {
            self.seqs.clear(); // forget every sender rather than grow: at worst a gap uncounted
        }
        let s = self.seqs.entry(from.clone()).or_default();
        match s.highest {
            None => s.highest = Some(msg),
            Some(h) => {
                let ahead = msg.wrapping_sub(h);
                if ahead != 0 && ahead < 1 << 31 {
                    self.lost += u64::from(ahead - 1);
                    s.highest = Some(msg);
                } else if ahead != 0 && h.wrapping_sub(msg) <= LATE_WINDOW {
                    // Late: it was counted lost when a later message completed.
                    self.lost = self.lost.saturating_sub(1);
                } else if ahead != 0 {
                    // Far behind: the sender numbers from 0 again (a client port reused at
                    // the ingress, or a restarted ingress): a new sequence, nothing lost.
                    s.highest = Some(msg);
                }
            }
        }
    }

    /// Gives up partial messages older than the timeout.
    fn expire(&mut self, now: Instant) {
        while let Some(k) = self.order.front() {
            match self.partial.get(k) {
                Some(p) if now.duration_since(p.started) < REASSEMBLY_TIMEOUT => return,
                _ => {
                    let k = self.order.pop_front().expect("front exists");
                    if let Some(p) = self.partial.remove(&k) {
                        self.bytes -= p.bytes;
                    }
                }
            }
        }
    }

    /// Gives up the oldest partial messages while over the byte bound.
    fn bound(&mut self) {
        while self.bytes > REASSEMBLY_BYTES {
            let Some(k) = self.order.pop_front() else {
                return;
            };
            if let Some(p) = self.partial.remove(&k) {
                self.bytes -= p.bytes;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
    }

    #[test]
    fn a_largest_datagram_survives_fragmentation_in_any_order() {
        let chunk = chunk_size(1400 - 24, 9).unwrap();
        let payload = bytes(MAX_UDP, 7);
        let mut frags = fragment(0, b"host:9000", &payload, chunk);
        assert!(frags.len() > 40 && frags.iter().all(|f| f.len() <= 1400 - 24));
        frags.reverse();
        let mut r = Reassembler::new(16);
        let now = Instant::now();
        let mut out = None;
        for f in &frags {
            let p = parse(f).unwrap();
            assert!(out.is_none(), "completed before the last fragment");
            out = r.push(1u8, &p, now);
        }
        let m = out.expect("completed");
        assert_eq!((m.dest.as_slice(), m.payload), (&b"host:9000"[..], payload));
        assert_eq!((r.held(), r.lost), (0, 0));
    }

    #[test]
    fn losses_are_counted_by_message_number_and_partials_expire() {
        let mut r = Reassembler::new(16);
        let t0 = Instant::now();
        let mut got = Vec::new();
        for msg in 0..10u32 {
            let frags = fragment(msg, b"", &bytes(3000, msg as u8), 1000);
            for (i, f) in frags.iter().enumerate() {
                // Message 3 loses a fragment; message 6 is lost whole.
                if (msg == 3 && i == 1) || msg == 6 {
                    continue;
                }
                if let Some(m) = r.push(5u8, &parse(f).unwrap(), t0) {
                    got.push((msg, m.payload));
                }
            }
        }
        let ids: Vec<u32> = got.iter().map(|g| g.0).collect();
        assert_eq!(ids, [0, 1, 2, 4, 5, 7, 8, 9]);
        assert!(got.iter().all(|(m, p)| *p == bytes(3000, *m as u8)));
        assert_eq!(r.lost, 2);
        assert!(r.held() > 0, "message 3's fragments wait");
        // After the timeout the partial message is given up (already counted lost).
        let later = t0 + REASSEMBLY_TIMEOUT + Duration::from_millis(1);
        let f = fragment(10, b"", b"x", 1000);
        assert!(r.push(5u8, &parse(&f[0]).unwrap(), later).is_some());
        assert_eq!((r.held(), r.lost), (0, 2));
        // A late message takes its loss back; a sender numbering from 0 again loses nothing.
        let late = fragment(6, b"", b"late", 1000);
        assert!(r.push(5u8, &parse(&late[0]).unwrap(), later).is_some());
        assert_eq!(r.lost, 1);
        for msg in [1000u32, 0, 1] {
            let f = fragment(msg, b"", b"again", 1000);
            assert!(r.push(5u8, &parse(&f[0]).unwrap(), later).is_some());
        }
        assert_eq!(
            r.lost,
            1 + 989,
            "1000 after 10: 989 lost; then 0 and 1 a new numbering"
        );
    }

    #[test]
    fn parse_never_panics_and_the_byte_bound_holds() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut r = Reassembler::new(4);
        let now = Instant::now();
        for n in 0..20_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut b: Vec<u8> = (0..(n % 300)).map(|i| (x >> (i % 8 * 8)) as u8).collect();
            if n % 3 == 0 && b.len() > FRAG_HEADER {
                b[0] = MAGIC;
                b[7] = 0;
            }
            if let Some(f) = parse(&b) {
                let _ = r.push((n % 7) as u8, &f, now);
            }
            assert!(r.held() <= REASSEMBLY_BYTES);
        }
        // Many large partial messages: the oldest are given up, the bound holds.
        for msg in 0..200u32 {
            let frags = fragment(msg, b"", &bytes(60_000, 1), 1000);
            for f in &frags[..frags.len() - 1] {
                let _ = r.push(9u8, &parse(f).unwrap(), now);
            }
            assert!(r.held() <= REASSEMBLY_BYTES);
        }
    }

    #[test]
    fn a_tiny_mtu_is_refused_with_the_sizes() {
        let e = chunk_size(200, 0).unwrap_err();
        assert!(e.contains("200") && e.contains("255"), "{e}");
    }
}
