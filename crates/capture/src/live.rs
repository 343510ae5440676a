//! Real-time captures (`aerotp send|recv|link --pcap`): the datapath hands each datagram to
//! a [`LiveCapture`], which copies it into a queue bounded in bytes and returns; a writer
//! thread turns the queue into pcapng. The datapath never waits for the disk: when the queue
//! is full the record is dropped and counted ([`LiveCapture::dropped`]), the datagram itself
//! goes on untouched.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{Capture, CaptureError};

/// Default bound of the queue: bytes of records waiting for the writer thread. The thread
/// takes the whole queue at once, so at most twice this is held (one batch being written,
/// one filling). 8 MiB is about 0.7 s of a 100 Mb/s transfer: room for a slow disk's pause.
pub const DEFAULT_QUEUE_BYTES: usize = 8 * 1024 * 1024;
/// The writer is woken as soon as this much is queued; otherwise it looks every
/// [`WRITER_PERIOD`], so a slow transfer's packets reach the file within that time.
const WAKE_BYTES: usize = 256 * 1024;
const WRITER_PERIOD: Duration = Duration::from_millis(100);

/// One queued datagram: everything but its bytes, which are in [`Batch::data`].
#[derive(Debug, Clone, Copy)]
struct Meta {
    iface: u32,
    at: Duration,
    src: SocketAddr,
    dst: SocketAddr,
    tos: u8,
    len: usize,
}

/// Bytes a record costs against the bound: its payload and its metadata.
fn cost(len: usize) -> usize {
    len + std::mem::size_of::<Meta>()
}

#[derive(Debug, Default)]
struct Batch {
    meta: Vec<Meta>,
    data: Vec<u8>,
    /// Bytes charged against the bound ([`cost`] of each record).
    bytes: usize,
}

impl Batch {
    fn clear(&mut self) {
        self.meta.clear();
        self.data.clear();
        self.bytes = 0;
    }
}

