//! `aerotp experiment seeds`: the papers' experiments that need no TCP, reproduced in the
//! simulator (CSV + PNG + a Markdown report), joined with the ns-3 TCP rows when present.
//!
//! Every point of every experiment is listed first; all (point, run) jobs then run on all
//! cores at once. Run i of every point uses `run_seed(seed, i)`: the series of one figure see
//! the same impairment streams (common random numbers), and the whole output is reproducible.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aerotp_proto::{FecSetting, Mode};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use crate::plot::{draw, Chart, Series};
use crate::run::{run_once, RunResult};
use crate::scenario::{Scenario, SimMode, Topology};
use crate::summary::{run_seed, summarize, Summary};

/// Options of `aerotp experiment seeds`.
#[derive(Debug, Clone)]
pub struct Options {
    pub out: PathBuf,
    pub runs: usize,
    /// Fewer points (for a smoke test); the same experiments.
    pub quick: bool,
    pub seed: u64,
    /// Where the ns-3 TCP CSVs are (joined if present).
    pub ns3_dir: PathBuf,
    /// Show a progress bar (only drawn when stderr is a terminal).
    pub progress: bool,
    /// The command line, for the report.
    pub command: String,
}

/// One sweep point.
#[derive(Debug, Clone)]
struct Point {
    experiment: &'static str,
    series: String,
    x: f64,
    scenario: Scenario,
}

/// One summarised row of a CSV (AeroTP/UDP from the simulator, or TCP from ns-3).
#[derive(Debug, Clone)]
pub struct Row {
    pub experiment: &'static str,
    pub series: String,
    pub source: &'static str,
    pub x: f64,
    pub ber: f64,
    pub loss: f64,
    pub delay_s: f64,
    pub runs: usize,
    pub complete_runs: usize,
    pub delivered_bytes: f64,
    pub goodput_bps: f64,
    pub goodput_ci95: f64,
    pub mean_delay_s: Option<f64>,
    pub overhead_bytes: f64,
    pub setup_delay_s: Option<f64>,
    pub setup_ci95: Option<f64>,
    pub fec_words: f64,
    pub retransmissions: f64,
}

impl Row {
    fn from_summary(p: &Point, s: &Summary) -> Row {
        Row {
            experiment: p.experiment,
            series: p.series.clone(),
            source: "aerotp-sim",
            x: p.x,
            ber: s.ber,
            loss: s.loss,
            delay_s: s.delay_s,
            runs: s.runs,
            complete_runs: s.complete_runs,
            delivered_bytes: s.delivered_bytes,
            goodput_bps: s.goodput_bps,
            goodput_ci95: s.goodput.ci95,
            mean_delay_s: s.mean_delay_s,
            overhead_bytes: s.overhead_bytes,
            setup_delay_s: s.setup_delay_s,
            setup_ci95: s.setup_delay.map(|d| d.ci95),
            fec_words: s.fec_words,
            retransmissions: s.retransmissions,
        }
    }
}

/// What `seeds` produced.
#[derive(Debug)]
pub struct Outcome {
    pub rows: Vec<Row>,
    pub files: Vec<PathBuf>,
    pub wall: Duration,
    pub runs_total: usize,
    pub report: String,
    /// Each headline figure with whether the simulator meets it.
    pub checks: Vec<(String, bool)>,
}

const BERS: [f64; 7] = [0.0, 1e-6, 1e-5, 2.5e-5, 5e-5, 7.5e-5, 1e-4];
const BERS_QUICK: [f64; 3] = [0.0, 1e-5, 1e-4];

/// The BERs the simulator ran (ns-3 rows may add others), ascending, once each.
fn simulated_bers(rows: &[&Row]) -> Vec<f64> {
    let mut bers: Vec<f64> = rows
        .iter()
        .filter(|r| r.source == "aerotp-sim")
        .map(|r| r.ber)
        .collect();
    bers.sort_by(f64::total_cmp);
    bers.dedup();
    bers
}

/// A series of AeroTP runs named as the tables show it: `reliable`, `reliable, FEC auto`,
/// `quasi-reliable, FEC 96 words`.
fn aero_series(mode: Mode, fec: FecSetting) -> (String, SimMode, Option<FecSetting>) {
    let name = match fec {
        FecSetting::Off => mode.name().to_string(),
        FecSetting::Auto => format!("{}, FEC auto", mode.name()),
        FecSetting::Words(w) => format!("{}, FEC {w} words", mode.name()),
        FecSetting::Parity(p) => format!("{}, FEC p{p}", mode.name()),
    };
    (name, aero(mode), Some(fec))
}

