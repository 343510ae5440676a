//! Where `aerotp recv` writes a transfer: a temporary file beside its destination
//! (`.NAME.ID.aerotp-tmp`), renamed to `NAME` when the transfer is verified and to
//! `NAME.partial` otherwise; or standard output, or memory (demo).

use std::path::{Path, PathBuf};

use anyhow::Context;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};

/// Where a transfer's bytes go.
#[derive(Debug, Clone)]
pub enum Sink {
    /// A file named from the sender's header in this directory.
    Dir(PathBuf),
    /// This file (replaced when the transfer is complete).
    File(PathBuf),
    Stdout,
    /// Kept in memory with arrival times (demo).
    #[cfg_attr(not(feature = "dev"), allow(dead_code))] // `demo` is not in the field build
    Memory,
}

/// One transfer's output: the writer, and for a file its temporary and final names.
pub struct Output {
    writer: Option<Box<dyn AsyncWrite + Unpin + Send>>,
    tmp: Option<PathBuf>,
    final_path: Option<PathBuf>,
}

fn unique_in(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    if !p.exists() {
        return p;
    }
    (1..10_000)
        .map(|i| dir.join(format!("{name}.{i}")))
        .find(|p| !p.exists())
        .unwrap_or(p)
}

pub async fn open_output(sink: &Sink, name: &str, id: u64) -> anyhow::Result<Output> {
    let (dir, final_path) = match sink {
        Sink::Dir(d) => (d.clone(), unique_in(d, name)),
        Sink::File(f) => {
            let dir = f
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            (dir, f.clone())
        }
        Sink::Stdout => {
            return Ok(Output {
                writer: Some(Box::new(tokio::io::stdout())),
                tmp: None,
                final_path: None,
            })
        }
        Sink::Memory => {
            return Ok(Output {
                writer: None,
                tmp: None,
                final_path: None,
            })
        }
    };
    let base = final_path
        .file_name()
        .map_or_else(|| "received".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{base}.{id}.aerotp-tmp"));
    let f = tokio::fs::File::create(&tmp)
        .await
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    Ok(Output {
        writer: Some(Box::new(BufWriter::with_capacity(1 << 20, f))),
        tmp: Some(tmp),
        final_path: Some(final_path),
    })
}

impl Output {
    /// Flushes what the writer holds.
    pub async fn flush(&mut self) -> anyhow::Result<()> {
        if let Some(w) = self.writer.as_mut() {
            w.flush()
                .await
                .map_err(|e| anyhow::Error::new(e).context("writing the output"))?;
        }
        Ok(())
    }
}

/// Flushes, fsyncs and renames the temporary file to its final name.
pub async fn commit(out: &mut Output) -> anyhow::Result<Option<PathBuf>> {
    let Some(fin) = out.final_path.take() else {
        return Ok(None);
    };
    finish_tmp(out, fin).await
}

/// Keeps what arrived as `NAME.partial`.
pub async fn keep_partial(out: &mut Output) -> anyhow::Result<Option<PathBuf>> {
    let Some(fin) = out.final_path.take() else {
        return Ok(None);
    };
    let mut p = fin.into_os_string();
    p.push(".partial");
    finish_tmp(out, PathBuf::from(p)).await
}

async fn finish_tmp(out: &mut Output, dest: PathBuf) -> anyhow::Result<Option<PathBuf>> {
    let Some(tmp) = out.tmp.take() else {
        return Ok(None);
    };
    if let Some(mut w) = out.writer.take() {
        // Best effort: a failed flush was reported already; the rename still keeps the bytes.
        let _ = w.flush().await;
    }
    let f = tokio::fs::OpenOptions::new()
        .write(true)
        .open(&tmp)
        .await
        .context("reopening the temporary file")?;
    f.sync_all().await.context("fsync")?;
    drop(f);
    tokio::fs::rename(&tmp, &dest)
        .await
        .with_context(|| format!("renaming to {}", dest.display()))?;
    Ok(Some(dest))
}

pub async fn write_bytes(
    out: Option<&mut Output>,
    b: &[u8],
    sha: &mut Sha256,
    sink: &Sink,
    data: &mut Vec<u8>,
) -> anyhow::Result<()> {
    sha.update(b);
    if matches!(sink, Sink::Memory) {
        data.extend_from_slice(b);
    }
    if let Some(w) = out.and_then(|o| o.writer.as_mut()) {
        w.write_all(b).await.context("writing the output")?;
    }
    Ok(())
}
