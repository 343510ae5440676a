//! Key rotation on a running endpoint: a receiver following its key file (`keyfile::watch`)
//! takes a rotated key without a restart, so a sender already on the new key gets through,
//! and TPDUs under the old key still open until it is retired.

use std::time::Duration;

use aerotp_net::keyfile::{self, WriteMode};
use aerotp_net::{ConnectionConfig, Endpoint, EndpointConfig, Mode};
use tokio::io::AsyncWriteExt;

fn cfg() -> ConnectionConfig {
    let mut c = ConnectionConfig::with_mode(Mode::Reliable);
    c.rate_bps = 100_000_000;
    c.linger = Duration::from_millis(200);
    c
}

fn ecfg(keys: aerotp_net::KeySet) -> EndpointConfig {
    EndpointConfig {
        auth: Some(keyfile::auth_config(keys, true).unwrap()),
        ..EndpointConfig::default()
    }
}

/// Sends `n` bytes from a fresh endpoint with `keys`; true if they arrived and were confirmed
/// within `limit`.
async fn send(server: &Endpoint, keys: aerotp_net::KeySet, n: usize, limit: Duration) -> bool {
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), ecfg(keys)).unwrap();
    let mut c = client.connect(server.local_addr(), 7, cfg()).unwrap();
    let srv = server.clone();
    let me = client.local_addr().port();
    let rx = tokio::spawn(async move {
        // Skip connections of earlier attempts: their ASYNs, refused under a key the
        // receiver did not yet hold, open a connection once it does.
        let rx = loop {
            let c = srv.accept().await.unwrap();
            if c.remote_address().port() == me {
                break c;
            }
        };
        let mut got = 0;
        while let Some(ch) = rx.read_chunk().await.unwrap() {
            got += ch.data.len();
        }
        let _ = rx.finish().await;
        got
    });
    // A failed attempt must not leave its accept behind to take the next one's connection.
    let stop = rx.abort_handle();
    let attempt = async {
        c.write_all(&vec![7u8; n]).await.unwrap();
        let confirmed = c.finish().await.guarantee_met;
        confirmed && rx.await.unwrap() == n
    };
    let ok = aerotp_net::within(limit, attempt).await.unwrap_or(false);
    stop.abort();
    ok
}

#[tokio::test]
async fn a_watched_key_file_rotates_without_a_restart() {
    let dir = tempfile_dir();
    let path = dir.join("k.key");
    let first = keyfile::write(&path, WriteMode::New).unwrap();
    let server = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        ecfg(keyfile::load(&path, "test").unwrap()),
    )
    .unwrap();
    server.listen(7, cfg()).unwrap();
    keyfile::watch(&server, path.clone(), "test".into());
    assert!(send(&server, first.clone(), 10_000, Duration::from_secs(10)).await);
    // Rotate the file; the sender moves to the new key at once.
    tokio::time::sleep(Duration::from_millis(1100)).await; // a new modification time
    let rotated = keyfile::write(&path, WriteMode::Rotate).unwrap();
    assert_eq!(rotated.previous.as_ref(), Some(&first.current));
    // The watcher checks once a second: within a few seconds the new key is accepted ...
    let mut ok = false;
    for _ in 0..3 {
        if send(&server, rotated.clone(), 10_000, Duration::from_secs(10)).await {
            ok = true;
            break;
        }
    }
    assert!(
        ok,
        "the receiver never took the rotated key: {:?}",
        server.stats()
    );
    // ... and the old one still is, until retired.
    assert!(send(&server, first.clone(), 10_000, Duration::from_secs(10)).await);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    keyfile::write(&path, WriteMode::Retire).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!send(&server, first, 10_000, Duration::from_secs(3)).await);
    let stats = server.stats();
    assert!(stats.auth_unknown_key > 0, "{stats:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("aerotp-keyfile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
