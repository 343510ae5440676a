//! Codec choice by measurement: this crate's RS codec, the `reed-solomon` crate (0.2) and CCSDS
//! LDPC codes from `labrador-ldpc` (hard-decision decoding), on 1500-byte TPDUs with independent
//! bit errors. Prints Markdown tables (recorded in docs/fec.md).
//!
//! Run: `cargo run --release -p aerotp-fec --example fec_compare [-- --trials N --ldpc-trials N]`

use std::hint::black_box;
use std::panic::{catch_unwind, AssertUnwindSafe};

use aerotp_fec::auto::tpdu_failure_probability;
use aerotp_fec::{decode, encode, max_protected_len, Layout};
use aerotp_testkit::flip_bits;
use labrador_ldpc::LDPCCode;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const MTU: usize = 1500;
const BERS: [f64; 6] = [1e-5, 3.5e-5, 1e-4, 3e-4, 1e-3, 3e-3];
const RS_PARITIES: [u8; 8] = [0, 2, 4, 6, 8, 12, 16, 32];

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time of this thread in seconds: the machine is shared, so wall-clock time would measure
/// the other tenants too.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Stopwatch on thread CPU time.
struct Cpu(f64);
impl Cpu {
    fn now() -> Cpu {
        Cpu(cpu_seconds())
    }
    fn secs(&self) -> f64 {
        cpu_seconds() - self.0
    }
}

/// Failure rate, or "0/N" when none was seen.
fn rate(fails: usize, trials: usize) -> String {
    if fails == 0 {
        format!("0/{trials}")
    } else {
        format!("{:.1e}", fails as f64 / trials as f64)
    }
}

fn mbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

/// Measures encode and decode (with `nerr` symbol errors in codeword 0.. spread over codewords)
/// throughput in MB/s of protected bytes, and decode µs per TPDU.
fn time_codec<E, D>(
    l: usize,
    iters: usize,
    mut enc: E,
    mut dec: D,
    corrupt: &dyn Fn(&mut [u8]),
) -> (f64, f64, f64)
where
    E: FnMut(&[u8]) -> Vec<u8>,
    D: FnMut(&mut [u8]) -> bool,
{
    let mut rng = Pcg64::seed_from_u64(99);
    let data: Vec<u8> = (0..l).map(|_| rng.gen()).collect();
    let t0 = Cpu::now();
    let mut sent = Vec::new();
    for _ in 0..iters {
        sent = enc(black_box(&data));
    }
    let enc_s = t0.secs();
    let mut rx = sent.clone();
    corrupt(&mut rx);
    let t0 = Cpu::now();
    for _ in 0..iters {
        let mut b = rx.clone();
        assert!(dec(black_box(&mut b)));
    }
    let dec_s = t0.secs();
    (
        mbps(l * iters, enc_s),
        mbps(l * iters, dec_s),
        dec_s / iters as f64 * 1e6,
    )
}

/// Interleaved encode with the `reed-solomon` crate (same layout and code definition).
fn crate_encode(p: u8, data: &[u8]) -> Vec<u8> {
    let lay = Layout::for_protected(data.len(), p).unwrap();
    let m = lay.codewords;
    let enc = reed_solomon::Encoder::new(p as usize);
    let mut out = data.to_vec();
    out.resize(lay.datagram_len(), 0);
    let mut cw = Vec::with_capacity(255);
    for j in 0..m {
        cw.clear();
        cw.extend(data[j..].iter().step_by(m));
        let b = enc.encode(&cw);
        let at = lay.protected_len + j * p as usize;
        out[at..at + p as usize].copy_from_slice(b.ecc());
    }
    out
}

/// Interleaved decode with the `reed-solomon` crate; Ok(true) = decoded, Err = it panicked.
fn crate_decode(p: u8, dg: &mut [u8]) -> Result<bool, String> {
    let lay = Layout::for_datagram(dg.len(), p).map_err(|e| e.to_string())?;
    let m = lay.codewords;
    let l = lay.protected_len;
    let dec = reed_solomon::Decoder::new(p as usize);
    let mut ok = true;
    for j in 0..m {
        let mut cw: Vec<u8> = dg[j..l].iter().step_by(m).copied().collect();
        let at = l + j * p as usize;
        cw.extend_from_slice(&dg[at..at + p as usize]);
        let r = catch_unwind(AssertUnwindSafe(|| dec.correct_err_count(&cw, None)))
            .map_err(|_| format!("panicked (p={p}, n={})", cw.len()))?;
        match r {
            Ok((buf, _)) => {
                for (s, &v) in buf.data().iter().enumerate() {
                    dg[j + s * m] = v;
                }
                dg[at..at + p as usize].copy_from_slice(buf.ecc());
            }
            Err(_) => ok = false,
        }
    }
    Ok(ok)
}

