//! The egress's crash-safe delivery record (docs/gateway.md §Egress restart): per
//! near-reliable flow, how many of the ingress's bytes the egress has written to the
//! destination socket, so that a restarted egress can tell a resuming ingress exactly where
//! to continue — or that it cannot know.
//!
//! Per flow two files in the egress's `--store` directory: `<flow id>.meta` (class,
//! destination and the host's boot id; written once, durably) and `<flow id>.progress`, two
//! 64-byte slots written alternately with `pwrite`, each with a generation and a CRC-32C, so a
//! torn write leaves the other slot valid. Just before each `write()` to the destination the
//! record says `intent = written + len`; just after it returned, `written = intent`. At a
//! restart `intent != written` means the process died between the two: those bytes are *in
//! doubt* (the kernel may or may not have taken them).
//!
//! Durability: a record is in the kernel's page cache once `pwrite` returned, so it survives
//! the death of the process (kill -9, panic, OOM kill) without `fsync`. It does not survive a
//! crash of the host, but then neither does the destination connection's send buffer: after a
//! reboot what reached the destination is unknowable whatever was synced, so a flow recorded
//! under another boot id is reset (docs/gateway.md §Egress restart). The meta file and the
//! flags (`IN_FIN`, `REVERSE`, `COMPLETE`) are synced (`fdatasync`); per-chunk records are
//! not, which keeps the record off the data path's critical time (two `pwrite`s per chunk).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 4] = b"AGWP";
const SLOT: usize = 64;

/// Flag: the ingress's FIN was delivered (the destination's write half was shut).
pub(crate) const IN_FIN: u8 = 1;
/// Flag: the destination sent bytes back (the reverse direction is not empty).
pub(crate) const REVERSE: u8 = 2;
/// Flag: the flow completed.
pub const COMPLETE: u8 = 4;

/// One flow's delivery state as recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub generation: u64,
    /// Bytes the next `write()`s to the destination may have reached.
    pub intent: u64,
    /// Bytes `write()` to the destination returned for.
    pub written: u64,
    pub flags: u8,
}

impl Progress {
    fn encode(&self) -> [u8; SLOT] {
        let mut b = [0u8; SLOT];
        b[..4].copy_from_slice(MAGIC);
        b[4..12].copy_from_slice(&self.generation.to_be_bytes());
        b[12..20].copy_from_slice(&self.intent.to_be_bytes());
        b[20..28].copy_from_slice(&self.written.to_be_bytes());
        b[28] = self.flags;
        let c = aerotp_wire::crc32c(&b[..SLOT - 4]);
        b[SLOT - 4..].copy_from_slice(&c.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Progress> {
        if b.len() < SLOT || &b[..4] != MAGIC {
            return None;
        }
        let c = u32::from_be_bytes(b[SLOT - 4..SLOT].try_into().ok()?);
        if aerotp_wire::crc32c(&b[..SLOT - 4]) != c {
            return None;
        }
        let u = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Some(Progress {
            generation: u(4),
            intent: u(12),
            written: u(20),
            flags: b[28],
        })
    }

    /// Bytes in doubt: the process died between the intent and the written record.
    pub(crate) fn in_doubt(&self) -> Option<(u64, u64)> {
        (self.intent != self.written).then_some((self.written, self.intent))
    }
}

/// What the egress knows of a flow across restarts.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressMeta {
    pub flow_id: u64,
    pub class: u8,
    pub dest: String,
    /// `/proc/sys/kernel/random/boot_id` when the flow was created.
    pub boot_id: String,
}

impl EgressMeta {
    fn encode(&self) -> String {
        format!(
            "aerotp-gw egress flow v1\n{:016x}\n{}\n{}\n{}\n",
            self.flow_id, self.class, self.dest, self.boot_id
        )
    }
    fn decode(s: &str) -> Option<EgressMeta> {
        let mut l = s.lines();
        if l.next()? != "aerotp-gw egress flow v1" {
            return None;
        }
        Some(EgressMeta {
            flow_id: u64::from_str_radix(l.next()?, 16).ok()?,
            class: l.next()?.parse().ok()?,
            dest: l.next()?.to_owned(),
            boot_id: l.next()?.to_owned(),
        })
    }
}

/// This host's boot id (changes at every boot); empty if the kernel does not say.
pub(crate) fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// A flow's open delivery record.
pub struct ProgressLog {
    root: PathBuf,
    flow_id: u64,
    file: File,
    last: Progress,
}

impl std::fmt::Debug for ProgressLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressLog")
            .field("flow", &format_args!("{:016x}", self.flow_id))
            .field("last", &self.last)
            .finish()
    }
}

