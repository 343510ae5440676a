//! A keyed transfer recorded on the wire and replayed to a restarted `aerotp recv` writes
//! nothing (docs/security.md, "Replays"): the recording verifies — same key — but its sender
//! never answers the new receiver's challenge, so no connection of it is ever proven.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

/// A scratch directory removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("aerotp-replay-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A UDP relay between the sender and the receiver that records what the sender sent: the
/// attacker on the path. The receiver sees the relay's `upstream` socket as the sender.
struct Recorder {
    upstream: Arc<UdpSocket>,
    recorded: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    fn start(listen: &UdpSocket, receiver: SocketAddr) -> Recorder {
        let front = Arc::new(listen.try_clone().unwrap());
        let upstream = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        front
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        upstream
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let (f, u, rec, st) = (
            front.clone(),
            upstream.clone(),
            recorded.clone(),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            let mut sender: Option<SocketAddr> = None;
            let mut buf = vec![0u8; 65536];
            let t = Instant::now();
            while !st.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(120) {
                while let Ok((n, from)) = f.recv_from(&mut buf) {
                    sender = Some(from);
                    rec.lock().unwrap().push(buf[..n].to_vec());
                    let _ = u.send_to(&buf[..n], receiver);
                }
                while let Ok((n, _)) = u.recv_from(&mut buf) {
                    if let Some(s) = sender {
                        let _ = f.send_to(&buf[..n], s);
                    }
                }
            }
        });
        Recorder {
            upstream,
            recorded,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops relaying; returns the recording and the socket the receiver knew the sender by.
    fn stop(mut self) -> (Vec<Vec<u8>>, Arc<UdpSocket>) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let rec = std::mem::take(&mut *self.recorded.lock().unwrap());
        (rec, self.upstream.clone())
    }
}

fn recv(listen: &str, out: &str, key: &str) -> KillOnDrop {
    KillOnDrop(
        bin()
            .args([
                "recv",
                "--listen",
                listen,
                "-o",
                out,
                "--key-file",
                key,
                "--setup-timeout",
                "2s",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn files_in(dir: &str) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_keyed_transfer_replayed_to_a_restarted_receiver_writes_nothing() {
    let d = Dir::new("recv");
    let key = d.path("k.key");
    assert!(bin().args(["keygen", &key]).status().unwrap().success());
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + i / 97) as u8).collect();
    let input = d.path("in.bin");
    std::fs::write(&input, &data).unwrap();
    let (out1, out2) = (d.path("first"), d.path("second"));
    std::fs::create_dir_all(&out1).unwrap();
    std::fs::create_dir_all(&out2).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let via = front.local_addr().unwrap().to_string();

    // The real transfer, through the recorder.
    let first = recv(&listen, &out1, &key);
    std::thread::sleep(Duration::from_millis(300));
    let rec = Recorder::start(&front, listen.parse().unwrap());
    let o = bin()
        .args([
            "send",
            &input,
            "--to",
            &via,
            "--mode",
            "reliable",
            "--key-file",
            &key,
            "--rate",
            "20mbit",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = Instant::now();
    while std::fs::read(Path::new(&out1).join("in.bin"))
        .ok()
        .as_deref()
        != Some(&data[..])
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the real transfer arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (recording, upstream) = rec.stop();
    drop(first);
    assert!(
        recording.len() > 100,
        "{} datagrams recorded",
        recording.len()
    );

    // The receiver restarts (new process, same key, same port); the attacker replays the
    // whole recording from the address the receiver knew the sender by, at about its pace.
    let second = recv(&listen, &out2, &key);
    std::thread::sleep(Duration::from_millis(300));
    for d in &recording {
        upstream.send_to(d, &listen).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    // Past the set-up timeout (2 s), and the challenges answered to nobody.
    std::thread::sleep(Duration::from_secs(4));
    let mut second = second;
    let _ = second.0.kill();
    let o = second.0.wait_with_output_ref();
    assert!(
        files_in(&out2).is_empty(),
        "a replay wrote {:?}; recv said: {o}",
        files_in(&out2)
    );
    assert!(
        o.contains("unproven") || o.contains("never proved"),
        "recv names the dropped connection: {o}"
    );
}

/// Reads what a killed child wrote on stderr.
trait StderrOf {
    fn wait_with_output_ref(&mut self) -> String;
}

impl StderrOf for Child {
    fn wait_with_output_ref(&mut self) -> String {
        let _ = self.wait();
        let mut s = String::new();
        if let Some(mut e) = self.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}
