//! Prometheus text exposition: the one writer and the one HTTP server of the workspace, used by
//! `aerotp send|recv --metrics ADDR` (an endpoint's counters, below) and by the gateways
//! (`aerotp_gw::metrics`, which renders its own families with [`family`] and [`sample`] and
//! serves them with [`serve_with`]).
//!
//! An endpoint's families come from the engine's public statistics (`aerotp_proto::Endpoint::
//! stats`, `EndpointStats`) and the driver's socket counters. Counters are summed over every
//! connection the endpoint has had: the final counters of a released connection are kept in
//! [`Totals`], so a counter never goes down. Per-connection values that go up and down (RTT,
//! rate, FEC parity) are gauges labelled with the connection. One naming scheme: `aerotp_`,
//! then `gw_` for a gateway's families, counters end in `_total` (and only they do), units are
//! spelled out in Prometheus' base units (`_bytes`, `_seconds`, `_bytes_per_second`: never
//! bits, which `promtool check metrics` refuses); every name is listed in docs/stats.md.
//!
//! The HTTP server is written by hand (a few lines over tokio) rather than pulled in from a
//! web framework: it answers one request per connection, `GET /metrics`, with bounded request
//! size, time and concurrency.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aerotp_proto::{ConnectionHandle, ConnectionStats, EndpointStats, Mode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

pub use crate::counters::{IoCounters, Totals, CONNECTION_COUNTERS};
use crate::driver::Shared;
pub use crate::exposition::{counter, family, gauge, sample, Kind, Value};

/// One live connection's gauges.
#[derive(Debug, Clone)]
pub struct LiveConnection {
    pub handle: ConnectionHandle,
    pub remote: SocketAddr,
    pub mode: Mode,
    pub stats: ConnectionStats,
}

/// Everything the exposition shows, read at one instant under the endpoint's lock.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub endpoint: EndpointStats,
    pub io: IoCounters,
    /// Connection counters over the endpoint's life (released and live connections).
    pub totals: Totals,
    pub opened: u64,
    pub closed: u64,
    /// Connections the engine holds.
    pub connections: usize,
    pub live: Vec<LiveConnection>,
}

/// Reads an endpoint's counters without keeping its driver alive.
#[derive(Clone)]
pub struct MetricsSource {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MetricsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsSource")
            .field("local_addr", &self.shared.local_addr)
            .finish()
    }
}