/// Puts `per_cw` symbol errors into every codeword of the layout.
fn corrupt_symbols(lay: Layout, per_cw: usize) -> impl Fn(&mut [u8]) {
    move |dg: &mut [u8]| {
        for j in 0..lay.codewords {
            let k = lay.data_symbols(j);
            for e in 0..per_cw {
                // alternate data and parity symbols
                let idx = if e % 2 == 0 {
                    j + ((e * 31) % k) * lay.codewords
                } else {
                    lay.protected_len + j * lay.parity as usize + (e * 7) % lay.parity as usize
                };
                dg[idx] ^= 0x5a;
            }
        }
    }
}

fn rs_section(trials: usize) {
    println!("### Reed–Solomon (this crate), MTU {MTU} B\n");
    println!(
        "Residual TPDU error rate: measured failures / trials (wrong output or decode error), with"
    );
    println!("the analytic prediction in brackets. Throughput in MB/s of protected bytes per");
    println!(
        "second of thread CPU time; decode time for a TPDU with 2 symbol errors per codeword (1 for p=2),\nthe engine's usual case.\n"
    );
    print!("| p | N words | L (B) | T (B) | overhead (T-L)/T |");
    for b in BERS {
        print!(" fail @ {b:e} |");
    }
    println!(" enc MB/s | dec MB/s | dec µs/TPDU |");
    print!("|---|---|---|---|---|");
    for _ in BERS {
        print!("---|");
    }
    println!("---|---|---|");
    for &p in &RS_PARITIES {
        let l = max_protected_len(MTU, p);
        let lay = Layout::for_protected(l, p).unwrap();
        let t = lay.datagram_len();
        print!(
            "| {p} | {} | {l} | {t} | {:.1} % |",
            aerotp_fec::words_for_parity(p, MTU),
            100.0 * (t - l) as f64 / t as f64
        );
        let mut rng = Pcg64::seed_from_u64(p as u64);
        let data: Vec<u8> = (0..l).map(|_| rng.gen()).collect();
        let mut sent = data.clone();
        encode(p, &mut sent).unwrap();
        for ber in BERS {
            let mut fails = 0;
            for _ in 0..trials {
                let mut rx = sent.clone();
                if flip_bits(&mut rx, ber, &mut rng) == 0 {
                    continue;
                }
                let ok = if p == 0 {
                    false
                } else {
                    decode(p, &mut rx).is_ok() && rx[..l] == data[..]
                };
                if !ok {
                    fails += 1;
                }
            }
            let pred = tpdu_failure_probability(ber, t, p);
            print!(" {} [{pred:.1e}] |", rate(fails, trials));
        }
        if p == 0 {
            println!(" – | – | – |");
            continue;
        }
        let per_cw = if p >= 4 { 2 } else { 1 };
        let (e, d, us) = time_codec(
            l,
            20000,
            |d| {
                let mut v = d.to_vec();
                encode(p, &mut v).unwrap();
                v
            },
            |b| decode(p, b).is_ok(),
            &corrupt_symbols(lay, per_cw),
        );
        println!(" {e:.0} | {d:.0} | {us:.1} |");
    }
    println!();
}

fn crate_section() {
    crate_speed_table();
    crate_edge_case_table();
}

/// The `reed-solomon` crate against this one on the same code and layout: identical parity,
/// encode and decode speeds.
fn crate_speed_table() {
    println!("### `reed-solomon` crate 0.2.1 vs this crate (same code, same layout)\n");
    println!("| p | parity identical | crate enc MB/s | ours enc MB/s | crate dec MB/s | ours dec MB/s |");
    println!("|---|---|---|---|---|---|");
    for p in [2u8, 8, 16, 32] {
        let l = max_protected_len(MTU, p);
        let lay = Layout::for_protected(l, p).unwrap();
        let mut rng = Pcg64::seed_from_u64(5);
        let data: Vec<u8> = (0..l).map(|_| rng.gen()).collect();
        let mut ours = data.clone();
        encode(p, &mut ours).unwrap();
        let same = crate_encode(p, &data) == ours;
        let per_cw = if p >= 4 { 2 } else { 1 };
        let corrupt = corrupt_symbols(lay, per_cw);
        let (ce, cd, _) = time_codec(
            l,
            5000,
            |d| crate_encode(p, d),
            |b| crate_decode(p, b) == Ok(true),
            &corrupt,
        );
        let (oe, od, _) = time_codec(
            l,
            5000,
            |d| {
                let mut v = d.to_vec();
                encode(p, &mut v).unwrap();
                v
            },
            |b| decode(p, b).is_ok(),
            &corrupt,
        );
        println!("| {p} | {same} | {ce:.0} | {oe:.0} | {cd:.0} | {od:.0} |");
    }
    println!();
}

