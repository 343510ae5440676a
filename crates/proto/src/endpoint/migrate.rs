//! A peer's new address (docs/spec.md §9, "A peer's new address"): a connection survives a
//! change of either end's address — a radio that comes back with another address, a handover
//! to another ground station, a NAT that rebinds — without a reset and without loss.
//!
//! A TPDU from an address no connection has is matched to a connection by what it carries
//! besides the address: local port, peer port and `tag`, if exactly one proven, open
//! connection has them. Its content goes to that connection at once (the data is not lost,
//! and it is no more trusted than a TPDU from the old address: without a key anyone can
//! forge either), except a reset. The connection keeps sending to the old address until the
//! new one proves it receives: the endpoint sends it a CHALLENGE (§9's, kind 0), again after
//! 250 ms and at doubling intervals up to 2 s, six in all, and switches the connection when the ECHO of
//! its cookie comes back from there. So a spoofed source address gets a challenge or two and
//! never the connection's traffic; nothing is amplified beyond the challenges.
//!
//! Either end may move. When the initiator moves, the listener challenges its new address and
//! the initiator's echo (it answers every CHALLENGE) comes from there. When the listener moves,
//! the initiator challenges it the same way; a listener answers a CHALLENGE for one of its
//! connections with an ECHO like an initiator.
//!
//! Ports and tag are 24 to 40 bits: at a gateway with thousands of connections two may share
//! them. Then the connection identifiers decide (`endpoint::validation`): a CHALLENGE or ECHO
//! from the new address names its sender's identifier, which is the peer identifier of one of
//! them; any other TPDU from there is held back (a stray) and the address is challenged for
//! each of them — only the real peer's connection answers, and its ECHO says which one it is.

use super::{ConnectionHandle, Endpoint, EndpointError, PathAddr};
use crate::admission::Key;
use crate::codec::Received as Tpdu;
use crate::codec::{Quality, Received};
use crate::paths::MAX_PATHS;
use aerotp_wire::Flags;
use std::time::Duration;

/// Most connections sharing ports and tag that one new address is challenged for.
const MAX_AMBIGUOUS: usize = 4;

/// What a TPDU from a new address belongs to.
enum Match {
    /// No connection: handled as a stranger's TPDU (a new peer, a stray).
    Stranger,
    /// This connection.
    One(ConnectionHandle),
    /// Several, and the TPDU does not say which: dropped, the address challenged.
    Held,
}

impl Endpoint {
    /// A TPDU from `path.remote`, an address no connection has: if it belongs to one
    /// connection that moved, it is handled here (`None`); otherwise it is given back for the
    /// usual handling of a stranger's TPDU.
    pub(super) fn take_from_new_address(
        &mut self,
        now: Duration,
        path: PathAddr,
        r: Received,
    ) -> Option<Received> {
        if r.quality == Quality::Corrupted {
            return Some(r);
        }
        match self.match_new_address(now, path, &r) {
            Match::Stranger => Some(r),
            Match::Held => None,
            Match::One(ch) => self.take_on_new_path(now, ch, path, r),
        }
    }

    /// A TPDU for connection `ch` on `path`, which is not one of its paths (the peer's
    /// address, or this host's, is new to it): handled here (`None`), or given back.
    pub(super) fn take_on_new_path(
        &mut self,
        now: Duration,
        ch: ConnectionHandle,
        path: PathAddr,
        r: Received,
    ) -> Option<Received> {
        let h = r.header;
        if r.quality == Quality::Corrupted {
            return Some(r);
        }
        let remote = path.remote;
        let Some(c) = self.conns.get(&ch) else {
            return Some(r);
        };
        if c.is_closed() || c.mode() != h.mode {
            return Some(r);
        }
        // A listener's connection not yet proven (docs/security.md) takes a new address
        // like a proven one: its ECHO proves the connection as well as the address. The
        // path it opened on may be the one that died (a channel that dropped its call
        // during the set-up: its CHALLENGEs never reached the peer, and the set-up timed
        // out while the peer's TPDUs came on its other paths).
        // An ASYN from another address is not taken for one: it is how a new peer opens, and
        // two peers may share ports and tag (a flood of spoofed ASYNs would also feed one
        // unproven connection instead of each being held to its own slot and RETRY).
        let half_open = self.admission.is_half_open(ch.0);
        if half_open && h.flags.contains(Flags::ASYN) && h.flags.is_data() {
            return Some(r);
        }
        let key = (remote, c.local_port, c.remote_port);
        // The peer's address is another connection's (a path of this one's only if the local
        // address is new).
        if self.by_key.get(&key).is_some_and(|&o| o != ch) {
            return Some(r);
        }
        if h.flags.is_echo() {
            self.echo_on_new_path(now, ch, path, key, half_open, r);
            return None;
        }
        if h.flags.is_challenge() {
            self.challenge_on_new_path(now, ch, path, &r);
            return None;
        }
        // A reset from an unproven address is not taken: it would end the connection on the
        // word of anyone who knows its ports and tag.
        if h.flags.contains(Flags::RST) && !h.flags.is_repair() {
            self.stats.stray += 1;
            return None;
        }
        self.schedule.touch(ch);
        if let Some(c) = self.conns.get_mut(&ch) {
            c.handle(now, r);
        }
        self.challenge_path(now, ch, path);
        None
    }

