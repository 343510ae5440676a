//! Issue 14's forgery figures on loopback (docs/results/security.md): a live authenticated
//! transfer, first clean, then with 10^6 forged TPDUs sent at the receiver while it runs, then
//! with forged RSTs. Forgeries are built as an attacker who sees the traffic would build
//! them: the live connection's ports, tag and sequence numbers, valid HEC and CRC-32C —
//! plain TPDUs (no key), and TPDUs sealed by the format of docs/spec.md §8 with a wrong key.
//!
//! `cargo run --release -p aerotp-net --example forgery -- [--size 300MB] [--rate 200mbit]
//! [--forged 1000000] [--flood-rate 100000] [--runs 3]` prints one line per run and the
//! median.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerotp_net::{keyfile, ConnectionConfig, Endpoint, EndpointConfig, KeySet, Mode, Tap};
use aerotp_wire::{crc32c, emit_tpdu, Envelope, Flags, Header, AUTH_OVERHEAD, HEADER_LEN};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

struct Args {
    size: u64,
    rate: u64,
    forged: u64,
    /// Forged datagrams per second (0: as fast as one thread can send).
    flood_rate: u64,
    runs: usize,
}

fn args() -> Args {
    let mut a = Args {
        size: 300_000_000,
        rate: 200_000_000,
        forged: 1_000_000,
        flood_rate: 100_000,
        runs: 3,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    for w in v.chunks(2) {
        let val = w.get(1).map(String::as_str).unwrap_or("");
        let bad = |what: &str| -> ! {
            eprintln!("{}: '{val}' is not {what}", w[0]);
            std::process::exit(2)
        };
        match w[0].as_str() {
            "--size" => {
                a.size = aerotp_link::parse_size(val).unwrap_or_else(|_| bad("a size (300MB)"))
            }
            "--rate" => {
                a.rate = aerotp_link::parse_rate(val).unwrap_or_else(|_| bad("a rate (1gbit)"))
            }
            "--forged" => a.forged = val.parse().unwrap_or_else(|_| bad("a count")),
            "--flood-rate" => {
                a.flood_rate = val
                    .parse()
                    .unwrap_or_else(|_| bad("datagrams per second (0: unpaced)"))
            }
            "--runs" => {
                a.runs = val
                    .parse()
                    .ok()
                    .filter(|&r| r > 0)
                    .unwrap_or_else(|| bad("a count >= 1"))
            }
            f => {
                eprintln!("unknown flag {f}: give --size, --rate, --forged, --flood-rate, --runs");
                std::process::exit(2)
            }
        }
    }
    a
}

/// Remembers the header of a data TPDU the sender sent: what an eavesdropper learns.
#[derive(Default)]
struct Spy(Mutex<Option<Header>>);

impl Tap for Spy {
    fn datagram(&self, iface: u32, _: Duration, _: SocketAddr, _: SocketAddr, b: &[u8]) {
        if iface != aerotp_net::TAP_SENT {
            return;
        }
        if let Ok((h, _)) = Header::parse_any(b) {
            if h.flags.is_data() && h.seq > 10 {
                *self.0.lock().unwrap() = Some(h);
            }
        }
    }
}

/// A TPDU sealed as the spec says, with a key the receiver does not hold.
fn seal_wrong(key: &LessSafeKey, mut h: Header, key_id: u8, body: &[u8], n: u64) -> Vec<u8> {
    h.len = (body.len() + AUTH_OVERHEAD) as u16;
    h.fec = 0;
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&n.to_be_bytes());
    let mut out = h.to_bytes_auth().to_vec();
    out.push(Envelope::key_byte(key_id, true));
    out.extend_from_slice(&nonce);
    let start = out.len();
    out.extend_from_slice(body);
    let (aad, text) = out.split_at_mut(start);
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&aad[..]),
            text,
        )
        .unwrap();
    out.extend_from_slice(tag.as_ref());
    let crc = crc32c(&out[HEADER_LEN..]);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The forgeries: data ahead of the receiver, RSTs, an ASYN — plain and wrong-key sealed.