/// Edge cases of the code (errors only in parity, shortened and odd codes, exactly `t` and
/// one more than `t` errors): (name, parity bytes, data bytes, error positions).
fn edge_cases() -> Vec<(&'static str, u8, usize, Vec<usize>)> {
    vec![
        (
            "p=8, 4 errors all in parity",
            8,
            100,
            vec![100, 101, 105, 107],
        ),
        ("p=8, shortened k=10, 4 errors", 8, 10, vec![0, 3, 9, 17]),
        ("p=7 (odd), 3 errors", 7, 200, vec![1, 100, 205]),
        (
            "p=170, 85 errors",
            170,
            85,
            (0..85).map(|i| i * 3).collect(),
        ),
        (
            "p=170, 86 errors (> t)",
            170,
            85,
            (0..86).map(|i| i * 2).collect(),
        ),
        (
            "p=254, 1 data byte, 127 errors",
            254,
            1,
            (0..127).map(|i| i * 2).collect(),
        ),
        (
            "p=254, 1 data byte, 128 errors (> t)",
            254,
            1,
            (0..128).map(|i| i * 2).collect(),
        ),
        (
            "p=16, 9 errors (> t)",
            16,
            200,
            (0..9).map(|i| i * 20).collect(),
        ),
    ]
}

/// What each decoder makes of [`edge_cases`]: corrected, refused, miscorrected or panicked.
fn crate_edge_case_table() {
    println!("Edge cases (one codeword unless said; \"ok\" = corrected to the sent word):\n");
    println!("| case | reed-solomon crate | this crate |");
    println!("|---|---|---|");
    // The crate's panics are caught and reported in the table; keep their messages out.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for (name, p, k, errs) in edge_cases() {
        let mut rng = Pcg64::seed_from_u64(k as u64);
        let data: Vec<u8> = (0..k).map(|_| rng.gen()).collect();
        let mut sent = data.clone();
        encode(p, &mut sent).unwrap();
        let mut rx = sent.clone();
        for &e in &errs {
            rx[e] ^= rng.gen_range(1..=255u8);
        }
        let describe = |r: Result<bool, String>, out: &[u8]| match r {
            Err(e) => e,
            Ok(false) => "error reported".to_string(),
            Ok(true) if out == &sent[..] => "ok".to_string(),
            Ok(true) => "miscorrected".to_string(),
        };
        let mut a = rx.clone();
        let ra = crate_decode(p, &mut a);
        let ca = describe(ra, &a);
        let mut b = rx.clone();
        let rb = decode(p, &mut b).map(|_| true).or_else(|e| match e {
            aerotp_fec::FecError::Uncorrectable { .. } => Ok(false),
            e => Err(e.to_string()),
        });
        let cb = describe(rb, &b);
        println!("| {name} | {ca} | {cb} |");
    }
    std::panic::set_hook(hook);
    println!();
}

#[derive(Clone, Copy)]
enum LdpcDecoder {
    BitFlip,
    MinSum,
}

fn ldpc_section(trials: usize) {
    println!(
        "### CCSDS LDPC (labrador-ldpc 1.2), hard decisions, as many codewords as fit {MTU} B\n"
    );
    println!(
        "Failures / trials (TPDU fails if any codeword fails); no analytic column. Decode time"
    );
    println!("per TPDU at BER 1e-4 (thread CPU time); throughput in MB/s of protected bytes.\n");
    print!("| code | decoder | rate | cw/TPDU | L (B) | T (B) | overhead |");
    for b in BERS {
        print!(" fail @ {b:e} |");
    }
    println!(" enc MB/s | dec MB/s | dec µs/TPDU |");
    print!("|---|---|---|---|---|---|---|");
    for _ in BERS {
        print!("---|");
    }
    println!("---|---|---|");
    let codes = [
        (LDPCCode::TM1280, "TM1280"),
        (LDPCCode::TM1536, "TM1536"),
        (LDPCCode::TM2048, "TM2048"),
        (LDPCCode::TC512, "TC512"),
    ];
    for (code, name) in codes {
        for dec in [LdpcDecoder::BitFlip, LdpcDecoder::MinSum] {
            ldpc_row(code, name, dec, trials);
        }
    }
    println!();
}

