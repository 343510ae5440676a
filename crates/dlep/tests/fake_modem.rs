//! The client against hand-written modems that misbehave: garbage, truncated messages, absurd
//! rates, floods, silence, and a port where nothing listens. Every wait is bounded.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use aerotp_dlep::codec::ids::{item, message as msg, signal};
use aerotp_dlep::codec::{message_frame_len, DataItem as D, Message, Signal};
use aerotp_dlep::{
    spawn, Anomaly, ClientConfig, Config, Discovery, Event, LostReason, Mac, StatusCode, Target,
};
use common::{collect_for, init_tracing, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::time::timeout;

const T: Duration = Duration::from_secs(5);
const MAC: Mac = Mac::eui48([0, 0x11, 0x22, 0x33, 0x44, 0x55]);

/// One accepted router connection, seen from the modem's side.
struct Conn(TcpStream);

impl Conn {
    async fn accept(l: &TcpListener) -> Conn {
        let (s, _) = timeout(T, l.accept())
            .await
            .expect("no connection")
            .unwrap();
        Conn(s)
    }

    async fn read_message(&mut self) -> Message {
        let mut hdr = [0u8; 4];
        timeout(T, self.0.read_exact(&mut hdr))
            .await
            .expect("no message")
            .unwrap();
        let len = message_frame_len(&hdr).unwrap();
        let mut b = hdr.to_vec();
        b.resize(len, 0);
        timeout(T, self.0.read_exact(&mut b[4..]))
            .await
            .unwrap()
            .unwrap();
        Message::parse(&b).unwrap()
    }

    async fn send(&mut self, ty: u16, items: Vec<D>) {
        let b = Message::new(ty, items).to_bytes().unwrap();
        self.0.write_all(&b).await.unwrap();
    }

    /// Reads Session Initialization and accepts it.
    async fn init(&mut self, heartbeat_ms: u32) {
        let m = self.read_message().await;
        assert_eq!(m.ty, msg::SESSION_INITIALIZATION);
        self.send(
            msg::SESSION_INITIALIZATION_RESPONSE,
            vec![
                D::Status {
                    code: StatusCode::SUCCESS,
                    text: String::new(),
                },
                D::PeerType {
                    secured: false,
                    description: "fake".into(),
                },
                D::HeartbeatInterval(heartbeat_ms),
                D::CurrentDataRateTx(5_000_000),
            ],
        )
        .await;
    }
}

async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

fn config(addr: SocketAddr) -> ClientConfig {
    let mut c = ClientConfig::connect(addr);
    c.session.heartbeat_interval = Duration::from_millis(200);
    c.backoff_max = Duration::from_millis(400);
    c
}

fn is_up(e: &Event) -> bool {
    matches!(e, Event::SessionUp(_))
}

#[tokio::test]
async fn destination_up_with_rate_then_garbage_then_reconnect() {
    init_tracing();
    let (l, addr) = listener().await;
    let (client, mut rx) = spawn(config(addr));
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    wait_for(&mut rx, T, "session up", is_up).await;
    c.send(
        msg::DESTINATION_UP,
        vec![D::MacAddress(MAC), D::CurrentDataRateTx(1_000_000)],
    )
    .await;
    let e = wait_for(&mut rx, T, "destination up", |e| {
        matches!(e, Event::DestinationUp(_))
    })
    .await;
    let Event::DestinationUp(d) = e else {
        unreachable!()
    };
    assert_eq!((d.mac, d.metrics.current_rate_tx), (MAC, Some(1_000_000)));
    let r = c.read_message().await;
    assert_eq!(r.ty, msg::DESTINATION_UP_RESPONSE);

    // Garbage: a type nobody defined, then noise.
    c.0.write_all(&[0xde, 0xad, 0x00, 0x02, 0xbe, 0xef, 1, 2, 3])
        .await
        .unwrap();
    let e = wait_for(&mut rx, T, "session lost", |e| {
        matches!(e, Event::SessionLost { .. })
    })
    .await;
    assert!(
        matches!(&e, Event::SessionLost { reason: LostReason::ProtocolError { status, .. }, destinations } if *status == StatusCode::UNKNOWN_MESSAGE && destinations == &vec![MAC]),
        "{e:?}"
    );
    let t = c.read_message().await;
    assert_eq!(t.ty, msg::SESSION_TERMINATION);
    drop(c);
    // The client comes back.
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    wait_for(&mut rx, T, "second session", is_up).await;
    client.shutdown().await;
    let t = c.read_message().await;
    assert_eq!(t.ty, msg::SESSION_TERMINATION);
}

#[tokio::test]
async fn truncated_message_then_close_is_connection_closed() {
    init_tracing();
    let (l, addr) = listener().await;
    let (_client, mut rx) = spawn(config(addr));
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    wait_for(&mut rx, T, "session up", is_up).await;
    let full = Message::new(msg::DESTINATION_UP, vec![D::MacAddress(MAC)])
        .to_bytes()
        .unwrap();
    c.0.write_all(&full[..full.len() - 2]).await.unwrap();
    drop(c);
    let e = wait_for(&mut rx, T, "session lost", |e| {
        matches!(e, Event::SessionLost { .. })
    })
    .await;
    assert!(
        matches!(
            e,
            Event::SessionLost {
                reason: LostReason::ConnectionClosed,
                ..
            }
        ),
        "{e:?}"
    );
    // Half a message is not a destination.
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    let up = wait_for(&mut rx, T, "session up again", is_up).await;
    assert!(is_up(&up));
}

#[tokio::test]
async fn absurd_rates_are_anomalies_and_the_session_stays() {
    init_tracing();
    let (l, addr) = listener().await;
    let (_client, mut rx) = spawn(config(addr));
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    wait_for(&mut rx, T, "session up", is_up).await;
    c.send(
        msg::DESTINATION_UP,
        vec![
            D::MacAddress(MAC),
            D::CurrentDataRateTx(u64::MAX),
            D::MaxDataRateTx(0),
        ],
    )
    .await;
    let e = wait_for(&mut rx, T, "destination up", |e| {
        matches!(e, Event::DestinationUp(_))
    })
    .await;
    let Event::DestinationUp(d) = e else {
        unreachable!()
    };
    // The session-wide 5 Mb/s stands; the absurd values are not metrics.
    assert_eq!(d.metrics.current_rate_tx, Some(5_000_000));
    assert_eq!(d.metrics.max_rate_tx, None);
    c.send(
        msg::DESTINATION_UPDATE,
        vec![D::MacAddress(MAC), D::CurrentDataRateTx(0)],
    )
    .await;
    wait_for(&mut rx, T, "anomaly for rate 0", |e| {
        matches!(e, Event::Anomaly(Anomaly::Implausible { value: 0, item, .. }) if *item == item::CURRENT_DATA_RATE_TX)
    })
    .await;
    let later = collect_for(&mut rx, Duration::from_millis(300)).await;
    assert!(
        !later.iter().any(|e| matches!(e, Event::SessionLost { .. })),
        "{later:?}"
    );
}

#[tokio::test]
async fn a_flood_of_updates_ends_with_the_latest_state() {
    init_tracing();
    let (l, addr) = listener().await;
    let (_client, mut rx) = spawn(config(addr));
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    wait_for(&mut rx, T, "session up", is_up).await;
    c.send(msg::DESTINATION_UP, vec![D::MacAddress(MAC)]).await;
    let mut flood = Vec::new();
    for r in 1..=50_000u64 {
        Message::new(
            msg::DESTINATION_UPDATE,
            vec![D::MacAddress(MAC), D::CurrentDataRateTx(r)],
        )
        .emit(&mut flood)
        .unwrap();
    }
    // Read the router's responses meanwhile so that neither side blocks.
    let (mut rd, mut wr) = c.0.into_split();
    let drain = tokio::spawn(async move {
        let mut b = vec![0u8; 4096];
        while let Ok(Ok(n)) = timeout(Duration::from_secs(10), rd.read(&mut b)).await {
            if n == 0 {
                break;
            }
        }
    });
    timeout(T, wr.write_all(&flood)).await.unwrap().unwrap();
    let last = wait_for(
        &mut rx,
        Duration::from_secs(20),
        "the last update",
        |e| matches!(e, Event::DestinationUpdate(d) if d.metrics.current_rate_tx == Some(50_000)),
    )
    .await;
    assert!(matches!(last, Event::DestinationUpdate(_)));
    drop(wr);
    drain.abort();
}

#[tokio::test]
async fn silent_modem_times_out_and_mute_modem_times_out_init() {
    init_tracing();
    let (l, addr) = listener().await;
    let mut cfg = config(addr);
    cfg.session.init_timeout = Duration::from_millis(300);
    let (_client, mut rx) = spawn(cfg);
    // First connection: never answers Session Initialization.
    let c1 = Conn::accept(&l).await;
    let e = wait_for(&mut rx, T, "init timeout", |e| {
        matches!(e, Event::SessionLost { .. })
    })
    .await;
    assert!(
        matches!(
            e,
            Event::SessionLost {
                reason: LostReason::InitTimeout,
                ..
            }
        ),
        "{e:?}"
    );
    drop(c1);
    // Second: comes up with a 300 ms heartbeat interval, then falls silent (socket open).
    let mut c2 = Conn::accept(&l).await;
    c2.init(300).await;
    wait_for(&mut rx, T, "session up", is_up).await;
    let e = wait_for(&mut rx, T, "heartbeat timeout", |e| {
        matches!(e, Event::SessionLost { .. })
    })
    .await;
    let Event::SessionLost {
        reason: LostReason::HeartbeatTimeout { silent_for },
        ..
    } = e
    else {
        panic!("{e:?}")
    };
    assert!(silent_for >= Duration::from_millis(600), "{silent_for:?}");
    // The router kept sending its heartbeats meanwhile.
    let mut heartbeats = 0;
    for _ in 0..100 {
        let m = c2.read_message().await;
        if m.ty == msg::SESSION_TERMINATION {
            break;
        }
        heartbeats += usize::from(m.ty == msg::HEARTBEAT);
    }
    assert!(heartbeats >= 1);
}

#[tokio::test]
async fn nothing_listening_is_retried_with_backoff_and_shutdown_is_prompt() {
    init_tracing();
    let (l, addr) = listener().await;
    drop(l);
    let mut cfg = config(addr);
    cfg.backoff_initial = Duration::from_millis(50);
    cfg.backoff_max = Duration::from_millis(200);
    let (client, mut rx) = spawn(cfg);
    let mut retries = Vec::new();
    for _ in 0..4 {
        let e = wait_for(&mut rx, T, "connect failure", |e| {
            matches!(e, Event::ConnectFailed { .. })
        })
        .await;
        if let Event::ConnectFailed { retry_in, .. } = e {
            retries.push(retry_in);
        }
    }
    assert_eq!(
        retries,
        [50, 100, 200, 200].map(Duration::from_millis).to_vec(),
        "exponential backoff, capped"
    );
    timeout(Duration::from_secs(2), client.shutdown())
        .await
        .expect("shutdown hangs");
}

#[tokio::test]
async fn peer_discovery_finds_the_modem() {
    init_tracing();
    let (l, addr) = listener().await;
    // A modem's discovery responder on loopback (unicast: no multicast route needed).
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let group = udp.local_addr().unwrap();
    let responder = tokio::spawn(async move {
        let mut b = vec![0u8; 1500];
        // Garbage first, then the real offer: the router must skip the former.
        let (n, from) = udp.recv_from(&mut b).await.unwrap();
        assert_eq!(Signal::parse(&b[..n]).unwrap().ty, signal::PEER_DISCOVERY);
        udp.send_to(b"DLEPgarbage", from).await.unwrap();
        let offer = Signal::new(
            signal::PEER_OFFER,
            vec![D::Ipv4ConnectionPoint {
                tls: false,
                addr: [127, 0, 0, 1].into(),
                port: Some(addr.port()),
            }],
        );
        udp.send_to(&offer.to_bytes().unwrap(), from).await.unwrap();
    });
    let mut cfg = ClientConfig::discover(Discovery {
        group,
        interval: Duration::from_millis(200),
        ..Discovery::default()
    });
    cfg.session = Config {
        heartbeat_interval: Duration::from_millis(200),
        ..Config::default()
    };
    assert!(matches!(cfg.target, Target::Discover(_)));
    let (_client, mut rx) = spawn(cfg);
    let e = wait_for(&mut rx, T, "peer discovered", |e| {
        matches!(e, Event::PeerDiscovered { .. })
    })
    .await;
    assert_eq!(e, Event::PeerDiscovered { addr });
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    wait_for(&mut rx, T, "session up", is_up).await;
    responder.await.unwrap();
}

#[tokio::test]
async fn dropping_the_receiver_stops_the_client() {
    init_tracing();
    let (l, addr) = listener().await;
    let (client, rx) = spawn(config(addr));
    let mut c = Conn::accept(&l).await;
    c.init(1000).await;
    drop(rx);
    // The client ends the session politely and goes away.
    let deadline = tokio::time::Instant::now() + T;
    while c.read_message().await.ty != msg::SESSION_TERMINATION {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Session Termination"
        );
    }
    timeout(Duration::from_secs(3), client.shutdown())
        .await
        .expect("client still running");
}
