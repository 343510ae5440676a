//! The link flags shared by `aerotp sim`, `aerotp link` and `aerotp lab`: a scenario file
//! (`--scenario`) and flags that override it, with the same names and meanings everywhere.
//!
//! Every flag is optional and has no clap default, so a flag given overrides the file and a
//! flag not given leaves the file's value (or, without a file, `LinkConfig::default()`:
//! 5 Mb/s, 10 ms, no impairment). A plain flag (`--rate`, `--ber`, ...) sets that quantity
//! in both directions of every path; a `--reverse-*` flag sets the reverse direction of
//! every path, whatever order the flags come in.

use std::path::PathBuf;
use std::time::Duration;

use aerotp_link::{
    parse_burst, parse_duration, parse_outage, parse_random_outage, parse_rate, GilbertElliott,
    LinkConfig, Network, Outage, OutageScope, RandomOutage, Trace,
};
use anyhow::anyhow;

/// Link conditions: a scenario file and flags that override it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LinkFlags {
    /// Scenario file (TOML): one or more [[path]] entries, each with a `forward` table and
    /// an optional `reverse` table of link-model keys (rate_bps, delay, jitter, allow_reorder,
    /// ber, loss, burst, outages, periodic_outage, random_outage, duplicate, queue_bytes,
    /// trace). See docs/link-model.md. The flags below override it.
    #[arg(long, value_name = "FILE", help_heading = "Link")]
    pub scenario: Option<PathBuf>,
    /// Link rate, both directions of every path: 5mbit, 10Mbps, 2.4kbit, 500000 (bit/s).
    /// Default (no file): 5mbit.
    #[arg(long, value_parser = rate_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub rate: Option<u64>,
    /// One-way propagation delay, both directions: 10ms, 1.5s, 250us (0s = none).
    /// Default (no file): 10ms.
    #[arg(long, value_parser = delay_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub delay: Option<Duration>,
    /// Extra delay drawn uniformly in [0, JITTER] per packet, both directions (0s = none).
    /// Jitter never reorders unless --reorder is given.
    #[arg(long, value_parser = delay_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub jitter: Option<Duration>,
    /// Let jitter reorder packets (a packet may overtake the one sent before it).
    #[arg(long, help_heading = "Link")]
    pub reorder: bool,
    /// Bit-error rate in [0, 1), both directions: every bit flips with this probability.
    #[arg(long, value_parser = ber_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub ber: Option<f64>,
    /// Independent random packet loss probability in [0, 1], both directions.
    #[arg(long, value_parser = probability_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub loss: Option<f64>,
    /// Probability in [0, 1] that a delivered packet is delivered twice, both directions.
    #[arg(long, value_name = "P", value_parser = probability_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub duplicate: Option<f64>,
    /// Scheduled outage START+DURATION from the start, both directions, e.g. 30s+10s.
    /// Repeatable; given, these replace the file's scheduled outages.
    #[arg(long = "outage", value_name = "START+DURATION", value_parser = outage_flag, allow_hyphen_values = true,
          help_heading = "Link")]
    pub outages: Vec<Outage>,
    /// Drop-tail transmit queue limit in bytes, both directions (e.g. 150000 = 100 × 1500 B).
    #[arg(long, value_name = "BYTES", value_parser = queue_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub queue: Option<u64>,
    /// Gilbert–Elliott bursts, both directions: comma-separated KEY=VALUE. Sojourns as
    /// good=DUR,bad=DUR (mean times), good=N,bad=N (mean packets) or p_gb=P,p_bg=P (per
    /// packet); then loss_bad (default 1), loss_good (0), ber_bad, ber_good (default: --ber).
    /// Example: good=2s,bad=50ms,ber_bad=1e-3,loss_bad=0 (error bursts of 50 ms every 2 s).
    #[arg(long, value_name = "SPEC", value_parser = burst_flag, help_heading = "Link")]
    pub burst: Option<GilbertElliott>,
    /// Random outages: up=MEAN,down=MIN-MAX[,seed=N][,dir=both|forward|reverse], e.g.
    /// up=3min,down=45s-50s (up for an exponential time of mean 3 min, down 45-50 s).
    /// dir=both (default) drops both directions of a path together, on one schedule.
    #[arg(long, value_name = "SPEC", value_parser = random_outage_flag, help_heading = "Link")]
    pub random_outage: Option<(RandomOutage, OutageScope)>,
    /// Time-varying rate, delay, BER and loss from a CSV trace (header time_s, then any of
    /// rate_bps, delay_ms, ber, loss), both directions. See docs/link-model.md.
    #[arg(long, value_name = "FILE", help_heading = "Link")]
    pub trace: Option<PathBuf>,
    /// Replay the --trace in a loop instead of holding its last row.
    #[arg(long, requires = "trace", help_heading = "Link")]
    pub trace_repeat: bool,
    /// Rate of the reverse direction (receiver → sender) of every path.
    #[arg(long, value_parser = rate_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub reverse_rate: Option<u64>,
    /// One-way delay of the reverse direction of every path.
    #[arg(long, value_parser = delay_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub reverse_delay: Option<Duration>,
    /// Bit-error rate of the reverse direction of every path, in [0, 1).
    #[arg(long, value_parser = ber_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub reverse_ber: Option<f64>,
    /// Random loss probability of the reverse direction of every path, in [0, 1].
    #[arg(long, value_parser = probability_flag, allow_hyphen_values = true, help_heading = "Link")]
    pub reverse_loss: Option<f64>,
}

