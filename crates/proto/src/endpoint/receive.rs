//! What arrives: a datagram is refused early if it cannot be genuine, decoded (FEC) and
//! verified (with a key), and then routed: to datagram mode, to the connection that has its
//! peer and ports, to a connection that moved (`migrate`), or to the stranger's rules — a
//! released connection's tombstone, a lost probe's RETRY, or a listener that accepts it.

use super::{ConnectionHandle, Endpoint, Event, PathAddr};
use crate::admission::Key;
use crate::auth::{Refusal, Sealer};
use crate::codec::{self, Quality, Received};
use crate::config::ConnectionConfig;
use crate::connection::{Connection, Role};
use crate::error_control::ErrorControl;
use aerotp_wire::{ControlBody, Flags, Header};
use std::net::SocketAddr;
use std::time::Duration;

impl Endpoint {
    pub(super) fn receive_on(&mut self, now: Duration, path: PathAddr, source: codec::Source<'_>) {
        let len = source.datagram().len();
        self.stats.datagrams_in += 1;
        let Some((r, sealer)) = self.decode_and_verify(now, path.remote, source) else {
            return;
        };
        if !ErrorControl::of(r.header.mode).connected {
            self.receive_datagram(now, path.remote, r);
            return;
        }
        let Some(r) = self.receive_on_known_ports(now, path, r, sealer, len) else {
            return;
        };
        let Some(r) = self.take_from_new_address(now, path, r) else {
            return;
        };
        self.receive_from_stranger(now, path, r, sealer);
    }

    /// Turns a datagram from `remote` into a verified TPDU and the key that sealed it (with
    /// authentication on), counting what is refused on the way (`None`).
    fn decode_and_verify(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        source: codec::Source<'_>,
    ) -> Option<(Received, Option<Sealer>)> {
        let datagram = source.datagram();
        // With a key, a TPDU whose intact header says it is not authenticated is refused
        // before FEC, CRC and copy: the cheapest way out for the commonest forgery.
        if self.auth.is_some()
            && datagram
                .first()
                .is_some_and(|b| b & aerotp_wire::AUTH_BIT == 0)
            && Header::parse(datagram).is_ok()
        {
            self.stats.auth_missing += 1;
            return None;
        }
        let refused = &mut self.stats.fec_budget_refused;
        let Ok(mut r) = self.decoding.decode(now, remote, source, refused) else {
            self.stats.undecodable += 1;
            return None;
        };
        // Correct first (above), then verify: nothing below sees a TPDU that did not.
        let sealer = self.authenticate(&mut r, remote)?;
        self.decoding.remember_parity(remote, &r);
        Some((r, sealer))
    }

    /// A TPDU whose peer address and ports are a connection's key: handled here (`None`),
    /// or given back when no connection has them, or when it opens a new incarnation on the
    /// ports of a finished one (which is released for it).
    fn receive_on_known_ports(
        &mut self,
        now: Duration,
        path: PathAddr,
        r: Received,
        sealer: Option<Sealer>,
        len: usize,
    ) -> Option<Received> {
        let h = r.header;
        let Some(&ch) = self.by_key.get(&(path.remote, h.dst_port, h.src_port)) else {
            return Some(r);
        };
        self.schedule.touch(ch);
        let c = self.conns.get_mut(&ch).expect("by_key and conns agree");
        if c.tag == h.tag {
            if c.arrived_from(now, path, len) {
                self.deliver_to_connection(now, ch, path, r, sealer);
            } else if self.take_on_new_path(now, ch, path, r).is_some() {
                // The peer's address is the connection's, this host's is not: a path
                // being opened from another local address, or nothing to take.
                self.stats.stray += 1;
            }
            return None;
        }
        if !(c.is_closed() && h.flags.is_data() && r.quality != Quality::Corrupted) {
            self.stats.stray += 1;
            return None;
        }
        // A new incarnation on the same ports replaces a finished one.
        self.release(ch);
        Some(r)
    }

    /// A TPDU no connection takes: an ECHO or CHALLENGE of the stateless admission, a TPDU
    /// for a released connection, a lost probe, or a new peer's first data.
    fn receive_from_stranger(
        &mut self,
        now: Duration,
        path: PathAddr,
        r: Received,
        sealer: Option<Sealer>,
    ) {
        let h = r.header;
        let key = (path.remote, h.dst_port, h.src_port);
        if h.flags.is_echo() || h.flags.is_challenge() {
            self.admission_without_state(now, path, key, &h, &r, sealer);
            return;
        }
        if self.answer_from_tombstone(path, key, &r) {
            return;
        }
        if !h.flags.is_data() {
            self.stats.stray += 1;
            // An outage probe for a connection this listener no longer has (set-up timeout,
            // restart): a RETRY echoing it tells the prober its connection is gone, at once
            // rather than at its idle timeout (docs/spec.md §9). Stateless, like any RETRY.
            let probe = crate::connection::is_probe(&h, &r.body);
            if probe && r.quality != Quality::Corrupted && self.listeners.accepts(h.dst_port) {
                self.queue_challenge(now, path, &h, true, 0);
            }
            return;
        }
        if r.quality == Quality::Corrupted {
            self.stats.corrupted_without_connection += 1;
            return;
        }
        self.accept(now, path, key, r, sealer);
    }

