//! The receiver's delivery queue: TPDU bodies delivered in order and not yet read by the
//! application, what it has read, and whether the AFIN has been delivered. The reorder
//! buffer in front of it and the byte bounds over both are the receiver's.

use crate::reorder_budget::SLOT_OVERHEAD;
use bytes::{Buf, Bytes};
use std::collections::VecDeque;

/// A chunk delivered in order to the application.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub seq: u64,
    /// The TPDU's body: where the runtime handed the engine its receive buffer, a slice of
    /// it (holding a chunk holds that buffer; `aerotp_net` hands over only buffers that the
    /// chunks of one connection fill at least half of).
    pub data: Bytes,
}

/// Delivered, unread data (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Delivery {
    ready: VecDeque<Delivered>,
    /// Bytes of the bodies in `ready`.
    ready_bytes: usize,
    /// Bytes the application has read.
    read_bytes: u64,
    fin: bool,
}

impl Delivery {
    /// TPDU `seq` is delivered in order (an empty body is not kept; `fin`: it is the AFIN).
    pub(super) fn push(&mut self, seq: u64, body: Bytes, fin: bool) {
        if !body.is_empty() {
            self.ready_bytes += body.len();
            self.ready.push_back(Delivered { seq, data: body });
        }
        self.fin |= fin;
    }

    /// Copies delivered data into `buf`: (bytes copied, chunks emptied).
    pub(super) fn read(&mut self, buf: &mut [u8]) -> (usize, usize) {
        let (mut n, mut emptied) = (0, 0);
        while n < buf.len() {
            let Some(front) = self.ready.front_mut() else {
                break;
            };
            let k = front.data.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&front.data[..k]);
            front.data.advance(k);
            n += k;
            if front.data.is_empty() {
                self.ready.pop_front();
                emptied += 1;
            }
        }
        self.consumed(n);
        (n, emptied)
    }

    /// Takes the next chunk whole.
    pub(super) fn pop(&mut self) -> Option<Delivered> {
        let c = self.ready.pop_front()?;
        self.consumed(c.data.len());
        Some(c)
    }

    fn consumed(&mut self, n: usize) {
        self.ready_bytes -= n;
        self.read_bytes += n as u64;
    }

    /// Chunks waiting to be read.
    pub(super) fn chunks(&self) -> usize {
        self.ready.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Bytes of bodies waiting to be read.
    pub(super) fn unread_bytes(&self) -> usize {
        self.ready_bytes
    }

    /// What waiting data is charged: bodies and bookkeeping.
    pub(super) fn unread_charge(&self) -> usize {
        self.ready_bytes + self.ready.len() * SLOT_OVERHEAD
    }

    /// Bytes the application has read.
    pub(super) fn read_bytes(&self) -> u64 {
        self.read_bytes
    }

    /// Whether the AFIN has been delivered.
    pub(super) fn fin(&self) -> bool {
        self.fin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_span_chunks_and_count_what_was_read_and_charged() {
        let mut d = Delivery::default();
        d.push(0, Bytes::from_static(b"abc"), false);
        d.push(1, Bytes::new(), false);
        d.push(2, Bytes::from_static(b"de"), true);
        assert_eq!(
            (d.chunks(), d.unread_bytes()),
            (2, 5),
            "the empty body is not kept"
        );
        assert_eq!(d.unread_charge(), 5 + 2 * SLOT_OVERHEAD);
        assert!(d.fin());
        let mut buf = [0u8; 4];
        assert_eq!(d.read(&mut buf), (4, 1));
        assert_eq!(&buf, b"abcd");
        assert_eq!((d.chunks(), d.unread_bytes(), d.read_bytes()), (1, 1, 4));
        let c = d.pop().unwrap();
        assert_eq!((c.seq, &c.data[..]), (2, &b"e"[..]));
        assert!(d.is_empty());
        assert_eq!((d.unread_charge(), d.read_bytes()), (0, 5));
        assert!(d.pop().is_none());
        assert_eq!(d.read(&mut buf), (0, 0));
    }
}
