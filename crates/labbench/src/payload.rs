//! Self-describing blocks carried by every protocol, so the receiver can count intact bytes and
//! one-way delays whatever the protocol delivers (an exact stream, a stream with holes, or
//! datagrams).
//!
//! Block layout (little endian): `magic u32 | index u32 | sent_ns u64 | filler … | crc32c u32`,
//! where `sent_ns` is the send time in nanoseconds since a [`Clock`] epoch shared by the sender
//! and the receiver (both run as threads of one process, so one `Instant` serves both), the
//! filler is a deterministic pseudo-random function of the index, and the CRC-32C covers
//! everything before it. A block is intact if its magic and CRC match.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// First four bytes of every block.
pub const MAGIC: u32 = 0xAE70_B10C;
/// Header bytes (magic, index, timestamp) before the filler.
pub const HEADER: usize = 16;
/// Trailing CRC bytes.
pub const TRAILER: usize = 4;
/// Smallest usable block.
pub const MIN_BLOCK: usize = HEADER + TRAILER + 4;

/// The shared time origin of a transfer.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub epoch: Instant,
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }
    pub fn ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    pub fn secs(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.epoch).as_secs_f64()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// What the transfer carries: `size` bytes in blocks of `block` bytes (the last block padded).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub size: u64,
    pub block: usize,
}

impl Plan {
    pub fn new(size: u64, block: usize) -> Plan {
        assert!(
            block >= MIN_BLOCK,
            "block of {block} B is below {MIN_BLOCK} B"
        );
        assert!(size > 0, "empty transfer");
        Plan { size, block }
    }
    pub fn blocks(&self) -> u32 {
        self.size.div_ceil(self.block as u64) as u32
    }
    /// Bytes on the wire (whole blocks).
    pub fn wire_bytes(&self) -> u64 {
        u64::from(self.blocks()) * self.block as u64
    }
    /// Payload bytes that block `i` stands for (the last one may stand for fewer).
    pub fn useful(&self, i: u32) -> u64 {
        let start = u64::from(i) * self.block as u64;
        self.size.saturating_sub(start).min(self.block as u64)
    }
}

fn fill(index: u32, out: &mut [u8]) {
    let mut x = u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// Writes block `index`, stamped `sent_ns`, into `out` (`out.len()` = the block size).
pub fn encode(index: u32, sent_ns: u64, out: &mut [u8]) {
    let n = out.len();
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..8].copy_from_slice(&index.to_le_bytes());
    out[8..16].copy_from_slice(&sent_ns.to_le_bytes());
    fill(index, &mut out[HEADER..n - TRAILER]);
    let crc = aerotp_wire::crc32c(&out[..n - TRAILER]);
    out[n - TRAILER..].copy_from_slice(&crc.to_le_bytes());
}

/// `(index, sent_ns)` if `b` is an intact block.
pub fn decode(b: &[u8]) -> Option<(u32, u64)> {
    let n = b.len();
    if n < MIN_BLOCK || b[0..4] != MAGIC.to_le_bytes() {
        return None;
    }
    let crc = u32::from_le_bytes(b[n - TRAILER..].try_into().ok()?);
    if aerotp_wire::crc32c(&b[..n - TRAILER]) != crc {
        return None;
    }
    let index = u32::from_le_bytes(b[4..8].try_into().ok()?);
    let sent = u64::from_le_bytes(b[8..16].try_into().ok()?);
    Some((index, sent))
}

/// Sender side: produces stamped blocks in order and hashes what it produced.
#[derive(Debug)]
pub struct Source {
    plan: Plan,
    next: u32,
    sha: Sha256,
}

impl Source {
    pub fn new(plan: Plan) -> Source {
        Source {
            plan,
            next: 0,
            sha: Sha256::new(),
        }
    }
    pub fn done(&self) -> bool {
        self.next >= self.plan.blocks()
    }
    /// Appends up to `max_blocks` blocks stamped now; returns how many.
    pub fn take(&mut self, clock: &Clock, max_blocks: u32, out: &mut Vec<u8>) -> u32 {
        let n = max_blocks.min(self.plan.blocks() - self.next);
        let now = clock.ns();
        for _ in 0..n {
            let start = out.len();
            out.resize(start + self.plan.block, 0);
            encode(self.next, now, &mut out[start..]);
            self.sha.update(&out[start..]);
            self.next += 1;
        }
        n
    }
    pub fn digest(self) -> [u8; 32] {
        self.sha.finalize().into()
    }
}

/// Receiver side: finds intact blocks in what arrives (a stream, possibly with holes, or
/// datagrams), counts distinct ones, their delays, and hashes the raw stream.
#[derive(Debug)]
pub struct Sink {
    plan: Plan,
    seen: Vec<bool>,
    buf: Vec<u8>,
    sha: Sha256,
    pub raw_bytes: u64,
    pub intact_blocks: u32,
    pub delivered: u64,
    pub delay_sum_s: f64,
    pub first_arrival: Option<Instant>,
    pub last_new: Option<Instant>,
    /// `(arrival, useful bytes)` of every new intact block, for rate timelines.
    pub arrivals: Vec<(Instant, u32)>,
    pub keep_arrivals: bool,
}