#[derive(Debug)]
struct Queue {
    batch: Batch,
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    limit: usize,
    queued: AtomicU64,
    dropped: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue holds plain data; a panic elsewhere leaves it usable.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a finished live capture wrote and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveSummary {
    /// Packets in the file.
    pub written: u64,
    /// Records dropped because the queue was full (or a datagram was too long for a UDP
    /// packet); the datagrams themselves were not affected.
    pub dropped: u64,
}

/// A pcapng file written by a thread of its own from a queue bounded in bytes.
#[derive(Debug)]
pub struct LiveCapture {
    shared: Arc<Shared>,
    /// Taken by the first [`LiveCapture::finish`]; `&self` so that the capture can be shared
    /// (`Arc`) with the datapath that feeds it.
    writer: Mutex<Option<JoinHandle<Result<u64, CaptureError>>>>,
    path: PathBuf,
}

impl LiveCapture {
    /// Creates `path` with `interfaces` (fails at once, naming the file, if it cannot be
    /// created) and starts the writer thread; at most `queue_bytes` wait for it.
    pub fn create(
        path: &Path,
        interfaces: &[&str],
        queue_bytes: usize,
    ) -> Result<LiveCapture, CaptureError> {
        let cap = Capture::create(path, interfaces)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                batch: Batch::default(),
                closed: false,
            }),
            ready: Condvar::new(),
            limit: queue_bytes.max(cost(crate::MAX_PAYLOAD)),
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let s = shared.clone();
        let writer = std::thread::Builder::new()
            .name("aerotp-pcap".into())
            .spawn(move || write_loop(&s, cap))
            .map_err(|e| CaptureError::Write {
                path: path.to_path_buf(),
                message: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(LiveCapture {
            shared,
            writer: Mutex::new(Some(writer)),
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records accepted into the queue so far.
    pub fn queued(&self) -> u64 {
        self.shared.queued.load(Ordering::Relaxed)
    }

    /// Records dropped so far (queue full, or longer than a UDP packet).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Queues one datagram; returns at once. Dropped (and counted) if the queue is full.
    pub fn record(&self, iface: u32, at: Duration, src: SocketAddr, dst: SocketAddr, b: &[u8]) {
        self.record_marked(iface, at, (src, dst, 0), b);
    }

    /// [`LiveCapture::record`] of a datagram that left with TOS byte `to.2` (its DSCP mark).
    pub fn record_marked(
        &self,
        iface: u32,
        at: Duration,
        (src, dst, tos): (SocketAddr, SocketAddr, u8),
        b: &[u8],
    ) {
        let c = cost(b.len());
        if b.len() > crate::MAX_PAYLOAD {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut q = self.shared.lock();
        if q.closed || q.batch.bytes + c > self.shared.limit {
            drop(q);
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.batch.meta.push(Meta {
            iface,
            at,
            src,
            dst,
            tos,
            len: b.len(),
        });
        q.batch.data.extend_from_slice(b);
        q.batch.bytes += c;
        let wake = q.batch.data.len() >= WAKE_BYTES;
        drop(q);
        self.shared.queued.fetch_add(1, Ordering::Relaxed);
        if wake {
            self.shared.ready.notify_one();
        }
    }

    /// Stops taking records (later ones are counted as dropped), lets the thread write what
    /// is queued, flushes the file. A second call returns 0 packets written.
    pub fn finish(&self) -> Result<LiveSummary, CaptureError> {
        self.shared.lock().closed = true;
        self.shared.ready.notify_one();
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        let written = match writer {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err(CaptureError::Write {
                    path: self.path.clone(),
                    message: "the writer thread panicked".into(),
                })
            })?,
            None => 0,
        };
        Ok(LiveSummary {
            written,
            dropped: self.dropped(),
        })
    }
}

impl Drop for LiveCapture {
    fn drop(&mut self) {
        // Best effort: what is queued still reaches the file.
        let _ = self.finish();
    }
}

impl aerotp_net::Tap for LiveCapture {
    fn datagram(&self, iface: u32, at: Duration, src: SocketAddr, dst: SocketAddr, bytes: &[u8]) {
        self.record(iface, at, src, dst, bytes);
    }

    fn marked_datagram(
        &self,
        iface: u32,
        at: Duration,
        addrs: (SocketAddr, SocketAddr, u8),
        bytes: &[u8],
    ) {
        self.record_marked(iface, at, addrs, bytes);
    }
}

/// The writer thread: takes the whole queue, writes it with the lock released, repeats until
/// closed and empty. The first write error ends the writing (records are then dropped) and
/// is returned.
fn write_loop(shared: &Shared, mut cap: Capture) -> Result<u64, CaptureError> {
    let mut spare = Batch::default();
    let mut error: Option<CaptureError> = None;
    loop {
        let closed = {
            let mut q = shared.lock();
            if q.batch.meta.is_empty() && !q.closed {
                q = shared
                    .ready
                    .wait_timeout(q, WRITER_PERIOD)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            std::mem::swap(&mut q.batch, &mut spare);
            if error.is_some() {
                // Nothing more reaches the file: refuse further records.
                q.closed = true;
            }
            q.closed
        };
        if error.is_none() {
            let mut off = 0;
            for m in &spare.meta {
                let b = &spare.data[off..off + m.len];
                off += m.len;
                match cap.write_marked(m.iface, m.at, m.src, m.dst, m.tos, b) {
                    Ok(()) => {}
                    Err(CaptureError::TooLong { .. } | CaptureError::NoInterface { .. }) => {
                        shared.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
        }
        if error.is_some() {
            shared
                .dropped
                .fetch_add(spare.meta.len() as u64, Ordering::Relaxed);
        }
        let done = closed && spare.meta.is_empty();
        spare.clear();
        if done {
            break;
        }
    }
    match error {
        Some(e) => Err(e),
        None => cap.finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcapng::{Block, PcapNgReader};

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn count(p: &Path) -> Vec<(u32, usize)> {
        let mut r = PcapNgReader::new(std::fs::File::open(p).unwrap()).unwrap();
        let mut out = Vec::new();
        while let Some(b) = r.next_block() {
            if let Block::EnhancedPacket(e) = b.unwrap() {
                out.push((e.interface_id, e.data.len()));
            }
        }
        out
    }

    #[test]
    fn everything_queued_is_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.pcapng");
        let c = LiveCapture::create(&p, &["sent", "received"], DEFAULT_QUEUE_BYTES).unwrap();
        for i in 0..5000u32 {
            let at = Duration::from_micros(u64::from(i));
            c.record(i % 2, at, a("10.0.0.1:1"), a("10.0.0.2:2"), &[i as u8; 100]);
        }
        assert_eq!(c.queued(), 5000);
        let s = c.finish().unwrap();
        assert_eq!(
            s,
            LiveSummary {
                written: 5000,
                dropped: 0
            }
        );
        let got = count(&p);
        assert_eq!(got.len(), 5000);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, g)| *g == (i as u32 % 2, 128)));
    }

    #[test]
    fn a_full_queue_drops_and_counts_records_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.pcapng");
        // The smallest bound (one largest datagram): a burst far above it must drop.
        let c = LiveCapture::create(&p, &["sent"], 0).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..20_000 {
            c.record(
                0,
                Duration::ZERO,
                a("10.0.0.1:1"),
                a("10.0.0.2:2"),
                &[0; 1400],
            );
        }
        // Too long for one UDP packet: dropped, counted.
        c.record(
            0,
            Duration::ZERO,
            a("10.0.0.1:1"),
            a("10.0.0.2:2"),
            &vec![0; 70_000],
        );
        assert!(t.elapsed() < Duration::from_secs(5));
        let queued = c.queued();
        let s = c.finish().unwrap();
        assert!(s.dropped > 0, "{s:?}");
        assert_eq!(s.written + s.dropped, 20_001, "{s:?}");
        assert_eq!(s.written, queued);
        assert_eq!(count(&p).len() as u64, s.written);
    }

    #[test]
    fn an_unwritable_file_fails_at_creation() {
        let e = LiveCapture::create(Path::new("/nonexistent-dir/l.pcapng"), &["x"], 1024)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot create capture file /nonexistent-dir/l.pcapng"),
            "{e}"
        );
    }
}
