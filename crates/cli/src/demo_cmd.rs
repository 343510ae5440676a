//! `aerotp demo`: one process, no root, no arguments. A receiver, an emulated 5 Mb/s lossy link
//! (aerotp-emu relay: BER 1e-5, 10 ms, a 1 s outage) and a sender over loopback UDP; a 3 Mb/s
//! PCM-like telemetry stream of 1 MB in three AeroTP modes (quasi-reliable with two erasure
//! delay bounds), then as plain UDP through the same link; prints what each delivered, what
//! became of the TPDUs the link lost, and what each word of its tables means.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use aerotp_emu::{Relay, RelayConfig};
use aerotp_link::{LinkConfig, Outage};
use aerotp_net::{Endpoint, EndpointConfig, Mode};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::net::UdpSocket;
use tokio::time::Instant;

use crate::common::*;
use crate::recv_cmd::{receive, Sink};
use crate::send_cmd::{connection_config, send_stream};

#[derive(Debug, clap::Args)]
pub struct Args {}

const SIZE: usize = 1 << 20;
const FRAME: usize = 256;
/// Frames written per tick of the source.
const BATCH_FRAMES: usize = 16;
const SOURCE_BPS: f64 = 3e6;
const LINK_BPS: u64 = 5_000_000;
/// IRIG-106 32-bit frame synchronisation pattern.
const SYNC: [u8; 4] = [0xFE, 0x6B, 0x28, 0x40];

/// Deterministic PCM-like frames: sync word, frame counter, 124 16-bit measurands (slowly
/// varying "sensor" values and counters).
pub fn telemetry(size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size + FRAME);
    let mut i = 0u32;
    while v.len() < size {
        v.extend_from_slice(&SYNC);
        v.extend_from_slice(&i.to_be_bytes());
        for j in 0..124u32 {
            let phase = (i.wrapping_mul(3).wrapping_add(j * 97)) % 1024;
            let tri = if phase < 512 { phase } else { 1023 - phase };
            let w = (tri * 64 + j) as u16 ^ ((j as u16) << 12);
            v.extend_from_slice(&w.to_be_bytes());
        }
        i += 1;
    }
    v.truncate(size);
    v
}

fn batch_interval() -> Duration {
    Duration::from_secs_f64((FRAME * BATCH_FRAMES * 8) as f64 / SOURCE_BPS)
}

/// When frame `i` left the source (relative to the source start).
fn generated_at(i: u32) -> Duration {
    batch_interval() * (i / BATCH_FRAMES as u32)
}

/// Mean delay of the frames found intact in `data` (sync + counter), given chunk arrivals.
fn mean_delay(data: &[u8], arrivals: &[(usize, Instant)], start: Instant) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut n = 0u32;
    let mut k = 0usize;
    let mut a = 0usize;
    let frames = (SIZE / FRAME) as u32;
    while k + 8 <= data.len() {
        if data[k..k + 4] == SYNC {
            let i = u32::from_be_bytes([data[k + 4], data[k + 5], data[k + 6], data[k + 7]]);
            let end = (k + FRAME).min(data.len());
            while a < arrivals.len() && arrivals[a].0 < end {
                a += 1;
            }
            if i < frames && a < arrivals.len() {
                let arrived = arrivals[a].1 - start;
                total += arrived.saturating_sub(generated_at(i));
                n += 1;
            }
            k += FRAME;
        } else {
            k += 1;
        }
    }
    (n > 0).then(|| total / n)
}

fn link() -> LinkConfig {
    LinkConfig {
        rate_bps: LINK_BPS,
        delay: Duration::from_millis(10),
        ber: 1e-5,
        per_packet_overhead: 28,
        protected_prefix: 28,
        outages: vec![Outage {
            start: Duration::from_millis(800),
            duration: Duration::from_secs(1),
        }],
        ..LinkConfig::default()
    }
}

/// One transfer of the demo: the name its rows carry and what it shows.
struct Run {
    name: &'static str,
    mode: Mode,
    /// The erasure delay bound both ends use (the mode's default, 500 ms, when `None`).
    max_delay: Option<Duration>,
    what: &'static str,
}

