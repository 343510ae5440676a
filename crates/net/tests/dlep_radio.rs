//! A real radio's word steering a real transfer: MIT-LL's LL-DLEP (commit 184e148, built by
//! `scripts/build-ll-dlep.sh`) runs as the modem on 127.0.0.1, driven through its CLI on
//! stdin; the sending endpoint follows it (`Endpoint::follow_dlep`, the destination's MAC
//! mapped to 127.0.0.1) while a reliable transfer at a fixed 20 Mb/s runs between two
//! endpoints on loopback. What the modem says must be in force on the connection: its rate
//! caps the pacer, its Destination Down stops the data, its Destination Up starts it again,
//! and every byte arrives. Every change the modem made is reported: to the engine tap (what
//! `--qlog` writes) at the engine's time of the change, and in the metrics.
//!
//! The modem is `aerotp_testkit::ll_dlep` (`$AEROTP_LL_DLEP`, else the cache of
//! scripts/build-ll-dlep.sh); this test FAILS (never skips) when it is missing.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aerotp_dlep::{ClientConfig, Mac};
use aerotp_net::{
    Connection, ConnectionConfig, ConnectionStats, DestinationMap, Endpoint, EndpointConfig, Mode,
};
use aerotp_proto::{RadioChange, RadioSignal, RateReason};
use aerotp_testkit::ll_dlep::Modem;
use aerotp_testkit::{prom, random, sha256};
use tokio::io::AsyncReadExt;

const MAC: &str = "00:11:22:33:44:55";
const FIXED_RATE: u64 = 20_000_000;

/// The radio changes the driver hands to the engine tap, with their time on the wall clock.
#[derive(Default)]
struct Radios(Mutex<Vec<(Duration, RadioChange)>>);

impl aerotp_net::EngineTap for Radios {
    fn connection(&self, _: Duration, _: u64, _: &ConnectionStats, _: aerotp_proto::State) {}

    fn radio(&self, at: Duration, change: &RadioChange) {
        self.0.lock().unwrap().push((at, *change));
    }
}

