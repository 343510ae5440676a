//! Real-time drivers of the link model: a UDP relay (`aerotp link`).
//!
//! One [`Relay`] is one path: a listening address, a destination, and a forward and a
//! reverse [`Link`]. A scenario of several paths is several relays sharing one epoch,
//! run together by [`run_relays`]; [`path_seed`] gives each path its own seed.
//!
//! The relay listens on `listen`. Every datagram from a client goes through the forward
//! [`Link`] model and then out to `to` from a socket dedicated to that client and
//! connected to `to`, so the server's replies come back on that socket; they go through
//! the reverse `Link` model and are sent back to the client from the listening socket.
//! All clients share the two link directions (one physical link), as on a real radio.
//!
//! Time for the model is `tokio::time::Instant` elapsed since the relay was bound, so
//! outages in the config are relative to relay start. A single task owns both links and
//! wakes at `next_arrival`. The model itself is `aerotp_link`; see `docs/link-model.md`.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use aerotp_link::{Link, LinkConfig, LinkError, LinkStats};
use aerotp_net::tap::wall_clock;
use serde::Serialize;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

/// Largest UDP payload the relay handles.
const MAX_DATAGRAM: usize = 65_535;
/// Bound of the channel carrying server replies from per-client reader tasks.
const REPLY_CHANNEL: usize = 1024;

/// Configuration of [`run_relay`].
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Where clients send (bound by the relay).
    pub listen: SocketAddr,
    /// Where the relay forwards (the server side).
    pub to: SocketAddr,
    /// Client → server direction.
    pub forward: LinkConfig,
    /// Server → client direction; `None` = same as `forward`.
    pub reverse: Option<LinkConfig>,
    /// Seed of the forward link; the reverse link uses `seed ^ REVERSE_SEED_MIX`.
    pub seed: u64,
    /// Maximum number of concurrent clients; datagrams from further clients are dropped.
    pub max_clients: usize,
    /// A client with no traffic in either direction for this long is forgotten.
    pub idle_timeout: Duration,
    /// Period of the statistics log line (tracing, INFO); `None` = never.
    pub stats_interval: Option<Duration>,
    /// Name of the path in log lines (`path0` by default).
    pub name: String,
    /// A copy of what enters and what leaves the link model, both directions (`--pcap`).
    pub tap: Option<RelayTap>,
}

/// Where a relay hands copies of the datagrams it carries: `inbound` is the interface of
/// what entered the link model (from a client, or a reply from the server), `outbound` that
/// of what the model delivered and the relay sent on (possibly corrupted, duplicated or
/// reordered). A datagram the link lost is only on `inbound`. Addresses are the real ones of
/// each hop: client → listening socket and the relay's outbound socket → server going
/// forward; server → outbound socket and listening socket → client coming back.
#[derive(Debug, Clone)]
pub struct RelayTap {
    pub tap: aerotp_net::TapHandle,
    pub inbound: u32,
    pub outbound: u32,
}

/// Mixed into a path's seed for the reverse link's seed.
pub const REVERSE_SEED_MIX: u64 = 0x5EED_5EED_5EED_5EED;
/// Mixed into a path's seed for the schedule of a path-level random outage (one schedule
/// shared by both directions).
pub const OUTAGE_SEED_MIX: u64 = 0x0D0A_0D0A_0D0A_0D0A;

/// The seed of path `index` of a scenario run with `seed`: path 0 uses `seed` itself (so a
/// one-path relay draws exactly what it always drew), path i > 0 a SplitMix64 mix of
/// `seed` and `i`, so paths draw independent impairments from one seed.
pub fn path_seed(seed: u64, index: usize) -> u64 {
    if index == 0 {
        return seed;
    }
    aerotp_link::splitmix64(seed, index as u64)
}

/// Seed of the shared random-outage schedule of the path whose seed is `path_seed`.
pub fn outage_seed(path_seed: u64) -> u64 {
    path_seed ^ OUTAGE_SEED_MIX
}

