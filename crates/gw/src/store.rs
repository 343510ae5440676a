//! Custody of the bytes a gateway has taken from its TCP side and the peer has not yet
//! confirmed: in memory (`Custody::Mem`) or in the crash-safe store ([`DiskLog`]): per flow a
//! directory of fsync'd append-only segment files, the confirmed offset and the FIN offset
//! (docs/gateway.md §Custody store).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A new segment file is started once the last one holds this many bytes.
pub(crate) const SEGMENT_BYTES: u64 = 4 << 20;

/// What a flow's store says about it (written once, at creation).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowMeta {
    pub flow_id: u64,
    pub class: u8,
    pub dest: String,
    pub route: String,
}

impl FlowMeta {
    fn encode(&self) -> String {
        format!(
            "aerotp-gw flow v1\n{:016x}\n{}\n{}\n{}\n",
            self.flow_id, self.class, self.dest, self.route
        )
    }
    fn decode(s: &str) -> Option<FlowMeta> {
        let mut l = s.lines();
        if l.next()? != "aerotp-gw flow v1" {
            return None;
        }
        Some(FlowMeta {
            flow_id: u64::from_str_radix(l.next()?, 16).ok()?,
            class: l.next()?.parse().ok()?,
            dest: l.next()?.to_owned(),
            route: l.next()?.to_owned(),
        })
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `data` to `dir/name` atomically and durably (temporary file, fsync, rename, fsync dir).
fn write_durable(dir: &Path, name: &str, data: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

fn read_u64_file(p: &Path) -> io::Result<Option<u64>> {
    match fs::read_to_string(p) {
        Ok(s) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{}", p.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

struct Segment {
    start: u64,
    len: u64,
    file: File,
}

/// One flow's append-only log on disk.
pub struct DiskLog {
    dir: PathBuf,
    segs: VecDeque<Segment>,
    /// Confirmed offset last written to disk.
    base_on_disk: u64,
}

impl std::fmt::Debug for DiskLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskLog").field("dir", &self.dir).finish()
    }
}

/// A flow found in the store at start-up.
#[derive(Debug)]
pub struct Restored {
    pub meta: FlowMeta,
    pub log: DiskLog,
    pub base: u64,
    pub end: u64,
    pub fin: bool,
}

impl DiskLog {
    /// Creates the flow's directory and metadata (durably).
    pub fn create(root: &Path, meta: &FlowMeta) -> io::Result<DiskLog> {
        let dir = root.join(format!("{:016x}", meta.flow_id));
        fs::create_dir_all(&dir)?;
        write_durable(&dir, "meta", meta.encode().as_bytes())?;
        sync_dir(root)?;
        Ok(DiskLog {
            dir,
            segs: VecDeque::new(),
            base_on_disk: 0,
        })
    }

    /// Opens a flow directory written by [`DiskLog::create`].
    pub fn open(dir: &Path) -> io::Result<Restored> {
        let meta = FlowMeta::decode(&fs::read_to_string(dir.join("meta"))?)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad meta file"))?;
        let base = read_u64_file(&dir.join("confirmed"))?.unwrap_or(0);
        let fin_at = read_u64_file(&dir.join("fin"))?;
        let mut starts: Vec<u64> = Vec::new();
        for e in fs::read_dir(dir)? {
            let name = e?.file_name();
            if let Some(s) = name.to_str().and_then(|n| n.strip_prefix("seg-")) {
                if let Ok(v) = s.parse() {
                    starts.push(v);
                }
            }
        }
        starts.sort_unstable();
        let mut segs = VecDeque::new();
        let mut end = None;
        for s in starts {
            let path = dir.join(format!("seg-{s:020}"));
            if let Some(e) = end {
                if s != e {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("segment gap at {e} in {}", dir.display()),
                    ));
                }
            }
            let file = OpenOptions::new().read(true).append(true).open(&path)?;
            let len = file.metadata()?.len();
            let seg_end = s.checked_add(len).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "segment {} of {} bytes ends beyond the largest offset in {}",
                        s,
                        len,
                        dir.display()
                    ),
                )
            })?;
            end = Some(seg_end);
            segs.push_back(Segment {
                start: s,
                len,
                file,
            });
        }
        let end = end.unwrap_or(base);
        if let Some(f) = fin_at {
            if f != end {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("FIN at {f} but log ends at {end}"),
                ));
            }
        }
        let first = segs.front().map_or(base, |s| s.start);
        if first > base || base > end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("confirmed {base} outside the log {first}..{end}"),
            ));
        }
        Ok(Restored {
            meta,
            log: DiskLog {
                dir: dir.to_owned(),
                segs,
                base_on_disk: base,
            },
            base,
            end,
            fin: fin_at.is_some(),
        })
    }

    fn end(&self) -> u64 {
        self.segs
            .back()
            .map_or(self.base_on_disk, |s| s.start + s.len)
    }

    /// Appends and fsyncs.
    pub fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let end = self.end();
        if self.segs.back().is_none_or(|s| s.len >= SEGMENT_BYTES) {
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .create_new(true)
                .open(self.dir.join(format!("seg-{end:020}")))?;
            sync_dir(&self.dir)?;
            self.segs.push_back(Segment {
                start: end,
                len: 0,
                file,
            });
        }
        let seg = self.segs.back_mut().expect("a segment");
        seg.file.write_all(data)?;
        seg.file.sync_data()?;
        seg.len += data.len() as u64;
        Ok(())
    }

    /// Up to `max` bytes from `offset`.
    pub fn read_at(&self, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let seg = self
            .segs
            .iter()
            .find(|s| s.start <= offset && offset < s.start + s.len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "offset not in the log"))?;
        let n = ((seg.start + seg.len - offset) as usize).min(max);
        let mut b = vec![0u8; n];
        seg.file.read_exact_at(&mut b, offset - seg.start)?;
        Ok(b)
    }

    /// Records that the peer confirmed everything below `base`; deletes whole segments below
    /// it (the last segment stays: it is the append target).
    pub fn trim(&mut self, base: u64) -> io::Result<()> {
        if base <= self.base_on_disk {
            return Ok(());
        }
        write_durable(&self.dir, "confirmed", base.to_string().as_bytes())?;
        self.base_on_disk = base;
        while self.segs.len() > 1 && self.segs[0].start + self.segs[0].len <= base {
            let s = self.segs.pop_front().expect("len > 1");
            fs::remove_file(self.dir.join(format!("seg-{:020}", s.start)))?;
        }
        Ok(())
    }

    /// Records the end of the source's stream.
    pub(crate) fn set_fin(&mut self) -> io::Result<()> {
        let end = self.end();
        write_durable(&self.dir, "fin", end.to_string().as_bytes())
    }

    /// Deletes the flow's directory (delivered or abandoned).
    pub fn remove(self) -> io::Result<()> {
        fs::remove_dir_all(&self.dir)
    }
}

