//! The endpoint: demultiplexes datagrams to connections, accepts on listening ports, carries
//! datagram mode, and multiplexes what the connections send. Sans-IO: the caller passes in
//! time and datagrams and takes out datagrams and the next timeout.

use crate::auth::{Auth, KeySet};
use crate::codec;
use crate::config::{ConfigError, ConnectionConfig, EndpointConfig};
use crate::connection::{ConnEvent, Connection, Role};
pub use crate::endpoint_types::{
    ConnectionHandle, DatagramMsg, EndpointError, EndpointStats, Event, PathAddr, Peer, Transmit,
};
use crate::error_control::ErrorControl;
use crate::receiver::Delivered;
use aerotp_wire::{ControlBody, Flags, Header};
use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::time::Duration;

use crate::admission::{Admission, Key};
use crate::table::{table, Table};
use crate::tombstones::Tombstones;

mod confirm;
mod datagram;
mod decoding;
mod generators;
mod migrate;
mod outbox;
mod ports;
mod queries;
mod radio;
mod receive;
mod release;
mod routes;
mod schedule;
mod share;
mod transmit;
mod validation;

/// A router over a table of connections: it owns the connections and the tables that find
/// them, and a few managers that each own one part of what the endpoint keeps beside them.
#[derive(Debug)]
pub struct Endpoint {
    cfg: EndpointConfig,
    /// Tags, ports, connection identifiers and clock offsets, each from its own generator.
    generators: generators::Generators,
    conns: Table<ConnectionHandle, Connection>,
    by_key: Table<Key, ConnectionHandle>,
    listeners: crate::listeners::Listeners,
    tombstones: Tombstones,
    /// Events, received datagram-mode messages and TPDUs the endpoint made, waiting.
    outbox: outbox::Outbox,
    next_handle: u64,
    next_port: u16,
    /// Each connection's deadline and pending events, in round-robin order.
    schedule: schedule::Schedule,
    /// A list of handles lent to one call at a time (the schedule's due and touched
    /// connections), kept so that building it allocates nothing once grown.
    handles: Vec<ConnectionHandle>,
    /// Present when `EndpointConfig::auth` is: seals what leaves, opens what arrives.
    auth: Option<Auth>,
    /// Out-of-order bytes of all connections, bounded by `max_reorder_bytes`.
    reorder: crate::reorder_budget::ReorderBudget,
    /// Half-open connections, cookies and peers admitted after a RETRY.
    admission: Admission,
    /// FEC decoding of what arrives: peers' parity hints and the decoding budgets.
    decoding: decoding::FecDecoding,
    /// Present when `EndpointConfig::link_share` is: paces the connections by class, and
    /// the link as a whole.
    share: Option<crate::link_share::LinkShare>,
    /// Datagram-mode routes that repair (`crate::datagram_repair`), each side.
    routes: routes::DatagramRoutes,
    /// Connections by ports and tag, and peers' new addresses being validated.
    migrate: crate::migrations::Migrations,
    /// What each peer's radio said last (`crate::radio`).
    radio: crate::radio::RadioBook,
    pub stats: EndpointStats,
}

