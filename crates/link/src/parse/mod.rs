//! Parsers for the human forms of link parameters, shared by the CLI and config files.
//!
//! One job per module: `units` rates, sizes and durations (parse and format), `impairment`
//! outages, bursts and random outages, `serde_forms` the serde adapters config files use.

mod impairment;
mod serde_forms;
mod units;

pub use impairment::{
    parse_burst, parse_outage, parse_random_outage, OutageScope, BURST_FORMS, RANDOM_OUTAGE_FORMS,
};
pub use serde_forms::{serde_duration, serde_opt_duration, serde_rate};
pub use units::{format_duration, format_rate, parse_duration, parse_rate, parse_size, SIZE_FORMS};