fn paths(root: &Path, id: u64) -> (PathBuf, PathBuf) {
    (
        root.join(format!("{id:016x}.meta")),
        root.join(format!("{id:016x}.progress")),
    )
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl ProgressLog {
    /// Creates the flow's record (meta durably, progress zero).
    pub fn create(root: &Path, meta: &EgressMeta) -> io::Result<ProgressLog> {
        fs::create_dir_all(root)?;
        let (mp, pp) = paths(root, meta.flow_id);
        let tmp = root.join(format!(".{:016x}.meta.tmp", meta.flow_id));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(meta.encode().as_bytes())?;
            f.sync_all()?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&pp)?;
        let mut log = ProgressLog {
            root: root.to_owned(),
            flow_id: meta.flow_id,
            file,
            last: Progress::default(),
        };
        log.record(Progress::default(), true)?;
        fs::rename(&tmp, &mp)?;
        sync_dir(root)?;
        Ok(log)
    }

    /// Writes `p` (its generation is set here) into the older slot; `sync`: and `fdatasync`s.
    pub fn record(&mut self, mut p: Progress, sync: bool) -> io::Result<()> {
        p.generation = self.last.generation + 1;
        let slot = (p.generation % 2) * SLOT as u64;
        self.file.write_all_at(&p.encode(), slot)?;
        if sync {
            self.file.sync_data()?;
        }
        self.last = p;
        Ok(())
    }

    pub fn last(&self) -> Progress {
        self.last
    }

    /// Deletes the flow's files.
    pub fn remove(&self) -> io::Result<()> {
        let (mp, pp) = paths(&self.root, self.flow_id);
        fs::remove_file(mp)?;
        fs::remove_file(pp)
    }
}

/// Egress: one flow's delivery record while the flow runs, taken when it ends. Its lock is
/// shared by the flow's TCP writer (the intent before each write and what was written after
/// it), the task reading the destination (`REVERSE` before the first byte back) and the
/// egress (`COMPLETE`, then taken); it is held for one `pwrite` (and `fdatasync` when
/// `sync`), never across an await.
#[derive(Debug)]
pub struct Record(Mutex<Option<ProgressLog>>);

impl Record {
    pub fn new(log: ProgressLog) -> Arc<Record> {
        Arc::new(Record(Mutex::new(Some(log))))
    }

    /// Updates the record from its last state (`sync`: and `fdatasync`s it; else one
    /// `pwrite`); a no-op once taken.
    pub fn note(&self, f: impl FnOnce(&mut Progress), sync: bool) -> Result<(), String> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(log) => {
                let mut p = log.last();
                f(&mut p);
                log.record(p, sync)
            }
            None => Ok(()),
        }
        .map_err(|e| {
            format!("egress store error (delivery record): {e}; check the --store directory")
        })
    }

    /// [`Record::note`] with `fdatasync`, on a blocking thread.
    pub async fn persist(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Progress) + Send + 'static,
    ) -> Result<(), String> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.note(f, true))
            .await
            .unwrap_or_else(|e| Err(format!("store task: {e}")))
    }

    /// The log, taken (the flow finished).
    pub fn take(&self) -> Option<ProgressLog> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A flow found in the egress's store at start-up.
#[derive(Debug)]
pub struct Found {
    pub meta: EgressMeta,
    pub progress: Progress,
    pub log: ProgressLog,
    pub modified: std::time::SystemTime,
}

fn open(root: &Path, meta_path: &Path) -> io::Result<Found> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let meta = EgressMeta::decode(&fs::read_to_string(meta_path)?).ok_or_else(|| {
        bad(format!(
            "{}: not an egress flow record",
            meta_path.display()
        ))
    })?;
    let (_, pp) = paths(root, meta.flow_id);
    let file = OpenOptions::new().read(true).write(true).open(&pp)?;
    let mut b = [0u8; 2 * SLOT];
    let n = file.read_at(&mut b, 0)?;
    let a = Progress::decode(&b[..n.min(SLOT)]);
    let c = if n >= 2 * SLOT {
        Progress::decode(&b[SLOT..])
    } else {
        None
    };
    let progress = match (a, c) {
        (Some(a), Some(c)) => {
            if a.generation > c.generation {
                a
            } else {
                c
            }
        }
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => {
            return Err(bad(format!(
                "{}: no valid progress slot (torn or foreign file)",
                pp.display()
            )))
        }
    };
    let modified = fs::metadata(&pp)?.modified()?;
    Ok(Found {
        log: ProgressLog {
            root: root.to_owned(),
            flow_id: meta.flow_id,
            file,
            last: progress,
        },
        meta,
        progress,
        modified,
    })
}