impl MetricsSource {
    pub(crate) fn new(shared: &Arc<Shared>) -> MetricsSource {
        MetricsSource {
            shared: shared.clone(),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let st = self.shared.lock();
        let mut totals = st.retired.clone();
        let mut handles: Vec<ConnectionHandle> = st.slots.keys().copied().collect();
        handles.sort();
        let mut live = Vec::with_capacity(handles.len());
        for h in handles {
            let (Some(stats), Some(c)) = (st.engine.stats(h), st.engine.peer(h)) else {
                continue;
            };
            totals.add(&stats);
            live.push(LiveConnection {
                handle: h,
                remote: c.remote,
                mode: c.mode,
                stats,
            });
        }
        Snapshot {
            endpoint: st.engine.stats.clone(),
            io: IoCounters {
                send_errors: st.send_errors,
                recv_errors: st.recv_errors,
                ..st.io.clone()
            },
            totals,
            opened: st.opened,
            closed: st.closed,
            connections: st.engine.connection_count(),
            live,
        }
    }

    /// The Prometheus text of the endpoint now.
    pub fn render(&self) -> String {
        render(&self.snapshot())
    }
}

type Gauge = (&'static str, &'static str, fn(&ConnectionStats) -> f64);

/// Per-connection gauges: name, help, value.
pub const CONNECTION_GAUGES: [Gauge; 8] = [
    (
        "rtt_seconds",
        "Latest round-trip time of the connection (MACK echoes).",
        |s| s.rtt.as_secs_f64(),
    ),
    (
        "srtt_seconds",
        "Smoothed round-trip time of the connection.",
        |s| s.srtt.as_secs_f64(),
    ),
    (
        "rto_seconds",
        "Current retransmission timeout of the connection.",
        |s| s.rto.as_secs_f64(),
    ),
    (
        "rate_bytes_per_second",
        "Pacing rate of the connection.",
        |s| s.rate_bps as f64 / 8.0,
    ),
    (
        "fec_parity_bytes",
        "Parity bytes per codeword the connection sends with now.",
        |s| f64::from(s.fec_parity),
    ),
    (
        "measured_ber",
        "Bit-error rate this side measures on what it receives.",
        |s| s.measured_ber,
    ),
    (
        "peer_reported_ber",
        "Bit-error rate the peer reported (the forward channel, for a sender).",
        |s| s.peer_reported_ber,
    ),
    (
        "peer_delivered_bytes",
        "Bytes the peer application has read, from its acknowledgements.",
        |s| s.peer_delivered as f64,
    ),
];

/// The exposition text of a snapshot.
/// The radio's families alone (docs/stats.md "Radio"), named `prefix` + `radio_…` with the
/// `extra` labels first, for an exposition of its own that shows an endpoint's radio changes
/// (a gateway's: `aerotp_gw_radio_…{role}`).
pub fn render_radio(s: &Snapshot, prefix: &str, extra: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let live = s.live.iter().map(|c| (c.handle, c.mode, &c.stats));
    crate::radio_metrics::render(&mut out, prefix, extra, &s.totals, live);
    out
}

pub fn render(s: &Snapshot) -> String {
    let mut out = String::with_capacity(8192);
    let endpoint = socket_counters(s)
        .into_iter()
        .chain(admission_counters(&s.endpoint))
        .chain(datagram_and_path_counters(s));
    for (name, help, v) in endpoint {
        counter(&mut out, name, help, v);
    }
    for (i, (name, help, _)) in CONNECTION_COUNTERS.iter().enumerate() {
        counter(
            &mut out,
            name,
            &format!("{help} Summed over connections."),
            s.totals.values()[i],
        );
    }
    gauge(
        &mut out,
        "connections",
        "Connections the engine holds (open, closing, or closed and not yet released).",
        s.connections as f64,
    );
    for (name, help, get) in CONNECTION_GAUGES {
        let full = format!("aerotp_{name}");
        family(&mut out, &full, Kind::Gauge, help);
        for c in &s.live {
            let (h, remote) = (c.handle.0.to_string(), c.remote.to_string());
            let labels = [
                ("connection", h.as_str()),
                ("remote", remote.as_str()),
                ("mode", c.mode.name()),
            ];
            sample(&mut out, &full, &labels, get(&c.stats));
        }
    }
    let live = s.live.iter().map(|c| (c.handle, c.mode, &c.stats));
    crate::radio_metrics::render(&mut out, "aerotp_", &[], &s.totals, live);
    out
}

/// A counter family of the endpoint: name, help, value.
type Counter = (&'static str, &'static str, u64);

/// The UDP socket's traffic, and what the engine could not decode or place.
fn socket_counters(s: &Snapshot) -> Vec<Counter> {
    let e = &s.endpoint;
    vec![
        (
            "udp_datagrams_sent",
            "Datagrams the endpoint handed to its UDP socket.",
            s.io.datagrams_sent,
        ),
        (
            "udp_bytes_sent",
            "Bytes of the datagrams handed to the UDP socket.",
            s.io.bytes_sent,
        ),
        (
            "udp_datagrams_received",
            "Datagrams the endpoint read from its UDP socket.",
            s.io.datagrams_received,
        ),
        (
            "udp_bytes_received",
            "Bytes of the datagrams read from the UDP socket.",
            s.io.bytes_received,
        ),
        (
            "udp_send_errors",
            "Datagrams the kernel refused to send.",
            s.io.send_errors,
        ),
        (
            "udp_recv_errors",
            "Failed reads from the UDP socket.",
            s.io.recv_errors,
        ),
        (
            "endpoint_datagrams_in",
            "Datagrams handed to the engine.",
            e.datagrams_in,
        ),
        (
            "undecodable_datagrams",
            "Datagrams whose header did not check even after FEC (lost).",
            e.undecodable,
        ),
        (
            "corrupted_without_connection",
            "Corrupted data TPDUs for no connection.",
            e.corrupted_without_connection,
        ),
        (
            "stray_tpdus",
            "TPDUs for no connection or an old incarnation.",
            e.stray,
        ),
        (
            "connections_refused",
            "Connection attempts refused with RST.",
            e.refused,
        ),
    ]
}

/// Admission and authentication: tags checked, challenges, cookies, set-up timeouts and the
/// FEC budget of unknown peers (docs/security.md).
fn admission_counters(e: &EndpointStats) -> Vec<Counter> {
    vec![
        (
            "auth_verified",
            "Authenticated TPDUs whose tag verified (docs/security.md).",
            e.auth_verified,
        ),
        (
            "auth_failed",
            "TPDUs dropped: tag did not verify (forged, or another key under the same id).",
            e.auth_failed,
        ),
        (
            "auth_unknown_key",
            "TPDUs dropped: sealed with a key id this endpoint does not hold.",
            e.auth_unknown_key,
        ),
        (
            "auth_replayed",
            "TPDUs dropped: packet number seen before or older than the replay window.",
            e.auth_replayed,
        ),
        (
            "auth_missing",
            "TPDUs dropped: not authenticated while this endpoint requires it.",
            e.auth_missing,
        ),
        (
            "auth_unexpected",
            "TPDUs dropped: authenticated while this endpoint has no key.",
            e.auth_unexpected,
        ),
        (
            "auth_corrupted",
            "Authenticated TPDUs dropped unverified: CRC-32C failed even after FEC.",
            e.auth_corrupted,
        ),
        (
            "challenges_sent",
            "CHALLENGEs sent to half-open connections (docs/security.md).",
            e.challenges_sent,
        ),
        (
            "retries_sent",
            "RETRYs sent to new peers while the half-open slots were full.",
            e.retries_sent,
        ),
        (
            "echoes_sent",
            "ECHOs of a listener's cookie sent by this end.",
            e.echoes_sent,
        ),
        (
            "connections_proven",
            "Accepted connections whose peer proved its address.",
            e.proven,
        ),
        (
            "cookies_refused",
            "ECHOs whose cookie did not check (forged, stale, misdirected).",
            e.cookies_refused,
        ),
        (
            "setup_timeouts",
            "Half-open connections closed at the set-up timeout.",
            e.setup_timeouts,
        ),
        (
            "fec_budget_refused",
            "FEC decoding attempts skipped: unknown peers over their CPU budget.",
            e.fec_budget_refused,
        ),
    ]
}

/// Datagram mode and its repairs, paths and migrations, connections opened and closed.
fn datagram_and_path_counters(s: &Snapshot) -> Vec<Counter> {
    let e = &s.endpoint;
    vec![
        (
            "datagram_messages_delivered",
            "Datagram-mode messages delivered.",
            e.datagrams_delivered,
        ),
        (
            "datagram_messages_dropped",
            "Datagram-mode messages dropped (corrupted or queue full).",
            e.datagrams_dropped,
        ),
        (
            "datagram_messages_sent",
            "Datagram-mode messages queued to send.",
            e.datagrams_sent,
        ),
        (
            "datagram_sent_bytes",
            "Bytes of datagram-mode messages as sent (header, CRC, parity, authentication).",
            e.datagram_bytes_sent,
        ),
        (
            "path_challenges",
            "CHALLENGEs sent to a peer's new address (docs/spec.md §9).",
            e.path_challenges,
        ),
        (
            "migrations",
            "Connections switched to a peer's new address after it echoed a challenge.",
            e.migrations,
        ),
        (
            "paths_added",
            "A peer's addresses added as another path of a connection (docs/spec.md §9).",
            e.paths_added,
        ),
        (
            "datagram_repairs_sent",
            "Repair TPDUs sent on datagram routes that repair.",
            e.datagram_repairs_sent,
        ),
        (
            "datagram_repairs_used",
            "Repair TPDUs of datagram routes that added an equation at this receiver.",
            e.datagram_repairs_used,
        ),
        (
            "datagram_messages_rebuilt",
            "Datagram-mode messages lost on the link and rebuilt from repairs.",
            e.datagrams_rebuilt,
        ),
        (
            "datagram_duplicates",
            "Numbered datagrams dropped as copies of one already delivered.",
            e.datagram_duplicates,
        ),
        (
            "connections_opened",
            "Connections opened (connect or accept).",
            s.opened,
        ),
        (
            "connections_closed",
            "Connections that ended, with any outcome.",
            s.closed,
        ),
    ]
}

/// Extra metric families appended to the endpoint's (e.g. a capture's dropped records).
pub type Extra = Arc<dyn Fn(&mut String) + Send + Sync>;

/// Most scrapes served at once; further connections wait in the kernel's accept queue.
const MAX_CONCURRENT: usize = 8;
/// Longest request head read, and the longest a client may take to send it.
const MAX_REQUEST: usize = 8192;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A running metrics server; dropping it stops the server (unless [`MetricsServer::detach`]ed).
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    /// `None` once detached.
    task: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// The address it listens on (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Lets the server run on without this handle: it stops when its render function returns
    /// `None` (a gateway's, once the gateway is gone) or the runtime shuts down.
    pub fn detach(mut self) {
        self.task = None;
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Renders the body of one scrape; `None` when what it reads is gone, which stops the server.
pub type Render = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Listens on `addr` (TCP) and serves an endpoint's `GET /metrics`, with `extra` families
/// appended. Binding fails at once, naming the address, so a wrong `--metrics` stops a command
/// before any traffic.
pub async fn serve(
    addr: SocketAddr,
    source: MetricsSource,
    extra: Option<Extra>,
) -> io::Result<MetricsServer> {
    let render: Render = Arc::new(move || {
        let mut body = source.render();
        if let Some(x) = &extra {
            x(&mut body);
        }
        Some(body)
    });
    serve_with(addr, render).await
}

/// Listens on `addr` (TCP) and serves `GET /metrics` with what `render` returns; the one server
/// behind both `send|recv --metrics` and the gateways' `--metrics`. Binding fails at once,
/// naming the flag and the address.
pub async fn serve_with(addr: SocketAddr, render: Render) -> io::Result<MetricsServer> {
    let l = TcpListener::bind(addr).await.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("--metrics {addr}: cannot listen on this TCP address: {e}"),
        )
    })?;
    let local = l.local_addr()?;
    let slots = Arc::new(Semaphore::new(MAX_CONCURRENT));
    // Set by the scrape that found `render` returning `None`; the accept loop then ends.
    let gone = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn(async move {
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let Ok((s, _)) = l.accept().await else {
                continue;
            };
            if gone.load(Ordering::Relaxed) {
                return;
            }
            let render = render.clone();
            let gone = gone.clone();
            tokio::spawn(async move {
                let _ = answer(s, &render, &gone).await;
                drop(permit);
            });
        }
    });
    Ok(MetricsServer {
        addr: local,
        task: Some(task),
    })
}

