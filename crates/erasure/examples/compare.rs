//! Recovery versus overhead, added delay and CPU for the erasure codes, on seeded loss
//! patterns. `cargo run --release -p aerotp-erasure --example compare -- --help`.
//!
//! Wire schedule at repair ratio `q` with a delay bound of `n` wire symbols (500 ms at 5 Mb/s
//! with 1400-byte symbols = 223): `k = round(n / q)` sources per block / window.
//! * RS (reed-solomon-simd): k sources then `n - k` repairs of the block.
//! * RLC (this crate): after each source, `(n-k)/k` repairs on average (credit counter), each
//!   over the last `k` sources; decoder window `k`.
//! * RaptorQ (raptorq 2): the same blocks as RS, decoded by `SourceBlockDecoder` (throughput
//!   runs only; its recovery is that of a near-MDS code, within 1e-2 of RS per block).
//!
//! Recovery runs use small payloads (0..=64 bytes, random): which symbols a code rebuilds
//! does not depend on symbol size (RS is MDS; the RLC's coefficient matrix does not see the
//! data), so millions of symbols take seconds. CPU runs use 1400-byte payloads and report
//! source bytes per second of this thread's CPU time (encoder + decoder), median of runs.

use std::time::Duration;

use aerotp_erasure::block::{RsDecoder, RsEncoder};
use aerotp_erasure::channel::{LossChannel, LossModel};
use aerotp_erasure::control::{ControllerConfig, LinkReport, StrengthController};
use aerotp_erasure::rlc::{RlcDecoder, RlcEncoder};
use aerotp_erasure::{CodecConfig, ErasureDecoder, ErasureEncoder};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

