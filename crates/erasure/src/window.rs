//! The decoders' memory of recent source symbols: a ring of `cap` (a power of two >= window)
//! slots indexed by `seq & (cap-1)`, which stays right across the 2^32 wrap because `cap`
//! divides 2^32. Holds the last `window` seqs up to the newest seen; older ones are forgotten.

pub(crate) struct SeqWindow {
    window: u32,
    mask: u32,
    newest: Option<u32>,
    slots: Vec<Option<Vec<u8>>>,
}

/// Where a seq stands relative to the window.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Inside the window.
    In,
    /// Newer than the newest seen (the window must advance to hold it).
    Ahead,
    /// Older than the window: forgotten.
    Stale,
}

impl SeqWindow {
    pub(crate) fn new(window: usize) -> SeqWindow {
        let cap = window.next_power_of_two();
        SeqWindow {
            window: window as u32,
            mask: cap as u32 - 1,
            newest: None,
            slots: vec![None; cap],
        }
    }

    pub(crate) fn newest(&self) -> Option<u32> {
        self.newest
    }

    pub(crate) fn cap(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn col(&self, seq: u32) -> usize {
        (seq & self.mask) as usize
    }

    pub(crate) fn place(&self, seq: u32) -> Place {
        match self.newest {
            None => Place::Ahead,
            Some(n) => {
                let back = n.wrapping_sub(seq);
                if back < self.window {
                    Place::In
                } else if back >= 1 << 31 {
                    Place::Ahead
                } else {
                    Place::Stale
                }
            }
        }
    }

    /// Makes `seq` the newest; returns the seqs that fell out (at most `window` of them,
    /// oldest first) so the caller can forget what depends on them.
    pub(crate) fn advance(&mut self, seq: u32) -> Vec<u32> {
        let mut dropped = Vec::new();
        if let Some(n) = self.newest {
            let d = seq.wrapping_sub(n);
            if d == 0 || d >= 1 << 31 {
                return dropped;
            }
            let old_base = n.wrapping_sub(self.window - 1);
            for i in 0..d.min(self.window) {
                let s = old_base.wrapping_add(i);
                let c = self.col(s);
                self.slots[c] = None;
                dropped.push(s);
            }
        }
        self.newest = Some(seq);
        dropped
    }

    pub(crate) fn get(&self, seq: u32) -> Option<&[u8]> {
        if self.place(seq) != Place::In {
            return None;
        }
        self.slots[self.col(seq)].as_deref()
    }

    pub(crate) fn has(&self, seq: u32) -> bool {
        self.get(seq).is_some()
    }

    /// Stores a framed symbol for a seq inside the window, reusing the slot's buffer.
    pub(crate) fn put(&mut self, seq: u32, framed_payload: &[u8]) {
        debug_assert_eq!(self.place(seq), Place::In);
        let c = self.col(seq);
        let slot = self.slots[c].get_or_insert_with(Vec::new);
        slot.clear();
        slot.extend_from_slice(framed_payload);
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Option<Vec<u8>>>()
            + self
                .slots
                .iter()
                .flatten()
                .map(|v| v.capacity())
                .sum::<usize>()
    }
}
