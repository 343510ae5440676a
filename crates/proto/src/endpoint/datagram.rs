//! Datagram mode at the endpoint: messages sent and taken outside any connection, and the
//! erasure repair of routes that ask for it (`crate::datagram_repair`).

use super::{DatagramMsg, Endpoint, EndpointError, Event};
use crate::codec::{self, Quality, Received};
use crate::datagram_repair::{DatagramRoute, RepairOut, RouteKey};
use crate::erasure::{ErasureMode, REPAIR_OVERHEAD};
use aerotp_wire::{Flags, Header, Mode};
use std::net::SocketAddr;
use std::time::Duration;

impl Endpoint {
    /// Sends one datagram-mode message (no connection state, no repair). `parity` is its FEC
    /// strength.
    pub fn send_datagram(
        &mut self,
        remote: SocketAddr,
        src_port: u16,
        dst_port: u16,
        data: &[u8],
        parity: u8,
        mtu: usize,
    ) -> Result<(), EndpointError> {
        let route = DatagramRoute::plain(remote, src_port, dst_port, parity, mtu);
        self.send_datagram_with(Duration::ZERO, &route, data)
    }

    /// Sends one datagram-mode message on `route`. With repair on, the message is numbered as
    /// a source of the route's code and the repairs it makes due are queued after it; a route
    /// that pauses gets its tail flush at the deadline `poll_timeout` reports. A message that
    /// repairs must leave `REPAIR_OVERHEAD` (22) bytes of the MTU free
    /// ([`Endpoint::max_datagram_payload`]).
    pub fn send_datagram_with(
        &mut self,
        now: Duration,
        route: &DatagramRoute,
        data: &[u8],
    ) -> Result<(), EndpointError> {
        let repair = route.repair();
        if let Some(s) = repair {
            if s.mode == ErasureMode::Auto {
                return Err(EndpointError::DatagramAutoRepair);
            }
            s.validate()?;
        }
        if let Some(queued) = self.outbox.outgoing_full() {
            return Err(EndpointError::DatagramQueueFull(queued));
        }
        let max = self.max_datagram_payload(route);
        if max.is_none_or(|m| data.len() > m) {
            return Err(EndpointError::DatagramTooLarge {
                len: data.len(),
                max: max.unwrap_or(0),
                mtu: route.mtu,
            });
        }
        let key = route.key();
        let (flags, tag, seq) = if repair.is_some() {
            if !self.routes.send.is_open_as(&key, route) {
                let (tag, code_key) = (self.generators.tag(), self.generators.code_key());
                self.routes.send.open(key, tag, code_key, route);
            }
            let (tag, seq) = self.routes.send.number(&key).expect("opened above");
            (Flags::SOURCE, tag, seq)
        } else {
            self.routes.send.remove(&key);
            (Flags::empty(), 0, 0)
        };
        let h = datagram_header(&key, flags, seq, tag, route.parity);
        self.queue_datagram(route.remote, route.class, h, data, route.mtu)?;
        if repair.is_some() {
            for r in self.routes.send.on_sent(now, &key, route, data) {
                // A repair that cannot be queued is one fewer repair: the datagram went.
                let _ = self.queue_repair(r);
            }
        }
        Ok(())
    }

    /// The largest message `send_datagram_with` takes on `route`: the MTU less the header,
    /// CRC, parity, the authentication envelope (with a key) and, when the route repairs, the
    /// room a repair covering it needs. `None` if the MTU cannot carry even an empty one.
    pub fn max_datagram_payload(&self, route: &DatagramRoute) -> Option<usize> {
        let room = self.auth.as_ref().map_or(0, |_| aerotp_wire::AUTH_OVERHEAD)
            + route.repair().map_or(0, |_| REPAIR_OVERHEAD);
        codec::datagram_len(room, route.parity).filter(|&l| l <= route.mtu)?;
        codec::max_body(route.mtu, route.parity).checked_sub(room)
    }

    pub fn take_datagram(&mut self) -> Option<DatagramMsg> {
        self.outbox.take_datagram()
    }

    /// Routes that repair and receivers' routes held now, and the bytes the receiving routes'
    /// decoders hold (bounded: docs/fec.md).
    pub fn repair_routes(&self) -> (usize, usize) {
        self.routes.held()
    }

