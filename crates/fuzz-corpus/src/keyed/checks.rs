//! The keyed target's checks after every step: B's proven connections, both ends' bounds
//! and counters.

use super::{a_addr, b_addr, World, FIXED_HEAP, MAX_CONNECTIONS, RECV_WINDOW, SEND_BUFFER};
use crate::endpoint::drain_events;
use aerotp_proto::{ConnectionHandle, Endpoint};
use std::net::SocketAddr;

/// Whether connection `h` of `ep` has a path to `addr` (its first address or one it added).
fn has_path(ep: &Endpoint, h: ConnectionHandle, addr: SocketAddr) -> bool {
    ep.peer(h).is_some_and(|p| p.remote == addr)
        || ep
            .stats(h)
            .is_some_and(|s| s.paths.iter().any(|p| p.remote == addr))
}

impl World {
    /// A proven connection of B's is one A (not a recording) spoke for in this life, from
    /// A's address.
    pub(super) fn check_proven(&self, h: ConnectionHandle) {
        if self.b_own.contains(&h) {
            return;
        }
        let Some(p) = self.b.peer(h) else { return };
        assert!(
            !self.a_cut || self.life == 0,
            "B (life {}) proved connection {:?} (ports {}→{}, tag {}) after a restart that cut \
             A off: only replays and forgeries reached it",
            self.life,
            h,
            p.remote_port,
            p.local_port,
            p.tag
        );
        assert!(
            self.live.contains(&(p.remote_port, p.local_port, p.tag)),
            "B (life {}) proved connection {:?} (ports {}→{}, tag {}) though no datagram A \
             sent in this life for it reached B: a replay proved it",
            self.life,
            h,
            p.remote_port,
            p.local_port,
            p.tag
        );
        assert!(
            has_path(&self.b, h, a_addr()),
            "B proved connection {h:?} (peer {}) with no path at A's address",
            p.remote
        );
    }

    pub(super) fn check_bounds(&mut self, heap_base: Option<isize>) {
        drain_events(&mut self.a, &mut self.a_hs);
        drain_events(&mut self.b, &mut self.b_hs);
        for h in self.b_hs.clone() {
            if self.b_own.contains(&h) {
                continue;
            }
            if !self.b_known.contains(&h) {
                self.b_known.push(h);
                self.sum.b_accepted += 1;
                if self.a_cut && self.life > 0 {
                    self.sum.b_accepted_after_cut += 1;
                }
            }
            if self.b.is_proven(h) {
                self.check_proven(h);
                if !self.b_seen_proven.contains(&h) {
                    self.b_seen_proven.push(h);
                    self.sum.b_proven += 1;
                    // Finding K1 (docs/results/fuzz.md), fixed: proven by A's ECHO, the
                    // connection's address is A's, not the one a replay opened it from.
                    assert!(
                        self.b.peer(h).is_none_or(|p| p.remote == a_addr()),
                        "B's connection {h:?} was proven by A but its address is {:?}",
                        self.b.peer(h).map(|p| p.remote)
                    );
                }
            } else {
                assert!(
                    !self.b_seen_proven.contains(&h) || self.b.state(h).is_none(),
                    "B's connection {h:?} was proven and is no longer"
                );
            }
        }
        for &h in &self.a_hs {
            if self.a.is_proven(h) && self.a.state(h).is_some() {
                assert!(
                    has_path(&self.a, h, b_addr()),
                    "A proved connection {h:?} (peer {:?}) with no path at B's address",
                    self.a.peer(h).map(|p| p.remote)
                );
            }
        }
        for ep in [&self.a, &self.b] {
            assert!(ep.connection_count() <= MAX_CONNECTIONS);
            assert!(ep.paths_pending() <= ep.connection_count() * aerotp_proto::MAX_PATHS);
            let st = &ep.stats;
            if self.keyed.is_some() {
                assert_eq!(
                    st.datagrams_in,
                    st.undecodable + st.auth_verified + st.auth_dropped(),
                    "a keyed endpoint's counters miss datagrams: {st:?}"
                );
            } else {
                assert_eq!(
                    st.auth_verified + st.auth_dropped(),
                    st.auth_unexpected,
                    "a keyless endpoint verified or refused for other reasons: {st:?}"
                );
            }
        }
        if let (Some(base), Some(now)) = (heap_base, crate::heap_live_bytes()) {
            let per_conn = SEND_BUFFER + RECV_WINDOW as usize * self.cfg.mtu;
            let recorded: usize = self.recorded.iter().map(|r| r.dg.capacity() + 64).sum();
            let bound = 2 * MAX_CONNECTIONS * per_conn + FIXED_HEAP + recorded;
            let used = now - base;
            assert!(
                used <= bound as isize,
                "heap grew by {used} bytes, over the bound of {bound} \
                 ({MAX_CONNECTIONS} connections × (send buffer {SEND_BUFFER} + window \
                 {RECV_WINDOW} × MTU {}) per endpoint + {FIXED_HEAP} fixed + {recorded} \
                 recorded)",
                self.cfg.mtu
            );
        }
    }
}
