//! The relay over real UDP on 127.0.0.1, every test bounded in time.

use std::net::SocketAddr;
use std::time::Duration;

use aerotp_emu::{Relay, RelayConfig, RelayStats};
use aerotp_link::{LinkConfig, Outage};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant};

/// An echo server: returns every datagram to its sender and reports (time, payload).
async fn echo_server() -> (SocketAddr, mpsc::UnboundedReceiver<(Instant, Vec<u8>)>) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let _ = tx.send((Instant::now(), buf[..n].to_vec()));
            let _ = sock.send_to(&buf[..n], from).await;
        }
    });
    (addr, rx)
}

struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<RelayStats>,
}

async fn start(config: RelayConfig) -> Running {
    let relay = Relay::bind(config).await.unwrap();
    let addr = relay.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        relay
            .run(async {
                rx.await.ok();
            })
            .await
            .unwrap()
    });
    Running { addr, stop, task }
}

impl Running {
    async fn stop(self) -> RelayStats {
        self.stop.send(()).unwrap();
        timeout(Duration::from_secs(5), self.task)
            .await
            .unwrap()
            .unwrap()
    }
}

fn config(to: SocketAddr, forward: LinkConfig) -> RelayConfig {
    let mut c = RelayConfig::new("127.0.0.1:0".parse().unwrap(), to, forward);
    c.seed = 1;
    c.stats_interval = None;
    c
}

fn fast_link() -> LinkConfig {
    LinkConfig {
        rate_bps: 100_000_000,
        delay: Duration::from_millis(2),
        ..LinkConfig::default()
    }
}

async fn recv_until(sock: &UdpSocket, n: usize, limit: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65_535];
    let deadline = Instant::now() + limit;
    while got.len() < n {
        match tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
            Ok(Ok(len)) => got.push(buf[..len].to_vec()),
            _ => break,
        }
    }
    got
}

#[tokio::test]
async fn relays_both_ways_and_routes_replies_per_client() {
    let (server, _seen) = echo_server().await;
    let relay = start(config(server, fast_link())).await;
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    a.connect(relay.addr).await.unwrap();
    b.connect(relay.addr).await.unwrap();
    for i in 0..20u8 {
        a.send(&[b'a', i]).await.unwrap();
        b.send(&[b'b', i, i]).await.unwrap();
    }
    let from_a = recv_until(&a, 20, Duration::from_secs(3)).await;
    let from_b = recv_until(&b, 20, Duration::from_secs(3)).await;
    assert_eq!(from_a, (0..20u8).map(|i| vec![b'a', i]).collect::<Vec<_>>());
    assert_eq!(
        from_b,
        (0..20u8).map(|i| vec![b'b', i, i]).collect::<Vec<_>>()
    );
    let stats = relay.stop().await;
    assert_eq!(stats.clients_accepted, 2);
    assert_eq!(stats.forward.delivered_packets, 40);
    assert_eq!(stats.reverse.delivered_packets, 40);
    assert_eq!(stats.send_errors, 0);
}