impl RelayConfig {
    /// A config with defaults: reverse = forward, seed 0, 64 clients, 10 min idle
    /// timeout (outages of several minutes must not forget clients), stats every 10 s.
    pub fn new(listen: SocketAddr, to: SocketAddr, forward: LinkConfig) -> RelayConfig {
        RelayConfig {
            listen,
            to,
            forward,
            reverse: None,
            seed: 0,
            max_clients: 64,
            idle_timeout: Duration::from_secs(600),
            stats_interval: Some(Duration::from_secs(10)),
            name: "path0".into(),
            tap: None,
        }
    }
}

/// Counters of a relay run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RelayStats {
    /// Client → server link model counters.
    pub forward: LinkStats,
    /// Server → client link model counters.
    pub reverse: LinkStats,
    /// Clients accepted (a client that expired and came back counts twice).
    pub clients_accepted: u64,
    /// Datagrams dropped because `max_clients` clients were already active.
    pub rejected_datagrams: u64,
    /// Clients forgotten after `idle_timeout`.
    pub clients_expired: u64,
    /// Packets delivered by the model whose client had expired meanwhile.
    pub undeliverable: u64,
    /// Packets delivered by the model that the kernel refused to send (buffer full…).
    pub send_errors: u64,
}

/// Errors of the relay; each says which socket or direction was wrong.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A link config did not validate.
    #[error("{direction} link config: {source}")]
    Config {
        /// "forward" or "reverse".
        direction: &'static str,
        /// The validation error.
        source: LinkError,
    },
    /// `max_clients` was 0.
    #[error("max_clients is 0; the relay must accept at least one client")]
    NoClients,
    /// A socket could not be created, configured or bound.
    #[error("{what} ({addr}): {source}")]
    Socket {
        /// Which socket and operation.
        what: &'static str,
        /// The address involved.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// Receiving on the listening socket failed for good.
    #[error("receiving on the listening socket {addr} failed: {source}")]
    Recv {
        /// The listening address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
}

/// A relay socket from the runtime's one set-up ([`aerotp_net::socket::open`]): non-blocking,
/// large buffers, `SO_NO_CHECK` on non-loopback IPv4 so that payloads corrupted by the model
/// are still delivered to the peer application on a real network instead of being dropped by
/// its kernel; connected to `connect` if given. `what` names the socket in the error.
fn udp_socket(
    bind: SocketAddr,
    connect: Option<SocketAddr>,
    what: &'static str,
) -> Result<UdpSocket, RelayError> {
    aerotp_net::socket::open(bind, connect).map_err(|e| RelayError::Socket {
        what,
        addr: e.addr,
        source: io::Error::new(e.source.kind(), format!("{}: {}", e.op, e.source)),
    })
}

struct Client {
    id: u64,
    socket: Arc<UdpSocket>,
    /// The outbound socket's address (connected: the kernel chose the source address).
    local: SocketAddr,
    last_active: Instant,
    reader: JoinHandle<()>,
}

/// A bound relay, ready to [`Relay::run`].
#[derive(Debug)]
pub struct Relay {
    config: RelayConfig,
    listen: Arc<UdpSocket>,
    forward: Link,
    reverse: Link,
    start: Instant,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Validates the configs and binds the listening socket. The model's epoch (time
    /// zero, the origin of scheduled outages) is now.
    pub async fn bind(config: RelayConfig) -> Result<Relay, RelayError> {
        if config.max_clients == 0 {
            return Err(RelayError::NoClients);
        }
        let reverse_cfg = config
            .reverse
            .clone()
            .unwrap_or_else(|| config.forward.clone());
        let forward = Link::new(config.forward.clone(), config.seed).map_err(|source| {
            RelayError::Config {
                direction: "forward",
                source,
            }
        })?;
        let reverse = Link::new(reverse_cfg, config.seed ^ REVERSE_SEED_MIX).map_err(|source| {
            RelayError::Config {
                direction: "reverse",
                source,
            }
        })?;
        let listen = udp_socket(config.listen, None, "binding the listening socket")?;
        Ok(Relay {
            config,
            listen: Arc::new(listen),
            forward,
            reverse,
            start: Instant::now(),
        })
    }

    /// Moves the model's epoch (time zero of outages and traces) to `start`, so that the
    /// relays of several paths share one clock. Call before [`Relay::run`].
    pub fn set_epoch(&mut self, start: Instant) {
        self.start = start;
    }

    /// The address clients should send to (useful when `listen` had port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listen.local_addr()
    }

    /// Relays until `shutdown` completes, then returns the counters.
    pub async fn run(mut self, shutdown: impl Future) -> Result<RelayStats, RelayError> {
        let listen_addr = self.local_addr().unwrap_or(self.config.listen);
        let (reply_tx, mut reply_rx) = mpsc::channel::<(u64, Vec<u8>)>(REPLY_CHANNEL);
        let mut run = Running {
            stats: RelayStats::default(),
            clients: HashMap::new(),
            by_id: HashMap::new(),
            next_id: 0,
            reply_tx,
            bind_any: if self.config.to.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, 0).into()
            },
            // The listening socket may be bound to the unspecified address: captures show
            // the source address the kernel uses towards each client.
            listen_local: aerotp_net::sources::LocalAddrs::new(listen_addr, false),
        };
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let (mut stats_tick, mut sweep) = self.tickers();
        let name = self.config.name.clone();
        tracing::info!(path = %name, listen = %listen_addr, to = %self.config.to, "link relay running");
        tokio::pin!(shutdown);
        loop {
            let wake = self.next_arrival();
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = wake => self.deliver_due(&mut run),
                r = self.listen.recv_from(&mut buf) => {
                    let (n, from) = match r {
                        Ok(v) => v,
                        // ICMP errors reported on the unconnected socket (a client went
                        // away) and interrupted calls are not fatal.
                        Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted) => continue,
                        Err(source) => return Err(RelayError::Recv { addr: listen_addr, source }),
                    };
                    self.on_client_datagram(&mut run, from, &buf[..n])?;
                }
                Some((id, packet)) = reply_rx.recv() => self.on_reply(&mut run, id, packet),
                _ = stats_tick.tick(), if self.config.stats_interval.is_some() => {
                    log_stats(&name, &self.forward, &self.reverse, run.clients.len());
                }
                _ = sweep.tick() => run.expire_idle(self.config.idle_timeout),
            }
        }
        for c in run.clients.values() {
            c.reader.abort();
        }
        log_stats(&name, &self.forward, &self.reverse, run.clients.len());
        let mut stats = run.stats;
        stats.forward = self.forward.stats().clone();
        stats.reverse = self.reverse.stats().clone();
        Ok(stats)
    }

    /// The periodic stats log (hourly when none is asked for: its branch is then off) and the
    /// idle-client sweep, a quarter of the idle timeout apart (10 ms to 5 s).
    fn tickers(&self) -> (tokio::time::Interval, tokio::time::Interval) {
        let stats_period = self
            .config
            .stats_interval
            .unwrap_or(Duration::from_secs(3600));
        let mut stats_tick = tokio::time::interval_at(self.start + stats_period, stats_period);
        stats_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let sweep_period =
            (self.config.idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(5));
        let mut sweep = tokio::time::interval_at(self.start + sweep_period, sweep_period);
        sweep.set_missed_tick_behavior(MissedTickBehavior::Delay);
        (stats_tick, sweep)
    }

    /// Sleeps until the next datagram either link has to deliver (forever when none is in
    /// flight). Owns what it needs, so the select loop can borrow the relay meanwhile.
    fn next_arrival(&self) -> impl Future<Output = ()> + use<> {
        let next = match (self.forward.next_arrival(), self.reverse.next_arrival()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let start = self.start;
        async move {
            match next {
                Some(t) => tokio::time::sleep_until(start + t).await,
                None => std::future::pending().await,
            }
        }
    }

    /// Sends what the links deliver now: forward to the destination from the client's
    /// outbound socket, reverse to the client from the listening socket.
    fn deliver_due(&mut self, run: &mut Running) {
        let now = self.start.elapsed();
        let (tap, to) = (&self.config.tap, self.config.to);
        while let Some(d) = self.forward.recv_delivery(now) {
            let Some(addr) = run.by_id.get(&d.tag) else {
                run.stats.undeliverable += 1;
                continue;
            };
            let client = &run.clients[addr];
            if client.socket.try_send(&d.packet).is_err() {
                run.stats.send_errors += 1;
            } else if let Some(t) = tap {
                t.tap
                    .datagram(t.outbound, wall_clock(), client.local, to, &d.packet);
            }
        }
        while let Some(d) = self.reverse.recv_delivery(now) {
            let Some(addr) = run.by_id.get(&d.tag) else {
                run.stats.undeliverable += 1;
                continue;
            };
            if self.listen.try_send_to(&d.packet, *addr).is_err() {
                run.stats.send_errors += 1;
            } else if let Some(t) = tap {
                let src = run.listen_local.towards(*addr);
                t.tap
                    .datagram(t.outbound, wall_clock(), src, *addr, &d.packet);
            }
        }
    }

    /// A datagram from a client (a new one gets its outbound socket, up to `max_clients`)
    /// goes into the forward link.
    fn on_client_datagram(
        &mut self,
        run: &mut Running,
        from: SocketAddr,
        packet: &[u8],
    ) -> Result<(), RelayError> {
        let now_i = Instant::now();
        let id = if let Some(c) = run.clients.get_mut(&from) {
            c.last_active = now_i;
            c.id
        } else if run.clients.len() >= self.config.max_clients {
            run.stats.rejected_datagrams += 1;
            tracing::warn!(client = %from, max = self.config.max_clients,
                "dropping datagram: too many clients (raise --max-clients or lower --idle-timeout)");
            return Ok(());
        } else {
            run.admit(from, self.config.to, now_i)?
        };
        if let Some(t) = &self.config.tap {
            let dst = run.listen_local.towards(from);
            t.tap.datagram(t.inbound, wall_clock(), from, dst, packet);
        }
        let now = now_i.duration_since(self.start);
        self.forward.send_tagged(now, packet.to_vec(), id);
        Ok(())
    }

    /// A reply from the destination to client `id` goes into the reverse link (dropped if
    /// the client expired meanwhile).
    fn on_reply(&mut self, run: &mut Running, id: u64, packet: Vec<u8>) {
        let now_i = Instant::now();
        if let Some(c) = run.by_id.get(&id).and_then(|a| run.clients.get_mut(a)) {
            c.last_active = now_i;
            if let Some(t) = &self.config.tap {
                t.tap
                    .datagram(t.inbound, wall_clock(), self.config.to, c.local, &packet);
            }
            self.reverse
                .send_tagged(now_i.duration_since(self.start), packet, id);
        }
    }
}

