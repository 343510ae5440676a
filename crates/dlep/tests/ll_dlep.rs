//! Interoperability with a modem nobody on this project wrote: MIT-LL's LL-DLEP (commit
//! 184e148), built by `scripts/build-ll-dlep.sh`, run as a modem on 127.0.0.1 and driven
//! through its CLI on stdin.
//!
//! The binary is `$AEROTP_LL_DLEP` if set, else
//! `${AEROTP_CACHE:-$HOME/.cache/aerotp}/ll-dlep-184e148/bin/Dlep`. These tests FAIL (never
//! skip) when it is missing: run `scripts/build-ll-dlep.sh` first (scripts/test.sh does).

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aerotp_dlep::{spawn, ClientConfig, Discovery, Event, Mac};
use common::{collect_for, init_tracing, wait_for};

const MAC: &str = "00:11:22:33:44:55";

fn binary() -> PathBuf {
    let p = match std::env::var_os("AEROTP_LL_DLEP") {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = std::env::var_os("AEROTP_CACHE")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/aerotp")))
                .expect("neither AEROTP_CACHE nor HOME is set");
            cache.join("ll-dlep-184e148/bin/Dlep")
        }
    };
    assert!(
        p.is_file(),
        "LL-DLEP not found at {} (set AEROTP_LL_DLEP, or run scripts/build-ll-dlep.sh)",
        p.display()
    );
    p
}

/// The protocol configuration next to the binary's cache (`etc/dlep`), or, for a binary given
/// by `AEROTP_LL_DLEP`, in `AEROTP_LL_DLEP_ETC` or `<binary>/../../etc/dlep`.
fn protocol_dir(bin: &Path) -> PathBuf {
    if let Some(d) = std::env::var_os("AEROTP_LL_DLEP_ETC") {
        return PathBuf::from(d);
    }
    let d = bin
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("etc/dlep"))
        .unwrap_or_default();
    assert!(
        d.join("dlep-rfc-8175.xml").is_file(),
        "LL-DLEP protocol configuration not found in {} (set AEROTP_LL_DLEP_ETC)",
        d.display()
    );
    d
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An LL-DLEP modem process listening on 127.0.0.1:`port`, heartbeat 1 s; with
/// `discovery_port`, it also answers Peer Discovery on 225.0.0.117 on the loopback interface.
struct Modem {
    child: Child,
    dir: PathBuf,
}

/// LL-DLEP's own loopback example (config/modem_lo.xml) uses this group.
const GROUP: [u8; 4] = [225, 0, 0, 117];

impl Modem {
    fn start(dir: &Path, port: u16) -> Modem {
        Modem::start_with(dir, port, None)
    }

    fn start_with(dir: &Path, port: u16, discovery_port: Option<u16>) -> Modem {
        let bin = binary();
        let etc = protocol_dir(&bin);
        let config = format!(
            r#"<?xml version="1.0" ?>
<config>
  <params>
    <local-type>modem</local-type>
    {discovery}
    <session-address>127.0.0.1</session-address>
    <session-port>{port}</session-port>
    <heartbeat-interval>1</heartbeat-interval>
    <heartbeat-threshold>2</heartbeat-threshold>
    <peer-type>ll-dlep-modem</peer-type>
    <log-file>{log}</log-file>
    <log-level>2</log-level>
    <protocol-config-file>{etc}/dlep-rfc-8175.xml</protocol-config-file>
    <protocol-config-schema>{etc}/protocol-config.xsd</protocol-config-schema>
  </params>
</config>
"#,
            discovery = match discovery_port {
                None => "<discovery-enable>0</discovery-enable>".to_string(),
                Some(p) => format!(
                    "<discovery-enable>1</discovery-enable>\n    <discovery-iface>lo</discovery-iface>\n    \
                     <discovery-port>{p}</discovery-port>\n    \
                     <discovery-mcast-address>{}</discovery-mcast-address>",
                    std::net::Ipv4Addr::from(GROUP)
                ),
            },
            log = dir.join("dlep-modem.log").display(),
            etc = etc.display(),
        );
        let cfg = dir.join("modem.xml");
        std::fs::write(&cfg, config).unwrap();
        let out = std::fs::File::create(dir.join("stdout.txt")).unwrap();
        let err = std::fs::File::create(dir.join("stderr.txt")).unwrap();
        let child = Command::new(&bin)
            .arg("config-file")
            .arg(&cfg)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        Modem {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// One line on the modem's CLI.
    fn cli(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("modem CLI closed");
        stdin.flush().unwrap();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The modem's own account, for failure messages.
    fn logs(&self) -> String {
        let tail = |f: &str| {
            let s = std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
            let lines: Vec<_> = s.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        format!(
            "--- LL-DLEP stdout ---\n{}\n--- stderr ---\n{}\n--- log ---\n{}",
            tail("stdout.txt"),
            tail("stderr.txt"),
            tail("dlep-modem.log")
        )
    }
}

impl Drop for Modem {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        self.kill();
    }
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
