//! One simulated transfer: two endpoints of the engine (or a plain UDP sender) joined by the
//! link model, driven in virtual time by a discrete-event loop.
//!
//! One job per module: [`once`] the entry points, `connection` and `datagrams` the two kinds
//! of run, `net` the paths between the endpoints, `copies` the spurious-retransmission
//! bookkeeping, `app` the applications' bytes, `result` what a run measured, `tap` the
//! endpoints' addresses and the capture hook, `path_watch` the sender's path states against
//! the links' outages, `queue` what the links' queues did, `shared` several senders over the
//! same links.

mod app;
mod connection;
mod copies;
mod datagrams;
mod net;
mod once;
mod path_watch;
mod queue;
mod radio;
mod result;
mod shared;
mod tap;

/// Independent seeds from one seed and a stream number (the one definition lives in
/// `aerotp_link`; its test pins the outputs this simulator has always used).
pub use aerotp_link::mix_seed;
pub use once::{run_once, run_once_tapped};
pub use path_watch::PathRun;
pub use result::RunResult;
pub use shared::{jain, run_shared, SenderRun, SharedRun};
pub use tap::{addr_sender, Tap, TapPoint};
