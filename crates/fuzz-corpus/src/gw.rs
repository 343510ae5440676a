//! The gateway targets: the flow protocol's frame parser and the custody store's records.
//! Both use only items `aerotp-gw` exports today (`frame::{Hello, Frame}`,
//! `store::DiskLog`), so they are easy to re-point when the crate is restructured.

use crate::script::Script;
use aerotp_gw::frame::{Frame, Hello, MAX_DATA};
use aerotp_gw::store::{DiskLog, FlowMeta};
use std::fs;
use std::future::Future;
use std::path::PathBuf;
use std::task::{Context, Poll, Waker};

/// Longest text the frame parser hands out: 1024 bytes on the wire, each invalid byte of
/// which `from_utf8_lossy` may widen to the 3-byte replacement character.
const MAX_TEXT_OUT: usize = 3 * 1024;

/// Runs a future that reads from a byte slice: such a reader is always ready, so one poll
/// finishes it (tokio's `AsyncRead for &[u8]` never returns `Pending`).
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a read from a byte slice waited"),
    }
}

/// Byte 0 says whether the stream starts with a `Hello` (ingress → egress) or with frames;
/// then frames until the end, an error or a clean end of stream. Every value read is within
/// its documented bound and encodes back to something that reads as the same value.
pub fn target_gw_frame(data: &[u8]) {
    let Some((&sel, mut r)) = data.split_first() else {
        return;
    };
    if sel & 1 == 1 {
        let before = r.len();
        let Ok(h) = ready(Hello::read(&mut r)) else {
            return;
        };
        assert!(h.dest.len() <= 1024, "destination over 1024 bytes");
        let enc = h.encode();
        assert_eq!(enc.len(), before - r.len(), "Hello read a different length");
        assert_eq!(ready(Hello::read(&mut &enc[..])).ok(), Some(h));
    }
    // Each frame takes at least its type byte, so this bounds the loop.
    for _ in 0..=data.len() {
        let before = r.len();
        let f = match ready(Frame::read(&mut r)) {
            Ok(Some(f)) => f,
            Ok(None) => {
                assert_eq!(before, 0, "end of stream reported with bytes left");
                return;
            }
            Err(_) => return,
        };
        assert!(r.len() < before, "a frame consumed nothing");
        let text = match &f {
            Frame::Data(d) => {
                assert!(
                    !d.is_empty() && d.len() <= MAX_DATA,
                    "DATA of {} bytes",
                    d.len()
                );
                None
            }
            Frame::Refused(t) | Frame::Reset(t) => {
                assert!(t.len() <= MAX_TEXT_OUT);
                Some(t.len())
            }
            _ => None,
        };
        let mut enc = Vec::new();
        f.encode(&mut enc);
        // A text widened past 1024 bytes by replacement characters is cut on encode.
        if text.is_none_or(|n| n <= 1024) {
            let back = ready(Frame::read(&mut &enc[..])).expect("an encoded frame reads");
            assert_eq!(back.as_ref(), Some(&f), "frame does not round-trip");
        }
    }
    panic!("more frames than bytes");
}

/// A scratch directory per thread and process (the replay tests run targets in parallel),
/// on tmpfs where there is one so the store's fsyncs cost nothing.
fn scratch_dir() -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let t = format!("{:?}", std::thread::current().id());
    let t: String = t.chars().filter(char::is_ascii_digit).collect();
    base.join(format!("aerotp-fuzz-store-{}-{t}", std::process::id()))
}

/// Removes scratch directories left by processes that no longer run: a fuzzer aborts on a
/// crash without unwinding, so [`Cleanup`] does not run there. Once per process.
fn remove_stale_scratch() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Some(base) = scratch_dir().parent().map(PathBuf::from) else {
            return;
        };
        let Ok(rd) = fs::read_dir(&base) else { return };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("aerotp-fuzz-store-"))
                .and_then(|n| n.split('-').next())
            else {
                continue;
            };
            if !pid.is_empty() && !std::path::Path::new("/proc").join(pid).exists() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    });
}

