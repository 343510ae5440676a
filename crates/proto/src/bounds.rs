//! Bounds on the engine's settings that parsers outside it check too, defined once here (the
//! lowest rate is `rate::MIN_RATE_BPS`, beside the pacing it bounds).

/// Smallest and largest MTU (UDP payload, bytes) a connection takes: what
/// `ConnectionConfig::validate` accepts and the CLI's `--mtu` parser checks.
pub const MIN_MTU: usize = 128;
pub const MAX_MTU: usize = 65_000;