fn wall() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `conn`'s statistics every 5 ms until `ok` holds; the time it took from `since`.
async fn until(
    conn: &Connection,
    since: Instant,
    limit: Duration,
    what: &str,
    ok: impl Fn(&ConnectionStats) -> bool,
) -> Duration {
    loop {
        let s = conn.stats();
        if ok(&s) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < limit,
            "{what}: not within {limit:?}; rate {} b/s ({:?}), path 0 {:?}",
            s.rate_bps,
            s.rate_reason,
            s.paths.first()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn data_sent(s: &ConnectionStats) -> (u64, u64) {
    let p = &s.paths[0].sent;
    (p.tpdus_sent, p.bytes_sent)
}

/// Over `span`, the rate stays `rate` (the radio's word, what limits) and the data TPDU bytes
/// sent grow at most at `rate` (plus one TPDU and 10 %); returns the payload rate seen.
async fn holds_rate(conn: &Connection, rate: u64, span: Duration) -> f64 {
    let start = Instant::now();
    let (_, b0) = data_sent(&conn.stats());
    while start.elapsed() < span {
        let s = conn.stats();
        assert_eq!(s.paths[0].rate.radio_bps, Some(rate));
        assert!(
            s.rate_bps <= rate && s.paths[0].rate.pacing_bps <= rate,
            "rate {} b/s, pacing {} b/s above the radio's {rate}",
            s.rate_bps,
            s.paths[0].rate.pacing_bps
        );
        assert_eq!(s.rate_reason, RateReason::Radio);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, b1) = data_sent(&conn.stats());
    let secs = start.elapsed().as_secs_f64();
    let bps = (b1 - b0) as f64 * 8.0 / secs;
    assert!(
        bps <= rate as f64 * 1.1 + 1500.0 * 8.0 / secs,
        "{bps:.0} b/s of data sent under a radio rate of {rate}"
    );
    assert!(bps > rate as f64 * 0.3, "only {bps:.0} b/s sent at {rate}");
    bps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ll_dlep_steers_a_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut modem = Modem::start(dir.path(), port);

    let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut cc = ConnectionConfig::with_mode(Mode::Reliable);
    cc.rate_bps = FIXED_RATE;
    cc.linger = Duration::from_millis(300);
    let server = Endpoint::bind(lo, EndpointConfig::default()).unwrap();
    server.listen(7, cc.clone()).unwrap();
    let target = server.local_addr();
    let client = Endpoint::bind(lo, EndpointConfig::default()).unwrap();

    let mut dcfg = ClientConfig::connect(SocketAddr::from(([127, 0, 0, 1], port)));
    // LL-DLEP rounds our interval to whole seconds and allows its threshold (2) of them.
    dcfg.session.heartbeat_interval = Duration::from_millis(500);
    dcfg.backoff_initial = Duration::from_millis(50);
    dcfg.backoff_max = Duration::from_millis(200);
    let mut map = DestinationMap::default();
    map.insert(MAC.parse::<Mac>().unwrap(), IpAddr::from([127, 0, 0, 1]));
    let follow = client.follow_dlep(dcfg, map);
    let radios = std::sync::Arc::new(Radios::default());
    client.set_engine_tap(radios.clone());
    // The wall-clock time of each modem command, beside the radio change it must make.
    let mut commands: Vec<(Duration, RadioSignal)> = Vec::new();

    let recv = tokio::spawn(async move {
        let mut conn = server.accept().await.unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).await.unwrap();
        let rep = conn.finish().await;
        (got, rep, server)
    });
    let conn = std::sync::Arc::new(client.connect(target, 7, cc).unwrap());
    conn.connected().await.expect("connected");
    assert_eq!(conn.stats().paths[0].rate.radio_bps, None);
    assert_eq!(conn.stats().rate_bps, FIXED_RATE);
    // The session is up within a few round trips on loopback; the modem announces
    // destinations only to a router in session.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let mut report = Vec::new();
    let t = modem.cli(&format!("dest up {MAC} Current_Data_Rate_Transmit 2000000"));
    commands.push((wall(), RadioSignal::Rate(2_000_000)));
    let took = until(&conn, t, Duration::from_secs(5), "dest up at 2 Mb/s", |s| {
        s.paths[0].rate.radio_bps == Some(2_000_000) && s.rate_bps <= 2_000_000
    })
    .await;
    report.push(("dest up, 2 Mb/s", took));

    // 500 kB at 2 Mb/s for 2 s, 250 kB at 1 Mb/s for 2 s, nothing for 2 s, the rest at
    // 2 Mb/s.
    let data = random(1_500_000, 38);
    let writer = {
        let conn = conn.clone();
        let data = bytes::Bytes::from(data.clone());
        tokio::spawn(async move {
            conn.write_chunk(data).await.unwrap();
            conn.finish().await
        })
    };
    let bps2 = holds_rate(&conn, 2_000_000, Duration::from_secs(2)).await;

    let t = modem.cli(&format!(
        "dest update {MAC} Current_Data_Rate_Transmit 1000000"
    ));
    commands.push((wall(), RadioSignal::Rate(1_000_000)));
    let took = until(
        &conn,
        t,
        Duration::from_secs(1),
        "dest update to 1 Mb/s",
        |s| s.paths[0].rate.radio_bps == Some(1_000_000) && s.rate_bps <= 1_000_000,
    )
    .await;
    report.push(("dest update, 2 -> 1 Mb/s", took));
    let bps1 = holds_rate(&conn, 1_000_000, Duration::from_secs(2)).await;

    // Down: the data stops. In force when a data TPDU count holds still for 50 ms (at 1 Mb/s
    // a 1.4 kB TPDU goes every 11 ms).
    // The metrics say what the radio says: its rate per path, its changes by kind.
    let m = prom::parse(&client.metrics_source().render(), "aerotp_");
    let rate_gauge: Vec<_> = m
        .samples
        .iter()
        .filter(|x| x.name == "aerotp_radio_rate_bytes_per_second")
        .collect();
    assert_eq!(
        rate_gauge.len(),
        1,
        "one path with a radio rate: {rate_gauge:?}"
    );
    assert_eq!(rate_gauge[0].value, 125_000.0, "1 Mb/s in bytes per second");
    assert_eq!(rate_gauge[0].labels["path"], "0");

    let t = modem.cli(&format!("dest down {MAC}"));
    commands.push((wall(), RadioSignal::Down));
    let mut last = (data_sent(&conn.stats()).0, Instant::now());
    let stopped = loop {
        let n = data_sent(&conn.stats()).0;
        if n != last.0 {
            last = (n, Instant::now());
        } else if last.1.elapsed() >= Duration::from_millis(50) {
            break last.1.duration_since(t);
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "data still going after dest down"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    report.push(("dest down, last data TPDU seen after it (0: none)", stopped));
    let held = data_sent(&conn.stats());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = conn.stats();
    assert_eq!(
        data_sent(&s),
        held,
        "data TPDUs went on a path the radio called down"
    );
    assert!(
        !writer.is_finished(),
        "the transfer ended before the down was tested"
    );

    let t = modem.cli(&format!("dest up {MAC} Current_Data_Rate_Transmit 2000000"));
    commands.push((wall(), RadioSignal::Up));
    commands.push((wall(), RadioSignal::Rate(2_000_000)));
    let took = until(
        &conn,
        t,
        Duration::from_secs(5),
        "data again after dest up",
        |s| data_sent(s).0 > held.0 && s.paths[0].rate.radio_bps == Some(2_000_000),
    )
    .await;
    report.push(("dest up again, first data TPDU", took));

    let sender = tokio::time::timeout(Duration::from_secs(30), writer)
        .await
        .expect("the transfer ends")
        .unwrap();
    let (got, receiver, _server) = recv.await.unwrap();
    assert_eq!(got.len(), data.len());
    assert_eq!(sha256(&got), sha256(&data), "every byte, in order");
    assert!(sender.guarantee_met, "{:?}", sender.outcome);
    assert!(receiver.guarantee_met, "{:?}", receiver.outcome);

    // Every change the modem made reached the engine tap once, in order, after its command
    // and within a second of it (its time is the engine's, not the driver's next step), with
    // the rate in force within the radio's. A latency the modem may report is no command's.
    let changes: Vec<(Duration, RadioChange)> = radios
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, c)| !matches!(c.signal, RadioSignal::Latency(_)))
        .copied()
        .collect();
    let said: Vec<RadioSignal> = changes.iter().map(|(_, c)| c.signal).collect();
    let asked: Vec<RadioSignal> = commands.iter().map(|c| c.1).collect();
    assert_eq!(said, asked, "the radio changes the tap saw");
    for ((at, c), (cmd, _)) in changes.iter().zip(&commands) {
        assert!(
            *at + Duration::from_millis(2) >= *cmd && *at < *cmd + Duration::from_secs(1),
            "{c:?} at {at:?}, its command at {cmd:?}"
        );
        if let RadioSignal::Rate(r) = c.signal {
            assert!(
                c.rate_bps <= r && c.rate_reason == RateReason::Radio,
                "{c:?}"
            );
        }
        report.push(("command to the change's engine time", *at - *cmd));
    }
    let m = prom::parse(&client.metrics_source().render(), "aerotp_");
    let kind = |k: &str| {
        m.samples
            .iter()
            .find(|x| x.name == "aerotp_radio_changes_total" && x.labels["kind"] == k)
            .map(|x| x.value)
    };
    assert_eq!(
        [
            kind("rate"),
            kind("down"),
            kind("up"),
            kind("pause"),
            kind("restart")
        ],
        [Some(3.0), Some(1.0), Some(1.0), Some(0.0), Some(0.0)],
        "radio changes by kind, the released connection's kept"
    );

    println!("LL-DLEP -> aerotp_net, modem command written to in force on the connection (stats polled every 5 ms):");
    for (what, d) in &report {
        println!("  {what}: {:.1} ms", d.as_secs_f64() * 1e3);
    }
    println!("  data sent at 2 Mb/s: {bps2:.0} b/s; at 1 Mb/s: {bps1:.0} b/s");
    follow.abort();
}
