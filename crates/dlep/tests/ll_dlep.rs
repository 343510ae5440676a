//! Interoperability with a modem nobody on this project wrote: MIT-LL's LL-DLEP (commit
//! 184e148), built by `scripts/build-ll-dlep.sh`, run as a modem on 127.0.0.1 and driven
//! through its CLI on stdin.
//!
//! The binary is `$AEROTP_LL_DLEP` if set, else
//! `${AEROTP_CACHE:-$HOME/.cache/aerotp}/ll-dlep-184e148/bin/Dlep`. These tests FAIL (never
//! skip) when it is missing: run `scripts/build-ll-dlep.sh` first (scripts/test.sh does).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aerotp_dlep::{spawn, ClientConfig, Discovery, Event, Mac};
use aerotp_testkit::ll_dlep::{Modem, GROUP};
use common::{collect_for, init_tracing, wait_for};

const MAC: &str = "00:11:22:33:44:55";

fn free_port() -> u16 {
    aerotp_testkit::free_tcp().port()
}

fn client_config(port: u16) -> ClientConfig {
    let mut c = ClientConfig::connect(SocketAddr::from(([127, 0, 0, 1], port)));
    // LL-DLEP rounds our interval to whole seconds and allows its threshold (2) of them.
    c.session.heartbeat_interval = Duration::from_millis(500);
    c.backoff_initial = Duration::from_millis(100);
    c.backoff_max = Duration::from_millis(500);
    c
}

fn mac() -> Mac {
    MAC.parse().unwrap()
}

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn destinations_rates_and_heartbeats_with_ll_dlep() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut modem = Modem::start(dir.path(), port);
    let (client, mut rx) = spawn(client_config(port));

    let e = wait_for(&mut rx, T, "session up", |e| {
        matches!(e, Event::SessionUp(_))
    })
    .await;
    let Event::SessionUp(peer) = e else {
        unreachable!()
    };
    assert_eq!(peer.peer_type, "ll-dlep-modem");
    assert_eq!(peer.heartbeat_interval, Duration::from_secs(1));

    modem.cli(&format!("dest up {MAC} Current_Data_Rate_Transmit 5000000"));
    let e = wait_for(&mut rx, T, "destination up", |e| {
        matches!(e, Event::DestinationUp(_))
    })
    .await;
    let Event::DestinationUp(d) = e else {
        unreachable!()
    };
    assert_eq!(d.mac, mac());
    assert_eq!(d.metrics.current_rate_tx, Some(5_000_000));

    // LL-DLEP's latency range is the draft's, under private ids (extension 65521, data item
    // 65411); offered by this side, it is read like RFC 8757's (maximum first).
    assert!(peer.extensions.contains(&65521), "{:?}", peer.extensions);
    modem.cli(&format!("dest update {MAC} Latency_Range 20000;3000"));
    let e = wait_for(&mut rx, T, "latency range", |e| {
        matches!(e, Event::DestinationUpdate(d) if d.metrics.latency_range_us.is_some_and(|r| r != (0, 0)))
    })
    .await;
    let Event::DestinationUpdate(d) = e else {
        unreachable!()
    };
    assert_eq!(d.metrics.latency_range_us, Some((3000, 20000)));

    modem.cli(&format!(
        "dest update {MAC} Current_Data_Rate_Transmit 1000000"
    ));
    let e = wait_for(&mut rx, T, "destination update", |e| {
        matches!(e, Event::DestinationUpdate(_))
    })
    .await;
    let Event::DestinationUpdate(d) = e else {
        unreachable!()
    };
    assert_eq!((d.mac, d.metrics.current_rate_tx), (mac(), Some(1_000_000)));

    modem.cli(&format!(
        "dest update {MAC} Current_Data_Rate_Transmit 2500000 Latency 20000"
    ));
    let e = wait_for(&mut rx, T, "second update", |e| {
        matches!(e, Event::DestinationUpdate(d) if d.metrics.current_rate_tx == Some(2_500_000))
    })
    .await;
    let Event::DestinationUpdate(d) = e else {
        unreachable!()
    };
    assert_eq!(d.metrics.latency_us, Some(20_000));

    // Link Characteristics Request: LL-DLEP answers on its own (linkchar-autoreply).
    assert!(client.request_link_characteristics(mac(), Some(2_000_000), None));
    wait_for(
        &mut rx,
        T,
        "link characteristics response",
        |e| matches!(e, Event::LinkCharacteristics { mac: m, .. } if *m == mac()),
    )
    .await;

    modem.cli(&format!("dest down {MAC}"));
    let e = wait_for(&mut rx, T, "destination down", |e| {
        matches!(e, Event::DestinationDown { .. })
    })
    .await;
    assert_eq!(e, Event::DestinationDown { mac: mac() });

    // Five of the modem's heartbeat intervals: both sides keep the session (LL-DLEP would
    // terminate it after two of ours without a message, this side after two of its).
    let quiet = collect_for(&mut rx, Duration::from_secs(5)).await;
    assert!(
        !quiet.iter().any(|e| matches!(e, Event::SessionLost { .. })),
        "session lost during heartbeats: {quiet:?}"
    );
    client.shutdown().await;
}

