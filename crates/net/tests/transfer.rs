//! Real UDP on loopback, directly and through the aerotp-emu relay (link model in real time).

use aerotp_emu::{Relay, RelayConfig};
use aerotp_link::{LinkConfig, Outage};
use aerotp_net::{CloseOutcome, ConnectionConfig, Endpoint, EndpointConfig, Mode, Report};
use aerotp_testkit::{random, sha256};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn cfg(mode: Mode, rate: u64) -> ConnectionConfig {
    let mut c = ConnectionConfig::with_mode(mode);
    c.rate_bps = rate;
    c.linger = Duration::from_millis(300);
    c
}

struct Outcome {
    received: Vec<u8>,
    sender: Report,
    receiver: Report,
}

/// Sends `data` from a fresh endpoint to a listening one, optionally through a relay.
async fn transfer(
    mode: Mode,
    rate: u64,
    data: &[u8],
    link: Option<LinkConfig>,
    v6: bool,
) -> Outcome {
    let any: SocketAddr = if v6 {
        "[::1]:0".parse().unwrap()
    } else {
        "127.0.0.1:0".parse().unwrap()
    };
    let server = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    server.listen(7, cfg(mode, rate)).unwrap();
    let mut target = server.local_addr();
    let shutdown = tokio::sync::oneshot::channel::<()>();
    let relay_task = if let Some(l) = link {
        let relay = Relay::bind(RelayConfig {
            stats_interval: None,
            ..RelayConfig::new(any, target, l)
        })
        .await
        .unwrap();
        target = relay.local_addr().unwrap();
        Some(tokio::spawn(relay.run(shutdown.1)))
    } else {
        None
    };
    let client = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    let recv = tokio::spawn(async move {
        let mut conn = server.accept().await.unwrap();
        let mut got = Vec::new();
        // Lossy modes may end with an error-free EOF; reliable ones must.
        let _ = conn.read_to_end(&mut got).await;
        let rep = conn.finish().await;
        (got, rep, server)
    });
    let mut conn = client.connect(target, 7, cfg(mode, rate)).unwrap();
    conn.write_all(data).await.unwrap();
    let sender = conn.finish().await;
    let (received, receiver, server) = recv.await.unwrap();
    drop(conn);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        client.connection_count(),
        0,
        "client released its connection"
    );
    assert_eq!(
        server.connection_count(),
        0,
        "server released its connection"
    );
    let _ = shutdown.0.send(());
    if let Some(t) = relay_task {
        let _ = t.await;
    }
    Outcome {
        received,
        sender,
        receiver,
    }
}

#[tokio::test]
async fn reliable_loopback_ipv4_and_ipv6() {
    let data = random(1 << 20, 1);
    for v6 in [false, true] {
        let o = tokio::time::timeout(
            Duration::from_secs(20),
            transfer(Mode::Reliable, 200_000_000, &data, None, v6),
        )
        .await
        .expect("bounded");
        assert_eq!(sha256(&o.received), sha256(&data), "v6={v6}");
        assert!(
            o.sender.guarantee_met && o.sender.delivered_confirmed,
            "{:?}",
            o.sender.outcome
        );
        assert_eq!(
            o.receiver.outcome,
            CloseOutcome::Finished { confirmed: true }
        );
    }
}

