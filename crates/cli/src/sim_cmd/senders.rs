//! `aerotp sim --senders N`: several senders sharing the scenario's links — the flags, the
//! check of what they can be combined with, and what the summary adds (each sender's figures
//! and Jain's fairness index).

use std::time::Duration;

use aerotp_sim::{Scenario, Senders, SendersSummary, MAX_SENDERS};

/// Several senders on the same links.
#[derive(Debug, clap::Args)]
pub struct SendersArgs {
    /// N senders (1-64), each with a receiver of its own, sharing the scenario's links: every
    /// sender's datagrams go through the same queues. Each moves --size in --mode with the
    /// same rate flags (--send-rate auto to let each discover its share); the summary adds
    /// each sender's goodput and Jain's fairness index. Bulk workload, connection modes, one
    /// path or --stripe-below; not with --pcap, --qlog, --timeline or the radio.
    #[arg(long, default_value_t = 1, value_parser = senders_arg)]
    senders: usize,
    /// When each sender connects, one value per sender: 0s,10s (default: all at 0).
    #[arg(long, value_name = "LIST", value_parser = durations_arg)]
    sender_start: Option<Durations>,
    /// Each sender's extra one-way delay, each way, between it and the shared links, one
    /// value per sender: 0ms,90ms,190ms,290ms (default: none).
    #[arg(long, value_name = "LIST", value_parser = durations_arg)]
    sender_delay: Option<Durations>,
    /// Jain's index and each sender's share are measured from this long after the last
    /// sender starts to the first sender's finish [default: 5s].
    #[arg(long, value_parser = crate::common::duration_arg)]
    settle: Option<Duration>,
}

/// A comma-separated list of durations.
#[derive(Debug, Clone)]
pub struct Durations(Vec<Duration>);

fn senders_arg(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("there must be at least 1 sender".into()),
        Ok(n) if n > MAX_SENDERS => Err(format!(
            "{n} senders is more than one run takes: give 1 to {MAX_SENDERS}"
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "'{s}' is not a number of senders: give 1 to {MAX_SENDERS}"
        )),
    }
}

fn durations_arg(s: &str) -> Result<Durations, String> {
    s.split(',')
        .map(|v| {
            aerotp_link::parse_duration(v.trim())
                .map_err(|e| format!("'{v}' in '{s}': {e} (e.g. 0s,10s: one per sender)"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Durations)
}

impl SendersArgs {
    /// The senders to run, or `None` for one sender (the ordinary run). `others` are the
    /// flags given that only a one-sender run takes (name, given). Says what cannot be run.
    pub fn spec(&self, s: &Scenario, others: &[(&str, bool)]) -> Result<Option<Senders>, String> {
        let n = self.senders;
        if n == 1 {
            let given = [
                ("--sender-start", self.sender_start.is_some()),
                ("--sender-delay", self.sender_delay.is_some()),
                ("--settle", self.settle.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|g| g.1) {
                return Err(format!("{flag} needs --senders 2 or more"));
            }
            return Ok(None);
        }
        if let Some((flag, _)) = others.iter().find(|g| g.1) {
            return Err(format!(
                "{flag} records one sender's run; not with --senders {n}"
            ));
        }
        let mut spec = Senders::new(n);
        for (flag, list, into) in [
            ("--sender-start", &self.sender_start, &mut spec.starts),
            ("--sender-delay", &self.sender_delay, &mut spec.delays),
        ] {
            if let Some(Durations(v)) = list {
                if v.len() != n {
                    return Err(format!(
                        "{flag} has {} value(s) for {n} senders: give one per sender, \
                         comma-separated",
                        v.len()
                    ));
                }
                into.clone_from(v);
            }
        }
        if let Some(d) = self.settle {
            spec.settle = d;
        }
        spec.validate(s)
            .map_err(|e| format!("--senders {n}: {e}"))?;
        Ok(Some(spec))
    }
}

/// The JSON object: every key of one sender's summary (for all senders together), then
/// `senders`, `jain`, `jain_stat`, `jain_from_s`, `jain_to_s`, `settle_s` and `wall_s`.
pub fn to_json(sum: &SendersSummary, wall: Duration) -> serde_json::Value {
    let mut v = serde_json::to_value(sum).expect("summary serialises");
    v["wall_s"] = serde_json::json!(wall.as_secs_f64());
    v
}

/// The lines the text summary adds: one per sender and Jain's index.
pub fn table(sum: &SendersSummary) -> String {
    let mbit = |v: Option<f64>| v.map_or_else(|| "-".into(), |x| format!("{:.3}", x / 1e6));
    let secs = |v: Option<f64>| v.map_or_else(|| "-".into(), |x| format!("{x:.3} s"));
    let mut out = String::new();
    for x in &sum.senders {
        out.push_str(&format!(
            "{:<16} start {:.3} s, +{:.0} ms each way: goodput {} Mb/s, share {} Mb/s, \
             {:.0} bytes, finish {}, complete {}/{}\n",
            format!("sender {}", x.sender),
            x.start_s,
            x.extra_delay_s * 1e3,
            mbit(Some(x.goodput_bps)),
            mbit(x.share_bps),
            x.delivered_bytes,
            secs(x.finish_s),
            x.complete_runs,
            sum.total.runs
        ));
    }
    let jain = match (sum.jain, sum.jain_from_s, sum.jain_to_s, sum.jain_stat) {
        (Some(j), Some(from), Some(to), Some(st)) => format!(
            "{j:.4} (min {:.4}) over {from:.1}-{to:.1} s, all senders active ({} of {} runs)",
            st.min, st.n, sum.total.runs
        ),
        _ => format!(
            "- : no interval with every sender active from {:.1} s after the last start \
             (a larger --size or a shorter --settle)",
            sum.settle_s
        ),
    };
    out.push_str(&format!("{:<16} {jain}\n", "Jain's index"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_counts_are_checked() {
        assert!(senders_arg("0").unwrap_err().contains("at least 1"));
        assert!(senders_arg("65").unwrap_err().contains("1 to 64"));
        assert!(senders_arg("two").is_err());
        assert_eq!(senders_arg("64"), Ok(64));
        let Durations(v) = durations_arg("0s, 10s").unwrap();
        assert_eq!(v, [Duration::ZERO, Duration::from_secs(10)]);
        assert!(durations_arg("0s,soon").unwrap_err().contains("soon"));
    }
}
