//! What one simulated transfer looks like: mode, link, file, topology; with validation.
//!
//! One job per module: `model` the scenario and what the engine and links get from it,
//! `mode` the carriers and topologies, `set` named settings (plans, flags), `validate` the
//! whole-scenario check, `values` how values are read, `error` why a scenario cannot run,
//! `senders` several senders sharing the scenario's links.

mod error;
mod mode;
mod model;
mod senders;
mod set;
mod validate;
mod values;

pub use error::SimError;
pub use mode::{SimMode, Topology};
pub use model::{datagram_parity, Scenario, Striping, IP_UDP_OVERHEAD};
pub use senders::{Senders, MAX_SENDERS};
pub use set::{ENGINE_KEYS, LINK_KEY_FORMS};
pub use values::parse_size;