fn aero(mode: Mode) -> SimMode {
    SimMode::Aero(mode)
}

fn fec_label(f: FecSetting) -> String {
    match f {
        FecSetting::Off => "off".into(),
        FecSetting::Auto => "auto".into(),
        FecSetting::Words(w) => format!("{w} words"),
        FecSetting::Parity(p) => format!("p{p}"),
    }
}

fn points(o: &Options) -> Vec<Point> {
    let bers: &[f64] = if o.quick { &BERS_QUICK } else { &BERS };
    let base = Scenario::default();
    let mut v = Vec::new();
    // 1. Set-up delay vs packet loss: two nodes, 10 Mb/s, 5 ms (seeds 000/002 §IV-A).
    let losses: &[f64] = if o.quick {
        &[0.0, 0.2]
    } else {
        &[0.0, 0.05, 0.1, 0.15, 0.2]
    };
    for &loss in losses {
        for mode in [Mode::Reliable, Mode::HybridNackMack] {
            v.push(Point {
                experiment: "setup",
                series: mode.name().into(),
                x: loss,
                scenario: Scenario {
                    mode: aero(mode),
                    size: 100_000,
                    topology: Topology::TwoNode,
                    ..base.clone()
                }
                .with_rate(10_000_000)
                .with_links(|l| {
                    l.loss = loss;
                    l.delay = Duration::from_millis(5);
                }),
            });
        }
    }
    // 2. FEC strength in quasi-reliable mode (seeds 000/002 §IV-C).
    let words: &[u16] = if o.quick {
        &[0, 32, 96, 256]
    } else {
        &[0, 16, 32, 64, 96, 128, 192, 256]
    };
    let fecs: Vec<FecSetting> = words
        .iter()
        .map(|&w| {
            if w == 0 {
                FecSetting::Off
            } else {
                FecSetting::Words(w)
            }
        })
        .chain([FecSetting::Auto])
        .collect();
    for &f in &fecs {
        for &ber in bers {
            v.push(Point {
                experiment: "fec",
                series: format!("FEC {}", fec_label(f)),
                x: ber,
                scenario: Scenario {
                    mode: aero(Mode::QuasiReliable),
                    fec: Some(f),
                    ..base.clone()
                }
                .with_links(|l| l.ber = ber),
            });
        }
    }
    // 3. MACK aggregation, reliable mode (seed 001 §IV-E).
    let macks: &[u16] = if o.quick {
        &[1, 32, 365]
    } else {
        &[1, 8, 32, 64, 128, 200, 256, 365]
    };
    for &m in macks {
        for &ber in bers {
            v.push(Point {
                experiment: "mack",
                series: format!("MACK {m}"),
                x: ber,
                scenario: Scenario {
                    mode: aero(Mode::Reliable),
                    mack: m,
                    fec: Some(FecSetting::Off),
                    ..base.clone()
                }
                .with_links(|l| l.ber = ber),
            });
        }
    }
    for &ber in bers {
        v.push(Point {
            experiment: "mack",
            series: "MACK 32, FEC auto".into(),
            x: ber,
            scenario: Scenario {
                mode: aero(Mode::Reliable),
                mack: 32,
                fec: Some(FecSetting::Auto),
                ..base.clone()
            }
            .with_links(|l| l.ber = ber),
        });
    }
    // 4. The modes over BER (seeds 000/002 §IV-D, 001 §IV-F).
    let modes = [
        aero_series(Mode::Reliable, FecSetting::Off),
        aero_series(Mode::Reliable, FecSetting::Auto),
        aero_series(Mode::QuasiReliable, FecSetting::Words(96)),
        aero_series(Mode::QuasiReliable, FecSetting::Auto),
        aero_series(Mode::HybridNack, FecSetting::Auto),
        aero_series(Mode::HybridNackMack, FecSetting::Auto),
        ("udp".into(), SimMode::Udp, None),
    ];
    for (name, mode, fec) in &modes {
        for &ber in bers {
            v.push(Point {
                experiment: "modes",
                series: name.clone(),
                x: ber,
                scenario: Scenario {
                    mode: *mode,
                    fec: *fec,
                    ..base.clone()
                }
                .with_links(|l| l.ber = ber),
            });
        }
    }
    // 5. Link delay 0-500 ms (seed 004), at the BERs of the ns-3 delay sweep.
    let delays: &[u64] = if o.quick {
        &[0, 100, 500]
    } else {
        &[0, 10, 50, 100, 200, 300, 500]
    };
    let delay_bers: &[f64] = if o.quick { &[1e-4] } else { &[0.0, 1e-5, 1e-4] };
    let delay_modes = [
        aero_series(Mode::Reliable, FecSetting::Auto),
        aero_series(Mode::QuasiReliable, FecSetting::Auto),
        aero_series(Mode::HybridNackMack, FecSetting::Auto),
        ("udp".into(), SimMode::Udp, None),
    ];
    for &ber in delay_bers {
        for (name, mode, fec) in &delay_modes {
            for &d in delays {
                v.push(Point {
                    experiment: "delay",
                    series: name.clone(),
                    x: d as f64 / 1000.0,
                    scenario: Scenario {
                        mode: *mode,
                        fec: *fec,
                        ..base.clone()
                    }
                    .with_links(|l| {
                        l.ber = ber;
                        l.delay = Duration::from_millis(d);
                    }),
                });
            }
        }
    }
    v
}