/// What [`Relay::run`] keeps while it runs: its clients, by address and by the id their
/// datagrams carry through the links, and its counters.
struct Running {
    stats: RelayStats,
    clients: HashMap<SocketAddr, Client>,
    by_id: HashMap<u64, SocketAddr>,
    next_id: u64,
    /// Each client's reader hands the destination's replies over here.
    reply_tx: mpsc::Sender<(u64, Vec<u8>)>,
    /// Where outbound sockets bind: the unspecified address of the destination's family.
    bind_any: SocketAddr,
    listen_local: aerotp_net::sources::LocalAddrs,
}

impl Running {
    /// A new client `from`: its own socket connected to `to` and a task reading the replies.
    fn admit(&mut self, from: SocketAddr, to: SocketAddr, now: Instant) -> Result<u64, RelayError> {
        let socket = Arc::new(udp_socket(
            self.bind_any,
            Some(to),
            "creating the outbound socket",
        )?);
        let local = socket.local_addr().unwrap_or(self.bind_any);
        let id = self.next_id;
        self.next_id += 1;
        let reader = tokio::spawn(read_replies(id, socket.clone(), self.reply_tx.clone()));
        let client = Client {
            id,
            socket,
            local,
            last_active: now,
            reader,
        };
        self.clients.insert(from, client);
        self.by_id.insert(id, from);
        self.stats.clients_accepted += 1;
        tracing::info!(client = %from, id, "new client");
        Ok(id)
    }