/// The AeroTP transfers, in the order they run (plain UDP follows). The last: quasi-reliable
/// with a delay bound longer than the outage, so the repairs sent once the receiver reports
/// the outage can rebuild it (with the default 500 ms bound none can arrive in time for a 1 s
/// outage).
const RUNS: [Run; 4] = [
    Run {
        name: "reliable",
        mode: Mode::Reliable,
        max_delay: None,
        what: "resends whatever the link lost until every byte is there (acknowledged by MACKs)",
    },
    Run {
        name: "hybrid-nack-mack",
        mode: Mode::HybridNackMack,
        max_delay: None,
        what: "the same, and the receiver asks at once (NACK) for what it finds missing or damaged",
    },
    Run {
        name: "quasi-reliable 0.5 s",
        mode: Mode::QuasiReliable,
        max_delay: None,
        what:
            "never resends: repair TPDUs rebuild lost ones if they come within 0.5 s (the default)",
    },
    Run {
        name: "quasi-reliable 3 s",
        mode: Mode::QuasiReliable,
        max_delay: Some(Duration::from_secs(3)),
        what: "the same with a 3 s bound (--max-delay 3s), longer than the outage",
    },
];

const UDP_NAME: &str = "plain UDP";
const UDP_WHAT: &str = "the same frames as UDP datagrams through the same link: no error control";

/// Reed-Solomon codewords in a full TPDU: a 1500-byte datagram less the IP and UDP headers,
/// in codewords of at most 255 bytes (docs/fec.md, "Layout").
const CODEWORDS: usize = (1500 - 28usize).div_ceil(255);

/// What became of the TPDUs the link lost or damaged, from the sender's and receiver's
/// counters.
struct Fate {
    resent: u64,
    rebuilt: u64,
    never: u64,
    corrected: u64,
    parity: u8,
}

struct Row {
    name: &'static str,
    bytes: usize,
    intact: bool,
    goodput: f64,
    delay: Option<Duration>,
    /// AeroTP runs; plain UDP says what arrived in `note` instead.
    fate: Option<Fate>,
    note: String,
}

/// Writes the telemetry at the source rate into `w`.
async fn source<W: tokio::io::AsyncWrite + Unpin>(
    data: &[u8],
    mut w: W,
    start: Instant,
) -> std::io::Result<()> {
    for (b, chunk) in data.chunks(FRAME * BATCH_FRAMES).enumerate() {
        tokio::time::sleep_until(start + batch_interval() * b as u32).await;
        w.write_all(chunk).await?;
    }
    w.shutdown().await
}

async fn start_relay(
    to: SocketAddr,
) -> anyhow::Result<(
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
)> {
    let lo: SocketAddr = "127.0.0.1:0".parse()?;
    let relay = Relay::bind(RelayConfig {
        stats_interval: None,
        seed: 7,
        ..RelayConfig::new(lo, to, link())
    })
    .await?;
    let addr = relay.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(async move {
        let _ = relay.run(rx).await;
    });
    Ok((addr, tx, h))
}

/// One AeroTP transfer as `run` says.
async fn aerotp_mode(run: &Run, data: &[u8]) -> anyhow::Result<Row> {
    let (mode, max_delay) = (run.mode, run.max_delay);
    let lo: SocketAddr = "127.0.0.1:0".parse()?;
    let server = Endpoint::bind(lo, EndpointConfig::default())?;
    let erasure = max_delay.map(|d| aerotp_proto::ErasureSetting {
        max_delay: d,
        ..aerotp_proto::ErrorControl::for_mode(mode).erasure
    });
    let mut listener =
        crate::listener_config::listener_config(LINK_BPS, None, Duration::from_secs(60))?;
    listener.erasure = erasure;
    server.listen(1, listener)?;
    let (relay_addr, stop, relay) = start_relay(server.local_addr()).await?;
    let client = Endpoint::bind(lo, EndpointConfig::default())?;
    let mut cfg = connection_config(mode, LINK_BPS, None, None, 1500, Some(1e-5))?;
    cfg.erasure = erasure;
    let hidden = indicatif::ProgressBar::hidden();
    let rx = tokio::spawn(async move {
        let conn = server
            .accept()
            .await
            .ok_or_else(|| anyhow::anyhow!("no connection"))?;
        receive(conn, &Sink::Memory, &indicatif::ProgressBar::hidden()).await
    });
    let (w, r) = tokio::io::duplex(64 * 1024);
    let start = Instant::now();
    let src = source(data, w, start);
    let header = encode_header("telemetry.pcm", Some(data.len() as u64));
    let snd = send_stream(
        &client,
        relay_addr,
        &[],
        1,
        cfg,
        &header,
        r,
        Duration::from_secs(10),
        &hidden,
    );
    let (src_r, snd_r) = tokio::join!(src, snd);
    src_r?;
    let sent = snd_r.map_err(|e| anyhow::anyhow!("{e}"))?;
    let got = tokio::time::timeout(Duration::from_secs(20), rx)
        .await??
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let _ = stop.send(());
    let _ = relay.await;
    let last = got.arrivals.last().map_or(start, |a| a.1);
    let sha_match = Sha256::digest(&got.data) == Sha256::digest(data);
    let rx = &got.report.stats.receiver;
    Ok(Row {
        name: run.name,
        bytes: got.data.len(),
        intact: got.data.len() == data.len() && sha_match,
        goodput: got.data.len() as f64 * 8.0 / (last - start).as_secs_f64().max(1e-9),
        delay: mean_delay(&got.data, &got.arrivals, start),
        fate: Some(Fate {
            resent: sent.report.stats.sender.tpdus_retransmitted,
            rebuilt: rx.tpdus_rebuilt,
            never: rx.tpdus_lost,
            corrected: rx.tpdus_corrected,
            parity: sent.report.stats.fec_parity,
        }),
        note: String::new(),
    })
}