    /// An ECHO for connection `ch` from `path`, new to it: if it carries a cookie minted for
    /// `key` (and, once the peer's identifier is known, names it), the path is proven and
    /// adopted — and with it a `half_open` connection — and the ECHO is heard like any TPDU.
    fn echo_on_new_path(
        &mut self,
        now: Duration,
        ch: ConnectionHandle,
        path: PathAddr,
        key: Key,
        half_open: bool,
        r: Received,
    ) {
        let Some(c) = self.conns.get(&ch) else {
            return;
        };
        let h = r.header;
        // The cookie is bound to the address it was sent to: one that comes back from
        // there proves the address, whichever candidate is pending now (a spoofer that
        // keeps replacing the candidate cannot keep the real one from proving itself).
        let (mode, peer_cid) = (c.mode(), c.peer_cid);
        let echo = aerotp_wire::Echo::parse(&r.body).ok().filter(|e| {
            peer_cid.is_none_or(|p| p == e.cid)
                && self.admission.check(now, key, h.tag, mode, &e.cookie)
        });
        let Some(e) = echo else {
            self.stats.cookies_refused += 1;
            return;
        };
        if half_open {
            self.admission.settle(ch.0);
            if let Some(c) = self.conns.get_mut(&ch) {
                c.set_unproven(false);
            }
            self.stats.proven += 1;
        }
        self.adopt_path(now, ch, path, half_open);
        self.schedule.touch(ch);
        if let Some(c) = self.conns.get_mut(&ch) {
            c.learn_peer_cid(e.cid);
            // Heard from the peer like any TPDU.
            c.handle(now, r);
        }
    }

    /// A CHALLENGE for connection `ch` from `path`, new to it: the peer (or someone at that
    /// address) asks whether we receive there. Answered, and the same asked of it before it
    /// is sent anything else.
    fn challenge_on_new_path(
        &mut self,
        now: Duration,
        ch: ConnectionHandle,
        path: PathAddr,
        r: &Received,
    ) {
        let Some(c) = self.conns.get(&ch) else {
            return;
        };
        // Answered if it names our peer's identifier (or one we do not know yet): a
        // challenge for another connection with the same ports and tag is not ours.
        let (cid, peer_cid) = (c.cid, c.peer_cid);
        match aerotp_wire::Challenge::parse(&r.body) {
            Ok(x) if !x.retry && (x.cid == 0 || peer_cid.is_none_or(|p| p == x.cid)) => {
                self.queue_echo(path, &r.header, x.cookie, cid)
            }
            _ => self.stats.stray += 1,
        }
        self.challenge_path(now, ch, path);
    }