#[tokio::test]
async fn killed_modem_is_lost_and_a_restarted_one_reconnected_within_5s() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut modem = Modem::start(dir.path(), port);
    let (client, mut rx) = spawn(client_config(port));
    wait_for(&mut rx, T, "session up", |e| {
        matches!(e, Event::SessionUp(_))
    })
    .await;
    modem.cli(&format!("dest up {MAC} Current_Data_Rate_Transmit 5000000"));
    wait_for(&mut rx, T, "destination up", |e| {
        matches!(e, Event::DestinationUp(_))
    })
    .await;

    modem.kill();
    let e = wait_for(&mut rx, Duration::from_secs(5), "session lost", |e| {
        matches!(e, Event::SessionLost { .. })
    })
    .await;
    let Event::SessionLost { destinations, .. } = e else {
        unreachable!()
    };
    assert_eq!(
        destinations,
        vec![mac()],
        "the destination went with the session"
    );

    // Let the client fail a few reconnects (its backoff grows), then bring the modem back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let restarted = Instant::now();
    let dir2 = tempfile::tempdir().unwrap();
    let mut modem2 = Modem::start(dir2.path(), port);
    wait_for(
        &mut rx,
        Duration::from_secs(5),
        "session up after restart",
        |e| matches!(e, Event::SessionUp(_)),
    )
    .await;
    let took = restarted.elapsed();
    eprintln!("restarted modem in session after {took:?}");
    assert!(took < Duration::from_secs(5), "reconnected after {took:?}");
    modem2.cli(&format!("dest up {MAC} Current_Data_Rate_Transmit 3000000"));
    let e = wait_for(&mut rx, T, "destination up again", |e| {
        matches!(e, Event::DestinationUp(_))
    })
    .await;
    let Event::DestinationUp(d) = e else {
        unreachable!()
    };
    assert_eq!(d.metrics.current_rate_tx, Some(3_000_000));
    client.shutdown().await;
}

#[tokio::test]
async fn peer_discovery_on_loopback_finds_ll_dlep() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let disc = free_port();
    let _modem = Modem::start_with(dir.path(), port, Some(disc));
    let mut cfg = ClientConfig::discover(Discovery {
        group: SocketAddr::from((GROUP, disc)),
        interface_v4: Some([127, 0, 0, 1].into()),
        interval: Duration::from_millis(300),
        ..Discovery::default()
    });
    cfg.session = client_config(port).session;
    let (client, mut rx) = spawn(cfg);
    let e = wait_for(&mut rx, T, "peer offer", |e| {
        matches!(e, Event::PeerDiscovered { .. })
    })
    .await;
    assert_eq!(
        e,
        Event::PeerDiscovered {
            addr: SocketAddr::from(([127, 0, 0, 1], port))
        }
    );
    wait_for(&mut rx, T, "session up", |e| {
        matches!(e, Event::SessionUp(_))
    })
    .await;
    client.shutdown().await;
}
