//! AeroTP wire format: the TPDU header, control bodies and integrity checks, byte by byte as
//! specified in `docs/spec.md`.
//!
//! Everything here is pure: parse functions take any byte slice and return a value or a typed
//! [`WireError`], never panic and never allocate more than the input's size.

mod admission;
mod auth;
mod checks;
mod control;
#[cfg(target_arch = "x86_64")]
mod crc_tail;
mod error;
mod header;
mod mode;
mod seq;
mod tpdu;

pub use admission::{Challenge, Echo, CHALLENGE_LEN, CID_LEN, COOKIE_LEN, ECHO_LEN};
pub use auth::{Envelope, AUTH_BIT, AUTH_OVERHEAD, ENCRYPTED_BIT, MAX_KEY_ID, NONCE_LEN, TAG_LEN};
pub use checks::{crc32c, crc32c_crate, crc32c_table, hec, hec_table};
pub use control::{Ack, ControlBody, Mack, Nack, Report, Snack, MACK_FIXED_LEN};
pub use error::WireError;
pub use header::{Flags, Header, HEADER_LEN, PORT_BYTES, VERSION};
pub use mode::Mode;
pub use seq::expand_seq;
pub use tpdu::{
    emit_tpdu, emit_tpdu_with, finish_auth_tpdu, parse_tpdu, parse_tpdu_any, Tpdu, CRC_LEN,
    OVERHEAD,
};
