//! The AeroTP protocol engine, sans-IO: it reads no clock, owns no socket, thread or global
//! random generator. Time is a `Duration` since an epoch the caller chooses; randomness comes
//! from the seed given to [`Endpoint::new`]. Drive it with `handle_datagram`,
//! `handle_timeout`, `poll_transmit`, `poll_timeout` and `poll_event`.

mod admission;
mod auth;
mod bounds;
mod close_outcome;
mod codec;
mod config;
mod config_error;
mod confirmation;
mod connection;
mod control_due;
mod datagram_repair;
mod decode_budget;
mod endpoint;
mod endpoint_types;
mod erasure;
mod error_control;
mod fec_control;
mod fec_parity;
mod feedback_budget;
mod link_share;
mod listeners;
mod liveness;
mod migrations;
mod pacer;
mod paths;
mod phase;
mod radio;
mod rate;
mod receiver;
mod reorder_budget;
mod reset_guard;
mod rtt;
mod sender;
mod state;
mod table;
mod tombstones;
mod tpdu_size;

pub use aerotp_wire::{Mode, AUTH_OVERHEAD};
pub use auth::{AuthConfig, AuthError, AuthKey, KeySet, KEY_LEN, REPLAY_PEERS, REPLAY_WINDOW};
pub use bounds::{MAX_MTU, MIN_MTU};
pub use codec::{datagram_len, max_body};
pub use config::{ConfigError, ConnectionConfig, EndpointConfig, FecSetting, SEND_BUFFER_TPDUS};
pub use connection::{CloseOutcome, ConnectionStats, Role};
pub use datagram_repair::{datagram_repair, DatagramRoute};
pub use endpoint::{
    ConnectionHandle, DatagramMsg, Endpoint, EndpointError, EndpointStats, Event, PathAddr, Peer,
    Transmit,
};
pub use erasure::{
    ErasureChoice, ErasureMode, ErasureRxStats, ErasureSetting, ErasureTxStats, REPAIR_OVERHEAD,
};
pub use error_control::{AutoFec, ErrorControl, Feedback, Hole, Keep};
pub use fec_control::datagram_parity;
pub use fec_parity::auto_parity;
pub use link_share::{LinkShareConfig, SharePolicy, TrafficClass, SHARE_PERIOD};
pub use paths::{PathStats, MAX_PATHS};
pub use radio::{
    PathRadio, RadioApplied, RadioChange, RadioSignal, RadioTarget, RADIO_CHANGES_HELD, RADIO_PEERS,
};
pub use rate::{
    PathRate, RateControl, RatePhase, RateReason, DEFAULT_RATE_CAP_BPS, MIN_RATE_BPS, TRAIN_TPDUS,
};
pub use receiver::{Delivered, ReceiverStats};
pub use reorder_budget::{
    ReorderBudget, SharedBound, DEFAULT_ENDPOINT_REORDER_BYTES, DEFAULT_ENDPOINT_UNPROVEN_BYTES,
};
pub use reset_guard::ResetStats;
pub use sender::{LaneStats, SenderStats};
pub use state::{transition, Action, State, StateEvent};