/// A TPDU of as many codewords of `code` as fit the MTU, with the decoder's working buffers.
struct LdpcTpdu {
    code: LDPCCode,
    dec: LdpcDecoder,
    /// Codewords per TPDU, and each one's length and data length in bytes.
    cws: usize,
    nb: usize,
    kb: usize,
    out: Vec<u8>,
    wbf: Vec<u8>,
    llrs: Vec<i8>,
    wms: Vec<i8>,
    wms8: Vec<u8>,
}

impl LdpcTpdu {
    fn new(code: LDPCCode, dec: LdpcDecoder) -> LdpcTpdu {
        let nb = code.n() / 8;
        LdpcTpdu {
            code,
            dec,
            cws: MTU / nb,
            nb,
            kb: code.k() / 8,
            out: vec![0u8; code.output_len()],
            wbf: vec![0u8; code.decode_bf_working_len()],
            llrs: vec![0i8; code.n()],
            wms: vec![0i8; code.decode_ms_working_len()],
            wms8: vec![0u8; code.decode_ms_working_u8_len()],
        }
    }

    /// Protected bytes per TPDU.
    fn data_len(&self) -> usize {
        self.cws * self.kb
    }

    /// Bytes on the wire per TPDU.
    fn wire_len(&self) -> usize {
        self.cws * self.nb
    }

    fn encode(&self, data: &[u8]) -> Vec<u8> {
        let (nb, kb) = (self.nb, self.kb);
        let mut out = vec![0u8; self.wire_len()];
        for c in 0..self.cws {
            self.code
                .copy_encode(&data[c * kb..(c + 1) * kb], &mut out[c * nb..(c + 1) * nb]);
        }
        out
    }

    /// Whether every codeword of `rx` decodes to its part of `data`.
    fn decodes(&mut self, rx: &[u8], data: &[u8]) -> bool {
        let (nb, kb) = (self.nb, self.kb);
        let mut all = true;
        for c in 0..self.cws {
            let cw = &rx[c * nb..(c + 1) * nb];
            let ok = match self.dec {
                LdpcDecoder::BitFlip => self.code.decode_bf(cw, &mut self.out, &mut self.wbf, 50).0,
                LdpcDecoder::MinSum => {
                    self.code.hard_to_llrs(cw, &mut self.llrs);
                    self.code
                        .decode_ms(&self.llrs, &mut self.out, &mut self.wms, &mut self.wms8, 50)
                        .0
                }
            };
            all &= ok && self.out[..kb] == data[c * kb..(c + 1) * kb];
        }
        all
    }
}

/// One code and decoder: its shape, TPDU failure rates at each BER, encode and decode speed.
fn ldpc_row(code: LDPCCode, name: &str, dec: LdpcDecoder, trials: usize) {
    let mut tpdu = LdpcTpdu::new(code, dec);
    let (cws, l, t) = (tpdu.cws, tpdu.data_len(), tpdu.wire_len());
    print!(
        "| {name} | {} | {}/{} | {cws} | {l} | {t} | {:.1} % |",
        match dec {
            LdpcDecoder::BitFlip => "bit-flip",
            LdpcDecoder::MinSum => "min-sum",
        },
        code.k(),
        code.n(),
        100.0 * (t - l) as f64 / t as f64
    );
    let mut rng = Pcg64::seed_from_u64(code.n() as u64);
    let data: Vec<u8> = (0..l).map(|_| rng.gen()).collect();
    let sent = tpdu.encode(&data);
    for ber in BERS {
        let mut fails = 0;
        for _ in 0..trials {
            let mut rx = sent.clone();
            if flip_bits(&mut rx, ber, &mut rng) == 0 {
                continue;
            }
            if !tpdu.decodes(&rx, &data) {
                fails += 1;
            }
        }
        print!(" {} |", rate(fails, trials));
    }
    let iters = 300;
    let t0 = Cpu::now();
    for _ in 0..iters {
        black_box(tpdu.encode(black_box(&data)));
    }
    let enc_s = t0.secs();
    let mut rx = sent.clone();
    flip_bits(&mut rx, 1e-4, &mut rng);
    let t0 = Cpu::now();
    for _ in 0..iters {
        black_box(tpdu.decodes(black_box(&rx), &data));
    }
    let dec_s = t0.secs();
    println!(
        " {:.1} | {:.1} | {:.0} |",
        mbps(l * iters, enc_s),
        mbps(l * iters, dec_s),
        dec_s / iters as f64 * 1e6
    );
}

fn main() {
    let trials = arg("--trials", 20000);
    let ldpc_trials = arg("--ldpc-trials", 2000);
    println!("## fec_compare: trials {trials} (RS), {ldpc_trials} (LDPC) per cell\n");
    rs_section(trials);
    crate_section();
    ldpc_section(ldpc_trials);
}