    /// Encodes (and seals) one datagram-mode TPDU and queues it.
    fn queue_datagram(
        &mut self,
        remote: SocketAddr,
        class: crate::TrafficClass,
        h: Header,
        body: &[u8],
        mtu: usize,
    ) -> Result<(), EndpointError> {
        let too_large = || EndpointError::DatagramTooLarge {
            len: body.len(),
            max: 0,
            mtu,
        };
        let mut out = Vec::new();
        codec::encode(h, body, &mut out).map_err(|_| too_large())?;
        if let Some(a) = &mut self.auth {
            if !a.seal(&mut out, 0, mtu, remote) {
                return Err(too_large());
            }
        }
        self.count_datagram_sent(out.len());
        self.outbox.push_outgoing((remote.into(), Some(class), out));
        Ok(())
    }

    fn queue_repair(&mut self, r: RepairOut) -> Result<(), EndpointError> {
        let h = datagram_header(&r.key, Flags::REPAIR, r.seq, r.tag, r.parity);
        let len = r.body.len();
        let room = self.auth.as_ref().map_or(0, |_| aerotp_wire::AUTH_OVERHEAD);
        if codec::datagram_len(len + room, r.parity).is_none_or(|l| l > r.mtu) {
            // Cannot happen: the route's sources left room for it, and a route whose parity
            // or MTU changes starts afresh. If it did, it is one repair fewer, not a datagram
            // over the MTU.
            return Err(EndpointError::DatagramTooLarge {
                len,
                max: 0,
                mtu: r.mtu,
            });
        }
        self.queue_datagram(r.key.0, r.class, h, &r.body, r.mtu)?;
        self.stats.datagram_repairs_sent += 1;
        self.stats.datagram_repair_bytes_sent += len as u64;
        Ok(())
    }

    /// The tail flushes of routes that paused (from `handle_timeout`).
    pub(super) fn flush_datagram_repairs(&mut self, now: Duration) {
        for r in self.routes.send.due(now) {
            let _ = self.queue_repair(r);
        }
    }

    /// A datagram-mode TPDU arrived (FEC and authentication done): a plain datagram is
    /// delivered; a route's numbered datagram is delivered unless it is a copy, and feeds the
    /// route's decoder; a repair feeds it. What the decoder rebuilds is delivered at once.
    pub(super) fn receive_datagram(&mut self, now: Duration, remote: SocketAddr, r: Received) {
        let h = r.header;
        if r.quality == Quality::Corrupted {
            self.stats.datagrams_dropped += 1;
            return;
        }
        let key = (remote, h.src_port, h.dst_port);
        match h.flags {
            f if f == Flags::empty() => self.deliver_datagram(&key, r.body.into()),
            Flags::SOURCE => match self.routes.recv.on_source(now, key, h.tag, h.seq, &r.body) {
                None => self.stats.datagram_duplicates += 1,
                Some(rebuilt) => {
                    self.deliver_datagram(&key, r.body.into());
                    self.deliver_rebuilt(&key, rebuilt);
                }
            },
            Flags::REPAIR => {
                self.stats.datagram_repairs_received += 1;
                let u = self.routes.recv.on_repair(now, key, h.tag, &r.body);
                self.stats.datagram_repairs_used += u64::from(u.used);
                self.stats.datagram_repairs_refused += u64::from(u.refused);
                self.deliver_rebuilt(&key, u.rebuilt);
            }
            // No other flags mean anything in datagram mode.
            _ => self.stats.datagrams_dropped += 1,
        }
    }

    fn deliver_rebuilt(&mut self, key: &RouteKey, rebuilt: Vec<crate::erasure::Rebuilt>) {
        for x in rebuilt {
            self.stats.datagrams_rebuilt += 1;
            self.deliver_datagram(key, x.body);
        }
    }

    /// `data` is the application's own (a body sliced from a shared receive buffer was
    /// copied out of it by `Vec::from`: a queued datagram pins no other's buffer).
    fn deliver_datagram(&mut self, key: &RouteKey, data: Vec<u8>) {
        let m = DatagramMsg {
            remote: key.0,
            src_port: key.1,
            dst_port: key.2,
            data,
        };
        if !self.outbox.deliver(m) {
            self.stats.datagrams_dropped += 1;
            return;
        }
        self.stats.datagrams_delivered += 1;
        self.push_event(Event::Datagram);
    }
}

fn datagram_header(key: &RouteKey, flags: Flags, seq: u32, tag: u8, parity: u8) -> Header {
    Header {
        mode: Mode::Datagram,
        flags,
        src_port: key.1,
        dst_port: key.2,
        seq,
        timestamp: 0,
        fec: parity,
        tag,
        len: 0,
    }
}
