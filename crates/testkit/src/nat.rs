//! A NAT on loopback that rebinds: the tests of a peer's new address (docs/spec.md §9, "A
//! peer's new address") put it between two endpoints or gateways.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::UdpSocket;

/// A NAT between a client and `server`: the client sends to the returned address; the first
/// `rebind_after` datagrams leave towards the server from one socket, the rest from a second
/// (the client's new address as the server sees it). What reaches the first socket after the
/// rebinding is dropped (its mapping is gone) and counted in the returned counter; what
/// reaches either socket before is relayed to the client. Runs until the runtime stops.
pub async fn rebinding_relay(
    server: SocketAddr,
    rebind_after: u64,
) -> (SocketAddr, Arc<AtomicU64>) {
    let inside = Arc::new(
        UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind NAT inside"),
    );
    let outs = [
        Arc::new(
            UdpSocket::bind("127.0.0.1:0")
                .await
                .expect("bind NAT outside"),
        ),
        Arc::new(
            UdpSocket::bind("127.0.0.1:0")
                .await
                .expect("bind NAT outside"),
        ),
    ];
    let addr = inside.local_addr().expect("NAT address");
    let forwarded = Arc::new(AtomicU64::new(0));
    let dropped = Arc::new(AtomicU64::new(0));
    let client = Arc::new(Mutex::new(None::<SocketAddr>));
    for (i, out) in outs.iter().enumerate() {
        let (out, inside, client, forwarded, dropped) = (
            out.clone(),
            inside.clone(),
            client.clone(),
            forwarded.clone(),
            dropped.clone(),
        );
        tokio::spawn(async move {
            let mut b = vec![0u8; 65_536];
            while let Ok((n, _)) = out.recv_from(&mut b).await {
                if i == 0 && forwarded.load(Ordering::Relaxed) >= rebind_after {
                    dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let to = *client.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(c) = to {
                    let _ = inside.send_to(&b[..n], c).await;
                }
            }
        });
    }
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((n, from)) = inside.recv_from(&mut b).await {
            *client.lock().unwrap_or_else(|e| e.into_inner()) = Some(from);
            let k = forwarded.fetch_add(1, Ordering::Relaxed);
            let _ = outs[usize::from(k >= rebind_after)]
                .send_to(&b[..n], server)
                .await;
        }
    });
    (addr, dropped)
}

/// A plain relay towards `server`, one path of several (docs/spec.md §9, "several paths"):
/// the client sends to the returned address, the relay forwards from a socket of its own (so
/// the server sees each relay as another address of the client) and sends the server's
/// answers back. The counter holds the datagrams relayed towards the server. Runs until the
/// runtime stops.
pub async fn path_relay(server: SocketAddr) -> (SocketAddr, Arc<AtomicU64>) {
    let (addr, carried, _) = watched_path_relay(server).await;
    (addr, carried)
}

/// The address the client last sent from, as a [`watched_path_relay`] saw it.
pub type LastSource = Arc<Mutex<Option<SocketAddr>>>;

/// As [`path_relay`], also giving the address the client last sent from (a test checks the
/// local address a path leaves from).
pub async fn watched_path_relay(server: SocketAddr) -> (SocketAddr, Arc<AtomicU64>, LastSource) {
    let inside = Arc::new(UdpSocket::bind("127.0.0.1:0").await.expect("bind relay"));
    let out = Arc::new(UdpSocket::bind("127.0.0.1:0").await.expect("bind relay"));
    let addr = inside.local_addr().expect("relay address");
    let carried = Arc::new(AtomicU64::new(0));
    let client = Arc::new(Mutex::new(None::<SocketAddr>));
    {
        let (out, inside, client) = (out.clone(), inside.clone(), client.clone());
        tokio::spawn(async move {
            let mut b = vec![0u8; 65_536];
            while let Ok((n, _)) = out.recv_from(&mut b).await {
                let to = *client.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(c) = to {
                    let _ = inside.send_to(&b[..n], c).await;
                }
            }
        });
    }
    let counter = carried.clone();
    let last = client.clone();
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((n, from)) = inside.recv_from(&mut b).await {
            *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(from);
            counter.fetch_add(1, Ordering::Relaxed);
            let _ = out.send_to(&b[..n], server).await;
        }
    });
    (addr, carried, client)
}