    /// Forgets the clients idle for `timeout` or longer (their reader stops).
    fn expire_idle(&mut self, timeout: Duration) {
        let now_i = Instant::now();
        let (by_id, stats) = (&mut self.by_id, &mut self.stats);
        self.clients.retain(|addr, c| {
            let keep = now_i.duration_since(c.last_active) < timeout;
            if !keep {
                c.reader.abort();
                by_id.remove(&c.id);
                stats.clients_expired += 1;
                tracing::info!(client = %addr, id = c.id, "client expired after idle timeout");
            }
            keep
        });
    }
}

/// Reads the server's replies for one client and hands them to the relay task. The
/// bounded channel applies backpressure; excess then queues (and drops) in the kernel.
async fn read_replies(id: u64, socket: Arc<UdpSocket>, tx: mpsc::Sender<(u64, Vec<u8>)>) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        match socket.recv(&mut buf).await {
            Ok(n) => {
                if tx.send((id, buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
            // The server port is closed (ICMP unreachable): keep listening, it may come up.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                tracing::warn!(id, error = %e, "outbound socket failed; replies to this client stop");
                return;
            }
        }
    }
}

fn log_stats(path: &str, forward: &Link, reverse: &Link, clients: usize) {
    for (dir, s) in [("forward", forward.stats()), ("reverse", reverse.stats())] {
        tracing::info!(
            path,
            direction = dir,
            clients,
            offered = s.offered_packets,
            delivered = s.delivered_packets,
            queue_drops = s.dropped_queue_packets,
            queue_delay_p50_s = s.queue_delay.p50().as_secs_f64(),
            queue_delay_p99_s = s.queue_delay.p99().as_secs_f64(),
            queue_delay_max_s = s.queue_delay.max().as_secs_f64(),
            lost_random = s.lost_random,
            lost_burst = s.lost_burst,
            lost_outage = s.lost_outage,
            duplicated = s.duplicated,
            lost_header = s.lost_header_corrupt,
            corrupted = s.corrupted_packets,
            bits_flipped = s.bits_flipped,
            "link stats"
        );
    }
}

