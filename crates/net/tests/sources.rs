//! The local address datagrams leave from, on endpoints bound to the unspecified address
//! (crates/net/src/sources.rs), over loopback (127.0.0.0/8 is all this host's, so several
//! local addresses need no set-up): a receiver answers from the address it was reached at; a
//! path's pinned local address is where its datagrams come from.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aerotp_net::{ConnectionConfig, Endpoint, EndpointConfig, Mode, Tap, TAP_RECEIVED, TAP_SENT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// (interface, src, dst) of every datagram.
#[derive(Default)]
struct Recorder(Mutex<Vec<(u32, SocketAddr, SocketAddr)>>);

impl Tap for Recorder {
    fn datagram(&self, iface: u32, _at: Duration, src: SocketAddr, dst: SocketAddr, _b: &[u8]) {
        self.0.lock().unwrap().push((iface, src, dst));
    }
}

impl Recorder {
    fn seen(&self, iface: u32) -> Vec<(SocketAddr, SocketAddr)> {
        let v = self.0.lock().unwrap();
        v.iter()
            .filter(|d| d.0 == iface)
            .map(|d| (d.1, d.2))
            .collect()
    }
}

fn cfg() -> ConnectionConfig {
    let mut c = ConnectionConfig::with_mode(Mode::Reliable);
    c.rate_bps = 100_000_000;
    c.linger = Duration::from_millis(200);
    c
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn at(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

/// Sends `data` on `conn` and checks the accepting side of `server` reads it all.
async fn transfer(
    server: &Endpoint,
    conn: &mut aerotp_net::Connection,
    data: &[u8],
) -> anyhow::Result<()> {
    let s2 = server.clone();
    let recv = tokio::spawn(async move {
        let mut conn = s2.accept().await.expect("accept");
        let mut got = Vec::new();
        conn.read_to_end(&mut got).await.expect("read");
        conn.finish().await;
        got
    });
    conn.write_all(data).await?;
    let rep = conn.finish().await;
    anyhow::ensure!(rep.guarantee_met, "sender's guarantee not met: {rep:?}");
    anyhow::ensure!(recv.await? == data, "the receiver read other bytes");
    Ok(())
}

#[tokio::test]
async fn a_receiver_on_the_unspecified_address_answers_from_the_address_it_was_reached_at() {
    let run = async {
        let server = Endpoint::bind(at("0.0.0.0", 0), EndpointConfig::default()).unwrap();
        server.listen(7, cfg()).unwrap();
        let client = Endpoint::bind(at("127.0.0.1", 0), EndpointConfig::default()).unwrap();
        let tap = Arc::new(Recorder::default());
        client.set_tap(tap.clone());
        // 127.0.0.3 is this host's, but not the address routing picks towards 127.0.0.1.
        let target = at("127.0.0.3", server.local_addr().port());
        let mut conn = client.connect(target, 7, cfg()).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 13) as u8).collect();
        transfer(&server, &mut conn, &data).await.unwrap();
        let heard = tap.seen(TAP_RECEIVED);
        assert!(!heard.is_empty());
        assert!(
            heard.iter().all(|(src, _)| *src == target),
            "answers came from {:?}",
            heard.iter().find(|(src, _)| *src != target)
        );
        assert_eq!(conn.stats().paths.len(), 1, "no second path was opened");
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("timed out");
}

/// What the server saw of a two-path transfer.
struct TwoPaths {
    /// (src, dst) of every datagram the server received and sent.
    heard: Vec<(SocketAddr, SocketAddr)>,
    sent: Vec<(SocketAddr, SocketAddr)>,
    paths: Vec<aerotp_net::PathStats>,
}

/// 2 MB from a client on the unspecified address over two paths, the first from 127.0.0.2
/// to the server at `first`, the second from 127.0.0.4 to it at `second` (the same address
/// or another). Checks that each path carried over 100 datagrams from its own local address
/// to its own server address, and nothing came from elsewhere.
async fn two_paths(first: &str, second: &str) -> TwoPaths {
    let server = Endpoint::bind(at("0.0.0.0", 0), EndpointConfig::default()).unwrap();
    server.listen(7, cfg()).unwrap();
    let port = server.local_addr().port();
    let tap = Arc::new(Recorder::default());
    server.set_tap(tap.clone());
    let client = Endpoint::bind(at("0.0.0.0", 0), EndpointConfig::default()).unwrap();
    let cport = client.local_addr().port();
    let (first, second) = (at(first, port), at(second, port));
    client.pin_source(first, ip("127.0.0.2")).unwrap();
    let mut conn = client.connect(first, 7, cfg()).unwrap();
    conn.add_path_from(ip("127.0.0.4"), second).unwrap();
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 31) as u8).collect();
    transfer(&server, &mut conn, &data).await.unwrap();
    let heard = tap.seen(TAP_RECEIVED);
    let from = |src: &str, dst: SocketAddr| {
        heard
            .iter()
            .filter(|(s, d)| *s == at(src, cport) && *d == dst)
            .count()
    };
    let (on_first, on_second) = (from("127.0.0.2", first), from("127.0.0.4", second));
    assert_eq!(
        on_first + on_second,
        heard.len(),
        "datagrams from elsewhere: {:?}",
        heard
            .iter()
            .find(|(s, _)| s.ip() != ip("127.0.0.2") && s.ip() != ip("127.0.0.4"))
    );
    assert!(
        on_first > 100 && on_second > 100,
        "{on_first} / {on_second}"
    );
    TwoPaths {
        heard,
        sent: tap.seen(TAP_SENT),
        paths: conn.stats().paths,
    }
}