#[tokio::test]
async fn rate_limits_to_the_configured_rate() {
    let (server, mut seen) = echo_server().await;
    // 100 × 1000 B at 1 Mb/s = 0.8 s of serialisation (the queue holds all of them).
    let link = LinkConfig {
        rate_bps: 1_000_000,
        delay: Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let relay = start(config(server, link)).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(relay.addr).await.unwrap();
    let t0 = Instant::now();
    for _ in 0..100 {
        client.send(&[0u8; 1000]).await.unwrap();
    }
    let mut last = t0;
    for _ in 0..100 {
        let (t, p) = timeout(Duration::from_secs(5), seen.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(p.len(), 1000);
        last = t;
    }
    let elapsed = last - t0;
    eprintln!("100 x 1000 B at 1 Mb/s: {elapsed:?}");
    assert!(
        elapsed >= Duration::from_millis(750) && elapsed <= Duration::from_millis(1500),
        "100 kB at 1 Mb/s took {elapsed:?}, expected ≈ 0.8 s"
    );
    let stats = relay.stop().await;
    assert_eq!(stats.forward.dropped_queue_packets, 0);
}

#[tokio::test]
async fn bit_errors_reach_the_server() {
    let (server, mut seen) = echo_server().await;
    let link = LinkConfig {
        ber: 1e-3,
        ..fast_link()
    };
    let relay = start(config(server, link)).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(relay.addr).await.unwrap();
    let payload = vec![0x55u8; 500];
    for _ in 0..100 {
        client.send(&payload).await.unwrap();
    }
    let mut flipped = 0u64;
    for _ in 0..100 {
        let (_, p) = timeout(Duration::from_secs(5), seen.recv())
            .await
            .unwrap()
            .unwrap();
        flipped += p
            .iter()
            .zip(&payload)
            .map(|(x, y)| u64::from((x ^ y).count_ones()))
            .sum::<u64>();
    }
    let stats = relay.stop().await;
    // 100 × 4000 bits × 1e-3 ≈ 400 flips; the ones the server saw are the model's.
    assert_eq!(flipped, stats.forward.bits_flipped);
    assert!((250..550).contains(&flipped), "flips {flipped}");
    assert!(stats.forward.corrupted_packets > 50);
}

#[tokio::test]
async fn outage_drops_then_recovers() {
    let (server, mut seen) = echo_server().await;
    // Down for the first 400 ms after the relay starts.
    let link = LinkConfig {
        outages: vec![Outage {
            start: Duration::ZERO,
            duration: Duration::from_millis(400),
        }],
        ..fast_link()
    };
    let relay = start(config(server, link)).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(relay.addr).await.unwrap();
    for i in 0..5u8 {
        client.send(&[0, i]).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    for i in 0..5u8 {
        client.send(&[1, i]).await.unwrap();
    }
    let mut got = Vec::new();
    while let Ok(Some((_, p))) = timeout(Duration::from_millis(500), seen.recv()).await {
        got.push(p);
    }
    assert_eq!(got, (0..5u8).map(|i| vec![1, i]).collect::<Vec<_>>());
    let stats = relay.stop().await;
    assert_eq!(stats.forward.lost_outage, 5);
}

#[tokio::test]
async fn client_limit_and_idle_expiry() {
    let (server, _seen) = echo_server().await;
    let mut cfg = config(server, fast_link());
    cfg.max_clients = 1;
    cfg.idle_timeout = Duration::from_millis(200);
    let relay = start(cfg).await;
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    a.connect(relay.addr).await.unwrap();
    b.connect(relay.addr).await.unwrap();
    a.send(b"a").await.unwrap();
    assert_eq!(recv_until(&a, 1, Duration::from_secs(2)).await.len(), 1);
    b.send(b"b").await.unwrap();
    assert!(recv_until(&b, 1, Duration::from_millis(200))
        .await
        .is_empty());
    // Once `a` has been idle for 200 ms its slot is free for `b`.
    tokio::time::sleep(Duration::from_millis(400)).await;
    b.send(b"b").await.unwrap();
    assert_eq!(
        recv_until(&b, 1, Duration::from_secs(2)).await,
        vec![b"b".to_vec()]
    );
    let stats = relay.stop().await;
    assert_eq!(stats.rejected_datagrams, 1);
    assert!(stats.clients_expired >= 1);
    assert_eq!(stats.clients_accepted, 2);
}

#[tokio::test]
async fn invalid_config_is_refused_with_the_direction() {
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut cfg = config(to, fast_link());
    cfg.reverse = Some(LinkConfig {
        ber: 2.0,
        ..LinkConfig::default()
    });
    let err = Relay::bind(cfg).await.unwrap_err().to_string();
    assert!(err.contains("reverse") && err.contains("ber"), "{err}");
}

/// Several paths: each relay carries its own traffic with its own delay, on one epoch.
#[tokio::test]
async fn paths_relay_their_own_traffic_with_their_own_delay() {
    use aerotp_emu::{path_seed, run_all};
    let (s0, mut seen0) = echo_server().await;
    let (s1, mut seen1) = echo_server().await;
    let path = |to, delay_ms: u64, i: usize| {
        let mut c = config(
            to,
            LinkConfig {
                delay: Duration::from_millis(delay_ms),
                ..fast_link()
            },
        );
        c.seed = path_seed(1, i);
        c.name = format!("p{i}");
        c
    };
    let r0 = Relay::bind(path(s0, 5, 0)).await.unwrap();
    let r1 = Relay::bind(path(s1, 80, 1)).await.unwrap();
    let (a0, a1) = (r0.local_addr().unwrap(), r1.local_addr().unwrap());
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(run_all(vec![r0, r1], async {
        rx.await.ok();
    }));
    let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let sent = Instant::now();
    for i in 0..10u8 {
        c.send_to(&[0, i], a0).await.unwrap();
        c.send_to(&[1, i, i], a1).await.unwrap();
    }
    let mut first = [None, None];
    for (k, seen) in [&mut seen0, &mut seen1].into_iter().enumerate() {
        for i in 0..10u8 {
            let (at, p) = timeout(Duration::from_secs(2), seen.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(p[0] as usize, k, "path {k} carries only its own datagrams");
            assert_eq!(p[1], i);
            first[k].get_or_insert(at - sent);
        }
    }
    let d0 = first[0].unwrap();
    let d1 = first[1].unwrap();
    assert!(
        d0 >= Duration::from_millis(5) && d0 < Duration::from_millis(40),
        "{d0:?}"
    );
    assert!(
        d1 >= Duration::from_millis(80) && d1 < Duration::from_millis(120),
        "{d1:?}"
    );
    stop.send(()).unwrap();
    let stats = timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(stats.len(), 2);
    assert_eq!(stats[0].forward.offered_packets, 10);
    assert_eq!(stats[1].forward.offered_packets, 10);
}