/// Removes the scratch directory when the target returns, also after a panic.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The custody store's on-disk records, as a restarted gateway finds them: the input writes a
/// flow directory (`meta`, `confirmed`, `fin`, `seg-*` files with any names and contents),
/// then `DiskLog::open` must either refuse it with an error or return a log whose offsets
/// agree (`base <= end`, FIN at the end) and whose every byte reads back as written.
pub fn target_gw_store(data: &[u8]) {
    remove_stale_scratch();
    let root = scratch_dir();
    let _ = fs::remove_dir_all(&root);
    let _cleanup = Cleanup(root.clone());
    let dir = root.join("0000000000000001");
    fs::create_dir_all(&dir).expect("scratch directory");
    let mut s = Script::new(data);
    // (start, contents) of each segment file written under its canonical name.
    let mut segs: Vec<(u64, Vec<u8>)> = Vec::new();
    for _ in 0..16 {
        if s.is_empty() {
            break;
        }
        let kind = s.u8();
        let len = usize::from(s.u16()) % 4096;
        match kind % 5 {
            0 => {
                let _ = fs::write(dir.join("meta"), s.bytes(len));
            }
            1 => {
                let _ = fs::write(dir.join("confirmed"), s.bytes(len));
            }
            2 => {
                let _ = fs::write(dir.join("fin"), s.bytes(len));
            }
            3 => {
                let start = if kind & 0x80 == 0 {
                    u64::from(s.u16())
                } else {
                    u64::from(s.u32()) << 32 | u64::from(s.u32())
                };
                let bytes = s.bytes(len).to_vec();
                if fs::write(dir.join(format!("seg-{start:020}")), &bytes).is_ok() {
                    segs.retain(|(st, _)| *st != start);
                    segs.push((start, bytes));
                }
            }
            _ => {
                // Any other name: only [0-9a-z-] so it stays inside the directory.
                let name: String = s
                    .bytes(len % 32)
                    .iter()
                    .map(|b| match b % 37 {
                        d @ 0..=9 => char::from(b'0' + d),
                        36 => '-',
                        c => char::from(b'a' + c - 10),
                    })
                    .collect();
                let bytes = s.bytes(64).to_vec();
                if !name.is_empty() && fs::write(dir.join(&name), &bytes).is_ok() {
                    // A name that is a canonical segment name is a segment: keep the model
                    // of what the log holds in step.
                    let start = name
                        .strip_prefix("seg-")
                        .and_then(|n| n.parse::<u64>().ok());
                    if let Some(st) = start.filter(|st| name == format!("seg-{st:020}")) {
                        segs.retain(|(x, _)| *x != st);
                        segs.push((st, bytes));
                    }
                }
            }
        }
    }
    if s.u8() & 1 == 1 {
        // A well-formed meta file, so the fuzzer reaches the segment checks more often.
        let meta = FlowMeta {
            flow_id: 1,
            class: 2,
            dest: "10.0.0.1:80".into(),
            route: String::new(),
        };
        let _ = fs::remove_file(dir.join("meta"));
        let _ = DiskLog::create(&root, &meta);
    }
    let Ok(r) = DiskLog::open(&dir) else {
        return;
    };
    assert!(
        r.base <= r.end,
        "confirmed {} beyond the end {}",
        r.base,
        r.end
    );
    segs.sort_unstable_by_key(|(st, _)| *st);
    let byte_at = |off: u64| -> Option<u8> {
        segs.iter().find_map(|(st, b)| {
            off.checked_sub(*st)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| b.get(i).copied())
        })
    };
    // Probe the first, last and middle byte and every segment start within [base, end).
    let mut probes: Vec<u64> = vec![
        r.base,
        r.end.saturating_sub(1),
        r.base + (r.end - r.base) / 2,
    ];
    probes.extend(segs.iter().map(|(st, _)| *st));
    for off in probes.into_iter().filter(|o| (r.base..r.end).contains(o)) {
        let got = r
            .log
            .read_at(off, 512)
            .expect("an offset inside the opened log reads");
        assert!(!got.is_empty() && got.len() <= 512);
        for (i, b) in got.iter().enumerate() {
            assert_eq!(
                Some(*b),
                byte_at(off + i as u64),
                "byte {} differs",
                off + i as u64
            );
        }
    }
}