#[tokio::test]
async fn each_path_leaves_from_its_pinned_local_address() {
    let run = async {
        let t = two_paths("127.0.0.1", "127.0.0.5").await;
        assert!(!t.heard.is_empty());
        // The server's answers on each path leave from the address that path reached it at.
        assert!(t.sent.iter().all(|(s, d)| (s.ip() == ip("127.0.0.1")
            && d.ip() == ip("127.0.0.2"))
            || (s.ip() == ip("127.0.0.5") && d.ip() == ip("127.0.0.4"))));
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("timed out");
}

/// Two radios, one ground address: the paths differ only in the client's local address.
/// Both carry the data, each from its own address, and the server answers each on it.
#[tokio::test]
async fn two_local_addresses_to_one_peer_address_are_two_paths() {
    let run = async {
        let t = two_paths("127.0.0.1", "127.0.0.1").await;
        let ends: Vec<_> = t.paths.iter().map(|p| (p.local, p.remote.ip())).collect();
        assert_eq!(
            ends,
            [
                (Some(ip("127.0.0.2")), ip("127.0.0.1")),
                (Some(ip("127.0.0.4")), ip("127.0.0.1"))
            ]
        );
        // The server's answers go back to each radio's address.
        assert!(t.sent.iter().any(|(_, d)| d.ip() == ip("127.0.0.2")));
        assert!(t.sent.iter().any(|(_, d)| d.ip() == ip("127.0.0.4")));
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("timed out");
}

#[tokio::test]
async fn a_bad_local_address_is_refused_and_changes_nothing() {
    let client = Endpoint::bind(at("0.0.0.0", 0), EndpointConfig::default()).unwrap();
    let peer = at("127.0.0.1", 9);
    let e = client.pin_source(peer, ip("203.0.113.9")).unwrap_err();
    assert!(e.to_string().contains("not an address of this host"), "{e}");
    let bound = Endpoint::bind(at("127.0.0.1", 0), EndpointConfig::default()).unwrap();
    let e = bound.pin_source(peer, ip("127.0.0.2")).unwrap_err();
    assert!(e.to_string().contains("unspecified address"), "{e}");
}
