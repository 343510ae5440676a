//! Rows of other tools joined into an experiment: the ns-3 TCP CSVs made by
//! bench/ns3/tcp_lossy.py, averaged per (protocol, BER, delay).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use super::row::Row;

/// Source name of ns-3 rows.
pub const NS3_SOURCE: &str = "ns-3";

/// The ns-3 rows of `path` for `experiment`; `x` is the column on the x axis (`ber` or
/// `delay_s`).
pub fn ns3_rows(path: &Path, experiment: &str, x: &str) -> anyhow::Result<Vec<Row>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let cols = Columns::find(&header, path)?;
    let mut groups: BTreeMap<(String, u64, u64), Acc> = BTreeMap::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok());
        let (Some(ber), Some(delay), Some(proto)) =
            (num(cols.ber), num(cols.delay), f.get(cols.protocol))
        else {
            continue;
        };
        groups
            .entry(((*proto).to_owned(), ber.to_bits(), delay.to_bits()))
            .or_default()
            .add(&cols, num);
    }
    Ok(groups
        .into_iter()
        .filter_map(|((proto, ber, delay), a)| {
            let (ber, delay) = (f64::from_bits(ber), f64::from_bits(delay));
            let metrics = a.metrics(ber, delay)?;
            Some(Row {
                experiment: experiment.to_owned(),
                series: format!("{proto} (ns-3)"),
                source: NS3_SOURCE.into(),
                x: if x == "delay_s" { delay } else { ber },
                metrics,
            })
        })
        .collect())
}

/// Where the columns read are in the CSV's header.
struct Columns {
    protocol: usize,
    ber: usize,
    delay: usize,
    delivered: usize,
    goodput: usize,
    mean_delay: usize,
    overhead: usize,
    complete: usize,
}

impl Columns {
    fn find(header: &[&str], path: &Path) -> anyhow::Result<Columns> {
        let col = |name: &str| {
            header
                .iter()
                .position(|h| *h == name)
                .with_context(|| format!("{}: no column {name}", path.display()))
        };
        Ok(Columns {
            protocol: col("protocol")?,
            ber: col("ber")?,
            delay: col("delay_s")?,
            delivered: col("delivered_bytes")?,
            goodput: col("goodput_bps")?,
            mean_delay: col("mean_delay_s")?,
            overhead: col("overhead_bytes")?,
            complete: col("complete")?,
        })
    }
}

/// The runs of one (protocol, BER, delay) point, summed.
#[derive(Default)]
struct Acc {
    n: usize,
    complete: usize,
    delivered: f64,
    overhead: f64,
    delays: usize,
    delay_sum: f64,
    goodputs: Vec<f64>,
}

impl Acc {
    /// Adds a run, whose fields `num` reads by column.
    fn add(&mut self, cols: &Columns, num: impl Fn(usize) -> Option<f64>) {
        self.n += 1;
        self.complete += usize::from(num(cols.complete) == Some(1.0));
        self.delivered += num(cols.delivered).unwrap_or(0.0);
        self.overhead += num(cols.overhead).unwrap_or(0.0);
        if let Some(d) = num(cols.mean_delay) {
            self.delays += 1;
            self.delay_sum += d;
        }
        self.goodputs.push(num(cols.goodput).unwrap_or(0.0));
    }

    /// The point's metrics (means over its runs), as a simulated row names them.
    fn metrics(&self, ber: f64, delay: f64) -> Option<BTreeMap<String, f64>> {
        let stat = crate::summary::Stat::of(&self.goodputs)?;
        let n = self.n as f64;
        let mut m: BTreeMap<String, f64> = [
            ("ber", ber),
            ("loss", 0.0),
            ("delay_s", delay),
            ("runs", n),
            ("complete_runs", self.complete as f64),
            ("delivered_bytes", self.delivered / n),
            ("goodput_bps", stat.mean),
            ("goodput.mean", stat.mean),
            ("goodput.ci95", stat.ci95),
            ("overhead_bytes", self.overhead / n),
            ("fec_words", 0.0),
            ("retransmissions", 0.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if self.delays > 0 {
            m.insert("mean_delay_s".into(), self.delay_sum / self.delays as f64);
        }
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns3_rows_are_averaged_per_point() {
        let dir = std::env::temp_dir().join(format!("aerotp-plan-join-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("ber_sweep.csv");
        std::fs::write(
            &csv,
            "protocol,ber,delay_s,run,delivered_bytes,goodput_bps,mean_delay_s,overhead_bytes,complete,elapsed_s\n\
             tcp-newreno,1e-05,0.01,1,1000000,300000,0.2,200000,1,30\n\
             tcp-newreno,1e-05,0.01,2,500000,100000,,100000,0,120\n\
             tcp-vegas,0.0,0.01,1,1000000,4700000,0.17,56000,1,1.7\n\
             broken line\n",
        )
        .unwrap();
        let rows = ns3_rows(&csv, "modes", "ber").unwrap();
        assert_eq!(rows.len(), 2);
        let nr = rows
            .iter()
            .find(|r| r.series == "tcp-newreno (ns-3)")
            .unwrap();
        assert_eq!(nr.metrics["runs"], 2.0);
        assert_eq!(nr.metrics["complete_runs"], 1.0);
        assert_eq!(nr.metrics["delivered_bytes"], 750_000.0);
        assert_eq!(nr.metrics["goodput_bps"], 200_000.0);
        assert_eq!(nr.metrics["mean_delay_s"], 0.2);
        assert_eq!(nr.x, 1e-5);
        assert!(!nr.is_sim());
        let d = ns3_rows(&csv, "delay", "delay_s").unwrap();
        assert!(d.iter().all(|r| r.x == 0.01));
        assert!(ns3_rows(&dir.join("absent.csv"), "modes", "ber").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