/// Flows left in `root` by a previous run (directories that fail to open are reported).
pub fn restore_all(root: &Path) -> io::Result<Vec<Result<Restored, (PathBuf, io::Error)>>> {
    let mut out = Vec::new();
    match fs::read_dir(root) {
        Ok(rd) => {
            for e in rd {
                let p = e?.path();
                if p.join("meta").exists() {
                    out.push(DiskLog::open(&p).map_err(|e| (p.clone(), e)));
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(root)?,
        Err(e) => return Err(e),
    }
    Ok(out)
}

/// Where a flow's unconfirmed outbound bytes live.
#[derive(Debug)]
pub(crate) enum Custody {
    /// Bytes from `base` on.
    Mem {
        base: u64,
        buf: VecDeque<u8>,
    },
    Disk(DiskLog),
}

impl Custody {
    pub fn mem(base: u64) -> Custody {
        Custody::Mem {
            base,
            buf: VecDeque::new(),
        }
    }

    pub(crate) fn is_disk(&self) -> bool {
        matches!(self, Custody::Disk(_))
    }

    pub fn append(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Custody::Mem { buf, .. } => {
                buf.extend(data);
                Ok(())
            }
            Custody::Disk(d) => d.append(data),
        }
    }

    pub fn read_at(&self, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        match self {
            Custody::Mem { base, buf } => {
                let from = offset
                    .checked_sub(*base)
                    .filter(|&f| f <= buf.len() as u64)
                    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "offset released"))?
                    as usize;
                let n = (buf.len() - from).min(max);
                Ok(buf.range(from..from + n).copied().collect())
            }
            Custody::Disk(d) => d.read_at(offset, max),
        }
    }

    pub fn trim(&mut self, to: u64) -> io::Result<()> {
        match self {
            Custody::Mem { base, buf } => {
                if to > *base {
                    let n = ((to - *base) as usize).min(buf.len());
                    buf.drain(..n);
                    *base += n as u64;
                }
                Ok(())
            }
            Custody::Disk(d) => d.trim(to),
        }
    }

    pub(crate) fn set_fin(&mut self) -> io::Result<()> {
        match self {
            Custody::Mem { .. } => Ok(()),
            Custody::Disk(d) => d.set_fin(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_log_survives_reopen_trims_and_detects_gaps() {
        let root = tempfile::tempdir().unwrap();
        let meta = FlowMeta {
            flow_id: 42,
            class: 2,
            dest: "127.0.0.1:80".into(),
            route: "r".into(),
        };
        let mut d = DiskLog::create(root.path(), &meta).unwrap();
        let data: Vec<u8> = (0..(SEGMENT_BYTES as usize * 2 + 1000))
            .map(|i| (i % 251) as u8)
            .collect();
        for c in data.chunks(1 << 20) {
            d.append(c).unwrap();
        }
        d.trim(SEGMENT_BYTES + 10).unwrap();
        d.set_fin().unwrap();
        drop(d);
        let mut all = restore_all(root.path()).unwrap();
        assert_eq!(all.len(), 1);
        let r = all.pop().unwrap().unwrap();
        assert_eq!(r.meta, meta);
        assert_eq!(r.base, SEGMENT_BYTES + 10);
        assert_eq!(r.end, data.len() as u64);
        assert!(r.fin);
        // The first segment was deleted; the bytes from the confirmed offset on are intact.
        assert!(r.log.read_at(0, 10).is_err());
        let mut off = r.base;
        while off < r.end {
            let b = r.log.read_at(off, 70_000).unwrap();
            assert_eq!(&b[..], &data[off as usize..off as usize + b.len()]);
            off += b.len() as u64;
        }
        let dir = root.path().join(format!("{:016x}", 42));
        fs::remove_file(dir.join(format!("seg-{:020}", SEGMENT_BYTES))).unwrap();
        assert!(DiskLog::open(&dir).is_err());
        r.log.remove().unwrap();
        assert!(restore_all(root.path()).unwrap().is_empty());
    }

    #[test]
    fn mem_custody_reads_and_trims() {
        let mut c = Custody::mem(100);
        c.append(b"hello world").unwrap();
        assert_eq!(c.read_at(106, 100).unwrap(), b"world");
        c.trim(106).unwrap();
        assert!(c.read_at(100, 1).is_err());
        assert_eq!(c.read_at(106, 3).unwrap(), b"wor");
        assert_eq!(c.read_at(111, 3).unwrap(), b"");
    }
}
