//! Several senders sharing the scenario's links (`aerotp sim --senders N`): when each starts,
//! the extra one-way delay between each and the shared links, how long they settle before
//! fairness is measured, and the check of all that against the scenario.

use std::time::Duration;

use aerotp_proto::Mode;

use super::error::SimError;
use super::mode::SimMode;
use super::model::{Scenario, Striping};
use crate::workload::Workload;

/// The most senders one run takes: each is two engine endpoints in the run's one thread, and
/// the link tag that carries a datagram's sender has six bits for it.
pub const MAX_SENDERS: usize = 64;

/// N senders, each with its own receiver, every sender's datagrams in the scenario's forward
/// links and every receiver's in its reverse links (the same queues), each moving the
/// scenario's bulk file at the scenario's rate settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Senders {
    /// Sender i connects at `starts[i]` (one per sender).
    pub starts: Vec<Duration>,
    /// Sender i's extra one-way delay, each way, between it and the shared links: its
    /// datagrams enter the forward links that much later, its receiver's reach it that much
    /// after leaving the reverse links (one per sender; zero: none).
    pub delays: Vec<Duration>,
    /// Jain's index and each sender's share are measured from this long after the last
    /// sender starts (to the first sender's finish).
    pub settle: Duration,
}

impl Senders {
    /// `n` senders, all from t = 0 with no extra delay, settling 5 s (the convergence time
    /// issue 37 asks for).
    pub fn new(n: usize) -> Senders {
        Senders {
            starts: vec![Duration::ZERO; n],
            delays: vec![Duration::ZERO; n],
            settle: Duration::from_secs(5),
        }
    }

    pub fn count(&self) -> usize {
        self.starts.len()
    }

    /// When the last sender starts.
    pub fn last_start(&self) -> Duration {
        self.starts.iter().copied().max().unwrap_or_default()
    }

    /// Checks the senders against a (valid) scenario and says what cannot be run.
    pub fn validate(&self, s: &Scenario) -> Result<(), SimError> {
        let bad = |key: &str, value: String, problem: String| {
            Err(SimError::Setting {
                key: key.into(),
                value,
                problem,
            })
        };
        let n = self.count();
        if n == 0 || n > MAX_SENDERS {
            return bad(
                "senders",
                n.to_string(),
                format!("give 1 to {MAX_SENDERS} senders"),
            );
        }
        if self.delays.len() != n {
            return bad(
                "sender_delay",
                format!("{} values", self.delays.len()),
                format!("give one per sender ({n})"),
            );
        }
        if matches!(s.mode, SimMode::Udp | SimMode::Aero(Mode::Datagram)) {
            return bad(
                "senders",
                n.to_string(),
                format!(
                    "several senders are AeroTP connections; mode {} has none",
                    s.mode
                ),
            );
        }
        if s.workload != Workload::Bulk {
            return bad(
                "senders",
                n.to_string(),
                format!(
                    "several senders each move the bulk file (--size); workload {} is for \
                     one sender",
                    s.workload
                ),
            );
        }
        if s.radio_follows_trace {
            return bad(
                "senders",
                n.to_string(),
                "the radio that follows a trace speaks to one sender's paths; not with \
                 several senders"
                    .into(),
            );
        }
        if s.network.paths.len() > 1 && s.striping == Striping::Engine {
            return bad(
                "senders",
                n.to_string(),
                format!(
                    "several senders share {} paths only when the driver stripes them \
                     (--stripe-below): each engine using every path itself is not simulated",
                    s.network.paths.len()
                ),
            );
        }
        if let Some(&late) = self.starts.iter().find(|&&t| t >= s.cap) {
            return bad(
                "sender_start",
                format!("{late:?}"),
                format!("every sender must start before the cap ({:?})", s.cap),
            );
        }
        if let Some(&d) = self.delays.iter().find(|&&d| d > Duration::from_secs(60)) {
            return bad(
                "sender_delay",
                format!("{d:?}"),
                "an extra one-way delay is at most 60 s".into(),
            );
        }
        Ok(())
    }
}
