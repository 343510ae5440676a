//! The end-to-end check and the silence bound, on loopback, with the built binary: a stream
//! whose digest, byte count or framing does not vouch for the file is never given the file's
//! name and fails on both sides; a sender whose input changes mid-send fails; a sender whose
//! receiver dies, and a receiver whose sender dies, exit within their silence bound; spoofed
//! ASYNs leave no file and do not keep a real sender out.
//!
//! The forged streams are written through the public runtime API (`aerotp_net`), byte by byte
//! as docs/runtime.md §File header describes them, so these tests also hold the document to
//! the code.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use aerotp_net::{ConnectionConfig, Endpoint, EndpointConfig, Mode, DEFAULT_PORT};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed and reaped when dropped, so a failing test leaves nothing running.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn take(mut self) -> Child {
        self.0.take().expect("taken once")
    }
    fn get(&mut self) -> &mut Child {
        self.0.as_mut().expect("not taken")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for `child` at most `limit`, killing it if it takes longer.
fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "timed out after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn spawn_recv(port: u16, out: &Path, extra: &[&str]) -> KillOnDrop {
    let child = bin()
        .args([
            "recv",
            "--insecure",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "-o",
            &format!("{}/", out.display()),
            "--once",
            "--json",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The socket is bound well within this; a sender that comes earlier would only retry.
    std::thread::sleep(Duration::from_millis(300));
    KillOnDrop(Some(child))
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// docs/runtime.md §File header, version `v`.
fn header(v: u8, name: &str, size: u64) -> Vec<u8> {
    let mut h = b"ATPF".to_vec();
    h.push(v);
    h.extend_from_slice(&(name.len() as u16).to_be_bytes());
    h.extend_from_slice(name.as_bytes());
    h.extend_from_slice(&size.to_be_bytes());
    h
}

/// docs/runtime.md §End-to-end digest: `ATPE`, byte count, SHA-256.
fn trailer(bytes: u64, data_for_digest: &[u8]) -> Vec<u8> {
    let mut t = b"ATPE".to_vec();
    t.extend_from_slice(&bytes.to_be_bytes());
    t.extend_from_slice(&Sha256::digest(data_for_digest));
    t
}

/// Sends `stream` to a receiver at `port` over a reliable connection, closes our half and
/// returns what the receiver answered on its half (bounded by the connection's own timers and
/// a 20 s guard).
fn send_raw(port: u16, stream: Vec<u8>) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let ep = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
        let mut cfg = ConnectionConfig::with_mode(Mode::Reliable);
        cfg.rate_bps = 50_000_000;
        cfg.idle_timeout = Duration::from_secs(10);
        let conn = ep
            .connect(
                format!("127.0.0.1:{port}").parse().unwrap(),
                DEFAULT_PORT,
                cfg,
            )
            .unwrap();
        let work = async {
            let mut w = conn.clone();
            w.write_all(&stream).await.unwrap();
            conn.close();
            let mut got = Vec::new();
            while let Ok(Some(c)) = conn.read_chunk().await {
                got.extend_from_slice(&c.data);
                assert!(got.len() < 1024, "a verdict is 5 bytes");
            }
            let _ = conn.closed().await;
            got
        };
        tokio::time::timeout(Duration::from_secs(20), work)
            .await
            .expect("the forged transfer ends")
    })
}