impl Sink {
    pub fn new(plan: Plan) -> Sink {
        Sink {
            plan,
            seen: vec![false; plan.blocks() as usize],
            buf: Vec::new(),
            sha: Sha256::new(),
            raw_bytes: 0,
            intact_blocks: 0,
            delivered: 0,
            delay_sum_s: 0.0,
            first_arrival: None,
            last_new: None,
            arrivals: Vec::new(),
            keep_arrivals: false,
        }
    }

    pub fn complete(&self) -> bool {
        self.intact_blocks == self.plan.blocks()
    }

    pub fn mean_delay_s(&self) -> Option<f64> {
        (self.intact_blocks > 0).then(|| self.delay_sum_s / f64::from(self.intact_blocks))
    }

    fn block(&mut self, clock: &Clock, now: Instant, b: &[u8]) -> bool {
        let Some((i, sent_ns)) = decode(b) else {
            return false;
        };
        let Some(seen) = self.seen.get_mut(i as usize) else {
            return false;
        };
        if !*seen {
            *seen = true;
            self.intact_blocks += 1;
            let useful = self.plan.useful(i);
            self.delivered += useful;
            let sent = clock.epoch + Duration::from_nanos(sent_ns);
            self.delay_sum_s += now.saturating_duration_since(sent).as_secs_f64();
            self.last_new = Some(now);
            if self.keep_arrivals {
                self.arrivals.push((now, useful as u32));
            }
        }
        true
    }

    /// A datagram carrying exactly one block.
    pub fn datagram(&mut self, clock: &Clock, now: Instant, d: &[u8]) {
        self.first_arrival.get_or_insert(now);
        self.raw_bytes += d.len() as u64;
        if d.len() == self.plan.block {
            self.block(clock, now, d);
        }
    }

    /// The next piece of a byte stream (pieces may be missing in lossy modes: a block cut by
    /// a hole fails its CRC and the scan resynchronises on the next magic).
    pub fn stream(&mut self, clock: &Clock, now: Instant, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.first_arrival.get_or_insert(now);
        self.raw_bytes += data.len() as u64;
        self.sha.update(data);
        self.buf.extend_from_slice(data);
        let bs = self.plan.block;
        let magic = MAGIC.to_le_bytes();
        let mut pos = 0;
        let buf = std::mem::take(&mut self.buf);
        while buf.len() - pos >= bs {
            if buf[pos..pos + 4] == magic && self.block(clock, now, &buf[pos..pos + bs]) {
                pos += bs;
            } else {
                pos += 1;
            }
        }
        self.buf = buf;
        self.buf.drain(..pos);
    }

    pub fn digest(&self) -> [u8; 32] {
        self.sha.clone().finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_resync_after_holes() {
        let clock = Clock::new();
        let plan = Plan::new(10_000, 500);
        let mut src = Source::new(plan);
        let mut wire = Vec::new();
        while !src.done() {
            src.take(&clock, 3, &mut wire);
        }
        assert_eq!(wire.len(), 10_000);
        let digest = src.digest();
        // Exact stream, in odd pieces.
        let mut sink = Sink::new(plan);
        for piece in wire.chunks(333) {
            sink.stream(&clock, Instant::now(), piece);
        }
        assert!(sink.complete());
        assert_eq!(sink.delivered, 10_000);
        assert_eq!(sink.digest(), digest);
        // A stream with a hole (bytes 1200..2600 missing) and a flipped bit in block 10.
        let mut holed = wire[..1200].to_vec();
        holed.extend_from_slice(&wire[2600..]);
        let flip = 5100 - 1400;
        holed[flip] ^= 0x10;
        let mut sink = Sink::new(plan);
        for piece in holed.chunks(700) {
            sink.stream(&clock, Instant::now(), piece);
        }
        // Blocks 2..=5 cut or lost by the hole, block 10 corrupted.
        assert_eq!(sink.intact_blocks, 20 - 4 - 1);
        assert!(!sink.complete());
        assert_ne!(sink.digest(), digest);
    }

    #[test]
    fn last_block_counts_only_useful_bytes() {
        let clock = Clock::new();
        let plan = Plan::new(1000, 300);
        assert_eq!(plan.blocks(), 4);
        let mut src = Source::new(plan);
        let mut wire = Vec::new();
        src.take(&clock, 10, &mut wire);
        let mut sink = Sink::new(plan);
        for d in wire.chunks(300) {
            sink.datagram(&clock, Instant::now(), d);
            sink.datagram(&clock, Instant::now(), d); // duplicates count once
        }
        assert_eq!(sink.delivered, 1000);
        assert!(sink.complete());
    }
}