    /// A TPDU for a connection released on `key` with its tag: counted as a stray and, if it
    /// asks for an answer, answered as the connection would have (a reset again, or its
    /// final acknowledgement). False if no tombstone has `key` and the tag.
    fn answer_from_tombstone(&mut self, path: PathAddr, key: Key, r: &Received) -> bool {
        let h = r.header;
        let Some(final_ack) = self.tombstones.get(key, h.tag) else {
            return false;
        };
        self.stats.stray += 1;
        let asks = h.flags.is_data() || crate::connection::is_probe(&h, &r.body);
        if asks && self.tombstones.was_reset(key, h.tag) {
            // Ended by a reset, abort or timeout: say so again (docs/spec.md §4).
            self.queue_reset(path, &h, "connection reset: this end has closed it");
        }
        if let (true, Some(ack)) = (asks, final_ack) {
            // The peer missed our final acknowledgement and we have released the
            // connection: answer with it again so the peer can finish.
            let body = ControlBody {
                ack: Some(ack),
                ..Default::default()
            };
            self.queue_control(path, &h, Flags::AFIN, body);
        }
        true
    }

    /// A new peer's first data TPDU `r` (intact): refused without a listener or room,
    /// challenged first when its address is not proven and half-open slots are short, else
    /// accepted as a new connection.
    fn accept(
        &mut self,
        now: Duration,
        path: PathAddr,
        key: Key,
        r: Received,
        sealer: Option<Sealer>,
    ) {
        let h = r.header;
        let Some(cfg) = self.listeners.get(h.dst_port).cloned() else {
            self.stats.refused += 1;
            self.queue_reset(path, &h, "connection refused: no listener on that port");
            return;
        };
        if self.conns.len() >= self.cfg.max_connections {
            self.stats.refused += 1;
            self.queue_reset(path, &h, "connection refused: too many connections");
            return;
        }
        // Proven from the first TPDU: the peer echoed our RETRY's cookie, or, with a key, its
        // sender answered one of our challenges before (in this endpoint's life) from this
        // address and sealed this TPDU after that. An authenticated TPDU alone is no proof: it
        // may be a recording (docs/security.md, "Replays") or a copy sent from elsewhere (K2).
        let remote = path.remote;
        let fresh = matches!((&self.auth, sealer), (Some(a), Some(s)) if a.is_fresh(s, remote));
        // A listener on a one-way link cannot be answered: it takes its peers unproven.
        let proven = fresh || cfg.accept_unproven || self.admission.take_validated(key, h.tag, now);
        if !proven && !self.admission.has_room() {
            // Under load: keep nothing, let the peer prove its address first.
            self.queue_challenge(now, path, &h, true, 0);
            return;
        }
        let ch = self.open_accepted(now, path, cfg, r, proven);
        // Accepted at once, so the first TPDU's data is delivered after one propagation
        // delay; the application may wait for `is_proven` before it commits resources.
        self.push_event(Event::Accepted(ch));
        if !proven {
            self.admission.open(ch.0, now);
            let cid = self.conns.get(&ch).map_or(0, |c| c.cid);
            self.queue_challenge(now, path, &h, false, cid);
        }
    }

    /// Makes the connection a listener configured `cfg` accepts with the first TPDU `r`, and
    /// hands `r` to it.
    fn open_accepted(
        &mut self,
        now: Duration,
        path: PathAddr,
        mut cfg: ConnectionConfig,
        r: Received,
        proven: bool,
    ) -> ConnectionHandle {
        let h = r.header;
        cfg.mode = h.mode;
        // Confirmed delivery needs acknowledgements: a listener configured for it (a
        // gateway's wildcard) accepts a peer in a mode without them as a plain connection.
        cfg.confirm_delivery &= ErrorControl::of(h.mode).delivers_everything();
        let mut conn = Connection::new(
            Role::Acceptor,
            cfg,
            path,
            h.dst_port,
            h.src_port,
            h.tag,
            now,
        );
        // The endpoint's reorder bound holds from the first TPDU on.
        conn.set_reorder_budget(self.reorder.clone());
        conn.set_unproven(!proven);
        conn.handle(now, r);
        self.insert(now, conn)
    }

    /// Opens `r` when authentication is on; counts and refuses what does not verify, and any
    /// authenticated TPDU when it is off. `None`: refused; `Some(None)`: no key, `r` goes on
    /// as it came; `Some(Some(s))`: verified, sealed by `s`.
    fn authenticate(&mut self, r: &mut Received, from: SocketAddr) -> Option<Option<Sealer>> {
        let Some(a) = &mut self.auth else {
            if r.auth {
                self.stats.auth_unexpected += 1;
                return None;
            }
            return Some(None);
        };
        match a.open(r, from) {
            Ok(s) => {
                self.stats.auth_verified += 1;
                Some(Some(s))
            }
            Err(why) => {
                let s = &mut self.stats;
                *match why {
                    Refusal::Failed => &mut s.auth_failed,
                    Refusal::UnknownKey => &mut s.auth_unknown_key,
                    Refusal::Replayed => &mut s.auth_replayed,
                    Refusal::Missing => &mut s.auth_missing,
                    Refusal::Corrupted => &mut s.auth_corrupted,
                } += 1;
                None
            }
        }
    }
}
