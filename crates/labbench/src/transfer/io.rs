//! What every protocol's sender and receiver share: the receiver's ready signal, block
//! writes stamped at write time, deadlines, the close grace.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::timeout_at;

use crate::payload::{Clock, Source};

/// Blocks per application write (small, so a block's stamp is close to its write time).
const BLOCKS_PER_WRITE: u32 = 4;
/// After the end of the data, how long a receiver keeps its endpoint for the close handshake.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The receiver tells the sender it is ready (with QUIC, the certificate to trust).
pub(super) type Ready = mpsc::SyncSender<Result<Trust>>;

/// What a sender must trust to reach the receiver: QUIC's self-signed certificate (DER).
pub(super) type Trust = Option<Arc<Vec<u8>>>;

/// A receiver's bind, reported to the sender waiting on `ready` (with what it must trust, for
/// QUIC) and returned; a failure is reported and returned as `"{what}: {error}"`.
pub(super) fn report_bound<T, E: std::fmt::Display>(
    bound: std::result::Result<(T, Trust), E>,
    what: &str,
    ready: &Ready,
) -> Result<T> {
    match bound {
        Ok((t, trust)) => {
            let _ = ready.send(Ok(trust));
            Ok(t)
        }
        Err(e) => {
            let msg = format!("{what}: {e:#}");
            let _ = ready.send(Err(anyhow!("{msg}")));
            Err(anyhow!(msg))
        }
    }
}

/// Writes every block (stamped at write time) unless the deadline comes first.
pub(super) async fn write_blocks<W: AsyncWrite + Unpin>(
    w: &mut W,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let mut buf = Vec::new();
    while !src.done() {
        buf.clear();
        src.take(&clock, BLOCKS_PER_WRITE, &mut buf);
        timeout_at(deadline, w.write_all(&buf))
            .await
            .map_err(|_| anyhow!("time cap reached while writing"))?
            .context("write")?;
    }
    Ok(())
}

pub(super) fn deadline_of(cap: Duration) -> tokio::time::Instant {
    tokio::time::Instant::now() + cap
}