fn forgeries(seen: Header, key_id: u8, rst_only: bool) -> Vec<Vec<u8>> {
    let wrong = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[0x99; 32]).unwrap());
    let mut v = Vec::new();
    for i in 0..2048u32 {
        let data = Header {
            seq: seen.seq.wrapping_add(300 + i),
            flags: Flags::empty(),
            len: 0,
            ..seen
        };
        let rst = Header {
            flags: Flags::RST,
            len: 0,
            ..seen
        };
        let mut plain = Vec::new();
        if rst_only {
            emit_tpdu(rst, b"forged reset", &mut plain).unwrap();
            v.push(plain);
            v.push(seal_wrong(
                &wrong,
                rst,
                key_id,
                b"forged reset",
                u64::from(i),
            ));
            continue;
        }
        emit_tpdu(data, &[0xEE; 1300], &mut plain).unwrap();
        v.push(plain);
        v.push(seal_wrong(
            &wrong,
            data,
            key_id,
            &[0xEE; 1300],
            u64::from(i),
        ));
        if i % 64 == 0 {
            let mut p = Vec::new();
            emit_tpdu(rst, b"forged", &mut p).unwrap();
            v.push(p);
            let asyn = Header {
                flags: Flags::ASYN,
                src_port: seen.src_port.wrapping_add(1 + i as u16),
                seq: 0,
                ..data
            };
            v.push(seal_wrong(
                &wrong,
                asyn,
                key_id,
                b"hello",
                u64::from(i) << 20,
            ));
        }
    }
    v
}

#[derive(Debug, Default, Clone)]
struct Outcome {
    goodput_bps: f64,
    intact: bool,
    confirmed: bool,
    forged_sent: u64,
    auth_dropped: u64,
    /// TPDUs that verified, and the datagrams the genuine sender sent.
    verified: u64,
    genuine_sent: u64,
    by_reason: String,
}

async fn transfer(a: &Args, flood: Option<(u64, bool)>) -> anyhow::Result<Outcome> {
    let lo: SocketAddr = "127.0.0.1:0".parse()?;
    let key = keyfile::new_key(3)?;
    let cfg = |k: &aerotp_net::AuthKey| -> anyhow::Result<EndpointConfig> {
        Ok(EndpointConfig {
            auth: Some(keyfile::auth_config(
                KeySet {
                    current: k.clone(),
                    previous: None,
                },
                true,
            )?),
            ..EndpointConfig::default()
        })
    };
    let mut lcfg = ConnectionConfig::with_mode(Mode::Reliable);
    lcfg.rate_bps = a.rate;
    lcfg.idle_timeout = Duration::from_secs(60);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let receiver = spawn_receiver(lo, cfg(&key)?, lcfg.clone(), addr_tx);
    let target = addr_rx.recv()?;
    let client = Endpoint::bind(lo, cfg(&key)?)?;
    let spy = Arc::new(Spy::default());
    client.set_tap(spy.clone());
    let mut conn = client.connect(target, 1, lcfg)?;
    let size = a.size;
    // The flood, from its own thread and socket, once the spy has seen the connection.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let flood_rate = a.flood_rate;
    let flooder = flood.map(|(count, rst_only)| {
        let (spy, stop, sent) = (spy.clone(), stop.clone(), sent.clone());
        std::thread::spawn(move || {
            flood_forgeries(&spy, &stop, target, (count, rst_only, flood_rate), &sent)
        })
    });
    send_pattern(&mut conn, size).await?;
    let report = conn.finish().await;
    let (got, ok, secs, es, _datagrams_in) = tokio::task::spawn_blocking(move || receiver.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the receiver thread panicked"))??;
    stop.store(true, Ordering::Relaxed);
    if let Some(f) = flooder {
        let _ = tokio::task::spawn_blocking(move || f.join()).await;
    }
    let client_sent = client.io_counters().datagrams_sent;
    Ok(Outcome {
        goodput_bps: got as f64 * 8.0 / secs,
        intact: ok && got == size,
        confirmed: report.guarantee_met,
        forged_sent: sent.load(Ordering::Relaxed),
        auth_dropped: es.auth_dropped(),
        verified: es.auth_verified,
        genuine_sent: client_sent,
        by_reason: format!(
            "missing {} failed {} unknown_key {} replayed {} corrupted {}",
            es.auth_missing,
            es.auth_failed,
            es.auth_unknown_key,
            es.auth_replayed,
            es.auth_corrupted
        ),
    })
}

/// What the receiver saw: bytes, whether every one was the sender's pattern, seconds from
/// the first, its endpoint's counters and the datagrams its socket read.
type Received = (u64, bool, f64, aerotp_net::EndpointStats, u64);

/// The receiver, on a thread and runtime of its own, as on another host: the flood costs it,
/// not the sender. It sends its address on `addr_tx` once listening.
fn spawn_receiver(
    lo: SocketAddr,
    server_cfg: EndpointConfig,
    listen_cfg: ConnectionConfig,
    addr_tx: std::sync::mpsc::Sender<SocketAddr>,
) -> std::thread::JoinHandle<anyhow::Result<Received>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let server = Endpoint::bind(lo, server_cfg)?;
            server.listen(1, listen_cfg)?;
            let _ = addr_tx.send(server.local_addr());
            let c = server
                .accept()
                .await
                .ok_or_else(|| anyhow::anyhow!("no connection"))?;
            let mut got = 0u64;
            let mut ok = true;
            let mut first: Option<Instant> = None;
            while let Some(ch) = c.read_chunk().await? {
                first.get_or_insert_with(Instant::now);
                // Every byte is the pattern the sender writes: one forged byte shows.
                ok &= ch
                    .data
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == pattern(got + i as u64));
                got += ch.data.len() as u64;
            }
            let secs = first.map_or(1e-9, |t| t.elapsed().as_secs_f64());
            let _ = c.finish().await;
            let es = server.stats();
            let datagrams_in = server.io_counters().datagrams_received;
            anyhow::Ok((got, ok, secs, es, datagrams_in))
        })
    })
}

