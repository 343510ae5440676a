//! The state behind a peer's new address (docs/spec.md §9, "A peer's new address";
//! the endpoint's use of it is `endpoint::migrate`): the connections by what identifies them
//! besides the peer's address, and the CHALLENGE series of new addresses being validated.

use crate::endpoint_types::ConnectionHandle;
use crate::endpoint_types::PathAddr;
use crate::table::{table, Table};
use std::time::Duration;

/// (local port, peer port, tag): what identifies a connection besides the peer's address.
pub(crate) type PortsTag = (u16, u16, u8);

/// Most new addresses being validated at once (a spoofer's challenges are bounded by it too).
const MAX_PENDING: usize = 256;
const FIRST_RECHALLENGE: Duration = Duration::from_millis(250);
const MAX_RECHALLENGE: Duration = Duration::from_secs(2);
/// CHALLENGEs in one series (the last 5.75 s after the first; the series ends at 7.75 s,
/// longer where two round trips exceed 250 ms: `Pending::new`); a TPDU from the
/// address after that starts another.
/// Bounded by count, not by the set-up timeout: a bit error in the air link's UDP source port
/// (sent without checksum, so that FEC sees corrupted datagrams) makes a one-off address that
/// will never answer, and 30 s of challenges to each would cost a thin link more than the
/// datagram it came with.
const CHALLENGES_PER_SERIES: u32 = 6;

#[derive(Debug, Clone, Copy)]
struct Pending {
    sent: u32,
    next: Duration,
    interval: Duration,
    /// When the series began: when the address was first heard, or asked for.
    started: Duration,
    /// This end asked for the address as another path (`Endpoint::add_path`).
    asked: bool,
    /// The least interval between its challenges (`Pending::new`).
    spacing: Duration,
}

/// A new address proven: when its validation began and whether this end asked for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Proven {
    pub started: Duration,
    pub asked: bool,
}

/// The connections by ports and tag, and the new addresses being validated.
#[derive(Debug)]
pub(crate) struct Migrations {
    /// Each (ports, tag) with the connections that have it (a match needs exactly one).
    by_ports: Table<PortsTag, Vec<ConnectionHandle>>,
    pending: Table<(ConnectionHandle, PathAddr), Pending>,
    /// The one address per connection being validated because the peer's TPDUs came from it
    /// (a newer one replaces it, so a spoofer cannot crowd out the real one). Addresses this
    /// end asked for are not in it.
    unsolicited: Table<ConnectionHandle, PathAddr>,
    /// Connections whose asked-for address never answered its series (`take_given_up`).
    given_up: Vec<ConnectionHandle>,
}

impl Migrations {
    pub(crate) fn new(seed: u64) -> Migrations {
        Migrations {
            by_ports: table(seed),
            pending: table(seed ^ 1),
            unsolicited: table(seed ^ 2),
            given_up: Vec::new(),
        }
    }

    pub(crate) fn on_insert(&mut self, h: ConnectionHandle, key: PortsTag) {
        self.by_ports.entry(key).or_default().push(h);
    }

    pub(crate) fn on_release(&mut self, h: ConnectionHandle, key: PortsTag) {
        self.pending.retain(|(ch, _), _| *ch != h);
        self.unsolicited.remove(&h);
        if let Some(v) = self.by_ports.get_mut(&key) {
            v.retain(|&x| x != h);
            if v.is_empty() {
                self.by_ports.remove(&key);
            }
        }
    }

    /// The connections with these ports and tag.
    pub(crate) fn candidates(&self, key: PortsTag) -> &[ConnectionHandle] {
        self.by_ports.get(&key).map_or(&[], Vec::as_slice)
    }

    /// When the next re-challenge is due.
    pub(crate) fn next_deadline(&self) -> Option<Duration> {
        self.pending.values().map(|p| p.next).min()
    }

    /// New addresses being validated now.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Starts validating `addr`, heard from for `ch`, unless it is being validated already:
    /// true if a CHALLENGE should go now. A new address for a connection replaces the one
    /// being validated; beyond [`MAX_PENDING`] addresses, a new series is not started.
    pub(crate) fn start(
        &mut self,
        ch: ConnectionHandle,
        addr: PathAddr,
        now: Duration,
        spacing: Duration,
    ) -> bool {
        if self.pending.contains_key(&(ch, addr)) {
            return false;
        }
        let replaces = self.unsolicited.get(&ch).copied();
        if self.pending.len() >= MAX_PENDING && replaces.is_none() {
            return false;
        }
        if let Some(old) = replaces {
            self.pending.remove(&(ch, old));
        }
        self.unsolicited.insert(ch, addr);
        self.pending
            .insert((ch, addr), Pending::new(now, false, spacing));
        true
    }

