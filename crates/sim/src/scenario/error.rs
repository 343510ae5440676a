//! Why a scenario cannot run.

use std::fmt;

/// Why a scenario cannot run.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    Mode(String),
    Topology(String),
    Size,
    Runs,
    Cap,
    Config(String),
    Parse(String),
    /// A named setting (`Scenario::set`, plans, `--workload`) that cannot be applied.
    Setting {
        key: String,
        value: String,
        problem: String,
    },
    /// The network: `path[i].forward.K` and what is wrong.
    Network(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Mode(m) => write!(
                f,
                "unknown mode '{m}': give one of reliable, near-reliable, quasi-reliable, hybrid-nack, hybrid-nack-mack, unreliable, datagram, udp"
            ),
            SimError::Topology(t) => write!(f, "unknown topology '{t}': give two-node or papers"),
            SimError::Size => write!(f, "size must be at least 1 byte (e.g. 1MB, 500kB, 4096)"),
            SimError::Runs => write!(f, "runs must be at least 1"),
            SimError::Cap => write!(f, "the time cap must be positive"),
            SimError::Config(e) => write!(f, "{e}"),
            SimError::Parse(e) => write!(f, "{e}"),
            SimError::Setting {
                key,
                value,
                problem,
            } => write!(f, "`{key}` = {value}: {problem}"),
            SimError::Network(e) => write!(f, "network: {e}"),
        }
    }
}

impl std::error::Error for SimError {}