    /// Which connection a TPDU from the new address `remote` belongs to: the one open
    /// connection in its mode with its ports and tag; where several have them, the one whose
    /// peer identifier a CHALLENGE or ECHO names. Any other TPDU matching several is held
    /// back and the address challenged for each (those with a known peer identifier, at most
    /// `MAX_AMBIGUOUS`), except an ASYN: a new peer opening.
    fn match_new_address(&mut self, now: Duration, path: PathAddr, r: &Tpdu) -> Match {
        let h = r.header;
        let key = (h.dst_port, h.src_port, h.tag);
        let mut cands: Vec<ConnectionHandle> = self
            .migrate
            .candidates(key)
            .iter()
            .copied()
            .filter(|ch| {
                self.conns
                    .get(ch)
                    .is_some_and(|c| !c.is_closed() && c.mode() == h.mode)
            })
            .collect();
        match cands.len() {
            0 => return Match::Stranger,
            1 => return Match::One(cands[0]),
            _ => {}
        }
        let named = if h.flags.is_echo() {
            aerotp_wire::Echo::parse(&r.body).ok().map(|e| e.cid)
        } else if h.flags.is_challenge() {
            aerotp_wire::Challenge::parse(&r.body).ok().map(|c| c.cid)
        } else if h.flags.contains(Flags::ASYN) && h.flags.is_data() {
            return Match::Stranger;
        } else {
            None
        };
        let peer = |ch: &ConnectionHandle| self.conns.get(ch).and_then(|c| c.peer_cid);
        if let Some(cid) = named {
            return match cands.iter().find(|ch| cid != 0 && peer(ch) == Some(cid)) {
                Some(&ch) => Match::One(ch),
                None => {
                    self.stats.stray += 1;
                    Match::Held
                }
            };
        }
        cands.retain(|ch| peer(ch).is_some());
        cands.truncate(MAX_AMBIGUOUS);
        for ch in cands {
            self.challenge_path(now, ch, path);
        }
        self.stats.stray += 1;
        Match::Held
    }

    /// Starts validating `addr` for connection `ch` (a CHALLENGE now), unless it is already
    /// being validated.
    fn challenge_path(&mut self, now: Duration, ch: ConnectionHandle, addr: PathAddr) {
        let Some(spacing) = self.conns.get(&ch).map(|c| c.challenge_spacing()) else {
            return;
        };
        if self.migrate.start(ch, addr, now, spacing) {
            self.send_path_challenge(now, ch, addr);
        }
    }

    fn send_path_challenge(&mut self, now: Duration, ch: ConnectionHandle, addr: PathAddr) {
        if let Some(c) = self.conns.get(&ch) {
            let (h, cid) = (crate::admission::from_peer(c), c.cid);
            self.queue_challenge(now, addr, &h, false, cid);
            self.stats.path_challenges += 1;
        }
    }

    /// Re-challenges new addresses not yet proven (from `handle_timeout`); one that stays
    /// silent through a whole series is forgotten.
    pub(super) fn rechallenge_paths(&mut self, now: Duration) {
        for (ch, addr) in self.migrate.due(now) {
            self.send_path_challenge(now, ch, addr);
        }
        for ch in self.migrate.take_given_up() {
            let asked = self.migrate.asked_for(ch);
            if let Some(c) = self.conns.get_mut(&ch) {
                c.expect_paths(asked);
                self.schedule.touch(ch);
            }
        }
    }

    /// The peer proved it receives at `addr`. It becomes another path of the connection if
    /// this end asked for it (`add_path`), or if the peer was still heard on the paths it
    /// has after `addr` appeared (the peer sends on several); otherwise the peer moved, and
    /// the path it has been silent on longest goes to `addr` (docs/spec.md §9). With
    /// `move_only` it always moves: the connection's own addresses proved nothing (a
    /// half-open connection proven at `addr`; kept as its first path, an address a spoofed
    /// ASYN came from stayed the connection's when the real peer's ECHO of a cookie for the
    /// same ports and tag proved it: fuzz finding K1, docs/results/fuzz.md).
    fn adopt_path(&mut self, now: Duration, ch: ConnectionHandle, addr: PathAddr, move_only: bool) {
        let proven = self.migrate.proven(ch, addr);
        let asked = self.migrate.asked_for(ch);
        let Some(c) = self.conns.get_mut(&ch) else {
            return;
        };
        c.expect_paths(asked);
        // An ECHO after its series ended (a slow path) has no start time: the peer still
        // heard on its paths within a timeout sends on several.
        let another = match proven {
            Some(p) => p.asked || c.heard_since(p.started),
            None => c.heard_since(now.saturating_sub(c.rto())),
        };
        if !move_only && another && c.add_path(now, addr).is_some() {
            self.by_key
                .insert((addr.remote, c.local_port, c.remote_port), ch);
            self.stats.paths_added += 1;
            self.radio_replay(now, ch);
            return;
        }
        let old = c.move_path(addr);
        // The old peer address stays the connection's key while another path has it (this
        // end moved from one of its addresses to another).
        let kept = c.path_addrs().any(|p| p.remote == old.remote);
        let old = (old.remote, c.local_port, c.remote_port);
        let new = (addr.remote, c.local_port, c.remote_port);
        if !kept && self.by_key.get(&old) == Some(&ch) {
            self.by_key.remove(&old);
        }
        self.by_key.insert(new, ch);
        self.stats.migrations += 1;
    }