impl Endpoint {
    /// `seed` feeds the endpoint's own random generators (tags, ports): the same seed and the
    /// same inputs give the same outputs.
    pub fn new(cfg: EndpointConfig, seed: u64) -> Endpoint {
        let mut generators = generators::Generators::new(seed);
        let next_port = generators.first_port();
        let auth = cfg.auth.as_ref().map(Auth::new);
        let reorder = crate::reorder_budget::ReorderBudget::with_unproven(
            cfg.max_reorder_bytes,
            cfg.max_unproven_bytes,
        );
        // The cookie secret comes from its own generator, so cookies change nothing else the
        // seed decides (tags, ports).
        let secret: [u8; 32] = Pcg64Mcg::seed_from_u64(seed ^ 0xC00C_1E5E_C2E7).gen();
        let admission = Admission::new(
            secret,
            cfg.setup_timeout.max(Duration::from_secs(1)),
            cfg.max_half_open,
        );
        let share = cfg.link_share.map(crate::link_share::LinkShare::new);
        // The tables' hash seeds too (`crate::table`): their own generator, drawn in this
        // order.
        let mut tables = Pcg64Mcg::seed_from_u64(seed ^ 0x7AB1_E5EE_D5EE_D5ED);
        let seeds: [u64; 8] = std::array::from_fn(|_| tables.gen());
        let [conns, by_key, hints, send_routes, recv_routes, migrate, sources, radio] = seeds;
        let routes = routes::DatagramRoutes::new(
            send_routes,
            recv_routes,
            cfg.max_repair_routes,
            cfg.datagram_repair_mtu,
        );
        Endpoint {
            outbox: outbox::Outbox::new(cfg.max_events, cfg.max_datagrams),
            cfg,
            generators,
            conns: table(conns),
            by_key: table(by_key),
            listeners: crate::listeners::Listeners::default(),
            tombstones: Tombstones::default(),
            next_handle: 1,
            next_port,
            schedule: schedule::Schedule::default(),
            handles: Vec::new(),
            auth,
            reorder,
            admission,
            decoding: decoding::FecDecoding::new(hints, sources),
            share,
            routes,
            migrate: crate::migrations::Migrations::new(migrate),
            radio: crate::radio::RadioBook::new(radio),
            stats: EndpointStats::default(),
        }
    }

    /// Bytes all connections hold for their applications now: TPDUs out of order and data
    /// delivered but not read (at most `EndpointConfig::max_reorder_bytes`, plus one TPDU per
    /// connection whose application has read everything).
    pub fn reorder_bytes_held(&self) -> usize {
        self.reorder.used()
    }

    /// Validates `config` and, with authentication on, leaves room in its MTU for the
    /// envelope the endpoint adds to every TPDU (so connections cut bodies that still fit).
    fn sealed_room(&self, mut config: ConnectionConfig) -> Result<ConnectionConfig, EndpointError> {
        config.validate()?;
        if self.auth.is_some() {
            config.mtu = config.mtu.saturating_sub(aerotp_wire::AUTH_OVERHEAD);
            config.validate()?;
        }
        Ok(config)
    }

    /// Whether authentication is on (`EndpointConfig::auth`).
    pub fn authenticated(&self) -> bool {
        self.auth.is_some()
    }

    /// Replaces the keys without stopping (rotation, docs/security.md): TPDUs are sealed
    /// with the new current key at once, and those sealed with the previous one still open.
    /// Refused when the endpoint was made without authentication.
    pub fn set_keys(&mut self, keys: &KeySet) -> Result<(), EndpointError> {
        keys.validate()
            .map_err(|e| EndpointError::Config(ConfigError::Auth(e)))?;
        match &mut self.auth {
            Some(a) => {
                a.set_keys(keys);
                Ok(())
            }
            None => Err(EndpointError::Config(ConfigError::Auth(
                crate::auth::AuthError::NotEnabled,
            ))),
        }
    }

    /// Opens a connection from local port `local_port` if it is free (else from the next
    /// free ephemeral port, as `connect`); data written before the peer answers rides on the
    /// ASYN. `to` is the peer's address, or a whole path (`PathAddr`: with this host's
    /// address on it, for a driver that says where each datagram arrived).
    pub fn connect_from(
        &mut self,
        now: Duration,
        to: impl Into<PathAddr>,
        remote_port: u16,
        local_port: Option<u16>,
        config: ConnectionConfig,
    ) -> Result<ConnectionHandle, EndpointError> {
        let path = to.into();
        let remote = path.remote;
        let config = self.sealed_room(config)?;
        if !ErrorControl::for_mode(config.mode).connected {
            return Err(EndpointError::Config(ConfigError::Fec(
                "datagram mode has no connections: use send_datagram".into(),
            )));
        }
        if self.conns.len() >= self.cfg.max_connections {
            return Err(EndpointError::TooManyConnections(self.conns.len()));
        }
        let local_port = self.alloc_port(remote, remote_port, local_port)?;
        let tag = self.generators.tag();
        let mut conn = Connection::new(
            Role::Initiator,
            config,
            path,
            local_port,
            remote_port,
            tag,
            now,
        );
        conn.set_reorder_budget(self.reorder.clone());
        Ok(self.insert(now, conn))
    }