#[test]
fn streams_that_do_not_vouch_for_their_bytes_fail_on_both_sides() {
    let data = pattern(300_000, 3);
    let mut tampered = data.clone();
    tampered[123_456] ^= 0x40;
    let whole = |h: Vec<u8>, body: &[u8], t: Vec<u8>| [h, body.to_vec(), t].concat();
    // (what, stream, the receiver's answer, its exit status, the file name it leaves)
    type Case = (&'static str, Vec<u8>, &'static [u8], i32, &'static str);
    let cases: Vec<Case> = vec![
        (
            "intact",
            whole(header(2, "f.bin", 300_000), &data, trailer(300_000, &data)),
            b"ATPV\x00",
            0,
            "f.bin",
        ),
        (
            "one bit changed in flight (digest of the original)",
            whole(
                header(2, "f.bin", 300_000),
                &tampered,
                trailer(300_000, &data),
            ),
            b"ATPV\x01",
            6,
            "f.bin.partial",
        ),
        (
            "fewer bytes than announced, trailer honest about them",
            whole(header(2, "f.bin", 400_000), &data, trailer(300_000, &data)),
            b"ATPV\x01",
            6,
            "f.bin.partial",
        ),
        (
            "trailer cut off",
            whole(header(2, "f.bin", 300_000), &data, Vec::new()),
            b"ATPV\x03",
            6,
            "f.bin.partial",
        ),
        (
            "version 1 (no digest): kept, never named",
            whole(header(1, "f.bin", 300_000), &data, Vec::new()),
            b"",
            6,
            "f.bin.partial",
        ),
    ];
    for (what, stream, answer, code, left) in cases {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let recv = spawn_recv(port, dir.path(), &[]);
        let got = send_raw(port, stream);
        let r = wait_bounded(recv.take(), Duration::from_secs(20));
        assert_eq!(got, answer, "{what}: the receiver's verdict");
        assert_eq!(r.status.code(), Some(code), "{what}: {}", stderr(&r));
        assert_eq!(names(dir.path()), vec![left.to_owned()], "{what}");
        let kept = std::fs::read(dir.path().join(left)).unwrap();
        if code == 0 {
            assert_eq!(kept, data, "{what}");
        } else {
            assert!(
                stderr(&r).contains("end-to-end check failed"),
                "{what}: {}",
                stderr(&r)
            );
            let json: serde_json::Value =
                serde_json::from_slice(&r.stdout).expect("one JSON object");
            assert_eq!(json["exit_code"], code, "{what}");
            assert_ne!(json["verdict"], "verified", "{what}");
        }
    }
}

/// Starts `aerotp send` of `file` to a receiver at `port` at 20 Mb/s (about 8 s for 20 MB).
fn spawn_send(file: &Path, port: u16, extra: &[&str]) -> KillOnDrop {
    let child = bin()
        .args([
            "send",
            "--insecure",
            file.to_str().unwrap(),
            "--to",
            &format!("127.0.0.1:{port}"),
            "--mode",
            "reliable",
            "--rate",
            "20mbit",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    KillOnDrop(Some(child))
}

#[test]
fn a_send_whose_input_shrinks_or_grows_fails_and_the_receiver_keeps_partial() {
    const SIZE: usize = 20_000_000;
    for change in ["shrank", "grew"] {
        let src = tempfile::tempdir().unwrap();
        let file = src.path().join("input.bin");
        std::fs::write(&file, pattern(SIZE, 11)).unwrap();
        let out = tempfile::tempdir().unwrap();
        let port = free_port();
        let recv = spawn_recv(port, out.path(), &[]);
        let send = spawn_send(&file, port, &[]);
        // Under a second in, the sender has read at most its 4 MiB buffer plus what 20 Mb/s
        // carried: far from the end of the file.
        std::thread::sleep(Duration::from_millis(800));
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        if change == "shrank" {
            f.set_len(1_000_000).unwrap();
        } else {
            use std::io::Write;
            (&f).write_all(&pattern(1000, 12)).unwrap();
        }
        drop(f);
        let s = wait_bounded(send.take(), Duration::from_secs(30));
        let r = wait_bounded(recv.take(), Duration::from_secs(30));
        assert_eq!(s.status.code(), Some(1), "{change}: {}", stderr(&s));
        assert!(stderr(&s).contains(change), "{change}: {}", stderr(&s));
        assert_eq!(r.status.code(), Some(4), "{change}: {}", stderr(&r));
        assert_eq!(
            names(out.path()),
            vec!["input.bin.partial".to_owned()],
            "{change}"
        );
    }
}

#[test]
fn a_sender_whose_receiver_dies_exits_within_its_silence_bound() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("input.bin");
    std::fs::write(&file, pattern(20_000_000, 5)).unwrap();
    let out = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut recv = spawn_recv(port, out.path(), &[]);
    let send = spawn_send(&file, port, &["--silence-timeout", "10s"]);
    std::thread::sleep(Duration::from_millis(1000));
    recv.get().kill().unwrap();
    let killed = Instant::now();
    let s = wait_bounded(send.take(), Duration::from_secs(30));
    let took = killed.elapsed();
    assert_eq!(s.status.code(), Some(4), "{}", stderr(&s));
    assert!(stderr(&s).contains("--silence-timeout"), "{}", stderr(&s));
    // The bound, plus the last RTO and process start-up slack.
    assert!(
        took >= Duration::from_millis(9500) && took < Duration::from_secs(13),
        "exited {took:?} after the receiver died (bound 10 s)"
    );
}

#[test]
fn a_receiver_whose_sender_dies_keeps_partial_within_its_silence_bound() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("input.bin");
    std::fs::write(&file, pattern(20_000_000, 6)).unwrap();
    let out = tempfile::tempdir().unwrap();
    let port = free_port();
    let recv = spawn_recv(port, out.path(), &["--idle-timeout", "10s"]);
    let mut send = spawn_send(&file, port, &[]);
    std::thread::sleep(Duration::from_millis(1000));
    send.get().kill().unwrap();
    let killed = Instant::now();
    let r = wait_bounded(recv.take(), Duration::from_secs(30));
    let took = killed.elapsed();
    assert_eq!(r.status.code(), Some(4), "{}", stderr(&r));
    assert!(
        took >= Duration::from_millis(9500) && took < Duration::from_secs(13),
        "exited {took:?} after the sender died (bound 10 s)"
    );
    assert_eq!(names(out.path()), vec!["input.bin.partial".to_owned()]);
    let kept = std::fs::metadata(out.path().join("input.bin.partial")).unwrap();
    assert!(kept.len() > 0 && kept.len() < 20_000_000, "{}", kept.len());
}

#[test]
fn a_receiver_that_cannot_store_stops_the_sender_at_once() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("input.bin");
    std::fs::write(&file, pattern(20_000_000, 8)).unwrap();
    let out = tempfile::tempdir().unwrap();
    let port = free_port();
    // A file-size limit of 2 MiB (4096 blocks of 512 bytes) stands in for a full disk: writes
    // beyond it fail with EFBIG (SIGXFSZ ignored, and an ignored signal stays so across exec).
    let recv = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 4096; exec \"$0\" recv --insecure --listen 127.0.0.1:{port} -o '{}/' --once",
            out.path().display()
        ))
        .arg(env!("CARGO_BIN_EXE_aerotp"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let recv = KillOnDrop(Some(recv));
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    // The default silence bound (40 min): only the receiver's reset can end this promptly.
    let send = spawn_send(&file, port, &[]);
    let s = wait_bounded(send.take(), Duration::from_secs(30));
    let r = wait_bounded(recv.take(), Duration::from_secs(10));
    assert_eq!(s.status.code(), Some(7), "{}", stderr(&s));
    assert!(
        stderr(&s).contains("the receiver could not store the file: writing the output"),
        "{}",
        stderr(&s)
    );
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    assert_eq!(names(out.path()), vec!["input.bin.partial".to_owned()]);
}

/// Spoofed ASYNs — each from a socket used once and closed, so what the receiver answers goes
/// nowhere — leave no file at all, not even a temporary one, and hold the receiver only for
/// its set-up timeout; a real sender during the flood is admitted (through a RETRY once the
/// half-open slots are full) and its file arrives intact (docs/security.md, "Half-open
/// connections").
#[test]
fn spoofed_asyns_leave_no_file_and_a_real_sender_still_gets_through() {
    use aerotp_wire::{emit_tpdu, Flags, Header};
    let port = free_port();
    let out = tempfile::tempdir().unwrap();
    let mut recv = spawn_recv(
        port,
        out.path(),
        &["--setup-timeout", "2s", "--max-half-open", "4"],
    );
    let spoof = |n: u16| {
        for i in 0..n {
            let h = Header {
                mode: Mode::Reliable,
                flags: Flags::ASYN,
                src_port: 100 + i,
                dst_port: DEFAULT_PORT,
                seq: 0,
                timestamp: 0,
                fec: 0,
                tag: 1 + (i % 200) as u8,
                len: 0,
            };
            let mut d = Vec::new();
            emit_tpdu(h, b"ATPF junk from nowhere", &mut d).unwrap();
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            s.send_to(&d, ("127.0.0.1", port)).unwrap();
        }
    };
    spoof(50);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        names(out.path()),
        Vec::<String>::new(),
        "no file for a spoofed ASYN"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("real.bin");
    let data = pattern(300_000, 11);
    std::fs::write(&file, &data).unwrap();
    let send = spawn_send(&file, port, &["--connect-timeout", "1s"]);
    spoof(50);
    let s = wait_bounded(send.take(), Duration::from_secs(30));
    assert!(s.status.success(), "{}", stderr(&s));
    let r = wait_bounded(recv.0.take().unwrap(), Duration::from_secs(30));
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(names(out.path()), vec!["real.bin".to_string()]);
    assert_eq!(std::fs::read(out.path().join("real.bin")).unwrap(), data);
}

#[test]
fn a_transfer_longer_than_the_silence_bound_after_its_last_write_completes() {
    // 1 MB paced at 600 kb/s takes about 13.5 s; all of it fits in the send buffer at once,
    // so the last byte is written about 13 s before the receiver has it. The silence bound
    // (10 s) counts from the last byte the receiver acknowledged, not from that write: this
    // transfer keeps going and completes (it was cut at 10 s, exit 4, before).
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("input.bin");
    let data = pattern(1_000_000, 9);
    std::fs::write(&file, &data).unwrap();
    let out = tempfile::tempdir().unwrap();
    let port = free_port();
    let recv = spawn_recv(port, out.path(), &[]);
    let send = bin()
        .args([
            "send",
            "--insecure",
            file.to_str().unwrap(),
            "--to",
            &format!("127.0.0.1:{port}"),
            "--mode",
            "reliable",
            "--rate",
            "600kbit",
            "--silence-timeout",
            "10s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let s = wait_bounded(send, Duration::from_secs(40));
    let took = t.elapsed();
    assert_eq!(s.status.code(), Some(0), "{}", stderr(&s));
    assert!(
        took > Duration::from_secs(11),
        "took {took:?}: not longer than the bound"
    );
    let r = wait_bounded(recv.take(), Duration::from_secs(10));
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(std::fs::read(out.path().join("input.bin")).unwrap(), data);
}
