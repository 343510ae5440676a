//! The egress dies mid-transfer and is restarted on the same store (docs/gateway.md §Egress
//! restart). The egress runs on its own tokio runtime, which is shut down abruptly to kill
//! it: its tasks are dropped where they wait, its sockets closed by their owners' drop (the
//! kernel closes them the same way at a kill -9), nothing of the gateway's own shutdown runs.

use aerotp_testkit::{free_tcp, free_udp, random};

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_gw::Gateway;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An egress on its own runtime (a stand-in for its own process).
struct Egress {
    gw: Option<Arc<Gateway>>,
    kill: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Egress {
    /// Starts an egress; retries the bind for a while (the killed one's socket closing).
    fn start(cfg: FileConfig) -> Egress {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (tx_gw, rx_gw) = std::sync::mpsc::channel();
            let (tx_kill, rx_kill) = std::sync::mpsc::channel::<()>();
            let settings = cfg.settings().unwrap();
            let thread = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap();
                let r = rt.block_on(aerotp_gw::start(aerotp_gw::Role::Egress, settings));
                let ok = r.is_ok();
                tx_gw.send(r.map_err(|e| format!("{e:#}"))).unwrap();
                if ok {
                    let _ = rx_kill.recv();
                }
                rt.shutdown_background();
            });
            match rx_gw.recv().unwrap() {
                Ok(gw) => {
                    return Egress {
                        gw: Some(gw),
                        kill: Some(tx_kill),
                        thread: Some(thread),
                    }
                }
                Err(e) if Instant::now() < deadline => {
                    eprintln!("egress start: {e}; retrying");
                    thread.join().unwrap();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("egress start: {e}"),
            }
        }
    }

    fn gw(&self) -> &Arc<Gateway> {
        self.gw.as_ref().unwrap()
    }

    /// Kills it: the runtime is shut down with every task where it waits.
    fn kill(mut self) {
        self.gw = None;
        drop(self.kill.take());
        self.thread.take().unwrap().join().unwrap();
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.gw = None;
        drop(self.kill.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Destination: accepts connections one after the other and appends what each delivers, until
/// `total` bytes arrived and that connection ended. Returns the bytes and the connection count.
type Received = Arc<std::sync::Mutex<(Vec<u8>, usize)>>;

async fn appending_destination(
    total: usize,
) -> (
    SocketAddr,
    Received,
    tokio::task::JoinHandle<(Vec<u8>, usize)>,
) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let seen: Received = Arc::default();
    let seen2 = seen.clone();
    let h = tokio::spawn(async move {
        loop {
            if seen2.lock().unwrap().0.len() >= total {
                break;
            }
            let (mut s, _) = l.accept().await.unwrap();
            seen2.lock().unwrap().1 += 1;
            let mut b = vec![0u8; 65536];
            loop {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen2.lock().unwrap().0.extend_from_slice(&b[..n]),
                }
            }
        }
        let g = seen2.lock().unwrap();
        (g.0.clone(), g.1)
    });
    (a, seen, h)
}

fn configs(
    dest: SocketAddr,
    eg_udp: SocketAddr,
    eg_store: &std::path::Path,
    in_store: &std::path::Path,
    entry: SocketAddr,
) -> (FileConfig, FileConfig) {
    let eg = FileConfig {
        listen: Some(eg_udp.to_string()),
        tcp_connect: Some(dest.to_string()),
        rate: Some("40mbit".into()),
        store: Some(eg_store.to_owned()),
        idle_timeout: Some("2s".into()),
        ..Default::default()
    };
    let ing = FileConfig {
        peer: Some(eg_udp.to_string()),
        rate: Some("40mbit".into()),
        store: Some(in_store.to_owned()),
        idle_timeout: Some("2s".into()),
        flows: vec![FlowSpec {
            tcp_listen: Some(entry.to_string()),
            ..Default::default()
        }],
        ..Default::default()
    };
    (eg, ing)
}

/// Source: writes `up`, half-closes, reads to the end (nothing comes back).
async fn source(entry: SocketAddr, up: Vec<u8>) -> usize {
    let mut c = TcpStream::connect(entry).await.unwrap();
    c.write_all(&up).await.unwrap();
    c.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest).await;
    rest.len()
}