#[derive(Parser, Debug)]
struct Args {
    /// Source symbols per recovery run.
    #[arg(long, default_value_t = 1_000_000)]
    symbols: usize,
    /// Source symbols (1400 B) per CPU run.
    #[arg(long, default_value_t = 20_000)]
    cpu_symbols: usize,
    /// CPU runs per setting (median reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Delay bound in wire symbols (223 = 500 ms at 5 Mb/s, 1400 B).
    #[arg(long, default_value_t = 223)]
    delay_symbols: usize,
    /// Repair ratios (wire symbols per source symbol), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1.1, 1.25, 1.3, 1.5])]
    ratios: Vec<f64>,
    /// Channels to run, comma-separated, of: iid2, iid10, ge.
    #[arg(long, value_delimiter = ',', default_values_t = ["iid2".to_string(), "iid10".to_string(), "ge".to_string()])]
    channels: Vec<String>,
    /// Skip the CPU runs and the peer table (recovery only).
    #[arg(long)]
    no_cpu: bool,
    /// Seed of the loss patterns.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[derive(Clone, Copy, PartialEq)]
enum Code {
    Rs,
    Rlc,
}

#[derive(Default)]
struct Outcome {
    sent: u64,
    lost: u64,
    recovered: u64,
    delays: Vec<u32>,
    wire: u64,
    bytes: u64,
}

impl Outcome {
    fn residual(&self) -> f64 {
        (self.lost - self.recovered) as f64 / self.sent as f64
    }
}

/// 4096 random payloads, reused cyclically (made before any timing): lengths uniform in
/// `min..=max`.
fn pool(min: usize, max: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..4096)
        .map(|_| {
            let len = rng.gen_range(min..=max);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect()
}

/// One run: `symbols` sources through encoder, channel and decoder. Every recovered payload
/// is compared with what was sent (a mismatch aborts: the decoder must never be wrong).
fn run(
    code: Code,
    model: LossModel,
    k: usize,
    n: usize,
    symbols: usize,
    pool: &[Vec<u8>],
    seed: u64,
) -> Outcome {
    let max = pool.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let cfg = CodecConfig::sized(max, k);
    let (mut enc, mut dec): (Box<dyn ErasureEncoder>, Box<dyn ErasureDecoder>) = match code {
        Code::Rs => (
            Box::new(RsEncoder::new(cfg).unwrap()),
            Box::new(RsDecoder::new(cfg).unwrap()),
        ),
        Code::Rlc => (
            Box::new(RlcEncoder::new(cfg, seed).unwrap()),
            Box::new(RlcDecoder::new(cfg).unwrap()),
        ),
    };
    let r = n - k;
    let mut ch = LossChannel::new(model, seed);
    let mut o = Outcome::default();
    // Sent payloads and wire slots, kept for the decoder's window only.
    let keep = 2 * n + 8;
    let mut sent: Vec<(Vec<u8>, u64)> = vec![(Vec::new(), 0); keep];
    let check = |o: &mut Outcome,
                 recs: Vec<aerotp_erasure::Recovered>,
                 sent: &[(Vec<u8>, u64)],
                 now: u64| {
        for rec in recs {
            let (p, slot) = &sent[rec.seq as usize % keep];
            assert_eq!(&rec.payload, p, "wrong bytes for seq {}", rec.seq);
            o.recovered += 1;
            o.delays.push((now - slot) as u32);
        }
    };
    let mut credit = 0.0f64;
    for seq in 0..symbols as u32 {
        let p = pool[seq as usize % pool.len()].clone();
        o.bytes += p.len() as u64;
        enc.push_source(seq, &p).unwrap();
        let slot = o.wire;
        o.wire += 1;
        o.sent += 1;
        if ch.lose() {
            o.lost += 1;
        } else {
            let recs = dec.on_source(seq, &p).unwrap();
            check(&mut o, recs, &sent, slot);
        }
        sent[seq as usize % keep] = (p, slot);
        let reps = match code {
            Code::Rs if (seq as usize + 1).is_multiple_of(k) || seq as usize + 1 == symbols => {
                enc.repair(r).unwrap()
            }
            Code::Rs => Vec::new(),
            Code::Rlc => {
                credit += r as f64 / k as f64;
                let c = credit.floor() as usize;
                credit -= c as f64;
                enc.repair(c).unwrap()
            }
        };
        for rep in reps {
            let now = o.wire;
            o.wire += 1;
            if !ch.lose() {
                let recs = dec.on_repair(&rep.header, &rep.data).unwrap();
                check(&mut o, recs, &sent, now);
            }
        }
    }
    o
}

/// RaptorQ over the same blocks: encode k sources, r repairs; decode when a source is lost.
fn run_raptorq(model: LossModel, k: usize, n: usize, symbols: usize, seed: u64) -> (u64, f64) {
    use raptorq::{
        EncodingPacket, ObjectTransmissionInformation, SourceBlockDecoder, SourceBlockEncoder,
    };
    let sym = 1400u16;
    let r = (n - k) as u32;
    let mut ch = LossChannel::new(model, seed);
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut bytes = 0u64;
    let mut cpu = 0.0;
    let blocks = symbols / k;
    for _ in 0..blocks {
        let data: Vec<u8> = (0..k * sym as usize).map(|_| rng.gen()).collect();
        let t0 = thread_cpu();
        let oti = ObjectTransmissionInformation::new(data.len() as u64, sym, 1, 1, 8);
        let enc = SourceBlockEncoder::new(0, &oti, &data);
        let mut pkts: Vec<EncodingPacket> = enc.source_packets();
        pkts.extend(enc.repair_packets(0, r));
        let mut any_lost = false;
        let recv: Vec<EncodingPacket> = pkts
            .into_iter()
            .enumerate()
            .filter(|(i, _)| {
                let l = ch.lose();
                any_lost |= l && *i < k;
                !l
            })
            .map(|(_, p)| p)
            .collect();
        if any_lost {
            let mut dec = SourceBlockDecoder::new(0, &oti, data.len() as u64);
            if let Some(out) = dec.decode(recv) {
                assert_eq!(out, data);
            }
        }
        cpu += (thread_cpu() - t0).as_secs_f64();
        bytes += data.len() as u64;
    }
    (bytes, cpu)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn pct(v: &mut [u32], q: f64) -> u32 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q) as usize]
}

