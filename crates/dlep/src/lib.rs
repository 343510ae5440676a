//! The router side of DLEP, the Dynamic Link Exchange Protocol (RFC 8175): a radio (the
//! *modem*) tells the router, for each neighbour it reaches (a *destination*, named by MAC
//! address), that it is up or down and at what rate, latency and quality. AeroTP uses it to
//! learn a path's rate from the radio instead of from the user.
//!
//! # Using it
//!
//! ```no_run
//! # async fn example() {
//! use aerotp_dlep::{spawn, ClientConfig, Event};
//! let (client, mut events) = spawn(ClientConfig::connect("192.0.2.1:854".parse().unwrap()));
//! while let Some(e) = events.recv().await {
//!     match e {
//!         Event::DestinationUp(d) | Event::DestinationUpdate(d) => {
//!             // d.metrics.current_rate_tx: what the radio can send to d.mac now (bit/s)
//!         }
//!         Event::DestinationDown { mac } => { /* that neighbour is gone */ }
//!         Event::SessionLost { .. } => { /* every destination is gone; the client reconnects */ }
//!         _ => {}
//!     }
//! }
//! client.shutdown().await;
//! # }
//! ```
//!
//! * [`spawn`] / [`Client`] / [`ClientConfig`]: a tokio task that connects to the modem over
//!   TCP (or finds it with Peer Discovery, [`Target::Discover`]), keeps the session, reconnects
//!   with backoff, and sends [`Event`]s on a channel.
//! * [`Session`]: the same protocol sans IO (bytes, timers and events, time passed in) for a
//!   caller with its own event loop or a simulator.
//! * [`codec`]: the wire format, zero-copy views and typed messages.
//!
//! Events carry full state, not deltas: a [`Destination`] in `DestinationUp`/`DestinationUpdate`
//! has every metric known for it (the modem-wide metrics of the session where it gave none of
//! its own). Metrics that are implausible (a data rate of 0 or above
//! [`Config::max_rate_bps`], a latency above [`Config::max_latency`]) are left out and reported
//! as [`Event::Anomaly`], so a consumer can apply any metric it gets. [`Event::SessionLost`]
//! means every destination of the session is down. RFC 8651 Pause/Restart arrive as
//! [`Event::Pause`] / [`Event::Restart`].
//!
//! # Why a codec of its own
//!
//! crates.io has `dlep` 0.2.0 (and its `dlep-core`/`dlep-fsm` parts, one author, first
//! functional release): it covers RFC 8175 but neither RFC 8651 Pause/Restart nor RFC 8757
//! Latency Range, is not zero-copy, and states that interoperability with independent
//! implementations is outside its validation. The codec here is small, written to the RFCs,
//! fuzzed, and tested against MIT-LL's LL-DLEP modem (`tests/ll_dlep.rs`).

pub mod client;
pub mod codec;
pub mod discovery;
mod fuzz;
mod session;
mod spec;

pub use client::{spawn, Client, ClientConfig, Discovery, Target};
pub use codec::{Mac, StatusCode};
pub use fuzz::fuzz_parse;
pub use session::{
    Addresses, Anomaly, Config, Destination, Event, LostReason, Metrics, PeerInfo, Session, Stats,
};
pub use spec::{parse_mapping, parse_target, target_text};
