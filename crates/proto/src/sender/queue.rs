//! The application's bytes written and not yet cut into TPDUs. TPDU bodies are slices of the
//! buffers the bytes were written into (no payload copy per TPDU).

use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;

/// Smallest allocation for the bytes the application writes (fewer, larger buffers that TPDU
/// bodies are cut from without copying).
const WRITE_CHUNK: usize = 256 << 10;

/// Written bytes not yet sent, in order: `head` (TPDU bodies are cut from it), `full` (frozen
/// buffers that filled up), then `tail` (still being written to). A buffer that fills up is
/// frozen rather than grown, since growing would copy what it holds.
#[derive(Debug)]
pub(crate) struct ByteQueue {
    head: Bytes,
    full: VecDeque<Bytes>,
    tail: BytesMut,
    /// Bytes in `head`, `full` and `tail`.
    len: usize,
    limit: usize,
}

impl ByteQueue {
    pub fn new(limit: usize) -> ByteQueue {
        ByteQueue {
            head: Bytes::new(),
            full: VecDeque::new(),
            tail: BytesMut::new(),
            len: 0,
            limit,
        }
    }

    /// Queues what fits of `data` under the limit; returns how many bytes.
    pub fn write(&mut self, data: &[u8]) -> usize {
        let n = self.room().min(data.len());
        if self.tail.capacity() - self.tail.len() < n {
            if !self.tail.is_empty() {
                self.full.push_back(self.tail.split().freeze());
            }
            self.tail.reserve(n.max(WRITE_CHUNK.min(self.limit)));
        }
        self.tail.extend_from_slice(&data[..n]);
        self.len += n;
        n
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.len)
    }

    /// Takes the first `n` queued bytes (`n` ≤ `len`): a slice of the buffer they were
    /// written into, without copying, unless the TPDU straddles two buffers.
    pub fn take_front(&mut self, n: usize) -> Bytes {
        self.len -= n;
        if self.head.is_empty() {
            self.head = self.next_buffer();
        }
        if self.head.len() >= n {
            return self.head.split_to(n);
        }
        let mut body = BytesMut::with_capacity(n);
        while body.len() < n {
            if self.head.is_empty() {
                self.head = self.next_buffer();
                if self.head.is_empty() {
                    break;
                }
            }
            let k = (n - body.len()).min(self.head.len());
            body.extend_from_slice(&self.head.split_to(k));
        }
        body.freeze()
    }

    /// The oldest written buffer not yet cut from: a full one, or what `tail` holds.
    fn next_buffer(&mut self) -> Bytes {
        self.full
            .pop_front()
            .unwrap_or_else(|| self.tail.split().freeze())
    }
}