/// Repair encoding over a window of `w` 1400-byte sources: this crate's RLC vs cu-fec 1.3
/// (only with `--features cu-fec`: that crate needs a newer rustc than the workspace's floor)
/// (RFC 8681, bit-serial field multiply). Source bytes combined per second of CPU time.
#[cfg(feature = "cu-fec")]
fn rlc_peer(w: usize, repairs: usize) -> (f64, f64) {
    use cu_fec::{DensityThreshold, EncodingSymbolId, Field, RepairParameters, RlcConfig};
    let mut rng = Pcg64::seed_from_u64(5);
    let srcs: Vec<Vec<u8>> = (0..w)
        .map(|_| (0..1398).map(|_| rng.gen()).collect())
        .collect();
    let cfg = CodecConfig::sized(1398, w);
    let mut ours = RlcEncoder::new(cfg, 1).unwrap();
    for (i, s) in srcs.iter().enumerate() {
        ours.push_source(i as u32, s).unwrap();
    }
    let t0 = thread_cpu();
    let mut sink = 0u8;
    for _ in 0..repairs {
        sink ^= ours.repair(1).unwrap()[0].data[7];
    }
    let t_ours = (thread_cpu() - t0).as_secs_f64();
    let c = RlcConfig::new(1400, w, Field::Gf256).unwrap();
    let mut theirs =
        Box::new(cu_fec::RlcEncoder::<1400, 256>::new(c, EncodingSymbolId::new(0)).unwrap());
    for s in &srcs {
        let mut b = vec![0u8; 1400];
        b[2..].copy_from_slice(s);
        theirs.push_source(&b).unwrap();
    }
    let mut out = vec![0u8; 1400];
    let t0 = thread_cpu();
    for i in 0..repairs {
        theirs
            .encode_repair(
                RepairParameters::new(i as u16, DensityThreshold::FULL),
                &mut out,
            )
            .unwrap();
        sink ^= out[7];
    }
    let t_theirs = (thread_cpu() - t0).as_secs_f64();
    std::hint::black_box(sink);
    let bits = (repairs * w * 1400 * 8) as f64;
    (bits / t_ours / 1e9, bits / t_theirs / 1e9)
}

