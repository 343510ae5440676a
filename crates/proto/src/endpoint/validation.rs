//! CHALLENGE and ECHO (docs/spec.md §9): a listener proving that an initiator receives at its
//! address, either end proving a peer's new address, and the connection identifiers both
//! carry. Each end draws a random 64-bit identifier for a connection (`Connection::cid`) and
//! sends it in every CHALLENGE and ECHO of that connection; the other end keeps the first it
//! receives from a proven address (`Connection::peer_cid`). Ports and `tag` find a
//! connection for a TPDU from a new address; the identifiers say which one where several
//! share them (`endpoint::migrate`).

use super::{ConnectionHandle, Endpoint, PathAddr};
use crate::admission::Key;
use crate::auth::Sealer;
use crate::codec::{self, Quality};
use crate::connection::Role;
use aerotp_wire::{Flags, Header};
use std::time::Duration;

impl Endpoint {
    /// A TPDU for connection `ch` (its tag matched). CHALLENGE and ECHO are the endpoint's
    /// business (address validation); everything else goes to the connection.
    pub(super) fn deliver_to_connection(
        &mut self,
        now: Duration,
        ch: ConnectionHandle,
        path: PathAddr,
        r: codec::Received,
        sealer: Option<Sealer>,
    ) {
        let h = r.header;
        self.schedule.touch(ch);
        let c = self.conns.get_mut(&ch).expect("by_key and conns agree");
        let intact = r.quality != Quality::Corrupted;
        if h.flags.is_challenge() {
            let Ok(ch_body) = aerotp_wire::Challenge::parse(&r.body) else {
                self.stats.stray += 1;
                return;
            };
            // A listener is challenged only for a new address of its own (`migrate`), and
            // a RETRY means nothing to it.
            if !intact || (c.role != Role::Initiator && ch_body.retry) {
                self.stats.stray += 1;
                return;
            }
            if ch_body.retry {
                c.on_retry(now, ch_body.ts_echo);
            } else if ch_body.cid != 0 && c.peer_cid.is_some_and(|p| p != ch_body.cid) {
                // The peer's host challenges for another of its connections with our ports
                // and tag (it cannot tell them apart): not ours to answer.
                self.stats.stray += 1;
                return;
            } else {
                // From an address of the connection's: the peer's own identifier.
                c.learn_peer_cid(ch_body.cid);
            }
            // Answered where it came from: one of the connection's paths.
            let cid = c.cid;
            self.queue_echo(path, &h, ch_body.cookie, cid);
            return;
        }
        if h.flags.is_echo() {
            let key = (c.remote(), c.local_port, c.remote_port);
            let echo = aerotp_wire::Echo::parse(&r.body).ok().filter(|e| {
                intact
                    && self
                        .admission
                        .check_half_open(ch.0, now, key, h.tag, c.mode(), &e.cookie)
            });
            if let Some(e) = echo {
                self.admission.settle(ch.0);
                if let (Some(a), Some(s)) = (&mut self.auth, sealer) {
                    a.mark_fresh(s, key.0);
                }
                c.set_unproven(false);
                c.learn_peer_cid(e.cid);
                // Heard from the peer like any TPDU (its body is no control structure: the
                // connection takes nothing else from it).
                c.handle(now, r);
                self.stats.proven += 1;
            } else if self.admission.is_half_open(ch.0) {
                self.stats.cookies_refused += 1;
            } else {
                self.stats.stray += 1;
            }
            return;
        }
        // If the peer sent more than its opening TPDU once, a half-open connection is kept to
        // its bound (`Admission::heard`). A copy of the opening TPDU (an initiator sends three,
        // and resends it until answered) says as much as new data: its data was
        // acknowledged and freed.
        let opening_again = h.flags.contains(Flags::ASYN) && h.flags.is_data();
        let fresh_before = c.tpdus_received();
        c.handle(now, r);
        if opening_again || c.tpdus_received() > fresh_before {
            self.admission.heard(ch.0);
        }
    }

    /// A CHALLENGE or ECHO for which no connection exists. An ECHO of a RETRY's cookie admits
    /// the peer's next TPDU; a CHALLENGE for a connection we released (it finished before the
    /// listener heard our echo) is still answered, so the listener can deliver what it holds.
    pub(super) fn admission_without_state(
        &mut self,
        now: Duration,
        to: PathAddr,
        key: Key,
        h: &Header,
        r: &codec::Received,
        sealer: Option<Sealer>,
    ) {
        if r.quality == Quality::Corrupted {
            self.stats.stray += 1;
            return;
        }
        if h.flags.is_echo() {
            let valid = self.listeners.accepts(h.dst_port)
                && aerotp_wire::Echo::parse(&r.body)
                    .is_ok_and(|e| self.admission.check(now, key, h.tag, h.mode, &e.cookie));
            if valid {
                self.admission.validate(key, h.tag, now);
                self.fresh_from(sealer, key.0);
            } else {
                self.stats.cookies_refused += 1;
            }
            return;
        }
        match aerotp_wire::Challenge::parse(&r.body) {
            Ok(c) if self.tombstones.get(key, h.tag).is_some() => {
                // The connection is gone, and its identifier with it.
                self.queue_echo(to, h, c.cookie, 0);
            }
            _ => self.stats.stray += 1,
        }
    }

    /// Answers `h` (a TPDU from a peer) with a CHALLENGE carrying this end's identifier of
    /// the connection (`cid`), or a RETRY (no state kept: `cid` 0).
    pub(super) fn queue_challenge(
        &mut self,
        now: Duration,
        to: PathAddr,
        h: &Header,
        retry: bool,
        cid: u64,
    ) {
        let key = (to.remote, h.dst_port, h.src_port);
        let c = aerotp_wire::Challenge {
            retry,
            ts_echo: h.timestamp,
            cookie: self.admission.cookie(now, key, h.tag, h.mode),
            cid,
        };
        let mut body = Vec::with_capacity(aerotp_wire::CHALLENGE_LEN);
        c.emit(&mut body);
        // Counted only when it goes: a full queue sends (and counts) nothing.
        if self.queue_raw(to, h, Flags::CHALLENGE, &body) {
            if retry {
                self.stats.retries_sent += 1;
            } else {
                self.stats.challenges_sent += 1;
            }
        }
    }

    /// Answers a CHALLENGE `h` with an ECHO of its cookie and this end's identifier `cid`.
    pub(super) fn queue_echo(
        &mut self,
        to: PathAddr,
        h: &Header,
        cookie: [u8; aerotp_wire::COOKIE_LEN],
        cid: u64,
    ) {
        let mut body = Vec::with_capacity(aerotp_wire::ECHO_LEN);
        aerotp_wire::Echo { cookie, cid }.emit(&mut body);
        if self.queue_raw(to, h, Flags::ECHO, &body) {
            self.stats.echoes_sent += 1;
        }
    }

    /// An ECHO of a cookie this endpoint minted for `at` verified: with a key, its sender's
    /// later TPDUs from `at` are fresh (`Auth::is_fresh`) and open connections proven at once.
    fn fresh_from(&mut self, sealer: Option<Sealer>, at: std::net::SocketAddr) {
        if let (Some(a), Some(s)) = (&mut self.auth, sealer) {
            a.mark_fresh(s, at);
        }
    }
}