/// Binds the relay described by `config` and runs it until `shutdown` completes.
pub async fn run_relay(
    config: RelayConfig,
    shutdown: impl Future,
) -> Result<RelayStats, RelayError> {
    Relay::bind(config).await?.run(shutdown).await
}

/// Binds one relay per config (one per path) and runs them with [`run_all`]. If a config
/// is invalid or a socket cannot be bound, nothing runs.
pub async fn run_relays(
    configs: Vec<RelayConfig>,
    shutdown: impl Future,
) -> Result<Vec<RelayStats>, RelayError> {
    let mut relays = Vec::with_capacity(configs.len());
    for c in configs {
        relays.push(Relay::bind(c).await?);
    }
    run_all(relays, shutdown).await
}

/// Gives bound relays (one per path) one epoch (now), runs them until `shutdown`
/// completes, and returns their counters in the order given.
pub async fn run_all(
    relays: Vec<Relay>,
    shutdown: impl Future,
) -> Result<Vec<RelayStats>, RelayError> {
    let epoch = Instant::now();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::with_capacity(relays.len());
    for mut relay in relays {
        relay.set_epoch(epoch);
        let mut rx = stop_rx.clone();
        tasks.push(tokio::spawn(relay.run(async move {
            // Resolves when the sender says stop or is gone.
            let _ = rx.wait_for(|stop| *stop).await;
        })));
    }
    shutdown.await;
    let _ = stop_tx.send(true);
    let mut out = Vec::with_capacity(tasks.len());
    let mut first_err = None;
    for t in tasks {
        match t.await {
            Ok(Ok(stats)) => out.push(stats),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
