//! The application's handle on a UDP socket and its AeroTP engine: bind, listen, connect,
//! accept, datagrams, statistics.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use aerotp_proto as proto;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::connection::Connection;
use crate::driver::{drive, Shared, Slot, State, UserRef};
use crate::marks::DscpPlan;
use crate::metrics::{IoCounters, MetricsSource, Totals};
use crate::socket::{udp_socket, zero_checksums};
use crate::sources::LocalAddrs;
use crate::tap::{EngineTap, Tap, TapHandle};
use crate::{ConnectionConfig, DatagramMsg, EndpointConfig, EndpointStats, Error};

/// A UDP socket with its AeroTP endpoint and driver task. Cheap to clone.
#[derive(Clone)]
pub struct Endpoint {
    user: Arc<UserRef>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_addr", &self.local_addr())
            .finish_non_exhaustive()
    }
}

/// The engine's seed, from the operating system's generator: it decides the cookie secret
/// and the hash tables' seeds (`proto::Endpoint::new`), which an attacker must not guess.
fn os_seed() -> Result<u64, Error> {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut b = [0u8; 8];
    SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| Error::Random)?;
    Ok(u64::from_le_bytes(b))
}

impl Endpoint {
    /// Binds a UDP socket on `addr` (port 0 = any) and spawns the driver task. Must be called
    /// within a tokio runtime.
    pub fn bind(addr: SocketAddr, config: EndpointConfig) -> Result<Endpoint, Error> {
        Endpoint::bind_with_seed(addr, config, os_seed()?)
    }