fn main() {
    let a = Args::parse();
    let channels = chosen_channels(&a);
    let n = a.delay_symbols;
    println!(
        "delay bound {n} wire symbols ({:.0} ms at 5 Mb/s, 1400 B); {} sources per recovery run, seed {}",
        n as f64 * SLOT_MS,
        a.symbols,
        a.seed
    );
    println!();
    println!(
        "| channel | ratio (n/k) | k | code | link loss | residual | recovered delay median / p99 / max (symbols) | max delay at 5 Mb/s (ms) | enc+dec Gb/s (1400 B, median of {}) |",
        a.runs
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let th = std::thread::Builder::new().stack_size(64 << 20);
    th.spawn(move || {
        recovery_table(&a, channels);
        if a.no_cpu {
            return;
        }
        controller_table();
        peer_table();
    })
    .unwrap()
    .join()
    .unwrap();
}

/// One wire symbol's time at 5 Mb/s, 1400 B, in ms.
const SLOT_MS: f64 = 1400.0 * 8.0 / 5e6 * 1e3;

/// The loss channels `--channels` names, in table order; exits on a bad `--channels` or
/// `--ratios`.
fn chosen_channels(a: &Args) -> Vec<(&'static str, LossModel)> {
    let n = a.delay_symbols;
    let channels = [
        ("iid 2 %", LossModel::iid(0.02)),
        ("iid 10 %", LossModel::iid(0.10)),
        ("GE 3 %, burst 10", LossModel::bursty(0.03, 10.0)),
    ];
    for c in &a.channels {
        if !["iid2", "iid10", "ge"].contains(&c.as_str()) {
            eprintln!("error: --channels: {c:?} is not one of iid2, iid10, ge");
            std::process::exit(1);
        }
    }
    for &q in &a.ratios {
        if !(q > 1.0 && q <= 4.0) || (n as f64 / q).round() < 1.0 {
            eprintln!("error: --ratios: {q} is not in (1, 4] with at least one source per block");
            std::process::exit(1);
        }
    }
    channels
        .into_iter()
        .zip(["iid2", "iid10", "ge"])
        .filter(|(_, id)| a.channels.iter().any(|c| c == id))
        .map(|(c, _)| c)
        .collect()
}

/// The recovery table's rows: per channel and ratio, RS and RLC (recovery, delay, CPU) and
/// RaptorQ (CPU only).
fn recovery_table(a: &Args, channels: Vec<(&str, LossModel)>) {
    let n = a.delay_symbols;
    let small = pool(0, 64, a.seed);
    let full = pool(1400, 1400, a.seed);
    for (name, model) in channels {
        for &q in &a.ratios {
            let k = (n as f64 / q).round() as usize;
            for code in [Code::Rs, Code::Rlc] {
                code_row(a, name, model, code, k, (&small, &full));
            }
            if a.no_cpu {
                continue;
            }
            let mut rq = Vec::new();
            for i in 0..a.runs {
                let (b, t) = run_raptorq(model, k, n, a.cpu_symbols, a.seed + 200 + i as u64);
                rq.push(b as f64 * 8.0 / t / 1e9);
            }
            println!(
                "| {name} | {:.3} | {k} | RaptorQ | | (near-MDS, as RS) | | | {:.2}  |",
                n as f64 / k as f64,
                median(rq)
            );
        }
    }
}

/// One code's row: a recovery run on the small payloads, then (unless `--no-cpu`) the CPU
/// runs on the full ones.
fn code_row(
    a: &Args,
    name: &str,
    model: LossModel,
    code: Code,
    k: usize,
    (small, full): (&[Vec<u8>], &[Vec<u8>]),
) {
    let n = a.delay_symbols;
    let mut o = run(code, model, k, n, a.symbols, small, a.seed);
    let mut gbps = vec![f64::NAN];
    for i in 0..if a.no_cpu { 0 } else { a.runs } {
        if i == 0 {
            gbps.clear();
        }
        let t0 = thread_cpu();
        let c = run(
            code,
            model,
            k,
            n,
            a.cpu_symbols,
            full,
            a.seed + 100 + i as u64,
        );
        let t = (thread_cpu() - t0).as_secs_f64();
        gbps.push(c.bytes as f64 * 8.0 / t / 1e9);
    }
    let name_c = if code == Code::Rs { "RS" } else { "RLC" };
    let mx = o.delays.iter().copied().max().unwrap_or(0);
    let line = format!(
        "| {name} | {:.3} | {k} | {name_c} | {:.4} | {:.2e} | {} / {} / {mx} | {:.0} | {} |",
        n as f64 / k as f64,
        o.lost as f64 / o.sent as f64,
        o.residual(),
        pct(&mut o.delays, 0.5),
        pct(&mut o.delays, 0.99),
        mx as f64 * SLOT_MS,
        if a.no_cpu {
            "–".to_string()
        } else {
            format!("{:.2}", median(gbps))
        },
    );
    println!("{line}");
}

/// What the strength controller chooses on the same models.
fn controller_table() {
    println!();
    println!(
        "Strength controller (aerotp_erasure::control) on the same models, 500 ms, 5 Mb/s, 1400 B:"
    );
    println!();
    println!(
        "| channel | target | block n | sources k | repairs r | ratio | predicted residual (block code) | meets |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, loss, burst, target) in [
        ("iid 2 %", 0.02, 1.0 / 0.98, 1e-4),
        ("iid 10 %", 0.10, 1.0 / 0.9, 1e-4),
        ("GE 3 %, burst 10", 0.03, 10.0, 1e-3),
        ("clean", 0.0, 1.0, 1e-4),
    ] {
        let c = StrengthController::new(ControllerConfig {
            target_residual: target,
            ..Default::default()
        })
        .unwrap();
        let s = c
            .choose(&LinkReport {
                rate_bps: 5e6,
                symbol_bytes: 1400,
                loss_rate: loss,
                mean_burst: burst,
            })
            .unwrap();
        println!(
            "| {name} | {target:.0e} | {} | {} | {} | {:.3} | {:.2e} | {} |",
            s.block, s.sources, s.repairs, s.ratio, s.predicted_residual, s.meets_target
        );
    }
}

/// This crate's RLC repair encoding against cu-fec's (with `--features cu-fec`).
fn peer_table() {
    #[cfg(feature = "cu-fec")]
    {
        println!();
        println!(
            "| window (1400 B) | this crate's RLC repair encoding Gb/s | cu-fec 1.3 Gb/s | ratio |"
        );
        println!("|---|---|---|---|");
        for w in [50usize, 200] {
            let (ours, theirs) = rlc_peer(w, 2000 / (w / 50));
            println!("| {w} | {ours:.2} | {theirs:.2} | {:.1}x |", ours / theirs);
        }
    }
    #[cfg(not(feature = "cu-fec"))]
    println!("\n(cu-fec comparison skipped: run with `--features cu-fec`)");
}
