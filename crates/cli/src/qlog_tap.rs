//! `--qlog DIR`: the adapters that write a trace (crates/qlog) from the simulator's hook and
//! from the runtime's datagram tap.

use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aerotp_qlog::writer::{WriteStats, DEFAULT_MAX_BYTES};
use aerotp_qlog::{Observer, QlogWriter, TpduLog, Vantage};
use anyhow::{Context, Result};

type Writer = QlogWriter<BufWriter<File>>;

/// Checks that `dir` exists (creating it) and is writable, before anything runs: a bad
/// `--qlog` stops the command at once and writes nothing else.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--qlog {}: cannot create the directory", dir.display()))?;
    let probe = dir.join(format!(".aerotp-qlog-probe-{}", std::process::id()));
    File::create(&probe)
        .with_context(|| format!("--qlog {}: the directory is not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

fn create(path: &Path, title: &str, vantage: Vantage) -> Result<Writer> {
    let f = File::create(path).with_context(|| format!("--qlog: creating {}", path.display()))?;
    QlogWriter::new(BufWriter::new(f), title, vantage, DEFAULT_MAX_BYTES)
        .with_context(|| format!("--qlog: writing {}", path.display()))
}

/// A simulator run's trace: both endpoints, virtual time.
pub struct SimQlog {
    w: Writer,
    tpdus: TpduLog,
    obs: Observer,
    sender: SocketAddr,
    error: Option<std::io::Error>,
    pub path: PathBuf,
}

impl SimQlog {
    pub fn create(path: PathBuf, title: &str) -> Result<SimQlog> {
        Ok(SimQlog {
            w: create(&path, title, Vantage::Network)?,
            tpdus: TpduLog::new(),
            obs: Observer::new(),
            sender: aerotp_sim::addr_sender(),
            error: None,
            path,
        })
    }

    fn keep(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }

    /// Flushes; the first write error, if any, names the file.
    pub fn finish(self) -> Result<WriteStats> {
        let path = self.path.display().to_string();
        if let Some(e) = self.error {
            return Err(e).with_context(|| format!("--qlog: writing {path}"));
        }
        Ok(self
            .w
            .finish()
            .with_context(|| format!("--qlog: writing {path}"))?
            .0)
    }
}

impl aerotp_sim::Tap for SimQlog {
    fn datagram(
        &mut self,
        point: aerotp_sim::TapPoint,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    ) {
        let sent = point == aerotp_sim::TapPoint::Sent;
        let who = if sent { src } else { dst };
        let side = if who == self.sender {
            "sender"
        } else {
            "receiver"
        };
        let r = self
            .tpdus
            .write(&mut self.w, at, sent, side, src, dst, bytes);
        self.keep(r);
    }

    fn engine(
        &mut self,
        at: Duration,
        side: &str,
        conn: u64,
        stats: &aerotp_proto::ConnectionStats,
        state: aerotp_proto::State,
    ) {
        let r = self.obs.observe(&mut self.w, at, side, conn, stats, state);
        self.keep(r);
    }
}