    /// Opens another path of connection `h` to the peer's address (a `SocketAddr`), or
    /// the path `PathAddr` from one of this host's addresses (docs/spec.md §9): the peer is
    /// challenged there, and once its ECHO comes back the connection sends on both. The
    /// peer, seeing this end's TPDUs come from another address while the first path still
    /// carries them, validates that address and sends on it too. A path that never answers
    /// is given up after the challenge series (7.75 s). A path is both of its addresses: two
    /// of this host's addresses to one peer address are two paths.
    pub fn add_path(
        &mut self,
        now: Duration,
        h: ConnectionHandle,
        to: impl Into<PathAddr>,
    ) -> Result<(), EndpointError> {
        let remote = to.into();
        let c = self.conns.get(&h).ok_or(EndpointError::UnknownConnection)?;
        if c.is_closed() {
            return Err(EndpointError::UnknownConnection);
        }
        if c.has_path(remote) {
            return Ok(());
        }
        if c.path_count() + self.migrate.pending_for(h) >= MAX_PATHS {
            return Err(EndpointError::TooManyPaths(MAX_PATHS));
        }
        if self
            .migrate
            .start_asked(h, remote, now, c.challenge_spacing())
        {
            self.send_path_challenge(now, h, remote);
            let asked = self.migrate.asked_for(h);
            if let Some(c) = self.conns.get_mut(&h) {
                c.expect_paths(asked);
            }
            self.schedule.touch(h);
        }
        Ok(())
    }

    /// New addresses of connections being validated now (bounded).
    pub fn paths_pending(&self) -> usize {
        self.migrate.pending()
    }
}

#[cfg(test)]
mod series_tests {
    use crate::{ConnectionConfig, Endpoint, EndpointConfig, Mode};
    use std::net::SocketAddr;
    use std::time::Duration;

    /// A one-off address (a corrupted source port) gets six challenges (at 0, 0.25, 0.75,
    /// 1.75, 3.75 and 5.75 s), then none.
    #[test]
    fn a_silent_new_address_gets_one_series_of_six_challenges() {
        let a_addr: SocketAddr = "10.0.0.1:9000".parse().unwrap();
        let b_addr: SocketAddr = "10.0.0.2:9000".parse().unwrap();
        let odd: SocketAddr = "10.0.0.1:9001".parse().unwrap();
        let mut a = Endpoint::new(EndpointConfig::default(), 1);
        let mut b = Endpoint::new(EndpointConfig::default(), 2);
        let cfg = ConnectionConfig::with_mode(Mode::Reliable);
        b.listen(7, cfg.clone()).unwrap();
        a.connect(Duration::ZERO, b_addr, 7, cfg).unwrap();
        // Set-up and proof: a few exchanges at one instant each.
        let mut buf = Vec::new();
        let mut first = None;
        for step in 0..20u64 {
            let now = Duration::from_millis(step);
            while a.poll_transmit(now, &mut buf).is_some() {
                first.get_or_insert_with(|| buf.clone());
                b.handle_datagram(now, a_addr, &buf);
                buf.clear();
            }
            while b.poll_transmit(now, &mut buf).is_some() {
                a.handle_datagram(now, b_addr, &buf);
                buf.clear();
            }
        }
        let before = b.stats.path_challenges;
        // The same TPDU again, from a port it was never sent from.
        let t0 = Duration::from_millis(100);
        b.handle_datagram(t0, odd, first.as_ref().unwrap());
        let mut to_odd = 0;
        let mut at = Vec::new();
        let mut now = t0;
        while now < t0 + Duration::from_secs(30) {
            b.handle_timeout(now);
            while let Some(t) = b.poll_transmit(now, &mut buf) {
                if t.remote == odd {
                    to_odd += 1;
                    at.push((now - t0).as_millis());
                }
                buf.clear();
            }
            now += Duration::from_millis(50);
        }
        assert_eq!(at, [0, 250, 750, 1750, 3750, 5750], "challenge times, ms");
        assert_eq!(b.stats.path_challenges - before, 6);
        assert_eq!(to_odd, 6, "challenges to the one-off address");
        assert_eq!(b.paths_pending(), 0, "the series is over");
        assert_eq!(b.stats.migrations, 0);
    }
}