/// Flows recorded in `root` (creating it if missing); unreadable records are reported.
pub fn restore_all(root: &Path) -> io::Result<Vec<Result<Found, (PathBuf, io::Error)>>> {
    let mut out = Vec::new();
    match fs::read_dir(root) {
        Ok(rd) => {
            for e in rd {
                let p = e?.path();
                let is_meta = p.extension().is_some_and(|x| x == "meta")
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'));
                if is_meta {
                    out.push(open(root, &p).map_err(|e| (p.clone(), e)));
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(root)?,
        Err(e) => return Err(e),
    }
    Ok(out)
}

/// Completed flows whose records are kept (a resume after a lost final confirmation), oldest
/// first, at most `cap`: pushing more deletes the oldest record.
#[derive(Debug, Default)]
pub(crate) struct Completed {
    pub order: VecDeque<(u64, Option<ProgressLog>)>,
    pub delivered: std::collections::HashMap<u64, u64>,
}

impl Completed {
    pub fn push(&mut self, id: u64, delivered: u64, log: Option<ProgressLog>, cap: usize) {
        self.order.push_back((id, log));
        self.delivered.insert(id, delivered);
        while self.order.len() > cap {
            if let Some((old, log)) = self.order.pop_front() {
                self.delivered.remove(&old);
                if let Some(l) = log {
                    if let Err(e) = l.remove() {
                        tracing::warn!(flow = %format!("{old:016x}"), error = %e,
                            "cannot remove a completed flow's record from the store");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen_and_torn_slots() {
        let root = tempfile::tempdir().unwrap();
        let meta = EgressMeta {
            flow_id: 7,
            class: 2,
            dest: "127.0.0.1:9".into(),
            boot_id: boot_id(),
        };
        let mut l = ProgressLog::create(root.path(), &meta).unwrap();
        l.record(
            Progress {
                intent: 100,
                written: 0,
                ..Progress::default()
            },
            false,
        )
        .unwrap();
        l.record(
            Progress {
                intent: 100,
                written: 100,
                flags: IN_FIN,
                ..Progress::default()
            },
            true,
        )
        .unwrap();
        drop(l);
        let mut all = restore_all(root.path()).unwrap();
        assert_eq!(all.len(), 1);
        let f = all.pop().unwrap().unwrap();
        assert_eq!(f.meta, meta);
        assert_eq!((f.progress.intent, f.progress.written), (100, 100));
        assert_eq!(f.progress.flags, IN_FIN);
        assert_eq!(f.progress.in_doubt(), None);
        // The newest slot torn: the previous record (intent 100, written 0) is what we know.
        let pp = root.path().join(format!("{:016x}.progress", 7));
        let slot = (f.progress.generation % 2) * SLOT as u64;
        let file = OpenOptions::new().write(true).open(&pp).unwrap();
        file.write_all_at(&[0xff; 8], slot + 20).unwrap();
        let f = restore_all(root.path()).unwrap().pop().unwrap().unwrap();
        assert_eq!(f.progress.in_doubt(), Some((0, 100)));
        f.log.remove().unwrap();
        assert!(restore_all(root.path()).unwrap().is_empty());
    }

    #[test]
    fn foreign_or_garbage_records_are_reported_and_good_ones_restored() {
        let root = tempfile::tempdir().unwrap();
        let meta = |flow_id| EgressMeta {
            flow_id,
            class: 1,
            dest: "127.0.0.1:9".into(),
            boot_id: boot_id(),
        };
        drop(ProgressLog::create(root.path(), &meta(1)).unwrap());
        drop(ProgressLog::create(root.path(), &meta(2)).unwrap());
        // Flow 2's progress file overwritten with garbage; a foreign .meta file beside them.
        fs::write(
            root.path().join(format!("{:016x}.progress", 2)),
            [0x5a; 100],
        )
        .unwrap();
        fs::write(root.path().join("junk.meta"), "hello\n").unwrap();
        let all = restore_all(root.path()).unwrap();
        assert_eq!(all.len(), 3);
        let ok: Vec<u64> = all
            .iter()
            .filter_map(|r| r.as_ref().ok().map(|f| f.meta.flow_id))
            .collect();
        assert_eq!(ok, [1]);
        let errors: Vec<String> = all
            .iter()
            .filter_map(|r| r.as_ref().err().map(|(_, e)| e.to_string()))
            .collect();
        assert!(
            errors.iter().any(|e| e.contains("no valid progress slot")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("not an egress flow record")),
            "{errors:?}"
        );
    }

    #[test]
    fn completed_records_are_bounded() {
        let root = tempfile::tempdir().unwrap();
        let mut c = Completed::default();
        for id in 0..5u64 {
            let meta = EgressMeta {
                flow_id: id,
                class: 0,
                dest: String::new(),
                boot_id: String::new(),
            };
            let l = ProgressLog::create(root.path(), &meta).unwrap();
            c.push(id, id * 10, Some(l), 3);
        }
        assert_eq!(c.order.len(), 3);
        assert!(!c.delivered.contains_key(&1));
        assert_eq!(c.delivered[&4], 40);
        assert_eq!(restore_all(root.path()).unwrap().len(), 3);
    }
}