/// A socket bound to the wildcard address keeps zero checksums and sends one datagram per call;
/// one bound to loopback sends GSO trains and reads GRO trains. Either talks to the other.
#[tokio::test]
async fn wildcard_and_loopback_bound_endpoints_interoperate() {
    assert!(aerotp_net::zero_checksums("0.0.0.0:0".parse().unwrap()));
    assert!(!aerotp_net::zero_checksums("127.0.0.1:0".parse().unwrap()));
    assert!(!aerotp_net::zero_checksums("[::]:0".parse().unwrap()));
    let data = random(3 << 20, 1);
    for (server_bind, client_bind) in [("0.0.0.0:0", "127.0.0.1:0"), ("127.0.0.1:0", "0.0.0.0:0")] {
        let run = async {
            let server =
                Endpoint::bind(server_bind.parse().unwrap(), EndpointConfig::default()).unwrap();
            server
                .listen(7, cfg(Mode::Reliable, 2_000_000_000))
                .unwrap();
            let target = SocketAddr::from(([127, 0, 0, 1], server.local_addr().port()));
            let client =
                Endpoint::bind(client_bind.parse().unwrap(), EndpointConfig::default()).unwrap();
            let recv = tokio::spawn(async move {
                let mut conn = server.accept().await.unwrap();
                let mut got = Vec::new();
                conn.read_to_end(&mut got).await.unwrap();
                (got, conn.finish().await)
            });
            let mut conn = client
                .connect(target, 7, cfg(Mode::Reliable, 2_000_000_000))
                .unwrap();
            conn.write_all(&data).await.unwrap();
            let sender = conn.finish().await;
            let (got, receiver) = recv.await.unwrap();
            (got, sender, receiver)
        };
        let (got, sender, receiver) = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .expect("bounded");
        let case = format!("server {server_bind}, client {client_bind}");
        assert_eq!(sha256(&got), sha256(&data), "{case}");
        assert!(sender.guarantee_met, "{case}: {:?}", sender.outcome);
        assert_eq!(
            receiver.outcome,
            CloseOutcome::Finished { confirmed: true },
            "{case}"
        );
    }
}

fn lossy_link(outage: bool) -> LinkConfig {
    LinkConfig {
        rate_bps: 20_000_000,
        delay: Duration::from_millis(5),
        ber: 1e-4,
        per_packet_overhead: 28,
        protected_prefix: 28,
        outages: if outage {
            vec![Outage {
                start: Duration::from_millis(150),
                duration: Duration::from_millis(400),
            }]
        } else {
            vec![]
        },
        ..LinkConfig::default()
    }
}

#[tokio::test]
async fn reliable_and_hybrid_survive_ber_1e4_and_an_outage() {
    let data = random(500_000, 1);
    for mode in [Mode::Reliable, Mode::HybridNackMack] {
        let o = tokio::time::timeout(
            Duration::from_secs(30),
            transfer(mode, 18_000_000, &data, Some(lossy_link(true)), false),
        )
        .await
        .expect("bounded");
        assert_eq!(o.received.len(), data.len(), "{mode}");
        assert_eq!(sha256(&o.received), sha256(&data), "{mode}");
        assert!(o.sender.guarantee_met, "{mode}: {:?}", o.sender.outcome);
        assert!(
            o.sender.stats.sender.tpdus_retransmitted > 0,
            "{mode}: the link lost something"
        );
        eprintln!("{mode}: {:?}", o.sender.stats);
    }
}

#[tokio::test]
async fn quasi_reliable_reports_what_it_lost() {
    let data = random(500_000, 1);
    let mut link = lossy_link(true);
    link.ber = 1e-5;
    let o = tokio::time::timeout(
        Duration::from_secs(30),
        transfer(Mode::QuasiReliable, 18_000_000, &data, Some(link), false),
    )
    .await
    .expect("bounded");
    let rx = &o.receiver.stats.receiver;
    // The outage took TPDUs off the link; with no ARQ, each was either rebuilt from repair
    // TPDUs (after the outage the first report shows the loss and the sender owes the window
    // its repairs: the 400 ms outage is usually rebuilt whole) or reported lost for good.
    assert!(rx.wire_lost > 0, "the outage took TPDUs: {rx:?}");
    assert_eq!(
        rx.wire_lost,
        rx.tpdus_rebuilt + rx.tpdus_lost,
        "every TPDU the link lost is accounted for: {rx:?}"
    );
    assert_eq!(
        o.received.len() < data.len(),
        rx.tpdus_lost > 0,
        "bytes are missing exactly when TPDUs are reported lost: {rx:?}"
    );
    assert_eq!(o.sender.stats.sender.nacks_received, 0);
    assert!(
        o.receiver.guarantee_met,
        "clean close: {:?}",
        o.receiver.outcome
    );
}

#[tokio::test]
async fn datagram_mode_messages() {
    let a = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    let b = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    for i in 0..10u8 {
        a.send_datagram(b.local_addr(), 5, 9, &[i; 100], 4, 1500)
            .unwrap();
    }
    for i in 0..10u8 {
        let m = tokio::time::timeout(Duration::from_secs(5), b.recv_datagram())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(m.data, vec![i; 100]);
        assert_eq!((m.src_port, m.dst_port), (5, 9));
        assert_eq!(m.remote, a.local_addr());
    }
    assert!(a
        .send_datagram(b.local_addr(), 5, 9, &[0; 2000], 0, 1500)
        .is_err());
}

