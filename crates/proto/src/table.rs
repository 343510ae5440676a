//! The hash tables the endpoint consults for every datagram (connections by handle and by
//! key, FEC hints by peer).
//!
//! They hash with foldhash rather than std's SipHash-1-3: SipHash was 10 % of the user-space
//! instructions of a loopback transfer (about 14 lookups per TPDU sent and received,
//! `valgrind --tool=callgrind` on `aerotp bench loopback`, docs/results/loopback.md). Keys
//! arrive off the wire (peer addresses, connection ids), so the hasher is seeded: from the
//! endpoint's own generator, which keeps the engine deterministic for a given seed, and keeps
//! the seed secret where the runtime draws it from the operating system
//! (`aerotp_net::Endpoint::bind`). Every table is bounded besides (`max_connections`,
//! `HINT_LIMIT`), so a crafted collision costs lookups, never memory.

use std::collections::HashMap;

use foldhash::fast::FixedState;

/// A hash table seeded by the endpoint.
pub(crate) type Table<K, V> = HashMap<K, V, FixedState>;

/// An empty table whose hasher is seeded with `seed`.
pub(crate) fn table<K, V>(seed: u64) -> Table<K, V> {
    HashMap::with_hasher(FixedState::with_seed(seed))
}
