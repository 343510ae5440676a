//! How a connection ended: the [`Report`] `Connection::finish` returns, and the I/O error
//! a stream operation gets after an unclean end.

use std::io;

use crate::{CloseOutcome, ConnectionStats, Mode};

/// How a connection ended, with its final statistics.
#[derive(Debug, Clone)]
pub struct Report {
    pub mode: Mode,
    pub outcome: CloseOutcome,
    /// The peer acknowledged every byte we sent (modes with positive acknowledgements only).
    pub delivered_confirmed: bool,
    /// Whether the mode's guarantee was met: fully reliable modes need a confirmed finish;
    /// the others (statistical or no reliability) need a clean close, losses being reported
    /// in `stats`.
    pub guarantee_met: bool,
    pub stats: ConnectionStats,
}

impl Report {
    pub(crate) fn new(mode: Mode, outcome: CloseOutcome, stats: ConnectionStats) -> Report {
        let (clean, confirmed) = match outcome {
            CloseOutcome::Finished { confirmed } => (true, confirmed),
            _ => (false, false),
        };
        let guarantee_met = clean
            && (confirmed || !aerotp_proto::ErrorControl::for_mode(mode).delivers_everything());
        Report {
            mode,
            outcome,
            delivered_confirmed: confirmed,
            guarantee_met,
            stats,
        }
    }
}

/// Turns a close outcome that is not a clean finish into an I/O error.
pub fn outcome_error(o: &CloseOutcome) -> io::Error {
    match o {
        CloseOutcome::Finished { .. } => {
            io::Error::new(io::ErrorKind::BrokenPipe, "connection finished")
        }
        CloseOutcome::CloseTimeout => io::Error::new(
            io::ErrorKind::TimedOut,
            "close timed out before the final acknowledgements",
        ),
        CloseOutcome::IdleTimeout => io::Error::new(
            io::ErrorKind::TimedOut,
            "nothing heard from the peer for the idle timeout",
        ),
        CloseOutcome::SetupTimeout => io::Error::new(
            io::ErrorKind::TimedOut,
            "the peer never proved its address within the set-up timeout (spoofed, or cut off \
             at set-up); nothing was kept",
        ),
        CloseOutcome::Reset(r) => io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!("reset by peer: {r}"),
        ),
        CloseOutcome::Aborted => {
            io::Error::new(io::ErrorKind::ConnectionAborted, "connection aborted")
        }
    }
}
