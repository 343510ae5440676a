//! AeroTP event traces in the style of qlog (draft-ietf-quic-qlog-main-schema): a JSON text
//! sequence (RFC 7464, JSON-SEQ) of one header record and then events, each
//! `{"time": ms, "name": "aerotp:…", "data": {…}}`, under the private schema
//! [`schema::SCHEMA_URI`] documented in docs/qlog.md.
//!
//! Where events come from (what the engine says anyway, read: a trace cannot change a run):
//! * [`tpdu`]: every datagram a driver sends or receives, decoded field by field (header,
//!   ACK/MACK/NACK/SNACK/RPT contents, repair and reset), with retransmissions marked;
//! * [`observer`]: the engine's own per-connection state, read after each step of the driver
//!   and written when it changes — RTT and timeout, rate, FEC strength, state, losses
//!   declared, TPDUs corrected or rebuilt, outages;
//! * [`radio`]: each change a radio (DLEP) made to a path, as the engine reports it with its
//!   own time (runtime traces).
//!
//! [`writer`] writes a trace, bounded in bytes; [`reader`] reads one back; [`analysis`] turns
//! it into a time-sequence chart and a summary (`aerotp trace`; feature `analysis`, on by
//! default: the field build writes traces and leaves the plotting out).

#[cfg(feature = "analysis")]
pub mod analysis;
pub mod observer;
pub mod radio;
pub mod reader;
pub mod schema;
pub mod tpdu;
pub mod writer;

#[cfg(feature = "analysis")]
pub use analysis::{analyse, Summary};
pub use observer::Observer;
pub use radio::radio_event;
pub use reader::{read_trace, Record};
pub use tpdu::TpduLog;
pub use writer::{QlogWriter, Vantage};