/// ns-3 TCP rows of a CSV made by bench/ns3/tcp_lossy.py, averaged per (protocol, ber, delay).
fn ns3_rows(path: &Path, experiment: &'static str) -> anyhow::Result<Vec<Row>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .with_context(|| format!("{}: no column {name}", path.display()))
    };
    let (cp, cb, cd) = (col("protocol")?, col("ber")?, col("delay_s")?);
    let (cdel, cg, cmd, co, cc) = (
        col("delivered_bytes")?,
        col("goodput_bps")?,
        col("mean_delay_s")?,
        col("overhead_bytes")?,
        col("complete")?,
    );
    type Acc = (usize, usize, f64, f64, f64, usize, f64, Vec<f64>);
    let mut groups: BTreeMap<(String, u64, u64), Acc> = BTreeMap::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok());
        let (Some(ber), Some(delay)) = (num(cb), num(cd)) else {
            continue;
        };
        let e = groups
            .entry((f[cp].to_owned(), ber.to_bits(), delay.to_bits()))
            .or_insert((0, 0, 0.0, 0.0, 0.0, 0, 0.0, Vec::new()));
        e.0 += 1;
        e.1 += usize::from(num(cc) == Some(1.0));
        e.2 += num(cdel).unwrap_or(0.0);
        e.3 += num(co).unwrap_or(0.0);
        if let Some(d) = num(cmd) {
            e.5 += 1;
            e.6 += d;
        }
        e.7.push(num(cg).unwrap_or(0.0));
    }
    Ok(groups
        .into_iter()
        .map(|((proto, ber, delay), (n, c, del, ovh, _, nd, sd, g))| {
            let ber = f64::from_bits(ber);
            let delay = f64::from_bits(delay);
            let stat = crate::summary::Stat::of(&g).expect("non-empty group");
            Row {
                experiment,
                series: format!("{proto} (ns-3)"),
                source: "ns-3",
                x: if experiment == "delay" { delay } else { ber },
                ber,
                loss: 0.0,
                delay_s: delay,
                runs: n,
                complete_runs: c,
                delivered_bytes: del / n as f64,
                goodput_bps: stat.mean,
                goodput_ci95: stat.ci95,
                mean_delay_s: (nd > 0).then(|| sd / nd as f64),
                overhead_bytes: ovh / n as f64,
                setup_delay_s: None,
                setup_ci95: None,
                fec_words: 0.0,
                retransmissions: 0.0,
            }
        })
        .collect())
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| format!("{x}"))
}