    fn insert(&mut self, now: Duration, mut conn: Connection) -> ConnectionHandle {
        conn.cid = self.generators.cid();
        let clock_offset = self.generators.clock_offset();
        conn.guard_resets(self.auth.is_some(), clock_offset);
        let h = ConnectionHandle(self.next_handle);
        self.next_handle += 1;
        self.by_key
            .insert((conn.remote(), conn.local_port, conn.remote_port), h);
        self.migrate
            .on_insert(h, (conn.local_port, conn.remote_port, conn.tag));
        self.conns.insert(h, conn);
        self.schedule.add(h);
        self.share_join(now, h);
        self.radio_replay(now, h);
        h
    }

    /// The connection, for a change: its deadline and events are looked at again.
    fn conn(&mut self, h: ConnectionHandle) -> Result<&mut Connection, EndpointError> {
        self.schedule.touch(h);
        self.conns
            .get_mut(&h)
            .ok_or(EndpointError::UnknownConnection)
    }

    pub fn write(&mut self, h: ConnectionHandle, data: &[u8]) -> Result<usize, EndpointError> {
        Ok(self.conn(h)?.write(data))
    }

    /// As [`Endpoint::write`], without copying the bytes: the queued ones are taken off the
    /// front of `data` (what is left did not fit), and the TPDUs cut from them share `data`'s
    /// buffer until the peer has them. For an application that holds its data in `Bytes`
    /// already; `write` copies.
    pub fn write_shared(
        &mut self,
        h: ConnectionHandle,
        data: &mut bytes::Bytes,
    ) -> Result<usize, EndpointError> {
        Ok(self.conn(h)?.write_shared(data))
    }

    pub fn writable(&self, h: ConnectionHandle) -> usize {
        self.conns.get(&h).map_or(0, |c| c.writable())
    }

    /// Reads delivered data into `buf`. The connection is touched only if the read moved its
    /// deadline (`Connection::read`): a touch costs its whole timer table at the next
    /// question, and a reader takes one chunk at a time.
    pub fn read(&mut self, h: ConnectionHandle, buf: &mut [u8]) -> Result<usize, EndpointError> {
        self.read_with(h, |c| c.read(buf))
    }

    /// The next delivered chunk with its TPDU number (lossy modes: shows where gaps are).
    /// Touches the connection only as [`Endpoint::read`] does.
    pub fn read_chunk(&mut self, h: ConnectionHandle) -> Result<Option<Delivered>, EndpointError> {
        self.read_with(h, |c| c.read_chunk())
    }

    /// A read of connection `h` (its value, and whether it moved the deadline), touching the
    /// connection only if it did.
    fn read_with<T>(
        &mut self,
        h: ConnectionHandle,
        read: impl FnOnce(&mut Connection) -> (T, bool),
    ) -> Result<T, EndpointError> {
        let c = self
            .conns
            .get_mut(&h)
            .ok_or(EndpointError::UnknownConnection)?;
        let (value, moved) = read(c);
        if moved {
            self.schedule.touch(h);
        }
        Ok(value)
    }

    /// Whether the peer closed and everything it sent has been read.
    pub fn at_eof(&self, h: ConnectionHandle) -> bool {
        self.conns.get(&h).is_none_or(|c| c.at_eof())
    }

    pub fn close(&mut self, h: ConnectionHandle) -> Result<(), EndpointError> {
        self.conn(h)?.close();
        Ok(())
    }

    pub fn abort(&mut self, h: ConnectionHandle, reason: &str) -> Result<(), EndpointError> {
        self.conn(h)?.abort(reason);
        Ok(())
    }

    pub fn set_rate(&mut self, h: ConnectionHandle, rate_bps: u64) -> Result<(), EndpointError> {
        self.conn(h)?.set_rate(rate_bps);
        Ok(())
    }

    /// Changes the erasure coding of what this end sends on a live connection (validated).
    pub fn set_erasure(
        &mut self,
        h: ConnectionHandle,
        setting: crate::ErasureSetting,
    ) -> Result<(), EndpointError> {
        setting.validate().map_err(EndpointError::Config)?;
        self.conn(h)?.set_erasure(setting);
        Ok(())
    }

    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Accepted connections not yet proven to reach a real peer (docs/security.md).
    pub fn half_open_count(&self) -> usize {
        self.admission.half_open_count()
    }