// Value parsers. clap prefixes their message with the flag and the value
// ("invalid value 'x' for '--rate <RATE>': ..."), so the message says what is accepted.

fn rate_flag(s: &str) -> Result<u64, String> {
    // parse_rate refuses 0, negative numbers and garbage, and names the accepted units.
    parse_rate(s).map_err(|e| e.to_string())
}

/// Longest one-way delay or jitter: an hour is beyond any air or space link this emulates, and
/// everything in flight is held in memory for that long.
const MAX_DELAY: Duration = Duration::from_secs(3600);

fn delay_flag(s: &str) -> Result<Duration, String> {
    // 0s is a real value here (no delay, no jitter): a file's value can be switched off.
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d > MAX_DELAY {
        return Err(format!(
            "'{s}' is too long; give 0s to 1h (e.g. 10ms, 270ms)"
        ));
    }
    Ok(d)
}

fn number(s: &str, accepted: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number; give {accepted}"))?;
    if !p.is_finite() {
        return Err(format!("{s:?} is not finite; give {accepted}"));
    }
    Ok(p)
}

fn ber_flag(s: &str) -> Result<f64, String> {
    const ACCEPTED: &str = "a bit-error rate in [0, 1), e.g. 1e-5 (0 = no bit errors)";
    let p = number(s, ACCEPTED)?;
    if !(0.0..1.0).contains(&p) {
        return Err(format!("{p} is outside [0, 1); give {ACCEPTED}"));
    }
    Ok(p)
}

fn probability_flag(s: &str) -> Result<f64, String> {
    const ACCEPTED: &str = "a probability in [0, 1], e.g. 0.01 (0 = never)";
    let p = number(s, ACCEPTED)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("{p} is outside [0, 1]; give {ACCEPTED}"));
    }
    Ok(p)
}

fn outage_flag(s: &str) -> Result<Outage, String> {
    parse_outage(s).map_err(|e| e.to_string())
}

fn queue_flag(s: &str) -> Result<u64, String> {
    const ACCEPTED: &str = "a whole number of bytes >= 1, e.g. 150000 (100 packets of 1500 B)";
    let q: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of bytes; give {ACCEPTED}"))?;
    if q == 0 {
        return Err(format!("0 would hold no packet; give {ACCEPTED}"));
    }
    Ok(q)
}

fn burst_flag(s: &str) -> Result<GilbertElliott, String> {
    parse_burst(s).map_err(|e| e.to_string())
}

