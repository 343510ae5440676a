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

    /// Queues what fits of `data` under the limit without copying it: the TPDU bodies cut
    /// from it share its buffer. Takes the queued bytes off the front of `data`; returns how
    /// many.
    pub fn write_shared(&mut self, data: &mut Bytes) -> usize {
        let n = self.room().min(data.len());
        if n == 0 {
            return 0;
        }
        // What `tail` holds was written before `data`: it goes ahead of it, and `tail` keeps
        // the rest of its allocation for later copying writes.
        if !self.tail.is_empty() {
            self.full.push_back(self.tail.split().freeze());
        }
        self.full.push_back(data.split_to(n));
        self.len += n;
        n
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.len)
    }

    /// At least half the limit is queued: the application writes faster than the
    /// connection sends.
    pub fn half_full(&self) -> bool {
        self.len * 2 >= self.limit
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

#[cfg(test)]
mod tests {
    use super::*;

    fn take_all(q: &mut ByteQueue, tpdu: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while q.len() > 0 {
            let n = tpdu.min(q.len());
            let body = q.take_front(n);
            assert_eq!(body.len(), n, "a TPDU body is as long as asked");
            out.extend_from_slice(&body);
        }
        out
    }

    #[test]
    fn copied_and_shared_writes_come_out_in_the_order_written() {
        let mut q = ByteQueue::new(1 << 20);
        let mut expect = Vec::new();
        for i in 0..50u32 {
            let chunk: Vec<u8> = (0..(i * 37 % 3000)).map(|b| (b ^ i) as u8).collect();
            expect.extend_from_slice(&chunk);
            if i % 3 == 0 {
                assert_eq!(q.write(&chunk), chunk.len());
            } else {
                let mut b = Bytes::from(chunk.clone());
                assert_eq!(q.write_shared(&mut b), chunk.len());
                assert!(b.is_empty(), "everything was taken");
            }
        }
        assert_eq!(q.len(), expect.len());
        assert_eq!(take_all(&mut q, 1452), expect);
    }

    #[test]
    fn a_shared_write_takes_only_what_fits_and_leaves_the_rest() {
        let mut q = ByteQueue::new(1000);
        assert_eq!(q.write(&[1u8; 400]), 400);
        let mut b = Bytes::from(vec![2u8; 900]);
        assert_eq!(q.write_shared(&mut b), 600);
        assert_eq!(b.len(), 300, "the caller keeps what did not fit");
        assert_eq!(q.write_shared(&mut b), 0, "full");
        let out = take_all(&mut q, 512);
        assert_eq!(&out[..400], &[1u8; 400][..]);
        assert_eq!(&out[400..], &[2u8; 600][..]);
    }

    #[test]
    fn a_tpdu_cut_from_a_shared_write_is_the_callers_buffer() {
        let mut q = ByteQueue::new(1 << 20);
        let data = Bytes::from(vec![7u8; 4096]);
        let mut w = data.clone();
        q.write_shared(&mut w);
        let body = q.take_front(1452);
        assert_eq!(body.as_ptr(), data.as_ptr(), "no copy: the same memory");
    }
}