    /// As [`Endpoint::bind`] with the engine's random seed given (connection tags, ports).
    pub fn bind_with_seed(
        addr: SocketAddr,
        config: EndpointConfig,
        seed: u64,
    ) -> Result<Endpoint, Error> {
        if let Some(share) = &config.link_share {
            share
                .validate()
                .map_err(|e| Error::Engine(proto::EndpointError::Config(e)))?;
        }
        let socket = udp_socket(addr).map_err(|source| Error::Bind { addr, source })?;
        let local_addr = socket
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        // Set up here, not in the driver: whether reads say their destination decides how
        // the first connection's path is named (`LocalAddrs::tells_engine`).
        let io = crate::udp::UdpIo::new(
            socket,
            !zero_checksums(addr),
            local_addr.ip().is_unspecified(),
        );
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                engine: proto::Endpoint::new(config, seed),
                slots: HashMap::new(),
                incoming: VecDeque::new(),
                users: 0,
                driver_stopped: false,
                send_errors: 0,
                recv_errors: 0,
                io: IoCounters::default(),
                retired: Totals::default(),
                opened: 0,
                closed: 0,
                tap: None,
                engine_tap: None,
                local_addrs: LocalAddrs::new(local_addr, io.destinations()),
                marks: crate::marks::DscpPlan::default(),
                steps_taken: 0,
                steps_sent: 0,
            }),
            wake: Notify::new(),
            accept: Notify::new(),
            datagram: Notify::new(),
            epoch: Instant::now(),
            local_addr,
        });
        let user = Arc::new(UserRef::new(&shared));
        tokio::spawn(drive(shared, io));
        Ok(Endpoint { user })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.user.0
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared().local_addr
    }

    /// Accepts connections to AeroTP port `port` with `config`'s rate, buffers and timers (the
    /// mode is the initiator's).
    pub fn listen(&self, port: u16, config: ConnectionConfig) -> Result<(), Error> {
        self.shared().lock().engine.listen(port, config)?;
        Ok(())
    }

    /// Accepts connections to every AeroTP port without a listener of its own (`listen`
    /// takes precedence), with `config` as for `listen`.
    pub fn listen_any(&self, config: ConnectionConfig) -> Result<(), Error> {
        self.shared().lock().engine.listen_any(config)?;
        Ok(())
    }

    /// Opens a connection to AeroTP port `port` at `remote`. Returns at once (opportunistic
    /// set-up: data written now rides on the first TPDU); [`Connection::connected`] waits for
    /// the peer's answer.
    pub fn connect(
        &self,
        remote: SocketAddr,
        port: u16,
        config: ConnectionConfig,
    ) -> Result<Connection, Error> {
        self.connect_from(remote, port, None, config)
    }

    /// Datagrams to the peer address `remote` leave from this host's address `local` from
    /// now on (a path's local end: one radio of several). Needs an endpoint bound to the
    /// unspecified address (`0.0.0.0:PORT`, `[::]:PORT`). The kernel still routes by
    /// destination: `local` chooses the outgoing interface only where routing does (a
    /// subnet per radio, or a rule `ip rule add from LOCAL table N`). Call before
    /// [`Endpoint::connect`] for a connection's first path; [`Connection::add_path_from`]
    /// does it for the others. Without it, a socket bound to the unspecified address
    /// answers each peer from the address the peer sent to (`crate::sources`).
    pub fn pin_source(&self, remote: SocketAddr, local: std::net::IpAddr) -> Result<(), Error> {
        self.shared().lock().local_addrs.pin(remote, local)?;
        Ok(())
    }

    /// As [`Endpoint::connect`], from AeroTP port `local_port` when it is free (else from the
    /// next free ephemeral port): a gateway carries a TCP flow's source port in it.
    pub fn connect_from(
        &self,
        remote: SocketAddr,
        port: u16,
        local_port: Option<u16>,
        config: ConnectionConfig,
    ) -> Result<Connection, Error> {
        let shared = self.shared();
        let h = {
            let mut st = shared.lock();
            let now = shared.now();
            let path = st.local_addrs.path(remote, None)?;
            let h = st
                .engine
                .connect_from(now, path, port, local_port, config)?;
            st.opened += 1;
            // This end chose the peer's address: nothing to prove (the engine's
            // `is_proven` says the same), so reads never wait for it.
            let slot = Slot {
                proven: true,
                ..Slot::new()
            };
            st.slots.insert(h, slot);
            h
        };
        shared.wake.notify_one();
        Ok(Connection::new(shared, h, remote))
    }

    /// The next accepted connection; `None` if the driver has stopped.
    pub async fn accept(&self) -> Option<Connection> {
        let shared = self.shared();
        loop {
            let notified = shared.accept.notified();
            {
                let mut st = shared.lock();
                if let Some(h) = st.incoming.pop_front() {
                    let remote = st
                        .engine
                        .peer(h)
                        .map(|p| p.remote)
                        .unwrap_or(shared.local_addr);
                    drop(st);
                    return Some(Connection::new(shared, h, remote));
                }
                if st.driver_stopped {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Sends one datagram-mode message to AeroTP port `port` at `remote`, with `parity`
    /// Reed–Solomon parity bytes per codeword (0 = none), within `mtu` bytes.
    pub fn send_datagram(
        &self,
        remote: SocketAddr,
        src_port: u16,
        port: u16,
        data: &[u8],
        parity: u8,
        mtu: usize,
    ) -> Result<(), Error> {
        self.shared()
            .lock()
            .engine
            .send_datagram(remote, src_port, port, data, parity, mtu)?;
        self.shared().wake.notify_one();
        Ok(())
    }

    /// Sends one datagram-mode message on `route`, with its FEC and, when the route repairs,
    /// numbered as a source of its erasure code (`proto::Endpoint::send_datagram_with`): the
    /// repairs it makes due, and the route's tail flush when it pauses, go out by themselves.
    pub fn send_datagram_on(&self, route: &proto::DatagramRoute, data: &[u8]) -> Result<(), Error> {
        let shared = self.shared();
        let now = shared.now();
        shared.lock().engine.send_datagram_with(now, route, data)?;
        shared.wake.notify_one();
        Ok(())
    }

    /// The next datagram-mode message received; `None` if the driver has stopped.
    pub async fn recv_datagram(&self) -> Option<DatagramMsg> {
        let shared = self.shared();
        loop {
            let notified = shared.datagram.notified();
            {
                let mut st = shared.lock();
                if let Some(d) = st.engine.take_datagram() {
                    return Some(d);
                }
                if st.driver_stopped {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// What datagram-mode traffic of `class` may send now, b/s, under the endpoint's link
    /// share (`EndpointConfig::link_share`); `None` without one.
    pub fn datagram_rate(&self, class: proto::TrafficClass) -> Option<u64> {
        self.shared().lock().engine.datagram_rate(class)
    }

    /// Connections the engine holds (open, closing, or closed and not yet released).
    pub fn connection_count(&self) -> usize {
        self.shared().lock().engine.connection_count()
    }

    /// The engine's endpoint counters (socket errors: [`Endpoint::io_counters`]).
    pub fn stats(&self) -> EndpointStats {
        self.shared().lock().engine.stats.clone()
    }

    /// Datagrams and bytes the driver moved through the socket, with socket errors.
    pub fn io_counters(&self) -> IoCounters {
        let st = self.shared().lock();
        IoCounters {
            send_errors: st.send_errors,
            recv_errors: st.recv_errors,
            ..st.io.clone()
        }
    }

    /// From now on, hands a copy of every datagram sent ([`crate::TAP_SENT`]) and received
    /// ([`crate::TAP_RECEIVED`]) to `tap`, with a wall-clock timestamp and the local address
    /// the kernel uses towards the peer. Set it before connecting to capture a whole transfer.
    pub fn set_tap(&self, tap: Arc<dyn Tap>) {
        self.shared().lock().tap = Some(TapHandle::new(tap));
    }

    /// From now on, hands the engine's view of every connection to `tap` after each step of
    /// the driver (`--qlog`).
    pub fn set_engine_tap(&self, tap: Arc<dyn EngineTap>) {
        self.shared().lock().engine_tap = Some(tap);
    }

    /// Stops handing the engine's view to the engine tap.
    pub fn remove_engine_tap(&self) {
        self.shared().lock().engine_tap = None;
    }

    /// Stops handing datagrams to the tap and returns the socket counters at that instant:
    /// every datagram they count was handed to the tap, none after (a capture's packets plus
    /// its dropped records equal `datagrams_sent + datagrams_received`).
    pub fn remove_tap(&self) -> IoCounters {
        let mut st = self.shared().lock();
        st.tap = None;
        IoCounters {
            send_errors: st.send_errors,
            recv_errors: st.recv_errors,
            ..st.io.clone()
        }
    }

    /// Replaces the pre-shared keys of an endpoint bound with authentication (rotation
    /// without stopping; docs/security.md). [`crate::keyfile::watch`] calls it when the key
    /// file changes.
    pub fn set_keys(&self, keys: &proto::KeySet) -> Result<(), Error> {
        self.shared().lock().engine.set_keys(keys)?;
        Ok(())
    }

    /// Sets the DSCP each traffic class's datagrams carry from now on (`crate::marks`; the
    /// default is [`DscpPlan::STANDARD`], which leaves bulk traffic unmarked). A datagram
    /// takes its connection's class (`ConnectionConfig::class`) or its route's
    /// (`DatagramRoute::class`). Marks are set per datagram on Linux; elsewhere datagrams go
    /// unmarked.
    pub fn set_dscp_plan(&self, plan: DscpPlan) {
        self.shared().lock().marks = plan;
    }

    /// The DSCP plan in force.
    pub fn dscp_plan(&self) -> DscpPlan {
        self.shared().lock().marks
    }

    /// Whether this endpoint seals and verifies every TPDU.
    pub fn authenticated(&self) -> bool {
        self.shared().lock().engine.authenticated()
    }

    /// The shared state without counting as a user (for background tasks that must not keep
    /// the driver alive).
    pub(crate) fn shared_weak(&self) -> std::sync::Weak<Shared> {
        Arc::downgrade(self.shared())
    }

    /// A handle that reads this endpoint's counters for metrics without keeping the driver
    /// alive (it does not count as an application handle).
    pub fn metrics_source(&self) -> MetricsSource {
        MetricsSource::new(self.shared())
    }
}