fn random_outage_flag(s: &str) -> Result<(RandomOutage, OutageScope), String> {
    parse_random_outage(s).map_err(|e| e.to_string())
}

impl LinkFlags {
    /// True if any flag changes the link (not counting `--scenario`).
    pub fn any_override(&self) -> bool {
        let LinkFlags {
            scenario: _,
            rate,
            delay,
            jitter,
            reorder,
            ber,
            loss,
            duplicate,
            outages,
            queue,
            burst,
            random_outage,
            trace,
            trace_repeat: _,
            reverse_rate,
            reverse_delay,
            reverse_ber,
            reverse_loss,
        } = self;
        rate.is_some()
            || delay.is_some()
            || jitter.is_some()
            || *reorder
            || ber.is_some()
            || loss.is_some()
            || duplicate.is_some()
            || !outages.is_empty()
            || queue.is_some()
            || burst.is_some()
            || random_outage.is_some()
            || trace.is_some()
            || reverse_rate.is_some()
            || reverse_delay.is_some()
            || reverse_ber.is_some()
            || reverse_loss.is_some()
    }

    /// The network these flags describe: `--scenario` loaded (or one path of
    /// `LinkConfig::default()`), the flags applied, the result validated. Errors name the
    /// file and key, or the flag, and what is accepted.
    pub fn network(&self) -> anyhow::Result<Network> {
        let mut net = match &self.scenario {
            Some(file) => Network::load(file).map_err(|e| anyhow!("--scenario: {e}"))?,
            None => Network::default(),
        };
        let trace = match &self.trace {
            Some(file) => Some(
                Trace::from_file(file, self.trace_repeat)
                    .map_err(|e| anyhow!("--trace {}: {e}", file.display()))?,
            ),
            None => None,
        };
        if self.any_override() {
            for path in &mut net.paths {
                // Give the reverse direction its own copy first, so that a one-direction
                // flag cannot leak into the other through "reverse = copy of forward".
                let mut reverse = path.reverse.take().unwrap_or_else(|| path.forward.clone());
                self.apply_both(&mut path.forward, trace.as_ref());
                self.apply_both(&mut reverse, trace.as_ref());
                self.apply_reverse(&mut reverse);
                if let Some((outage, scope)) = self.random_outage {
                    // The flag replaces every random outage of the path.
                    path.random_outage = None;
                    path.forward.random_outage = None;
                    reverse.random_outage = None;
                    match scope {
                        OutageScope::Both => path.random_outage = Some(outage),
                        OutageScope::Forward => path.forward.random_outage = Some(outage),
                        OutageScope::Reverse => reverse.random_outage = Some(outage),
                    }
                }
                path.reverse = Some(reverse);
            }
        }
        net.validate().map_err(|(key, problem)| {
            let origin = match &self.scenario {
                Some(f) if self.any_override() => {
                    format!("scenario {} with the link flags", f.display())
                }
                Some(f) => format!("scenario {}", f.display()),
                None => "the link flags".to_string(),
            };
            anyhow!("{origin}: `{key}` {problem}")
        })?;
        Ok(net)
    }

    /// The plain flags, which set a quantity in both directions.
    fn apply_both(&self, c: &mut LinkConfig, trace: Option<&Trace>) {
        if let Some(r) = self.rate {
            c.rate_bps = r;
        }
        if let Some(d) = self.delay {
            c.delay = d;
        }
        if let Some(j) = self.jitter {
            c.jitter = j;
        }
        if self.reorder {
            c.allow_reorder = true;
        }
        if let Some(b) = self.ber {
            c.ber = b;
        }
        if let Some(l) = self.loss {
            c.loss = l;
        }
        if let Some(d) = self.duplicate {
            c.duplicate = d;
        }
        if !self.outages.is_empty() {
            c.outages = self.outages.clone();
        }
        if let Some(q) = self.queue {
            c.queue_bytes = q;
        }
        if let Some(b) = self.burst {
            c.burst = Some(b);
        }
        if let Some(t) = trace {
            c.trace = Some(t.clone());
        }
    }