async fn plain_udp(data: &[u8]) -> anyhow::Result<Row> {
    let lo: SocketAddr = "127.0.0.1:0".parse()?;
    let rx_sock = UdpSocket::bind(lo).await?;
    let (relay_addr, stop, relay) = start_relay(rx_sock.local_addr()?).await?;
    let tx_sock = UdpSocket::bind(lo).await?;
    let start = Instant::now();
    let per = FRAME * 4;
    let sender = async {
        for (k, chunk) in data.chunks(per).enumerate() {
            tokio::time::sleep_until(
                start + Duration::from_secs_f64((k * per * 8) as f64 / SOURCE_BPS),
            )
            .await;
            tx_sock.send_to(chunk, relay_addr).await?;
        }
        anyhow::Ok(())
    };
    let receiver = async {
        let mut got = Vec::new();
        let mut arrivals = Vec::new();
        let mut buf = vec![0u8; 65536];
        let source_time = Duration::from_secs_f64((data.len() * 8) as f64 / SOURCE_BPS);
        loop {
            let deadline = (start + source_time).max(Instant::now()) + Duration::from_millis(500);
            match tokio::time::timeout_at(deadline, rx_sock.recv_from(&mut buf)).await {
                Ok(Ok((n, _))) => {
                    got.extend_from_slice(&buf[..n]);
                    arrivals.push((got.len(), Instant::now()));
                }
                Ok(Err(_)) => continue,
                Err(_) => break,
            }
            if Instant::now() > start + source_time + Duration::from_secs(3) {
                break;
            }
        }
        (got, arrivals)
    };
    let (s, (got, arrivals)) = tokio::join!(sender, receiver);
    s?;
    let _ = stop.send(());
    let _ = relay.await;
    let last = arrivals.last().map_or(start, |a| a.1);
    let sha_match = Sha256::digest(&got) == Sha256::digest(data);
    // Datagrams that arrived but carry flipped bits (UDP checksum 0 from the relay's socket).
    let damaged = got
        .chunks(FRAME)
        .filter(|f| f.len() >= 8 && f[..4] != SYNC)
        .count();
    Ok(Row {
        name: UDP_NAME,
        bytes: got.len(),
        intact: got.len() == data.len() && sha_match,
        goodput: got.len() as f64 * 8.0 / (last - start).as_secs_f64().max(1e-9),
        delay: mean_delay(&got, &arrivals, start),
        fate: None,
        note: format!(
            "{} of {} datagrams arrived; {damaged} frames with a damaged sync word",
            arrivals.len(),
            data.len().div_ceil(per)
        ),
    })
}

pub fn run(_args: Args) -> i32 {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aerotp demo: {e}");
            return EXIT_LOCAL;
        }
    };
    match rt.block_on(demo()) {
        Ok(true) => EXIT_OK,
        Ok(false) => EXIT_BROKEN,
        Err(e) => {
            eprintln!("aerotp demo: {e:#}");
            EXIT_LOCAL
        }
    }
}

async fn demo() -> anyhow::Result<bool> {
    let data = telemetry(SIZE);
    println!(
        "AeroTP demo: 1 MiB of PCM-like telemetry generated at 3 Mb/s, sent over an emulated 5 Mb/s\n\
         link (10 ms delay, bit-error rate 1e-5, a 1 s outage 0.8 s after the start) on loopback UDP,\n\
         five times:\n"
    );
    for r in &RUNS {
        println!("  {:<22}{}", r.name, r.what);
    }
    println!("  {UDP_NAME:<22}{UDP_WHAT}");
    println!(
        "Every AeroTP transfer also protects each TPDU with its own Reed-Solomon code (FEC), as\n\
         strong as the bit-error rate calls for (--fec auto).\n"
    );
    let total = RUNS.len() + 1;
    let mut rows = Vec::new();
    for (i, run) in RUNS.iter().enumerate() {
        eprintln!("running {}/{total}: {} ...", i + 1, run.name);
        rows.push(aerotp_mode(run, &data).await?);
    }
    eprintln!("running {total}/{total}: {UDP_NAME} ...");
    rows.push(plain_udp(&data).await?);
    print!("{}", report(&rows));
    // The fully reliable modes must have delivered everything.
    Ok(rows.iter().take(2).all(|r| r.intact))
}

