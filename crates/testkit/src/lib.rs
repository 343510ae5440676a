//! Helpers for the workspace's integration tests, written once: a child process that is killed
//! when dropped and waited for with a bound, free loopback ports, bounded polling,
//! reproducible incompressible data, SHA-256, and a strict parser of the Prometheus text that
//! `aerotp send|recv --metrics` and the gateways serve ([`prom`]), and MIT-LL's LL-DLEP as a
//! modem ([`ll_dlep`]), and an on-path relay that records, replays and forges ([`relay`]).
//!
//! Dev-only (`publish = false`): used from `[dev-dependencies]`, never by a shipped crate. Every
//! wait here has a time bound and panics naming what it waited for, so a failing test ends.

pub mod ll_dlep;
pub mod nat;
pub mod probe;
pub mod prom;
pub mod relay;
pub mod tos;
pub mod tshark;
pub mod udp_buffer;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use rand::{Rng, RngCore, SeedableRng};
use sha2::{Digest, Sha256};

/// How often the bounded waits poll: short against the seconds they allow, long enough not to
/// spin a core the tests share.
const POLL: Duration = Duration::from_millis(20);

/// `n` pseudo-random bytes from `seed`: incompressible, and the same bytes for the same seed.
pub fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand_pcg::Pcg64::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// Flips each bit of `buf` independently with probability `ber` (a binary symmetric channel,
/// drawn as geometric gaps between flips so a low BER costs one draw per flip, not per bit);
/// returns the number of bits flipped. `ber` must be in (0, 1).
pub fn flip_bits(buf: &mut [u8], ber: f64, rng: &mut impl Rng) -> usize {
    assert!(
        ber > 0.0 && ber < 1.0,
        "flip_bits: ber {ber} is not in (0, 1)"
    );
    let nbits = buf.len() * 8;
    let ln1 = (-ber).ln_1p();
    let mut pos = 0usize;
    let mut flips = 0;
    loop {
        let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
        pos += (u.ln() / ln1).floor() as usize;
        if pos >= nbits {
            return flips;
        }
        buf[pos / 8] ^= 0x80 >> (pos % 8);
        flips += 1;
        pos += 1;
    }
}

/// Peak resident set of process `pid` in bytes (`VmHWM` of `/proc/PID/status`).
pub fn peak_rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kb * 1024
}

/// Milliseconds since the Unix epoch (to line commands up with other processes' logs).
pub fn wall_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs_f64()
        * 1e3
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// SHA-256 of a file's contents; panics naming the file if it cannot be read.
pub fn sha256_file(p: &Path) -> [u8; 32] {
    let data = std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    sha256(&data)
}

/// A loopback TCP address nothing listens on right now (the port the kernel chose for a
/// listener just closed; another process could take it, which loopback tests accept).
pub fn free_tcp() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback TCP port")
}

/// A loopback UDP address nothing is bound to right now (same caveat as [`free_tcp`]).
pub fn free_udp() -> SocketAddr {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("bind a loopback UDP port")
}

/// A child process killed and reaped when dropped, so a failing test leaves nothing running.
#[derive(Debug)]
pub struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    pub fn new(c: Child) -> KillOnDrop {
        KillOnDrop(Some(c))
    }

    /// The child, no longer killed on drop (to wait for it).
    pub fn take(mut self) -> Child {
        self.0.take().expect("taken once")
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// The child, still owned by the guard.
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
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

/// Waits for `child` at most `limit` and returns its output; past the limit kills it and
/// panics with its stderr.
pub fn wait_bounded(child: Child, limit: Duration) -> Output {
    let mut guard = KillOnDrop::new(child);
    let t = Instant::now();
    loop {
        match guard.child().try_wait() {
            Ok(Some(_)) => return guard.take().wait_with_output().expect("collect output"),
            Ok(None) => {}
            Err(e) => panic!("try_wait: {e}"),
        }
        if t.elapsed() > limit {
            let mut c = guard.take();
            let _ = c.kill();
            let out = c.wait_with_output().expect("collect output");
            panic!(
                "a command took longer than {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Polls `f` until it holds, at most `limit`; panics naming `what` past it.
pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_is_reproducible_and_differs_by_seed() {
        assert_eq!(random(1000, 7), random(1000, 7));
        assert_ne!(random(1000, 7), random(1000, 8));
        assert_eq!(random(0, 1), Vec::<u8>::new());
    }

    #[test]
    fn flip_bits_flips_as_many_bits_as_it_says_near_the_ber() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(3);
        let mut total = 0;
        for _ in 0..50 {
            let mut b = vec![0u8; 10_000];
            let n = flip_bits(&mut b, 1e-3, &mut rng);
            let ones: u32 = b.iter().map(|x| x.count_ones()).sum();
            assert_eq!(ones as usize, n);
            total += n;
        }
        // 50 x 80 000 bits at 1e-3: 4000 expected, sd about 63.
        assert!((3700..4300).contains(&total), "{total}");
    }

    #[test]
    fn sha256_of_abc_is_the_fips_vector() {
        let h = sha256(b"abc");
        assert_eq!(h[..4], [0xba, 0x78, 0x16, 0xbf]);
        assert_eq!(h[28..], [0xf2, 0x00, 0x15, 0xad]);
    }

    #[test]
    fn free_ports_are_loopback_and_nonzero() {
        for a in [free_tcp(), free_udp()] {
            assert!(a.ip().is_loopback() && a.port() != 0, "{a}");
        }
    }

    #[test]
    fn a_child_over_its_limit_is_killed_and_reported() {
        let c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let r = std::panic::catch_unwind(|| wait_bounded(c, Duration::from_millis(100)));
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("longer than"), "{msg}");
        let c = std::process::Command::new("true").spawn().unwrap();
        assert!(wait_bounded(c, Duration::from_secs(10)).status.success());
    }

    #[test]
    fn wait_until_returns_once_true_and_panics_past_its_limit() {
        let mut n = 0;
        wait_until("third call", Duration::from_secs(5), || {
            n += 1;
            n == 3
        });
        assert_eq!(n, 3);
        let r =
            std::panic::catch_unwind(|| wait_until("never", Duration::from_millis(50), || false));
        assert!(r.is_err());
    }
}
