//! `aerotp keygen` and `--key-file` as a user runs them: key files are written mode 600 and
//! never overwritten by accident, bad key files stop `send` and `recv` with a message naming
//! the flag, and an authenticated, encrypted transfer over loopback arrives intact while a
//! sender with another key gets nowhere.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

/// A scratch directory removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("aerotp-auth-{tag}-{}", std::process::id()));
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

fn run(args: &[&str]) -> Output {
    bin()
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn mode_of(p: &str) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits for `child` at most `limit`, killing it if it takes longer.
fn wait_bounded(mut child: Child, limit: Duration) -> Option<Output> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn keygen_writes_mode_600_refuses_to_overwrite_and_rotates() {
    let d = Dir::new("keygen");
    let k = d.path("k.key");
    let o = run(&["keygen", &k]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(mode_of(&k), 0o600);
    let first = std::fs::read_to_string(&k).unwrap();
    assert!(first.contains("format = \"aerotp-psk-1\"") && first.contains("id = 1"));
    // No accidental overwrite.
    let o = run(&["keygen", &k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("backtrace"));
    assert_eq!(std::fs::read_to_string(&k).unwrap(), first);
    // Rotation keeps the old key as previous under a new id.
    let o = run(&["keygen", "--rotate", &k]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rotated = std::fs::read_to_string(&k).unwrap();
    let old_key = first.lines().find(|l| l.starts_with("key")).unwrap();
    assert!(rotated.contains("[previous]") && rotated.contains(old_key));
    assert!(rotated.contains("id = 2"));
    assert_eq!(mode_of(&k), 0o600);
    let o = run(&["keygen", "--retire", &k]);
    assert!(o.status.success());
    let retired = std::fs::read_to_string(&k).unwrap();
    assert!(!retired.contains("[previous]") && !retired.contains(old_key));
    let o = run(&["keygen", "--force", &k]);
    assert!(o.status.success());
    assert_ne!(std::fs::read_to_string(&k).unwrap(), retired);
    // --rotate on a missing file names it.
    let o = run(&["keygen", "--rotate", &d.path("none.key")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("none.key"), "{}", stderr(&o));
}

#[test]
fn bad_key_files_stop_send_and_recv_naming_the_flag() {
    let d = Dir::new("badkeys");
    let good = d.path("good.key");
    assert!(run(&["keygen", &good]).status.success());
    let open = d.path("open.key");
    std::fs::copy(&good, &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let garbage = d.path("garbage.key");
    std::fs::write(&garbage, "not a key at all\n").unwrap();
    std::fs::set_permissions(&garbage, std::fs::Permissions::from_mode(0o600)).unwrap();
    let short = d.path("short.key");
    std::fs::write(
        &short,
        "format = \"aerotp-psk-1\"\n[current]\nid = 1\nkey = \"abcd\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    let missing = d.path("missing.key");
    let input = d.path("in.bin");
    std::fs::write(&input, b"payload").unwrap();
    let out = d.path("out.bin");
    let port = free_port().to_string();
    let to = format!("127.0.0.1:{port}");
    for (file, says) in [
        (&missing, "cannot read"),
        (&open, "chmod 600"),
        (&garbage, "not a key file"),
        (&short, "64 hex digits"),
        (&d.0.to_str().unwrap().to_owned(), "not a regular file"),
    ] {
        let send = run(&[
            "send",
            &input,
            "--to",
            &to,
            "--mode",
            "reliable",
            "--key-file",
            file,
        ]);
        let recv = run(&["recv", "--listen", &to, "-o", &out, "--key-file", file]);
        for (what, o) in [("send", send), ("recv", recv)] {
            let e = stderr(&o);
            assert_ne!(o.status.code(), Some(0), "{what} {file}: {e}");
            assert!(
                e.contains("--key-file") && e.contains(file.as_str()) && e.contains(says),
                "{what} {file}: {e}"
            );
            assert!(!e.contains("stack backtrace"), "{e}");
        }
        assert!(!Path::new(&out).exists(), "nothing written");
    }
    // --encrypt without a key file is refused by the parser.
    let o = run(&[
        "send",
        &input,
        "--to",
        &to,
        "--mode",
        "reliable",
        "--encrypt",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--key-file"), "{}", stderr(&o));
}

#[test]
fn encrypted_transfer_arrives_intact_and_another_key_gets_nowhere() {
    let d = Dir::new("xfer");
    let k = d.path("k.key");
    let other = d.path("other.key");
    assert!(run(&["keygen", &k]).status.success());
    assert!(run(&["keygen", &other]).status.success());
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let input = d.path("in.bin");
    std::fs::write(&input, &data).unwrap();
    let out = d.path("out.bin");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let _recv = KillOnDrop(
        bin()
            .args([
                "recv",
                "--listen",
                &listen,
                "-o",
                &out,
                "--key-file",
                &k,
                "--encrypt",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    // Another key: the receiver drops every TPDU, so the sender hears nothing.
    let wrong = bin()
        .args([
            "send",
            &input,
            "--to",
            &listen,
            "--mode",
            "reliable",
            "--key-file",
            &other,
            "--connect-timeout",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_bounded(wrong, Duration::from_secs(30)).expect("wrong-key send ends");
    // Never answered: the "no answer" exit code (3), as for a dead address.
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!Path::new(&out).exists() || std::fs::read(&out).unwrap().is_empty());
    // The right key, encrypted.
    let good = bin()
        .args([
            "send",
            &input,
            "--to",
            &listen,
            "--mode",
            "reliable",
            "--key-file",
            &k,
            "--encrypt",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_bounded(good, Duration::from_secs(60)).expect("send ends");
    assert!(o.status.success(), "{}", stderr(&o));
    let t = Instant::now();
    while std::fs::read(&out).map(|b| b != data).unwrap_or(true) {
        assert!(t.elapsed() < Duration::from_secs(10), "file not intact");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `aerotp ARGS`, expected to refuse at once: killed (and the test failed) after 10 s.
fn refused(args: &[&str]) -> Output {
    let child = bin()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child, Duration::from_secs(10)).expect("refused at once, not started")
}

/// The default posture (docs/security.md): without --key-file and without --insecure,
/// `send` and `recv` refuse to start, say how to make a key and how to opt out, and touch
/// nothing: no datagram to the peer, no capture file, nothing in the output directory.
#[test]
fn without_a_key_send_and_recv_refuse_to_start_and_write_nothing() {
    let d = Dir::new("nokey");
    let input = d.path("in.bin");
    std::fs::write(&input, b"payload").unwrap();
    let rx = d.path("rx");
    std::fs::create_dir(&rx).unwrap();
    let pcap = d.path("x.pcapng");
    // A stand-in for the receiver: the refused sender must send it nothing.
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let to = peer.local_addr().unwrap().to_string();
    let listen = format!("127.0.0.1:{}", free_port());
    let send = refused(&[
        "send", &input, "--to", &to, "--mode", "reliable", "--pcap", &pcap,
    ]);
    let recv = refused(&[
        "recv",
        "--listen",
        &listen,
        "-o",
        &format!("{rx}/"),
        "--pcap",
        &pcap,
    ]);
    for (what, o) in [("send", send), ("recv", recv)] {
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{what}: {e}");
        for needle in [
            "--key-file",
            "aerotp keygen",
            "copy it to the peer",
            "--insecure",
        ] {
            assert!(e.contains(needle), "{what}: no {needle:?} in: {e}");
        }
        assert!(e.starts_with(&format!("aerotp {what}: ")), "{what}: {e}");
        assert!(!e.contains("not authenticated (--insecure)"), "{what}: {e}");
    }
    let mut b = [0u8; 2048];
    assert!(
        peer.recv_from(&mut b).is_err(),
        "the sender sent a datagram"
    );
    assert!(!Path::new(&pcap).exists(), "a capture file was written");
    assert_eq!(
        std::fs::read_dir(&rx).unwrap().count(),
        0,
        "the receiver wrote into its directory"
    );
    // A key and --insecure at once is a contradiction the parser refuses.
    let k = d.path("k.key");
    assert!(run(&["keygen", &k]).status.success());
    let o = run(&["recv", "--listen", &listen, "--key-file", &k, "--insecure"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--insecure"), "{}", stderr(&o));
}

/// One transfer between `send` and `recv` (`recv -o FILE` ends after one file), `extra` given
/// to both; returns both ends' stderr once the file is there intact.
fn transfer(d: &Dir, tag: &str, extra: &[&str]) -> (String, String) {
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 13 + i / 97) as u8).collect();
    let input = d.path(&format!("{tag}.in"));
    std::fs::write(&input, &data).unwrap();
    let out = d.path(&format!("{tag}.out"));
    let listen = format!("127.0.0.1:{}", free_port());
    let recv = bin()
        .args(["recv", "--listen", &listen, "-o", &out])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let send = bin()
        .args(["send", &input, "--to", &listen, "--mode", "reliable"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both bounded: an end that overstays is killed and fails the test.
    let s = wait_bounded(send, Duration::from_secs(60)).expect("send ends");
    let r = wait_bounded(recv, Duration::from_secs(30)).expect("recv ends");
    assert!(s.status.success(), "{tag} send: {}", stderr(&s));
    assert!(r.status.success(), "{tag} recv: {}", stderr(&r));
    assert_eq!(std::fs::read(&out).unwrap(), data, "{tag}: file not intact");
    (stderr(&s), stderr(&r))
}

/// `--insecure` runs, and both ends say on stderr, at start, what it risks; with a key
/// neither end prints the warning.
#[test]
fn insecure_warns_at_both_ends_and_a_key_does_not() {
    let d = Dir::new("posture");
    let (s, r) = transfer(&d, "insecure", &["--insecure"]);
    for (what, e) in [("send", &s), ("recv", &r)] {
        let first = e.lines().next().unwrap_or("");
        assert!(
            first.starts_with(&format!(
                "aerotp {what}: warning: not authenticated (--insecure)"
            )) && first.contains("anyone who can reach this port can"),
            "{what}: the warning is not the first line of stderr: {e}"
        );
        assert_eq!(e.matches("not authenticated").count(), 1, "{what}: {e}");
    }
    let k = d.path("k.key");
    assert!(run(&["keygen", &k]).status.success());
    let (s, r) = transfer(&d, "keyed", &["--key-file", &k]);
    for (what, e) in [("send", &s), ("recv", &r)] {
        assert!(!e.contains("not authenticated"), "{what}: {e}");
        assert!(!e.contains("--insecure"), "{what}: {e}");
    }
}

/// The gateways' default posture, as `send` and `recv`'s: without a key file and without
/// `--insecure` (or `insecure = true` in the config) `gw ingress` and `gw egress` refuse to
/// start, say how to make the key and where both gateways read it, and open nothing (no
/// capture file, no datagram to the peer, no custody store); with `--insecure` or the key
/// they run, and the first says on stderr what it risks; a key file and insecure together
/// are refused.
#[test]
fn a_gateway_needs_a_key_or_insecure_and_warns_when_insecure() {
    let d = Dir::new("gw");
    let k = d.path("k.key");
    assert!(run(&["keygen", &k]).status.success());
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let to = peer.local_addr().unwrap().to_string();
    let (pcap, store) = (d.path("gw.pcapng"), d.path("store"));
    let udp_in = format!("127.0.0.1:{}", free_port());
    let ingress: &[&str] = &[
        "gw",
        "ingress",
        "--peer",
        &to,
        "--udp-listen",
        &udp_in,
        "--store",
        &store,
        "--pcap",
        &pcap,
    ];
    let listen = format!("127.0.0.1:{}", free_port());
    let egress: &[&str] = &["gw", "egress", "--listen", &listen, "--pcap", &pcap];
    for args in [ingress, egress] {
        let o = refused(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        for needle in [
            "no key_file",
            "aerotp keygen",
            "--key-file",
            "--insecure",
            "insecure = true",
        ] {
            assert!(e.contains(needle), "{args:?}: no {needle:?} in: {e}");
        }
        assert!(!e.contains("not authenticated (--insecure)"), "{e}");
    }
    // The ingress was refused before it sent anything, captured or made its store.
    let mut b = [0u8; 2048];
    assert!(
        peer.recv_from(&mut b).is_err(),
        "the ingress sent a datagram"
    );
    assert!(!Path::new(&pcap).exists(), "a capture file was written");
    assert!(!Path::new(&store).exists(), "a custody store was made");
    // Runs (for 1.5 s) with what it is given; returns its stderr.
    let stderr_of = |extra: &[&str]| {
        let mut child = bin()
            .args(["gw", "egress", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            child.try_wait().unwrap().is_none(),
            "gw egress {extra:?} exited at start"
        );
        let _ = child.kill();
        stderr(&child.wait_with_output().unwrap())
    };
    let insecure_toml = d.path("insecure.toml");
    std::fs::write(&insecure_toml, "insecure = true\n").unwrap();
    for extra in [&["--insecure"][..], &["--config", &insecure_toml]] {
        let e = stderr_of(extra);
        assert!(
            e.contains("aerotp gw egress: warning: not authenticated (--insecure): anyone who can reach this port can"),
            "{extra:?}: {e}"
        );
    }
    let e = stderr_of(&["--key-file", &k]);
    assert!(!e.contains("not authenticated"), "{e}");
    // A key in the file and --insecure on the command line: refused, naming both.
    let keyed_toml = d.path("keyed.toml");
    std::fs::write(&keyed_toml, format!("key_file = {k:?}\n")).unwrap();
    let o = refused(&[
        "gw",
        "egress",
        "--listen",
        &listen,
        "--config",
        &keyed_toml,
        "--insecure",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("insecure") && e.contains("key_file") && e.contains("both set"),
        "{e}"
    );
}
