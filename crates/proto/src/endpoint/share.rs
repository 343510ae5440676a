//! The endpoint's side of the link share (`crate::link_share`): connections join it when
//! they open and leave when released, datagram-mode messages are counted against it, and
//! every period it re-paces the connections.

use super::{ConnectionHandle, Endpoint, EndpointError};
use crate::link_share::Observed;
use crate::{LinkShareConfig, TrafficClass};
use std::time::Duration;

impl Endpoint {
    /// The link share in force, if any (`EndpointConfig::link_share`).
    pub fn link_share(&self) -> Option<LinkShareConfig> {
        self.share.as_ref().map(|s| s.config())
    }

    /// Changes a live connection's traffic class; with a link share, its rate follows at
    /// the next recomputation (within `SHARE_PERIOD`), which samples the class.
    pub fn set_class(
        &mut self,
        h: ConnectionHandle,
        class: TrafficClass,
    ) -> Result<(), EndpointError> {
        self.conn(h)?.set_class(class);
        Ok(())
    }

    /// What datagram-mode traffic of `class` may send now, b/s: with a link share, the rate
    /// one more busy connection of the class would get less what idle connections reserve
    /// (recomputed every `SHARE_PERIOD`); without one, `None` (no cap).
    pub fn datagram_rate(&self, class: TrafficClass) -> Option<u64> {
        self.share.as_ref().map(|s| s.datagram_rate(class))
    }

    /// A new connection joins the share and starts at its busy share of the link.
    pub(super) fn share_join(&mut self, now: Duration, h: ConnectionHandle) {
        self.schedule.touch(h);
        let (Some(s), Some(c)) = (&mut self.share, self.conns.get_mut(&h)) else {
            return;
        };
        let rate = s.add(now, h.0, c.config().class, c.link_bytes_sent());
        c.set_rate(rate);
    }

    pub(super) fn share_leave(&mut self, h: ConnectionHandle) {
        if let Some(s) = &mut self.share {
            s.remove(h.0);
        }
    }

    /// With a link share, a datagram of `len` bytes (plus its IP and UDP headers) occupies
    /// the link for its time (`LinkShare::occupy`).
    pub(super) fn occupy_link(&mut self, now: Duration, len: usize) {
        if let Some(s) = &mut self.share {
            s.occupy(now, len + crate::config::IP_UDP_OVERHEAD);
        }
    }

    /// Counts a datagram-mode message of `wire_len` bytes queued to send.
    pub(super) fn count_datagram_sent(&mut self, wire_len: usize) {
        self.stats.datagrams_sent += 1;
        self.stats.datagram_bytes_sent += wire_len as u64;
        if let Some(s) = &mut self.share {
            // On the link it costs its IP and UDP headers too, as a connection's datagrams do.
            s.count_datagram(wire_len + crate::config::IP_UDP_OVERHEAD);
        }
    }

    /// Recomputes the shares if their period is up, and re-paces what changed.
    pub(super) fn share_tick(&mut self, now: Duration) {
        let Some(s) = &mut self.share else { return };
        let conns = &self.conns;
        if s.deadline().is_some_and(|d| d <= now) {
            s.set_discovered(conns.values().filter_map(|c| c.discovered_bps()).max());
        }
        let changed = s.tick(now, |h| {
            conns.get(&ConnectionHandle(h)).map(|c| Observed {
                class: c.config().class,
                wire_bytes: c.link_bytes_sent(),
                busy: c.backlog_outlasts(crate::SHARE_PERIOD),
            })
        });
        for (h, rate) in changed {
            self.schedule.touch(ConnectionHandle(h));
            if let Some(c) = self.conns.get_mut(&ConnectionHandle(h)) {
                c.set_rate(rate);
            }
        }
    }
}