    /// Starts validating `addr` as another path this end asked for: true if a CHALLENGE
    /// should go now (false if it is being validated already, or [`MAX_PENDING`] are).
    pub(crate) fn start_asked(
        &mut self,
        ch: ConnectionHandle,
        addr: PathAddr,
        now: Duration,
        spacing: Duration,
    ) -> bool {
        if self.pending.contains_key(&(ch, addr)) || self.pending.len() >= MAX_PENDING {
            return false;
        }
        self.pending
            .insert((ch, addr), Pending::new(now, true, spacing));
        true
    }

    /// Addresses being validated for `ch`.
    pub(crate) fn pending_for(&self, ch: ConnectionHandle) -> usize {
        self.pending.keys().filter(|(c, _)| *c == ch).count()
    }

    /// Addresses this end asked for that are being validated for `ch`.
    pub(crate) fn asked_for(&self, ch: ConnectionHandle) -> usize {
        self.pending
            .iter()
            .filter(|((c, _), p)| *c == ch && p.asked)
            .count()
    }

    /// The re-challenges due at `now`: each series advanced, those that are over forgotten.
    pub(crate) fn due(&mut self, now: Duration) -> Vec<(ConnectionHandle, PathAddr)> {
        let mut due = Vec::new();
        if self.next_deadline().is_none_or(|t| t > now) {
            return due;
        }
        let mut over = Vec::new();
        self.pending.retain(|&(ch, addr), p| {
            if p.next > now {
                return true;
            }
            if p.sent >= CHALLENGES_PER_SERIES {
                over.push((ch, addr, p.asked));
                return false;
            }
            p.sent += 1;
            p.interval = (p.interval * 2).min(MAX_RECHALLENGE.max(p.spacing));
            p.next = now + p.interval;
            due.push((ch, addr));
            true
        });
        for (ch, addr, asked) in over {
            if self.unsolicited.get(&ch) == Some(&addr) {
                self.unsolicited.remove(&ch);
            }
            if asked {
                self.given_up.push(ch);
            }
        }
        due
    }

    /// Connections whose asked-for address was given up since the last call (one entry per
    /// address).
    pub(crate) fn take_given_up(&mut self) -> Vec<ConnectionHandle> {
        std::mem::take(&mut self.given_up)
    }

    /// `addr` proved it receives for `ch`: its series is over. What it was, if it was being
    /// validated.
    pub(crate) fn proven(&mut self, ch: ConnectionHandle, addr: PathAddr) -> Option<Proven> {
        if self.unsolicited.get(&ch) == Some(&addr) {
            self.unsolicited.remove(&ch);
        }
        self.pending.remove(&(ch, addr)).map(|p| Proven {
            started: p.started,
            asked: p.asked,
        })
    }
}

impl Pending {
    /// A series whose challenges are never closer than `spacing` (the connection's
    /// `challenge_spacing`: on a 2.4 kb/s satellite channel with a 3 s round trip the whole
    /// fixed series was over before the first ECHO could come back).
    fn new(now: Duration, asked: bool, spacing: Duration) -> Pending {
        let first = FIRST_RECHALLENGE.max(spacing);
        Pending {
            sent: 1,
            next: now + first,
            interval: first,
            started: now,
            asked,
            spacing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_sharing_ports_and_tag_are_all_candidates_until_released() {
        let mut m = Migrations::new(1);
        let key = (7, 9000, 5);
        let (h1, h2) = (ConnectionHandle(1), ConnectionHandle(2));
        m.on_insert(h1, key);
        assert_eq!(m.candidates(key), [h1]);
        m.on_insert(h2, key);
        assert_eq!(m.candidates(key), [h1, h2], "both: the identifiers decide");
        // The first released: the second, not a stale handle, is the one left.
        m.on_release(h1, key);
        assert_eq!(m.candidates(key), [h2]);
        m.on_release(h2, key);
        assert!(m.candidates(key).is_empty());
        assert!(m.by_ports.is_empty());
    }
}