    /// The `--reverse-*` flags.
    fn apply_reverse(&self, c: &mut LinkConfig) {
        if let Some(r) = self.reverse_rate {
            c.rate_bps = r;
        }
        if let Some(d) = self.reverse_delay {
            c.delay = d;
        }
        if let Some(b) = self.reverse_ber {
            c.ber = b;
        }
        if let Some(l) = self.reverse_loss {
            c.loss = l;
        }
    }

    /// A one-line description for logs: the file (if any) and the number of paths.
    pub fn describe(&self, net: &Network) -> String {
        let src = match &self.scenario {
            Some(f) => format!("scenario {}", f.display()),
            None => "flags".to_string(),
        };
        format!("{src}, {} path(s)", net.paths.len())
    }
}

/// What the tests of the subcommands that take these flags share.
#[cfg(test)]
pub(crate) mod test_support {
    use std::time::Duration;

    use aerotp_link::LinkConfig;
    use clap::{Args, Command, FromArgMatches};

    /// Parses `args` (without the program name) into the flags `A` a subcommand flattens,
    /// as clap does for that subcommand; an error is clap's message.
    pub(crate) fn parse_flags<A: Args + FromArgMatches>(args: &[&str]) -> Result<A, String> {
        let cmd = A::augment_args(Command::new("aerotp"));
        let matches = cmd
            .try_get_matches_from(std::iter::once("aerotp").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        A::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    /// Two outages and a queue, as flags; [`assert_outages_and_queue`] checks a link got them.
    pub(crate) const OUTAGES_AND_QUEUE: [&str; 6] = [
        "--outage", "2s+1s", "--outage", "1min+30s", "--queue", "3000",
    ];

    pub(crate) fn assert_outages_and_queue(c: &LinkConfig) {
        assert_eq!(c.outages.len(), 2);
        assert_eq!(c.outages[1].start, Duration::from_secs(60));
        assert_eq!(c.queue_bytes, 3000);
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{assert_outages_and_queue, parse_flags, OUTAGES_AND_QUEUE};
    use super::*;

    fn parse(args: &[&str]) -> Result<LinkFlags, String> {
        parse_flags(args)
    }

    fn net(args: &[&str]) -> Network {
        parse(args).unwrap().network().unwrap()
    }

    fn temp(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn no_file_no_flag_is_one_default_path() {
        let n = net(&[]);
        assert_eq!(n, Network::default());
        assert_eq!(n.paths[0].forward, LinkConfig::default());
        assert_eq!(n.paths[0].reverse_config(0), LinkConfig::default());
    }

    #[test]
    fn plain_flags_set_both_directions() {
        let n = net(&[
            "--rate",
            "2mbit",
            "--delay",
            "300ms",
            "--jitter",
            "5ms",
            "--reorder",
            "--ber",
            "1e-5",
            "--loss",
            "0.01",
            "--duplicate",
            "0.02",
        ]
        .iter()
        .chain(&OUTAGES_AND_QUEUE)
        .copied()
        .collect::<Vec<_>>());
        let p = &n.paths[0];
        for c in [p.forward_config(1), p.reverse_config(1)] {
            assert_eq!(c.rate_bps, 2_000_000);
            assert_eq!(c.delay, Duration::from_millis(300));
            assert_eq!(c.jitter, Duration::from_millis(5));
            assert!(c.allow_reorder);
            assert_eq!(c.ber, 1e-5);
            assert_eq!(c.loss, 0.01);
            assert_eq!(c.duplicate, 0.02);
            assert_outages_and_queue(&c);
        }
    }

    #[test]
    fn reverse_flags_set_the_reverse_direction_only() {
        // Reverse flags first on the command line: order does not matter.
        let n = net(&[
            "--reverse-rate",
            "256kbit",
            "--reverse-delay",
            "1s",
            "--reverse-ber",
            "1e-4",
            "--reverse-loss",
            "0.5",
            "--rate",
            "5mbit",
            "--ber",
            "1e-6",
        ]);
        let (f, r) = (n.paths[0].forward_config(0), n.paths[0].reverse_config(0));
        assert_eq!((f.rate_bps, r.rate_bps), (5_000_000, 256_000));
        assert_eq!(
            (f.delay, r.delay),
            (Duration::from_millis(10), Duration::from_secs(1))
        );
        assert_eq!((f.ber, r.ber), (1e-6, 1e-4));
        assert_eq!((f.loss, r.loss), (0.0, 0.5));
    }

    #[test]
    fn file_with_overrides() {
        let (_d, file) = temp(
            "s.toml",
            r#"
            [[path]]
            name = "los"
            forward = { rate_bps = "5mbit", delay = "10ms", ber = 1e-5, loss = 0.1 }
            reverse = { rate_bps = "256kbit", delay = "20ms" }
            [[path]]
            name = "satcom"
            forward = { rate_bps = "2.4kbit", delay = "1.5s" }
            random_outage = { mean_up = "3min", down_min = "45s", down_max = "50s" }
            "#,
        );
        let f = file.to_str().unwrap();
        // The file alone.
        let n = net(&["--scenario", f]);
        assert_eq!(n.paths.len(), 2);
        assert_eq!(n.paths[0].reverse_config(0).rate_bps, 256_000);
        assert_eq!(n.paths[1].forward.delay, Duration::from_millis(1500));
        // Flags given override; flags not given leave the file.
        let n = net(&["--scenario", f, "--ber", "1e-4", "--reverse-delay", "50ms"]);
        let los = &n.paths[0];
        assert_eq!(los.forward.ber, 1e-4);
        assert_eq!(los.reverse_config(0).ber, 1e-4);
        assert_eq!(los.forward.loss, 0.1, "not given: the file's value");
        assert_eq!(los.forward.delay, Duration::from_millis(10));
        assert_eq!(los.reverse_config(0).delay, Duration::from_millis(50));
        assert_eq!(los.reverse_config(0).rate_bps, 256_000);
        let sat = &n.paths[1];
        assert_eq!(sat.forward.rate_bps, 2400);
        assert_eq!(
            sat.reverse_config(0).rate_bps,
            2400,
            "reverse copied from forward"
        );
        assert_eq!(sat.reverse_config(0).delay, Duration::from_millis(50));
        assert!(
            sat.random_outage.is_some(),
            "kept: no --random-outage given"
        );
        assert_eq!(n.paths[1].display_name(1), "satcom");
    }

    #[test]
    fn burst_random_outage_and_trace_flags() {
        let (_d, trace) = temp(
            "t.csv",
            "time_s,rate_bps,ber\n0,5000000,0\n10,1000000,1e-4\n",
        );
        let n = net(&[
            "--burst",
            "good=2s,bad=50ms,ber_bad=1e-3,loss_bad=0",
            "--random-outage",
            "up=3min,down=45s-50s,dir=forward",
            "--trace",
            trace.to_str().unwrap(),
            "--trace-repeat",
        ]);
        let p = &n.paths[0];
        let (f, r) = (p.forward_config(3), p.reverse_config(3));
        assert_eq!(f.burst.unwrap().bad_time, Some(Duration::from_millis(50)));
        assert_eq!(r.burst, f.burst);
        assert_eq!(f.random_outage.unwrap().mean_up, Duration::from_secs(180));
        assert_eq!(
            r.random_outage, None,
            "dir=forward leaves the reverse direction up"
        );
        let t = f.trace.unwrap();
        assert!(t.repeat);
        assert_eq!(t.rows.len(), 2);
        // dir=both: one path-level schedule, the same seed both ways.
        let n = net(&["--random-outage", "up=10s,down=1s-2s"]);
        let p = &n.paths[0];
        assert!(p.random_outage.is_some());
        assert_eq!(
            p.forward_config(9).random_outage,
            p.reverse_config(9).random_outage
        );
        assert_eq!(p.forward_config(9).random_outage.unwrap().seed, Some(9));
    }

    #[test]
    fn bad_values_name_the_flag_and_what_is_accepted() {
        for (args, needles) in [
            (&["--rate", "fast"][..], &["--rate", "no number"][..]),
            (&["--rate", "0"], &["--rate", "at least 1 bit/s"]),
            (&["--rate", "-5mbit"], &["--rate", "no number"]),
            (&["--loss", "-0.5"], &["--loss", "[0, 1]"]),
            (&["--reverse-rate", "NaN"], &["--reverse-rate"]),
            (&["--delay", "10"], &["--delay", "missing unit"]),
            (&["--delay", "-1s"], &["--delay", "no number"]),
            (&["--jitter", "inf"], &["--jitter"]),
            (
                &["--reverse-delay", "1x"],
                &["--reverse-delay", "unknown unit"],
            ),
            (&["--ber", "1"], &["--ber", "[0, 1)"]),
            (&["--ber", "-1e-5"], &["--ber", "[0, 1)"]),
            (&["--ber", "NaN"], &["--ber", "not finite"]),
            (&["--ber", "inf"], &["--ber", "not finite"]),
            (&["--reverse-ber", "x"], &["--reverse-ber", "not a number"]),
            (&["--loss", "1.5"], &["--loss", "[0, 1]"]),
            (&["--reverse-loss", "-0.1"], &["--reverse-loss", "[0, 1]"]),
            (&["--duplicate", "2"], &["--duplicate", "[0, 1]"]),
            (&["--outage", "5s"], &["--outage", "START+DURATION"]),
            (&["--outage", "5s+0s"], &["--outage", "positive"]),
            (&["--queue", "0"], &["--queue", "no packet"]),
            (&["--queue", "-3"], &["--queue", "whole number"]),
            (&["--queue", "1.5"], &["--queue", "whole number"]),
            (&["--burst", "good=2s"], &["--burst", "bad_time"]),
            (&["--burst", "speed=3"], &["--burst", "unknown key `speed`"]),
            (
                &["--random-outage", "up=1s"],
                &["--random-outage", "`down` is missing"],
            ),
            (
                &["--random-outage", "up=1s,down=1s,dir=up"],
                &["--random-outage", "`dir`"],
            ),
            (&["--trace-repeat"], &["--trace"]),
        ] {
            let e = parse(args).unwrap_err();
            for n in needles {
                assert!(e.contains(n), "{args:?}: {e} lacks {n:?}");
            }
        }
    }

    #[test]
    fn bad_files_name_the_file_and_key() {
        let (_d, file) = temp("bad.toml", "[[path]]\nforward = { ber = 2 }\n");
        let e = parse(&["--scenario", file.to_str().unwrap()])
            .unwrap()
            .network()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--scenario") && e.contains("bad.toml") && e.contains("path[0].forward.ber"),
            "{e}"
        );
        let e = parse(&["--scenario", "/nonexistent/s.toml"])
            .unwrap()
            .network()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/s.toml") && e.contains("cannot be read"),
            "{e}"
        );
        let e = parse(&["--trace", "/nonexistent/t.csv"])
            .unwrap()
            .network()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--trace") && e.contains("cannot be read"), "{e}");
        // A flag that makes a valid file invalid: the error names the key and the flag origin.
        let (_d, file) = temp(
            "ok.toml",
            "[[path]]\nforward = { burst = { p_gb = 0.1, p_bg = 0.5 } }\n",
        );
        let f = parse(&[
            "--scenario",
            file.to_str().unwrap(),
            "--burst",
            "good=1s,bad=1s",
        ])
        .unwrap();
        // The flag replaces the file's burst as a whole, so this one is valid.
        let n = f.network().unwrap();
        assert_eq!(n.paths[0].forward.burst.unwrap().p_gb, 0.0);
    }
}
