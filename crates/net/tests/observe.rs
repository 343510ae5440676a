//! The runtime's tap and metrics on a real loopback transfer: the tap sees exactly the
//! datagrams the socket counters count, with the real addresses; the metrics' counters keep
//! a connection's figures after it is released (they never go down) and the HTTP endpoint
//! serves them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aerotp_net::metrics::{fetch, serve};
use aerotp_net::{ConnectionConfig, Endpoint, EndpointConfig, Mode, Tap, TAP_RECEIVED, TAP_SENT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// (interface, src, dst, length, time) of one datagram.
type Seen = (u32, SocketAddr, SocketAddr, usize, Duration);

/// Records every datagram.
#[derive(Default)]
struct Recorder(Mutex<Vec<Seen>>);

impl Tap for Recorder {
    fn datagram(&self, iface: u32, at: Duration, src: SocketAddr, dst: SocketAddr, b: &[u8]) {
        self.0.lock().unwrap().push((iface, src, dst, b.len(), at));
    }
}

fn cfg() -> ConnectionConfig {
    let mut c = ConnectionConfig::with_mode(Mode::Reliable);
    c.rate_bps = 200_000_000;
    c.linger = Duration::from_millis(200);
    c
}

#[tokio::test]
async fn tap_matches_the_socket_counters_and_metrics_outlive_the_connection() {
    let run = async {
        let server =
            Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
        server.listen(7, cfg()).unwrap();
        // Bound to the unspecified address: the tap must show the route's source address.
        let client =
            Endpoint::bind("0.0.0.0:0".parse().unwrap(), EndpointConfig::default()).unwrap();
        let (tc, ts) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        client.set_tap(tc.clone());
        server.set_tap(ts.clone());
        let metrics = serve(
            "127.0.0.1:0".parse().unwrap(),
            server.metrics_source(),
            None,
        )
        .await
        .unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
        let target = server.local_addr();
        let s2 = server.clone();
        let recv = tokio::spawn(async move {
            let mut conn = s2.accept().await.unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).await.unwrap();
            conn.finish().await;
            got
        });
        let mut conn = client.connect(target, 7, cfg()).unwrap();
        conn.write_all(&data).await.unwrap();
        let rep = conn.finish().await;
        assert!(rep.guarantee_met);
        assert_eq!(recv.await.unwrap(), data);
        drop(conn);
        // Released within the drain: bounded wait.
        for _ in 0..100 {
            if server.connection_count() == 0 && client.connection_count() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(server.connection_count(), 0);
        // After the release the totals still hold the connection's figures.
        let snap = server.metrics_source().snapshot();
        assert!(snap.live.is_empty());
        assert_eq!(snap.totals.get("bytes_delivered"), Some(data.len() as u64));
        assert_eq!((snap.opened, snap.closed), (1, 1));
        let text = fetch(metrics.local_addr()).await.unwrap();
        assert!(
            text.contains(&format!("aerotp_bytes_delivered_total {}\n", data.len())),
            "{text}"
        );
        assert!(text.contains("# TYPE aerotp_connections gauge\naerotp_connections 0\n"));
        // The tap saw exactly what the socket counters count, per direction.
        for (ep, rec, local) in [(&client, &tc, None), (&server, &ts, Some(target))] {
            let io = ep.remove_tap();
            let seen = rec.0.lock().unwrap().clone();
            let sent: Vec<_> = seen.iter().filter(|r| r.0 == TAP_SENT).collect();
            let got: Vec<_> = seen.iter().filter(|r| r.0 == TAP_RECEIVED).collect();
            assert_eq!(sent.len() as u64, io.datagrams_sent);
            assert_eq!(got.len() as u64, io.datagrams_received);
            assert_eq!(sent.iter().map(|r| r.3 as u64).sum::<u64>(), io.bytes_sent);
            assert!(io.datagrams_sent > 0 && io.datagrams_received > 0);
            for r in &sent {
                assert!(r.1.ip().is_loopback(), "source {} is not the route's", r.1);
                assert_eq!(r.1.port(), ep.local_addr().port());
                if let Some(l) = local {
                    assert_eq!(r.1, l);
                }
            }
            for r in &got {
                assert_eq!(r.2.port(), ep.local_addr().port());
            }
            // Wall-clock stamps, in order per direction.
            assert!(sent.windows(2).all(|w| w[0].4 <= w[1].4));
            assert!(sent[0].4 > Duration::from_secs(1_600_000_000));
        }
        // Removed: nothing more reaches it.
        let before = tc.0.lock().unwrap().len();
        let c2 = client.connect(target, 7, cfg()).unwrap();
        c2.abort("test");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(tc.0.lock().unwrap().len(), before);
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("within 30 s");
}