/// Waits until the egress's flow has written between `lo` and `hi` bytes to the destination.
async fn wait_mid_transfer(eg: &Egress, lo: u64, hi: u64) -> u64 {
    let t = Instant::now();
    loop {
        for f in eg.gw().reg.snapshot() {
            let d = f.in_progress().0;
            if d >= lo {
                assert!(d < hi, "missed the window: {d} B already written");
                return d;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "transfer never got going"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{what}: not within {secs} s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An 8 MB upload under way through an ingress and an egress (each with its store) to an
/// appending destination.
struct Upload {
    eg_store: tempfile::TempDir,
    in_store: tempfile::TempDir,
    up: Vec<u8>,
    seen: Received,
    server: tokio::task::JoinHandle<(Vec<u8>, usize)>,
    eg_cfg: FileConfig,
    egress: Egress,
    ingress: Arc<Gateway>,
    client: tokio::task::JoinHandle<usize>,
}

async fn start_upload(seed: u64) -> Upload {
    let (eg_store, in_store) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let up = random(8_000_000, seed);
    let (dest, seen, server) = appending_destination(up.len()).await;
    let entry = free_tcp();
    let (eg_cfg, in_cfg) = configs(dest, free_udp(), eg_store.path(), in_store.path(), entry);
    let egress = Egress::start(eg_cfg.clone());
    let ingress = aerotp_gw::start(aerotp_gw::Role::Ingress, in_cfg.settings().unwrap())
        .await
        .unwrap();
    let client = tokio::spawn(source(entry, up.clone()));
    Upload {
        eg_store,
        in_store,
        up,
        seen,
        server,
        eg_cfg,
        egress,
        ingress,
        client,
    }
}

/// The egress is killed mid-transfer and restarted on its store: the ingress resumes, the
/// egress reconnects to the destination and continues from the recorded offset: the
/// destination's connections together carry every byte once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_killed_and_restarted_continues_exactly() {
    let Upload {
        eg_store,
        in_store,
        up,
        server,
        eg_cfg,
        egress,
        ingress,
        client,
        ..
    } = start_upload(11).await;
    let at = wait_mid_transfer(&egress, 2_000_000, 7_000_000).await;
    egress.kill();
    eprintln!("egress killed after writing about {at} B");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let egress = Egress::start(eg_cfg);
    let back = tokio::time::timeout(Duration::from_secs(60), client)
        .await
        .expect("source done within 60 s")
        .unwrap();
    assert_eq!(back, 0, "nothing flows back in this test");
    let (got, conns) = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("destination done")
        .unwrap();
    assert_eq!(
        conns, 2,
        "one destination connection before the kill, one after"
    );
    assert_eq!(
        got.len(),
        up.len(),
        "every byte once: no loss, no duplicate"
    );
    assert!(got == up, "every byte in order");
    assert!(ingress.reg.resumes.load(Ordering::Relaxed) >= 1);
    let eg = egress.gw().clone();
    wait_for("egress flow complete", 10, || {
        eg.reg.flows_completed.load(Ordering::Relaxed) == 1
    })
    .await;
    wait_for("ingress store emptied", 10, || {
        std::fs::read_dir(in_store.path()).unwrap().count() == 0
    })
    .await;
    // Only the completed flow's record stays (bounded, for a late resume).
    let recs = aerotp_gw::progress::restore_all(eg_store.path()).unwrap();
    assert_eq!(recs.len(), 1);
    let r = recs.into_iter().next().unwrap().unwrap();
    assert_ne!(r.progress.flags & aerotp_gw::progress::COMPLETE, 0);
    assert_eq!(r.progress.written, up.len() as u64);
}

/// The egress died between the two records of a write (simulated by editing the record while
/// it is down): the restarted egress cannot know whether those bytes reached the destination,
/// so it refuses the resume and the flow is reset — nothing is resent, nothing duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_in_doubt_resets_the_flow() {
    let Upload {
        eg_store,
        in_store,
        up,
        seen,
        server,
        eg_cfg,
        egress,
        ingress,
        client,
    } = start_upload(12).await;
    wait_mid_transfer(&egress, 2_000_000, 7_000_000).await;
    egress.kill();
    let mut recs = aerotp_gw::progress::restore_all(eg_store.path()).unwrap();
    assert_eq!(recs.len(), 1);
    let mut f = recs.pop().unwrap().unwrap();
    let mut p = f.progress;
    p.intent = p.written + 1000;
    f.log.record(p, true).unwrap();
    let written = p.written as usize;
    drop(f);
    let egress = Egress::start(eg_cfg);
    let eg = egress.gw().clone();
    wait_for("flow reset at the egress", 30, || {
        eg.reg.flows_reset.load(Ordering::Relaxed) == 1
    })
    .await;
    wait_for("flow reset at the ingress", 10, || {
        ingress.reg.flows_reset.load(Ordering::Relaxed) == 1
    })
    .await;
    wait_for("ingress custody dropped", 10, || {
        std::fs::read_dir(in_store.path()).unwrap().count() == 0
    })
    .await;
    assert!(
        aerotp_gw::progress::restore_all(eg_store.path())
            .unwrap()
            .is_empty(),
        "the reset flow's record is removed"
    );
    // The destination got exactly the recorded prefix of the stream, on one connection, and
    // nothing after the restart; the source's connection was reset.
    tokio::time::sleep(Duration::from_millis(300)).await;
    {
        let g = seen.lock().unwrap();
        assert_eq!(g.1, 1, "no second destination connection");
        assert_eq!(g.0.len(), written);
        assert!(g.0[..] == up[..written]);
    }
    server.abort();
    let _ = tokio::time::timeout(Duration::from_secs(10), client).await;
    drop(egress);
}