/// Sends forgeries made from the first header the spy saw to `target`, `count` of them (only
/// RSTs if `rst_only`) at `flood_rate` a second (0: as fast as it can), until `stop`; the
/// number sent goes to `sent`.
fn flood_forgeries(
    spy: &Spy,
    stop: &AtomicBool,
    target: SocketAddr,
    (count, rst_only, flood_rate): (u64, bool, u64),
    sent: &AtomicU64,
) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t0 = Instant::now();
    let seen = loop {
        if let Some(h) = *spy.0.lock().unwrap() {
            break Some(h);
        }
        if t0.elapsed() > Duration::from_secs(10) || stop.load(Ordering::Relaxed) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let Some(seen) = seen else { return };
    let pool = forgeries(seen, 3, rst_only);
    let mut n = 0u64;
    let t0 = Instant::now();
    while n < count && !stop.load(Ordering::Relaxed) {
        // Paced in bursts of 100: sleep until the schedule catches up.
        if flood_rate > 0 && n.is_multiple_of(100) {
            let due = Duration::from_secs_f64(n as f64 / flood_rate as f64);
            if let Some(w) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(w);
            }
        }
        if sock
            .send_to(&pool[(n as usize) % pool.len()], target)
            .is_ok()
        {
            n += 1;
        }
    }
    sent.store(n, Ordering::Relaxed);
}

/// Writes `size` bytes of the pattern the receiver checks.
async fn send_pattern(conn: &mut aerotp_net::Connection, size: u64) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = pattern(off + i as u64);
        }
        conn.write_all(&buf[..n]).await?;
        off += n as u64;
    }
    Ok(())
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(0x9E37_79B9) >> 11) as u8
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let a = args();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "authenticated+encrypted reliable transfer, {} bytes at {} b/s on loopback; {} forged TPDUs per flooded run at {} per second",
        a.size, a.rate, a.forged, a.flood_rate
    );
    let mut ratios = Vec::new();
    let mut all_ok = true;
    for run in 1..=a.runs {
        let clean = rt.block_on(transfer(&a, None))?;
        let flood = rt.block_on(transfer(&a, Some((a.forged, false))))?;
        let rst = rt.block_on(transfer(&a, Some((10_000, true))))?;
        let ratio = flood.goodput_bps / clean.goodput_bps;
        // Forged TPDUs accepted: at least the TPDUs that verified beyond what the genuine
        // sender sent (each forgery that verified would count there). Zero here, with every
        // delivered byte the sender's, is the figure.
        let accepted = flood.verified.saturating_sub(flood.genuine_sent);
        println!(
            "run {run}: clean {:.0} Mb/s intact {} | flood: sent {} dropped by auth {} ({}); verified {} <= genuine sent {}: forged accepted {} intact {} confirmed {} goodput {:.0} Mb/s = {:.1} % of clean | forged RST: sent {} dropped {} intact {} confirmed {}",
            clean.goodput_bps / 1e6,
            clean.intact,
            flood.forged_sent,
            flood.auth_dropped,
            flood.by_reason,
            flood.verified,
            flood.genuine_sent,
            accepted,
            flood.intact,
            flood.confirmed,
            flood.goodput_bps / 1e6,
            100.0 * ratio,
            rst.forged_sent,
            rst.auth_dropped,
            rst.intact,
            rst.confirmed,
        );
        all_ok &= clean.intact
            && flood.intact
            && flood.confirmed
            && accepted == 0
            && rst.intact
            && rst.confirmed;
        ratios.push(ratio);
    }
    println!(
        "median goodput under flood: {:.1} % of the clean run; every file intact and nothing forged accepted: {all_ok}",
        100.0 * median(ratios)
    );
    if !all_ok {
        std::process::exit(1);
    }
    Ok(())
}
