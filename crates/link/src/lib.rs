//! Link impairment model shared by the simulator, the UDP relay and the TUN lab.
//!
//! One direction of a link is a [`Link`]: FIFO serialisation at a rate, a bounded drop-tail
//! queue, propagation delay with optional jitter, bit flips at a BER (with an optional
//! protected virtual header), random and Gilbert–Elliott burst loss, scheduled and
//! periodic outages, optional duplication and reordering, and statistics.
//!
//! The model is pure and deterministic: it reads no clock and owns no socket. Time is a
//! [`std::time::Duration`] since an arbitrary epoch (the one outages are relative to),
//! passed in by the driver; randomness comes from the seed given to [`Link::new`]. The same
//! seed and the same sequence of calls give the same outputs bit for bit.
//!
//! ```
//! use std::time::Duration;
//! use aerotp_link::{Link, LinkConfig, Offer};
//!
//! let mut link = Link::new(LinkConfig::default(), 42).unwrap(); // 5 Mb/s, 10 ms
//! let offer = link.send(Duration::ZERO, vec![0u8; 1500]);
//! // 1500 B at 5 Mb/s = 2.4 ms of serialisation, then 10 ms of propagation.
//! assert!(matches!(offer, Offer::Queued { arrival, .. } if arrival == Duration::from_micros(12_400)));
//! assert_eq!(link.next_arrival(), Some(Duration::from_micros(12_400)));
//! assert!(link.recv(Duration::from_millis(12)).is_none());
//! assert_eq!(link.recv(Duration::from_millis(13)).unwrap().len(), 1500);
//! ```
//!
//! A [`Path`] chains links (the papers' LAN – lossy – LAN topology) behind the same API.
//! The precise semantics are in `docs/link-model.md`.

mod config;
mod error;
mod histogram;
mod link;
mod network;
mod parse;
mod path;
mod seed;
mod trace;

pub use config::{GilbertElliott, LinkConfig, Outage, PeriodicOutage, RandomOutage, Sojourn};
pub use error::LinkError;
pub use histogram::{DelayHistogram, DelaySummary};
pub use link::{Delivery, DropReason, Link, LinkStats, LossReason, Offer};
pub use network::{Network, PathSpec, ScenarioError, MAX_PATHS};
pub use parse::{
    format_duration, format_rate, parse_burst, parse_duration, parse_outage, parse_random_outage,
    parse_rate, parse_size, serde_duration, serde_opt_duration, serde_rate, OutageScope,
    BURST_FORMS, RANDOM_OUTAGE_FORMS, SIZE_FORMS,
};
pub use path::Path;
pub use seed::{mix_seed, splitmix64};
pub use trace::{Trace, TraceRow};