fn write_csv(path: &Path, rows: &[&Row]) -> anyhow::Result<()> {
    let mut s = String::from(
        "experiment,series,source,x,ber,loss,delay_s,runs,complete_runs,delivered_bytes,goodput_bps,goodput_ci95,mean_delay_s,overhead_bytes,setup_delay_s,setup_ci95,fec_words,retransmissions\n",
    );
    for r in rows {
        writeln!(
            s,
            "{},\"{}\",{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{},{:.1},{},{},{:.2},{:.2}",
            r.experiment,
            r.series,
            r.source,
            r.x,
            r.ber,
            r.loss,
            r.delay_s,
            r.runs,
            r.complete_runs,
            r.delivered_bytes,
            r.goodput_bps,
            r.goodput_ci95,
            opt(r.mean_delay_s),
            r.overhead_bytes,
            opt(r.setup_delay_s),
            opt(r.setup_ci95),
            r.fec_words,
            r.retransmissions
        )?;
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// Series of one experiment, in the order they first appear, each point (x, metric(row)).
fn series(rows: &[&Row], metric: &dyn Fn(&Row) -> Option<f64>) -> Vec<Series> {
    let mut order: Vec<String> = Vec::new();
    for r in rows {
        if !order.contains(&r.series) {
            order.push(r.series.clone());
        }
    }
    order
        .into_iter()
        .map(|name| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.series == name)
                .filter_map(|r| metric(r).map(|m| (r.x, m)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let peer = rows.iter().any(|r| r.series == name && r.source == "ns-3");
            Series { name, points, peer }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

struct Fig<'a> {
    file: &'a str,
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    metric: &'a dyn Fn(&Row) -> Option<f64>,
    legend_low: bool,
}

fn figure(
    out: &Path,
    rows: &[&Row],
    f: &Fig,
    x_sci: bool,
    files: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let path = out.join(f.file);
    draw(
        &path,
        &Chart {
            title: f.title,
            x_label: f.x_label,
            y_label: f.y_label,
            series: series(rows, f.metric),
            y_from_zero: true,
            x_sci,
            legend_low: f.legend_low,
        },
    )
    .with_context(|| format!("drawing {}", path.display()))?;
    files.push(path);
    Ok(())
}

fn mbps(r: &Row) -> Option<f64> {
    Some(r.goodput_bps / 1e6)
}
fn delay_ms(r: &Row) -> Option<f64> {
    r.mean_delay_s.map(|d| d * 1e3)
}
fn overhead_kb(r: &Row) -> Option<f64> {
    Some(r.overhead_bytes / 1e3)
}
fn delivered_kb(r: &Row) -> Option<f64> {
    Some(r.delivered_bytes / 1e3)
}

/// Runs every experiment, writes CSVs, PNGs and `report.md` into `o.out`.
pub fn seeds(o: &Options) -> anyhow::Result<Outcome> {
    anyhow::ensure!(o.runs > 0, "runs must be at least 1");
    std::fs::create_dir_all(&o.out).with_context(|| format!("creating {}", o.out.display()))?;
    let start = Instant::now();
    let pts = points(o);
    // The set-up experiment uses 5 x the runs (the papers ran 100).
    let runs_of = |p: &Point| {
        if p.experiment == "setup" {
            o.runs * 5
        } else {
            o.runs
        }
    };
    let jobs: Vec<(usize, usize)> = pts
        .iter()
        .enumerate()
        .flat_map(|(i, p)| (0..runs_of(p)).map(move |r| (i, r)))
        .collect();
    let bar = ProgressBar::with_draw_target(
        Some(jobs.len() as u64),
        if o.progress && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let results: Vec<RunResult> = jobs
        .par_iter()
        .map(|&(i, r)| {
            let res = run_once(&pts[i].scenario, run_seed(o.seed, r));
            bar.inc(1);
            res
        })
        .collect();
    bar.finish_and_clear();
    let mut per_point: Vec<Vec<RunResult>> = vec![Vec::new(); pts.len()];
    for (&(i, _), res) in jobs.iter().zip(results) {
        per_point[i].push(res);
    }
    let mut rows: Vec<Row> = pts
        .iter()
        .zip(per_point)
        .map(|(p, res)| Row::from_summary(p, &summarize(&p.scenario, o.seed, res)))
        .collect();
    // Cumulative delivery of one representative run (run 0) per FEC strength at BER 1e-4.
    let timeline_points: Vec<&Point> = pts
        .iter()
        .filter(|p| p.experiment == "fec" && p.x == 1e-4)
        .collect();
    let timelines: Vec<(String, RunResult)> = timeline_points
        .par_iter()
        .map(|p| {
            let s = Scenario {
                timeline: true,
                ..p.scenario.clone()
            };
            (p.series.clone(), run_once(&s, run_seed(o.seed, 0)))
        })
        .collect();
    let sim_runs = jobs.len() + timelines.len();
    // ns-3 TCP peers.
    let mut ns3_used = Vec::new();
    for (file, exp) in [("ber_sweep.csv", "modes"), ("delay_sweep.csv", "delay")] {
        let path = o.ns3_dir.join(file);
        if path.exists() {
            rows.extend(ns3_rows(&path, exp)?);
            ns3_used.push(path);
        }
    }

    let mut files = Vec::new();
    let out = o.out.as_path();
    let pick = |exp: &str| {
        rows.iter()
            .filter(|r| r.experiment == exp)
            .collect::<Vec<&Row>>()
    };
    for exp in ["setup", "fec", "mack", "modes", "delay"] {
        let path = out.join(format!("{exp}.csv"));
        write_csv(&path, &pick(exp))?;
        files.push(path);
    }
    let mut tl = String::from("series,time_s,delivered_bytes\n");
    for (name, r) in &timelines {
        for (t, b) in &r.timeline {
            writeln!(tl, "\"{name}\",{t},{b}")?;
        }
    }
    let tl_path = out.join("fec_timeline.csv");
    std::fs::write(&tl_path, tl)?;
    files.push(tl_path);

    // Figures.
    let ber_x = "bit-error rate";
    let setup_ms = |r: &Row| r.setup_delay_s.map(|d| d * 1e3);
    let setup_rows: Vec<&Row> = pick("setup");
    let mut setup_rows_pct: Vec<Row> = setup_rows.iter().map(|r| (*r).clone()).collect();
    for r in &mut setup_rows_pct {
        r.x *= 100.0;
    }
    let srp: Vec<&Row> = setup_rows_pct.iter().collect();
    figure(
        out,
        &srp,
        &Fig {
            file: "setup.png",
            title: "Set-up delay vs packet loss (two nodes, 10 Mb/s, 5 ms)",
            x_label: "packet loss (%)",
            y_label: "set-up delay (ms)",
            metric: &setup_ms,
            legend_low: true,
        },
        false,
        &mut files,
    )?;
    for (exp, name) in [
        ("fec", "quasi-reliable, FEC strength"),
        ("mack", "reliable, MACK aggregation"),
        ("modes", "transfer modes"),
    ] {
        let r = pick(exp);
        let g = format!("Goodput: {name} (1 MB, 5 Mb/s, 10 ms)");
        let d = format!("Mean one-way delay: {name}");
        let ov = format!("Overhead: {name}");
        figure(
            out,
            &r,
            &Fig {
                file: &format!("{exp}_goodput.png"),
                title: &g,
                x_label: ber_x,
                y_label: "goodput (Mb/s)",
                metric: &mbps,
                legend_low: true,
            },
            true,
            &mut files,
        )?;
        figure(
            out,
            &r,
            &Fig {
                file: &format!("{exp}_delay.png"),
                title: &d,
                x_label: ber_x,
                y_label: "mean delay (ms)",
                metric: &delay_ms,
                legend_low: false,
            },
            true,
            &mut files,
        )?;
        figure(
            out,
            &r,
            &Fig {
                file: &format!("{exp}_overhead.png"),
                title: &ov,
                x_label: ber_x,
                y_label: "overhead (kB, both directions)",
                metric: &overhead_kb,
                legend_low: false,
            },
            true,
            &mut files,
        )?;
    }
    let r = pick("modes");
    figure(
        out,
        &r,
        &Fig {
            file: "modes_delivered.png",
            title: "Data delivered of 1 MB: transfer modes",
            x_label: ber_x,
            y_label: "delivered (kB)",
            metric: &delivered_kb,
            legend_low: true,
        },
        true,
        &mut files,
    )?;
    let delay_rows = pick("delay");
    let dbers = simulated_bers(&delay_rows);
    for &ber in &dbers {
        let rs: Vec<Row> = delay_rows
            .iter()
            .filter(|r| r.ber == ber)
            .map(|r| Row {
                x: r.x * 1e3,
                ..(*r).clone()
            })
            .collect();
        let refs: Vec<&Row> = rs.iter().collect();
        let title = format!("Goodput vs link delay at BER {ber:e} (1 MB, 5 Mb/s)");
        figure(
            out,
            &refs,
            &Fig {
                file: &format!("delay_goodput_ber{ber:e}.png"),
                title: &title,
                x_label: "one-way delay of the 5 Mb/s link (ms)",
                y_label: "goodput (Mb/s)",
                metric: &mbps,
                legend_low: true,
            },
            false,
            &mut files,
        )?;
    }
    // Cumulative delivery plot.
    let cum: Vec<Series> = timelines
        .iter()
        .map(|(name, r)| Series {
            name: name.clone(),
            points: r
                .timeline
                .iter()
                .map(|&(t, b)| (t, b as f64 / 1e3))
                .collect(),
            peer: false,
        })
        .collect();
    let cum_path = out.join("fec_cumulative.png");
    draw(
        &cum_path,
        &Chart {
            title: "Cumulative delivery, one run per FEC strength, BER 1e-4",
            x_label: "time (s)",
            y_label: "delivered (kB)",
            series: cum,
            y_from_zero: true,
            x_sci: false,
            legend_low: false,
        },
    )?;
    files.push(cum_path);

    let wall = start.elapsed();
    let checks = checks(&rows, o);
    let report = report(o, &rows, &timelines, &checks, wall, sim_runs, &ns3_used);
    let rp = out.join("report.md");
    std::fs::write(&rp, &report)?;
    files.push(rp);
    Ok(Outcome {
        rows,
        files,
        wall,
        runs_total: sim_runs,
        report,
        checks,
    })
}

fn find<'a>(rows: &'a [Row], exp: &str, series: &str, x: f64) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.experiment == exp && r.series == series && r.x == x && r.source == "aerotp-sim")
}

/// The headline figures the engine must reach, evaluated on the simulator's numbers.
fn checks(rows: &[Row], o: &Options) -> Vec<(String, bool)> {
    let mut v = Vec::new();
    for series in ["reliable", "hybrid-nack-mack, FEC auto"] {
        let rs: Vec<&Row> = rows
            .iter()
            .filter(|r| r.experiment == "modes" && r.series == series)
            .collect();
        let bad: Vec<String> = rs
            .iter()
            .filter(|r| r.complete_runs != r.runs)
            .map(|r| format!("BER {:e}: {}/{}", r.ber, r.complete_runs, r.runs))
            .collect();
        v.push((
            format!(
                "{series} delivers all 1 MB in every run at every BER up to 1e-4: {}",
                if bad.is_empty() {
                    format!("yes ({} points x {} runs)", rs.len(), o.runs)
                } else {
                    format!("NO ({})", bad.join(", "))
                }
            ),
            bad.is_empty(),
        ));
    }
    let best = rows
        .iter()
        .filter(|r| {
            r.experiment == "modes"
                && r.ber == 1e-4
                && r.series.contains("FEC auto")
                && r.complete_runs == r.runs
        })
        .max_by(|a, b| a.goodput_bps.total_cmp(&b.goodput_bps));
    match best {
        Some(b) => v.push((
            format!("best mode with FEC auto at BER 1e-4, all data delivered: {} at {:.3} Mb/s (need >= 4.0, aim 4.5)", b.series, b.goodput_bps / 1e6),
            b.goodput_bps >= 4.0e6,
        )),
        None => v.push(("no FEC-auto mode delivered all data in every run at BER 1e-4".into(), false)),
    }
    for mode in ["reliable", "hybrid-nack-mack"] {
        let lo = find(rows, "setup", mode, 0.0).and_then(|r| r.setup_delay_s);
        let hi = find(rows, "setup", mode, 0.2).and_then(|r| r.setup_delay_s);
        if let (Some(lo), Some(hi)) = (lo, hi) {
            let rel = hi / lo - 1.0;
            v.push((
                format!("{mode}: set-up delay at 20 % loss {:.3} ms vs {:.3} ms loss-free ({:+.1} %, need within 5 %)", hi * 1e3, lo * 1e3, rel * 100.0),
                rel.abs() <= 0.05,
            ));
        }
    }
    v
}

fn mb(x: f64) -> String {
    format!("{:.3}", x / 1e6)
}

/// A matrix table: one line per series, one column per x, cell = f(row).
fn matrix(
    rows: &[&Row],
    x_name: &str,
    xfmt: &dyn Fn(f64) -> String,
    cell: &dyn Fn(&Row) -> String,
) -> String {
    let mut xs: Vec<f64> = rows.iter().map(|r| r.x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.series.as_str()) {
            names.push(&r.series);
        }
    }
    let mut s = format!(
        "| series \\ {x_name} | {} |\n",
        xs.iter().map(|&x| xfmt(x)).collect::<Vec<_>>().join(" | ")
    );
    s += &format!("|---|{}\n", xs.iter().map(|_| "---|").collect::<String>());
    for n in names {
        let cells: Vec<String> = xs
            .iter()
            .map(|&x| {
                rows.iter()
                    .find(|r| r.series == n && r.x == x)
                    .map_or_else(|| "".into(), |r| cell(r))
            })
            .collect();
        s += &format!("| {n} | {} |\n", cells.join(" | "));
    }
    s
}

fn report(
    o: &Options,
    rows: &[Row],
    timelines: &[(String, RunResult)],
    checks: &[(String, bool)],
    wall: Duration,
    sim_runs: usize,
    ns3: &[PathBuf],
) -> String {
    let pick = |exp: &str| {
        rows.iter()
            .filter(|r| r.experiment == exp)
            .collect::<Vec<&Row>>()
    };
    let ber = |x: f64| {
        if x == 0.0 {
            "0".to_string()
        } else {
            format!("{x:e}")
        }
    };
    let mut s = String::new();
    let _ = writeln!(s, "Generated by `{}`: {} simulated runs in {:.1} s wall time ({} threads), seed {}, {} runs per point (set-up: {}).\n", o.command, sim_runs, wall.as_secs_f64(), rayon::current_num_threads(), o.seed, o.runs, o.runs * 5);
    if !ns3.is_empty() {
        let _ = writeln!(
            s,
            "ns-3 TCP rows joined from: {}.\n",
            ns3.iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    s += "### Headline figures\n\n";
    for (c, ok) in checks {
        let _ = writeln!(s, "- [{}] {c}", if *ok { "x" } else { " " });
    }
    let delivered = |r: &Row| format!("{:.0} ({}/{})", r.delivered_bytes, r.complete_runs, r.runs);
    let overhead_kb = |r: &Row| format!("{:.1}", r.overhead_bytes / 1e3);
    s += "\n### Set-up delay vs packet loss (two nodes, 10 Mb/s, 5 ms, 100 kB)\n\nPapers: AeroTP 9.2 ms -> 10.1 ms from 0 to 20 % loss; TCP 20 ms -> ~3 s.\n\n![setup](seeds/setup.png)\n\n";
    s += &matrix(
        &pick("setup"),
        "loss",
        &|x| format!("{:.0} %", x * 100.0),
        &|r| {
            format!(
                "{} ms ±{}",
                r.setup_delay_s
                    .map_or("-".into(), |d| format!("{:.3}", d * 1e3)),
                r.setup_ci95
                    .map_or("-".into(), |d| format!("{:.3}", d * 1e3))
            )
        },
    );
    s += "\n### FEC strength, quasi-reliable (papers' words per TPDU)\n\nPapers: >= 96 words corrects everything; 128/256 saturate the link.\n\n![fec goodput](seeds/fec_goodput.png)\n![fec delivered over time](seeds/fec_cumulative.png)\n![fec delay](seeds/fec_delay.png)\n![fec overhead](seeds/fec_overhead.png)\n\nGoodput (Mb/s):\n\n";
    s += &matrix(&pick("fec"), "BER", &ber, &|r| mb(r.goodput_bps));
    s += "\nDelivered (bytes, mean) / complete runs:\n\n";
    s += &matrix(&pick("fec"), "BER", &ber, &delivered);
    s += "\nOverhead (kB):\n\n";
    s += &matrix(&pick("fec"), "BER", &ber, &overhead_kb);
    s += "\nFEC auto: words per TPDU chosen (end of run, mean):\n\n";
    let auto: Vec<&Row> = pick("fec")
        .into_iter()
        .filter(|r| r.series.contains("auto"))
        .collect();
    s += &matrix(&auto, "BER", &ber, &|r| format!("{:.1}", r.fec_words));
    s += "\nOne run (run 0) per strength at BER 1e-4, time to deliver everything it delivered:\n\n";
    let tl: Vec<String> = timelines
        .iter()
        .map(|(n, r)| {
            format!(
                "| {n} | {} | {} |",
                r.delivered_bytes,
                r.last_delivery_s
                    .map_or("-".into(), |t| format!("{t:.3} s"))
            )
        })
        .collect();
    s += "| series | delivered bytes | last delivery |\n|---|---|---|\n";
    s += &tl.join("\n");
    s += "\n\n### MACK aggregation, reliable mode\n\nPapers: no goodput or delay difference between 1 and 365 ACKs per MACK; overhead up above ~200.\n\n![mack goodput](seeds/mack_goodput.png)\n![mack delay](seeds/mack_delay.png)\n![mack overhead](seeds/mack_overhead.png)\n\nGoodput (Mb/s):\n\n";
    s += &matrix(&pick("mack"), "BER", &ber, &|r| mb(r.goodput_bps));
    s += "\nMean delay (ms):\n\n";
    s += &matrix(&pick("mack"), "BER", &ber, &|r| {
        r.mean_delay_s
            .map_or("-".into(), |d| format!("{:.1}", d * 1e3))
    });
    s += "\nOverhead (kB) and complete runs:\n\n";
    s += &matrix(&pick("mack"), "BER", &ber, &|r| {
        format!(
            "{:.1} ({}/{})",
            r.overhead_bytes / 1e3,
            r.complete_runs,
            r.runs
        )
    });
    s += "\n### Transfer modes over BER\n\nPapers: reliable delivers all 1 MB at every BER; TCP fails above 3.5e-5; UDP loses a share; the FEC mode loses less; NACK mode loses data above 2.5e-5, NACK+MACK delivers all; hybrids cost more overhead than pure FEC or ARQ; all AeroTP modes far less than TCP.\n\n![modes goodput](seeds/modes_goodput.png)\n![modes delivered](seeds/modes_delivered.png)\n![modes overhead](seeds/modes_overhead.png)\n![modes delay](seeds/modes_delay.png)\n\nGoodput (Mb/s):\n\n";
    s += &matrix(&pick("modes"), "BER", &ber, &|r| mb(r.goodput_bps));
    s += "\nDelivered (bytes, mean) / complete runs:\n\n";
    s += &matrix(&pick("modes"), "BER", &ber, &delivered);
    s += "\nOverhead (kB, both directions):\n\n";
    s += &matrix(&pick("modes"), "BER", &ber, &overhead_kb);
    s += "\n### Link delay 0-500 ms (seed 004)\n\nPaper (004): AeroTP-FEC >= ~2.9 Mb/s at every delay; NewReno, Westwood, SCPS-TP break down.\n\n";
    let delay_rows = pick("delay");
    let dbers = simulated_bers(&delay_rows);
    for b in dbers {
        let _ = writeln!(s, "BER {}: goodput (Mb/s) and complete runs\n\n![delay {b:e}](seeds/delay_goodput_ber{b:e}.png)\n", ber(b));
        let rs: Vec<&Row> = delay_rows.iter().copied().filter(|r| r.ber == b).collect();
        s += &matrix(&rs, "delay", &|x| format!("{:.0} ms", x * 1e3), &|r| {
            format!("{} ({}/{})", mb(r.goodput_bps), r.complete_runs, r.runs)
        });
        s += "\n";
    }
    s += "\n### Every row\n\nThe CSVs next to the plots hold every point (means over runs, 95 % CI of goodput).\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns3_rows_are_averaged_per_point_and_plotted() {
        let dir = std::env::temp_dir().join(format!("aerotp-sim-exp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("ber_sweep.csv");
        std::fs::write(
            &csv,
            "protocol,ber,delay_s,run,delivered_bytes,goodput_bps,mean_delay_s,overhead_bytes,complete,elapsed_s\n\
             tcp-newreno,1e-05,0.01,1,1000000,300000,0.2,200000,1,30\n\
             tcp-newreno,1e-05,0.01,2,500000,100000,,100000,0,120\n\
             tcp-vegas,0.0,0.01,1,1000000,4700000,0.17,56000,1,1.7\n",
        )
        .unwrap();
        let rows = ns3_rows(&csv, "modes").unwrap();
        assert_eq!(rows.len(), 2);
        let nr = rows
            .iter()
            .find(|r| r.series == "tcp-newreno (ns-3)")
            .unwrap();
        assert_eq!((nr.runs, nr.complete_runs), (2, 1));
        assert_eq!(nr.delivered_bytes, 750_000.0);
        assert_eq!(nr.goodput_bps, 200_000.0);
        assert_eq!(nr.mean_delay_s, Some(0.2));
        assert_eq!(nr.x, 1e-5);
        let refs: Vec<&Row> = rows.iter().collect();
        let s = series(&refs, &mbps);
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|s| s.peer));
        let png = dir.join("t.png");
        let mut files = Vec::new();
        let fig = Fig {
            file: "t.png",
            title: "t",
            x_label: "x",
            y_label: "y",
            metric: &mbps,
            legend_low: true,
        };
        figure(&dir, &refs, &fig, true, &mut files).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn quick_points_cover_every_experiment() {
        let o = Options {
            out: PathBuf::new(),
            runs: 1,
            quick: true,
            seed: 1,
            ns3_dir: PathBuf::new(),
            progress: false,
            command: String::new(),
        };
        let pts = points(&o);
        for e in ["setup", "fec", "mack", "modes", "delay"] {
            assert!(pts.iter().any(|p| p.experiment == e), "{e}");
        }
        assert!(pts.iter().all(|p| p.scenario.validate().is_ok()));
        // FEC auto appears wherever FEC applies.
        for e in ["fec", "mack", "modes", "delay"] {
            assert!(
                pts.iter()
                    .any(|p| p.experiment == e && p.series.contains("auto")),
                "{e}"
            );
        }
    }
}