    /// Whether the connection's peer has proven that it receives what is sent to its address
    /// (always, for connections this end opened, and with authentication). Commit
    /// resources that outlive the connection — an output file, a connection onwards — only
    /// to a proven one; an unproven one is closed (`CloseOutcome::SetupTimeout`) if no proof
    /// comes within `EndpointConfig::setup_timeout`.
    pub fn is_proven(&self, h: ConnectionHandle) -> bool {
        // A connection closed at its set-up timeout has left the half-open set unproven.
        self.conns.get(&h).is_some_and(|c| !c.is_unproven()) && !self.admission.is_half_open(h.0)
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.collect_events();
        self.outbox.pop_event()
    }

    fn push_event(&mut self, e: Event) {
        self.outbox.push_event(e);
    }

    fn collect_events(&mut self) {
        if self.outbox.has_events() {
            return;
        }
        let mut handles = std::mem::take(&mut self.handles);
        self.schedule.take_with_events(&mut handles);
        for &h in &handles {
            let Some(c) = self.conns.get_mut(&h) else {
                continue;
            };
            while let Some(e) = c.poll_event() {
                let ev = match e {
                    ConnEvent::Connected => Event::Connected(h),
                    ConnEvent::Readable => Event::Readable(h),
                    ConnEvent::Writable => Event::Writable(h),
                    ConnEvent::Confirmed => Event::Confirmed(h),
                    ConnEvent::Closed(o) => Event::Closed(h, o),
                };
                self.outbox.push_event(ev);
            }
        }
        self.handles = handles;
    }

    /// Takes in one datagram from the peer's address (a `SocketAddr`), or one that came on a
    /// path (a `PathAddr`: from `remote`, to this host's `local`).
    pub fn handle_datagram(&mut self, now: Duration, from: impl Into<PathAddr>, datagram: &[u8]) {
        self.receive_on(now, from.into(), codec::Source::Borrowed(datagram))
    }

    /// Takes in datagrams that arrived together on one path (a GRO train: `stride` bytes
    /// each, the last possibly shorter) in a buffer the caller hands over. When every one of
    /// them names the same pair of ports (one connection's), the TPDU bodies are slices of
    /// `train`: no copy and no allocation per TPDU. Otherwise each body is copied out, as
    /// `handle_datagram` does, so that one connection's slow reader cannot hold another's
    /// bytes. A body holds the whole buffer until it is read: hand over only buffers the
    /// train fills (`aerotp_net` does when it fills at least half of one).
    pub fn handle_train(
        &mut self,
        now: Duration,
        from: impl Into<PathAddr>,
        train: &Bytes,
        stride: usize,
    ) {
        let path = from.into();
        let stride = stride.max(1);
        // The header's port bytes as they are: a datagram whose header does not check keeps
        // no body, so there is no need to check it here (and an authenticated one is
        // compared the same way).
        fn ports(d: &[u8]) -> Option<&[u8]> {
            d.get(aerotp_wire::PORT_BYTES)
        }
        let first = ports(train);
        let one_connection =
            first.is_some() && train.chunks(stride).skip(1).all(|d| ports(d) == first);
        for d in train.chunks(stride) {
            let source = if one_connection {
                codec::Source::Shared {
                    datagram: d,
                    buffer: train,
                }
            } else {
                codec::Source::Borrowed(d)
            };
            self.receive_on(now, path, source);
        }
    }

    /// A RST answering `h`: it echoes `h`'s timestamp (docs/spec.md §4), so a peer without a
    /// key can tell it from a blind forgery.
    fn queue_reset(&mut self, to: PathAddr, h: &Header, reason: &str) {
        let body = ControlBody {
            reset: Some(reason.into()),
            ..Default::default()
        };
        let mut bytes = Vec::new();
        if body.emit(&mut bytes).is_ok() {
            let _ = self.queue_raw_at(to, h, body.flags(), &bytes, h.timestamp);
        }
    }

    fn queue_control(&mut self, to: PathAddr, h: &Header, extra: Flags, body: ControlBody) {
        let mut bytes = Vec::new();
        if body.emit(&mut bytes).is_ok() {
            let _ = self.queue_raw(to, h, body.flags() | extra, &bytes);
        }
    }

