//! The state behind a peer's new address (docs/spec.md §9, "A peer's new address";
//! the endpoint's use of it is `endpoint::migrate`): the connections by what identifies them
//! besides the peer's address, and the CHALLENGE series of new addresses being validated.

use crate::endpoint_types::ConnectionHandle;
use crate::table::{table, Table};
use std::net::SocketAddr;
use std::time::Duration;

/// (local port, peer port, tag): what identifies a connection besides the peer's address.
pub(crate) type PortsTag = (u16, u16, u8);

/// Most new addresses being validated at once (a spoofer's challenges are bounded by it too).
const MAX_PENDING: usize = 256;
const FIRST_RECHALLENGE: Duration = Duration::from_millis(250);
const MAX_RECHALLENGE: Duration = Duration::from_secs(2);
/// CHALLENGEs in one series (the last 5.75 s after the first; the series ends at 7.75 s); a TPDU from the address after that starts another.
/// Bounded by count, not by the set-up timeout: a bit error in the air link's UDP source port
/// (sent without checksum, so that FEC sees corrupted datagrams) makes a one-off address that
/// will never answer, and 30 s of challenges to each would cost a thin link more than the
/// datagram it came with.
const CHALLENGES_PER_SERIES: u32 = 6;

#[derive(Debug)]
struct Pending {
    addr: SocketAddr,
    sent: u32,
    next: Duration,
    interval: Duration,
}

/// The connections by ports and tag, and the new addresses being validated.
#[derive(Debug)]
pub(crate) struct Migrations {
    /// Each (ports, tag) with the connections that have it (a match needs exactly one).
    by_ports: Table<PortsTag, Vec<ConnectionHandle>>,
    pending: Table<ConnectionHandle, Pending>,
}

impl Migrations {
    pub(crate) fn new(seed: u64) -> Migrations {
        Migrations {
            by_ports: table(seed),
            pending: table(seed ^ 1),
        }
    }

    pub(crate) fn on_insert(&mut self, h: ConnectionHandle, key: PortsTag) {
        self.by_ports.entry(key).or_default().push(h);
    }

    pub(crate) fn on_release(&mut self, h: ConnectionHandle, key: PortsTag) {
        self.pending.remove(&h);
        if let Some(v) = self.by_ports.get_mut(&key) {
            v.retain(|&x| x != h);
            if v.is_empty() {
                self.by_ports.remove(&key);
            }
        }
    }

    /// The one connection with these ports and tag.
    pub(crate) fn lookup(&self, key: PortsTag) -> Option<ConnectionHandle> {
        match self.by_ports.get(&key).map(Vec::as_slice) {
            Some([h]) => Some(*h),
            _ => None,
        }
    }

    /// When the next re-challenge is due.
    pub(crate) fn next_deadline(&self) -> Option<Duration> {
        self.pending.values().map(|p| p.next).min()
    }

    /// New addresses being validated now.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Starts validating `addr` for `ch` unless it is being validated already: true if a
    /// CHALLENGE should go now. A new address for a connection replaces the one being
    /// validated; beyond [`MAX_PENDING`] connections with one, a new series is not started.
    pub(crate) fn start(&mut self, ch: ConnectionHandle, addr: SocketAddr, now: Duration) -> bool {
        if self.pending.get(&ch).is_some_and(|p| p.addr == addr) {
            return false;
        }
        if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(&ch) {
            return false;
        }
        self.pending.insert(
            ch,
            Pending {
                addr,
                sent: 1,
                next: now + FIRST_RECHALLENGE,
                interval: FIRST_RECHALLENGE,
            },
        );
        true
    }

    /// The re-challenges due at `now`: each series advanced, those that are over forgotten.
    pub(crate) fn due(&mut self, now: Duration) -> Vec<(ConnectionHandle, SocketAddr)> {
        let mut due = Vec::new();
        if self.next_deadline().is_none_or(|t| t > now) {
            return due;
        }
        self.pending.retain(|&ch, p| {
            if p.next > now {
                return true;
            }
            if p.sent >= CHALLENGES_PER_SERIES {
                return false;
            }
            p.sent += 1;
            p.interval = (p.interval * 2).min(MAX_RECHALLENGE);
            p.next = now + p.interval;
            due.push((ch, p.addr));
            true
        });
        due
    }

    /// `ch` switched to a proven address: its series is over.
    pub(crate) fn proven(&mut self, ch: ConnectionHandle) {
        self.pending.remove(&ch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_identity_matches_nothing_until_one_is_left() {
        let mut m = Migrations::new(1);
        let key = (7, 9000, 5);
        let (h1, h2) = (ConnectionHandle(1), ConnectionHandle(2));
        m.on_insert(h1, key);
        assert_eq!(m.lookup(key), Some(h1));
        m.on_insert(h2, key);
        assert_eq!(
            m.lookup(key),
            None,
            "two connections share it: neither matches"
        );
        // The first released: the second, not a stale handle, is the one left.
        m.on_release(h1, key);
        assert_eq!(m.lookup(key), Some(h2));
        m.on_release(h2, key);
        assert_eq!(m.lookup(key), None);
        assert!(m.by_ports.is_empty());
    }
}