/// The two tables and what their words mean.
fn report(rows: &[Row]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<22}{:>16}{:>8}{:>12}{:>12}",
        "transfer", "bytes delivered", "intact", "goodput", "mean delay"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:<22}{:>16}{:>8}{:>12}{:>12}",
            r.name,
            format!("{}/{}", r.bytes, SIZE),
            if r.intact { "yes" } else { "no" },
            human_rate(r.goodput),
            r.delay.map_or_else(
                || "-".into(),
                |d| format!("{:.0} ms", d.as_secs_f64() * 1e3)
            ),
        );
    }
    let _ = writeln!(
        o,
        "\nintact: every byte, in order, with the SHA-256 of what was sent;\n\
         goodput: bytes delivered / time from the source's start to the last arrival;\n\
         mean delay: arrival at the receiving application - generation at the source, per intact frame.\n"
    );
    let _ = writeln!(
        o,
        "What became of the TPDUs (AeroTP's packets) that the link lost or damaged:\n"
    );
    let _ = writeln!(
        o,
        "{:<22}{:>8}{:>9}{:>7}{:>11}{:>7}",
        "transfer", "resent", "rebuilt", "never", "corrected", "FEC p"
    );
    let mut parities = Vec::new();
    for r in rows {
        let Some(f) = &r.fate else {
            let _ = writeln!(o, "{:<22}{}", r.name, r.note);
            continue;
        };
        let _ = writeln!(
            o,
            "{:<22}{:>8}{:>9}{:>7}{:>11}{:>7}",
            r.name, f.resent, f.rebuilt, f.never, f.corrected, f.parity
        );
        if !parities.contains(&f.parity) {
            parities.push(f.parity);
        }
    }
    parities.sort_unstable();
    let _ = writeln!(
        o,
        "\nresent:    TPDUs the sender sent again, lost or not acknowledged in time (ARQ);\n\
         \x20          quasi-reliable resends only the TPDU that closes the transfer, if its answer is late\n\
         rebuilt:   lost TPDUs the receiver rebuilt from repair TPDUs (erasure coding across TPDUs)\n\
         never:     lost TPDUs given up on: the data around each hole is delivered without it\n\
         corrected: TPDUs that arrived with bit errors, repaired by their own FEC\n\
         FEC p:     Reed-Solomon parity bytes per codeword at the end of the transfer, chosen per mode\n\
         \x20          for the bit-error rate; a full TPDU is {CODEWORDS} codewords of at most 255 bytes:"
    );
    for p in parities {
        let _ = writeln!(o, "           {}", parity_meaning(p));
    }
    o
}

/// What FEC strength `p` costs and corrects in a full TPDU.
fn parity_meaning(p: u8) -> String {
    if p == 0 {
        return "p=0: no FEC: a TPDU with a bit error fails its check and counts as lost".into();
    }
    let fixes = p / 2;
    let bytes = if fixes == 1 { "byte" } else { "bytes" };
    if fixes == 0 {
        return format!(
            "p={p}: {} parity bytes per TPDU that detect a wrong byte but correct none",
            p as usize * CODEWORDS
        );
    }
    format!(
        "p={p}: {} parity bytes per TPDU; corrects up to {fixes} wrong {bytes} in each codeword",
        p as usize * CODEWORDS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_has_its_own_name() {
        let mut names: Vec<&str> = RUNS.iter().map(|r| r.name).chain([UDP_NAME]).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RUNS.len() + 1, "{names:?}");
        assert!(names.iter().all(|n| n.len() < 22), "{names:?}");
    }

    #[test]
    fn parity_meaning_counts_the_codewords_of_a_full_tpdu() {
        assert_eq!(CODEWORDS, 6);
        assert_eq!(
            parity_meaning(2),
            "p=2: 12 parity bytes per TPDU; corrects up to 1 wrong byte in each codeword"
        );
        assert_eq!(
            parity_meaning(4),
            "p=4: 24 parity bytes per TPDU; corrects up to 2 wrong bytes in each codeword"
        );
        assert!(parity_meaning(1).contains("correct none"));
        assert!(parity_meaning(0).starts_with("p=0: no FEC"));
    }
}