#[tokio::test]
async fn garbage_datagrams_leave_no_connection_behind() {
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    server.listen(1, cfg(Mode::Reliable, 10_000_000)).unwrap();
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let to = server.local_addr();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // A valid data header (reliable, ASYN, to port 1) whose body does not match its CRC.
    let mut valid = vec![
        0x10, 0x01, 0xC0, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 1, 0, 7, 0, 8,
    ];
    let hec = crc16(&valid);
    valid.extend_from_slice(&hec.to_be_bytes());
    valid.extend_from_slice(b"badbody!\0\0\0\0");
    for i in 0..3000 {
        let d: Vec<u8> = match i % 3 {
            0 => (0..(rnd() % 1500) as usize).map(|_| rnd() as u8).collect(),
            1 => valid[..(rnd() % 20) as usize].to_vec(),
            _ => {
                let mut v = valid.clone();
                let k = 20 + (rnd() as usize % 12);
                v[k] ^= 1 << (rnd() % 8);
                v
            }
        };
        sock.send_to(&d, to).await.unwrap();
        if i % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = server.stats();
    assert!(st.datagrams_in > 2500, "{st:?}");
    assert_eq!(server.connection_count(), 0, "{st:?}");
    // Still serves a real transfer afterwards.
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    let mut c = client
        .connect(to, 1, cfg(Mode::Reliable, 10_000_000))
        .unwrap();
    let s2 = server.clone();
    let rx = tokio::spawn(async move {
        let mut conn = s2.accept().await.unwrap();
        let mut v = Vec::new();
        conn.read_to_end(&mut v).await.unwrap();
        conn.finish().await;
        v
    });
    c.write_all(b"still alive").await.unwrap();
    assert!(c.finish().await.guarantee_met);
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), rx)
            .await
            .unwrap()
            .unwrap(),
        b"still alive"
    );
}

/// CRC-16/IBM-3740 (the header's HEC).
fn crc16(b: &[u8]) -> u16 {
    let mut c = 0xFFFFu16;
    for &x in b {
        c ^= u16::from(x) << 8;
        for _ in 0..8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            };
        }
    }
    c
}

/// `write_chunk` hands the connection the application's own buffer: what the queue has no room
/// for waits (backpressure) and comes out in order, intact, as with `write_all`.
#[tokio::test]
async fn a_shared_buffer_written_in_chunks_arrives_intact() {
    let data = bytes::Bytes::from(random(6 << 20, 3));
    let run = async {
        let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = Endpoint::bind(lo, EndpointConfig::default()).unwrap();
        server
            .listen(7, cfg(Mode::Reliable, 2_000_000_000))
            .unwrap();
        let target = server.local_addr();
        let recv = tokio::spawn(async move {
            let mut conn = server.accept().await.unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).await.unwrap();
            (got, conn.finish().await)
        });
        let client = Endpoint::bind(lo, EndpointConfig::default()).unwrap();
        let conn = client
            .connect(target, 7, cfg(Mode::Reliable, 2_000_000_000))
            .unwrap();
        // Chunks of uneven sizes, the largest beyond the connection's queue, so some wait.
        let mut at = 0;
        for (i, len) in [1usize, 1451, 1452, 1453, 5 << 20]
            .iter()
            .cycle()
            .enumerate()
        {
            if at == data.len() || i > 64 {
                break;
            }
            let end = (at + len).min(data.len());
            conn.write_chunk(data.slice(at..end)).await.unwrap();
            at = end;
        }
        assert_eq!(at, data.len(), "every byte handed over");
        let sender = conn.finish().await;
        let (got, receiver) = recv.await.unwrap();
        (got, sender, receiver)
    };
    let (got, sender, receiver) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("bounded");
    assert_eq!(sha256(&got), sha256(&data));
    assert!(sender.guarantee_met && sender.delivered_confirmed);
    assert_eq!(receiver.outcome, CloseOutcome::Finished { confirmed: true });
}
