//! One transfer across a running lab: receiver thread in the ground namespace, sender thread in
//! the air namespace, each with its own single-threaded tokio runtime.
//!
//! One job per module: `spec` what a transfer is and measured, `run` the two threads and the
//! outcome, `io` what the protocols share, `tcp`, `quic`, `udp` and `aero` each protocol's
//! sender and receiver.

mod aero;
mod io;
mod quic;
mod run;
mod spec;
mod tcp;
mod udp;

pub use run::run;
pub use spec::{AeroStats, Cc, Outcome, Proto, Spec, STREAM_BLOCK, UDP_BLOCK};
