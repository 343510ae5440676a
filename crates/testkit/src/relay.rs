//! An attacker on the path, for the tests of what an endpoint does with recorded, replayed and
//! forged datagrams: a UDP relay between a client and a server (loopback) that forwards both
//! ways, records what the client sent, and can inject forged datagrams toward the server at a
//! rate, made from the client's last datagram. The server sees the relay's `upstream` socket
//! as the client, so the relay's injections and replays come from the client's address.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Makes an injected datagram from the client's last one (`None`: nothing to inject yet).
pub type Forge = Box<dyn Fn(&[u8]) -> Option<Vec<u8>> + Send>;

/// Longest a relay runs: a test that forgets to stop it does not leave a thread spinning.
const MAX_RUN: Duration = Duration::from_secs(300);

/// A running relay; stops (and joins its thread) when dropped.
pub struct Relay {
    front: SocketAddr,
    upstream: Arc<UdpSocket>,
    recorded: Arc<Mutex<Vec<Vec<u8>>>>,
    per_second: Arc<AtomicU32>,
    injected: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the relay's thread shares with the handle.
struct Shared {
    front: UdpSocket,
    upstream: Arc<UdpSocket>,
    server: SocketAddr,
    record: bool,
    recorded: Arc<Mutex<Vec<Vec<u8>>>>,
    per_second: Arc<AtomicU32>,
    injected: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    forge: Option<Forge>,
}

impl Relay {
    /// A relay to `server`; the client sends to [`Relay::front`]. `record`: keep every
    /// datagram the client sends ([`Relay::stop`] returns them). `forge`: what to inject at
    /// the rate [`Relay::inject_per_second`] sets (none until then).
    pub fn start(server: SocketAddr, record: bool, forge: Option<Forge>) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").expect("bind the relay's front");
        let upstream = Arc::new(UdpSocket::bind("127.0.0.1:0").expect("bind the relay's upstream"));
        front.set_nonblocking(true).expect("nonblocking front");
        upstream
            .set_nonblocking(true)
            .expect("nonblocking upstream");
        let shared = Shared {
            front: front.try_clone().expect("clone the front socket"),
            upstream: upstream.clone(),
            server,
            record,
            recorded: Arc::default(),
            per_second: Arc::default(),
            injected: Arc::default(),
            stop: Arc::default(),
            forge,
        };
        let (recorded, per_second, injected, stop) = (
            shared.recorded.clone(),
            shared.per_second.clone(),
            shared.injected.clone(),
            shared.stop.clone(),
        );
        Relay {
            front: front.local_addr().expect("front address"),
            upstream,
            recorded,
            per_second,
            injected,
            stop,
            thread: Some(std::thread::spawn(move || shared.run())),
        }
    }

    /// Where the client sends.
    pub fn front(&self) -> SocketAddr {
        self.front
    }

    /// Injects this many forged datagrams a second from now on (0: none).
    pub fn inject_per_second(&self, n: u32) {
        self.per_second.store(n, Ordering::Relaxed);
    }

    /// Forged datagrams injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// Stops relaying; returns what the client sent and the socket the server knew the client
    /// by (to replay from that address).
    pub fn stop(mut self) -> (Vec<Vec<u8>>, Arc<UdpSocket>) {
        self.halt();
        let recorded = std::mem::take(&mut *self.recorded.lock().expect("recording"));
        (recorded, self.upstream.clone())
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("front", &self.front)
            .field("injected", &self.injected())
            .finish_non_exhaustive()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.halt();
    }
}

impl Shared {
    fn run(self) {
        let (mut client, mut last): (Option<SocketAddr>, Vec<u8>) = (None, Vec::new());
        let mut buf = vec![0u8; 65536];
        let (t0, mut next) = (Instant::now(), Instant::now());
        while !self.stop.load(Ordering::Relaxed) && t0.elapsed() < MAX_RUN {
            let mut idle = true;
            while let Ok((n, from)) = self.front.recv_from(&mut buf) {
                idle = false;
                client = Some(from);
                last.clear();
                last.extend_from_slice(&buf[..n]);
                if self.record {
                    self.recorded.lock().expect("recording").push(last.clone());
                }
                let _ = self.upstream.send_to(&buf[..n], self.server);
            }
            while let Ok((n, _)) = self.upstream.recv_from(&mut buf) {
                idle = false;
                if let Some(c) = client {
                    let _ = self.front.send_to(&buf[..n], c);
                }
            }
            let rate = self.per_second.load(Ordering::Relaxed);
            if rate > 0 && Instant::now() >= next {
                if let Some(d) = self.forge.as_ref().and_then(|f| f(&last)) {
                    let _ = self.upstream.send_to(&d, self.server);
                    self.injected.fetch_add(1, Ordering::Relaxed);
                }
                next = (next + Duration::from_secs(1) / rate).max(Instant::now());
            }
            if idle {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}