/// What a request line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    NotFound,
    BadMethod,
    BadRequest,
}

/// Parses the request line of an HTTP/1.x request head (never panics on any bytes).
fn route(head: &[u8]) -> Route {
    let line = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let Ok(line) = std::str::from_utf8(line) else {
        return Route::BadRequest;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    if method != "GET" {
        return Route::BadMethod;
    }
    let path = target.split('?').next().unwrap_or("");
    if path == "/metrics" {
        Route::Metrics
    } else {
        Route::NotFound
    }
}

async fn answer(mut s: TcpStream, render: &Render, gone: &AtomicBool) -> io::Result<()> {
    let mut req = vec![0u8; MAX_REQUEST];
    let mut n = 0;
    let read = async {
        while n < req.len() {
            match s.read(&mut req[n..]).await {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
            if req[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, read).await;
    let (status, body) = match route(&req[..n]) {
        Route::Metrics => match render() {
            Some(body) => ("200 OK", body),
            None => {
                gone.store(true, Ordering::Relaxed);
                (
                    "503 Service Unavailable",
                    "what these metrics describe has stopped\n".to_owned(),
                )
            }
        },
        Route::NotFound => ("404 Not Found", "only /metrics is served\n".to_owned()),
        Route::BadMethod => ("405 Method Not Allowed", "only GET is served\n".to_owned()),
        Route::BadRequest => ("400 Bad Request", "not an HTTP/1 request\n".to_owned()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::time::timeout(REQUEST_TIMEOUT, s.write_all(resp.as_bytes()))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "client too slow"))??;
    s.shutdown().await
}

/// Fetches `http://addr/metrics` and returns the body (tests, `aerotp` tooling).
pub async fn fetch(addr: SocketAddr) -> io::Result<String> {
    let work = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: aerotp\r\nConnection: close\r\n\r\n")
            .await?;
        let mut out = Vec::new();
        // A response is one scrape: bounded by what the server writes, then EOF.
        s.read_to_end(&mut out).await?;
        let text = String::from_utf8(out)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no HTTP header in the answer")
        })?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(io::Error::other(format!(
                "metrics endpoint answered {}",
                head.lines().next().unwrap_or("")
            )));
        }
        Ok(body.to_owned())
    };
    tokio::time::timeout(REQUEST_TIMEOUT, work)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "metrics endpoint: timeout"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{label, number};

    #[test]
    fn routes() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\n\r\n"), Route::Metrics);
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n"), Route::Metrics);
        assert_eq!(route(b"GET / HTTP/1.1\r\n"), Route::NotFound);
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n"), Route::BadMethod);
        assert_eq!(route(b""), Route::BadRequest);
        assert_eq!(route(b"\xff\xfe GET"), Route::BadRequest);
        assert_eq!(route(b"GET /metrics SPDY\r\n"), Route::BadRequest);
    }

    #[test]
    fn totals_sum_and_every_family_is_typed() {
        let mut s = ConnectionStats::default();
        s.sender.tpdus_sent = 5;
        s.receiver.bytes_delivered = 7;
        let mut t = Totals::default();
        t.add(&s);
        t.add(&s);
        assert_eq!(t.get("tpdus_sent"), Some(10));
        assert_eq!(t.get("bytes_delivered"), Some(14));
        assert_eq!(t.get("nope"), None);
        let snap = Snapshot {
            endpoint: EndpointStats::default(),
            io: IoCounters::default(),
            totals: t,
            opened: 2,
            closed: 1,
            connections: 1,
            live: vec![LiveConnection {
                handle: ConnectionHandle(3),
                remote: "127.0.0.1:9".parse().unwrap(),
                mode: Mode::Reliable,
                stats: s,
            }],
        };
        let text = render(&snap);
        let mut typed = std::collections::HashMap::new();
        for l in text.lines() {
            if let Some(r) = l.strip_prefix("# TYPE ") {
                let (n, k) = r.split_once(' ').unwrap();
                assert!(
                    typed.insert(n.to_owned(), k.to_owned()).is_none(),
                    "{n} twice"
                );
            }
        }
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let name = l.split(['{', ' ']).next().unwrap();
            let kind = &typed[name];
            assert_eq!(kind == "counter", name.ends_with("_total"), "{l}");
            let v = l.rsplit(' ').next().unwrap();
            assert!(v.parse::<f64>().is_ok(), "{l}");
        }
        assert!(text.contains("aerotp_tpdus_sent_total 10\n"), "{text}");
        assert!(text.contains(
            "aerotp_rtt_seconds{connection=\"3\",remote=\"127.0.0.1:9\",mode=\"reliable\"} 0\n"
        ));
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(number(f64::INFINITY), "+Inf");
    }

    #[test]
    fn samples_print_integers_exactly_and_escape_labels() {
        let mut out = String::new();
        family(&mut out, "aerotp_gw_x_total", Kind::Counter, "x");
        sample(
            &mut out,
            "aerotp_gw_x_total",
            &[("a", "q\"z"), ("b", "1")],
            u64::MAX,
        );
        sample(&mut out, "aerotp_gw_x_total", &[], 0.5);
        assert_eq!(
            out,
            "# HELP aerotp_gw_x_total x\n# TYPE aerotp_gw_x_total counter\n\
             aerotp_gw_x_total{a=\"q\\\"z\",b=\"1\"} 18446744073709551615\n\
             aerotp_gw_x_total 0.5\n"
        );
    }

    #[tokio::test]
    async fn a_server_whose_source_is_gone_answers_503_then_stops() {
        let alive = Arc::new(AtomicBool::new(true));
        let a = alive.clone();
        let render: Render = Arc::new(move || a.load(Ordering::Relaxed).then(|| "m 1\n".into()));
        let server = serve_with("127.0.0.1:0".parse().unwrap(), render)
            .await
            .unwrap();
        let addr = server.local_addr();
        server.detach();
        assert_eq!(fetch(addr).await.unwrap(), "m 1\n");
        alive.store(false, Ordering::Relaxed);
        let e = fetch(addr).await.unwrap_err().to_string();
        assert!(e.contains("503"), "{e}");
        // The next connection ends the accept loop: the listener closes, connecting fails or
        // the answer never comes (bounded by fetch's own 5 s timeout).
        assert!(fetch(addr).await.is_err());
    }
}
