//! The gateway targets: the flow protocol's records (docs/gateway.md §Flow protocol) and the
//! custody store's records. Both use only items `aerotp-gw` exports (`frame::{Open,
//! Resumed, Dest}`, `store::DiskLog`), so they are easy to re-point when the crate is
//! restructured.

use crate::script::Script;
use aerotp_gw::frame::{
    flow_reset, reset_reason, Dest, Open, RecordError, Resumed, MAX_OPEN, RESUMED_LEN,
};
use aerotp_gw::store::{DiskLog, FlowMeta, Restored};
use std::fs;
use std::path::{Path, PathBuf};

/// Byte 0 picks the parser (bit 0: the ingress's open record, else the egress's resume
/// answer; bit 1: also read the rest as a destination text and a reset reason), bytes 1–2 are
/// the AeroTP header's `dst_port`, the rest is the stream. A record that parses re-encodes to
/// exactly the bytes it took and parses back the same; a short input asks for more bytes
/// than it has and no more than the largest record; a destination text that parses prints
/// back to the same destination; a reset reason survives the RST's 256-byte body.
pub fn target_gw_frame(data: &[u8]) {
    let [sel, p0, p1, stream @ ..] = data else {
        return;
    };
    let dst_port = u16::from_be_bytes([*p0, *p1]);
    if sel & 1 == 1 {
        match Open::parse(stream, dst_port) {
            Ok((o, n)) => {
                assert!(
                    n <= stream.len() && n <= MAX_OPEN,
                    "open record of {n} bytes"
                );
                let enc = o.encode();
                assert_eq!(&enc[..], &stream[..n], "open record does not re-encode");
                assert_eq!(Open::parse(&enc, dst_port), Ok((o, n)));
            }
            Err(RecordError::Short(k)) => {
                assert!(
                    k > stream.len() && k <= MAX_OPEN,
                    "short by {k} of {}",
                    stream.len()
                );
            }
            Err(RecordError::Bad(m)) => assert!(!m.is_empty()),
        }
    } else {
        match Resumed::parse(stream) {
            Ok(r) => assert_eq!(&r.encode()[..], &stream[..RESUMED_LEN]),
            Err(RecordError::Short(k)) => {
                assert!(
                    k > stream.len() && k <= RESUMED_LEN,
                    "short by {k} of {}",
                    stream.len()
                );
            }
            Err(RecordError::Bad(m)) => assert!(!m.is_empty()),
        }
    }
    if sel & 2 == 2 {
        let text = String::from_utf8_lossy(stream);
        if let Ok(d) = Dest::parse(&text) {
            assert_eq!(Dest::parse(&d.to_string()), Ok(d.clone()), "{text:?}");
        }
        let r = reset_reason(&text);
        assert!(r.len() <= 256);
        let back = flow_reset(&r).expect("a flow reset reads as one");
        assert!(text.starts_with(back));
    }
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
    let mut segs = write_flow_files(&mut s, &dir);
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
    check_reads(&r, &segs);
}

/// Writes up to 16 files the script describes into the flow directory `dir`; the (start,
/// contents) of each segment file written under its canonical name.
fn write_flow_files(s: &mut Script, dir: &Path) -> Vec<(u64, Vec<u8>)> {
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
            _ => write_any_file(s, dir, len, &mut segs),
        }
    }
    segs
}

/// A file of any name (only [0-9a-z-], so it stays inside `dir`); one whose name is a
/// canonical segment name is a segment of `segs`.
fn write_any_file(s: &mut Script, dir: &Path, len: usize, segs: &mut Vec<(u64, Vec<u8>)>) {
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
        // A name that is a canonical segment name is a segment: keep the model of what the
        // log holds in step.
        let start = name
            .strip_prefix("seg-")
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(st) = start.filter(|st| name == format!("seg-{st:020}")) {
            segs.retain(|(x, _)| *x != st);
            segs.push((st, bytes));
        }
    }
}

/// Probes the first, last and middle byte and every segment start within [base, end) of
/// the opened log: each reads back as the segments (sorted by start) hold it.
fn check_reads(r: &Restored, segs: &[(u64, Vec<u8>)]) {
    let byte_at = |off: u64| -> Option<u8> {
        segs.iter().find_map(|(st, b)| {
            off.checked_sub(*st)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| b.get(i).copied())
        })
    };
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