    /// Queues a TPDU answering `h` (ports swapped, same mode and tag) on path `to` (it
    /// leaves from the local address the TPDU answered came to), without FEC. Bounded:
    /// beyond `outbox::ANSWER_LIMIT` queued TPDUs, further ones are not sent. True if queued.
    fn queue_raw(&mut self, to: PathAddr, h: &Header, flags: Flags, bytes: &[u8]) -> bool {
        self.queue_raw_at(to, h, flags, bytes, 0)
    }

    /// As `queue_raw`, with `timestamp` in the header.
    fn queue_raw_at(
        &mut self,
        to: PathAddr,
        h: &Header,
        flags: Flags,
        bytes: &[u8],
        timestamp: u32,
    ) -> bool {
        if !self.outbox.has_room_for_answer() {
            return false;
        }
        let header = Header {
            mode: h.mode,
            flags,
            src_port: h.dst_port,
            dst_port: h.src_port,
            seq: 0,
            timestamp,
            fec: 0,
            tag: h.tag,
            len: 0,
        };
        let mut out = Vec::new();
        let ok = match &mut self.auth {
            Some(a) => a.seal_new(header, bytes, &mut out, to.remote),
            None => codec::encode(header, bytes, &mut out).is_ok(),
        };
        if ok {
            let class = self.answer_class(to, h);
            self.outbox.push_outgoing((to, class, out));
        }
        ok
    }

    /// The class of an answer to `h` from `to` (`Transmit::class`): the connection's it
    /// concerns if that still exists, else the class a listener on its port would accept it
    /// with (a set-up's challenge goes as the connection it admits will), else none.
    fn answer_class(&self, to: PathAddr, h: &Header) -> Option<crate::TrafficClass> {
        let key = (to.remote, h.dst_port, h.src_port);
        match self.by_key.get(&key).and_then(|c| self.conns.get(c)) {
            Some(c) => Some(c.config().class),
            None => self.listeners.get(h.dst_port).map(|l| l.class),
        }
    }

    /// The earliest time `handle_timeout` or `poll_transmit` has work. A time already passed
    /// (work is due now) may stand for an earlier one that has passed too.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.outbox.has_outgoing() {
            return Some(Duration::ZERO);
        }
        // A connection's deadline waits for the link (with a link share): at most one
        // datagram's time on the link, the granularity of the link itself.
        let conns = self.schedule.next_deadline(&self.conns);
        let conns = conns.map(|d| match &self.share {
            Some(s) => d.max(s.link_free()),
            None => d,
        });
        conns
            .into_iter()
            .chain(self.admission.next_deadline())
            .chain(self.routes.deadline())
            .chain(self.migrate.next_deadline())
            .chain(self.share.as_ref().and_then(|s| s.deadline()))
            .min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        self.share_tick(now);
        self.flush_datagram_repairs(now);
        self.rechallenge_paths(now);
        for c in self.admission.expired(now) {
            // Never proven: closed, and its key freed at once without a tombstone (a real
            // peer's next TPDU opens a new connection, and so it learns that this one was
            // lost). The application releases it as any closed connection.
            self.stats.setup_timeouts += 1;
            self.schedule.touch(ConnectionHandle(c));
            if let Some(conn) = self.conns.get_mut(&ConnectionHandle(c)) {
                conn.setup_timed_out();
                let key = (conn.remote(), conn.local_port, conn.remote_port);
                if self.by_key.get(&key) == Some(&ConnectionHandle(c)) {
                    self.by_key.remove(&key);
                }
            }
        }
        for c in self.admission.rechallenges_due(now) {
            if let Some(conn) = self.conns.get(&ConnectionHandle(c)) {
                let (path, h) = (conn.first_path(), crate::admission::from_peer(conn));
                let cid = conn.cid;
                self.queue_challenge(now, path, &h, false, cid);
            }
        }
        self.schedule.refresh(&self.conns, now);
        let mut handles = std::mem::take(&mut self.handles);
        self.schedule.due(now, &mut handles);
        for &h in &handles {
            if let Some(c) = self.conns.get_mut(&h) {
                c.handle_timeout(now);
                self.schedule.touch(h);
            }
        }
        self.handles = handles;
    }
}
