//! `aerotp link`: a UDP relay that applies the link model (rate, delay, bit errors, loss,
//! outages) between clients and a server, in real time.

use std::net::SocketAddr;
use std::time::Duration;

use aerotp_emu::{run_relay, RelayConfig};
use aerotp_link::{parse_duration, parse_outage, parse_rate, LinkConfig, Outage};
use anyhow::Context;

/// Relay UDP datagrams through an emulated link: clients send to --listen, the relay
/// forwards to --to; replies come back through the reverse direction.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; clients send their datagrams here (e.g. 0.0.0.0:9000).
    #[arg(long)]
    listen: SocketAddr,
    /// Address to forward to (the server side), e.g. 10.0.0.2:9000.
    #[arg(long)]
    to: SocketAddr,
    /// Link rate in bits per second: 5mbit, 10Mbps, 2.4kbit, 500000.
    #[arg(long, default_value = "5mbit", value_parser = rate_arg)]
    rate: u64,
    /// One-way propagation delay: 10ms, 1.5s, 250us.
    #[arg(long, default_value = "10ms", value_parser = duration_arg)]
    delay: Duration,
    /// Extra delay drawn uniformly in [0, JITTER] per datagram (never reorders).
    #[arg(long, default_value = "0s", value_parser = duration_arg)]
    jitter: Duration,
    /// Bit error rate, in [0, 1): each bit of the datagram (and of its virtual IP/UDP
    /// header, see --header-bytes) flips with this probability.
    #[arg(long, default_value_t = 0.0, value_parser = ber_arg)]
    ber: f64,
    /// Independent random datagram loss probability, in [0, 1].
    #[arg(long, default_value_t = 0.0, value_parser = loss_arg)]
    loss: f64,
    /// Scheduled outage START+DURATION relative to relay start, e.g. 30s+10s; repeatable.
    #[arg(long = "outage", value_parser = outage_arg)]
    outages: Vec<Outage>,
    /// Transmit queue limit in bytes (drop-tail). Default: 150000 (100 × 1500 B).
    #[arg(long)]
    queue: Option<u64>,
    /// Rate of the server → client direction (default: same as --rate).
    #[arg(long, value_parser = rate_arg)]
    reverse_rate: Option<u64>,
    /// Delay of the server → client direction (default: same as --delay).
    #[arg(long, value_parser = duration_arg)]
    reverse_delay: Option<Duration>,
    /// Bytes of IPv4+UDP header the relayed payload lacks: counted in serialisation time
    /// and subject to bit errors, a flip there drops the datagram. 0 disables both.
    #[arg(long, default_value_t = 28)]
    header_bytes: u32,
    /// Seed of the impairment model (same seed + same traffic = same impairments).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Maximum number of concurrent clients.
    #[arg(long, default_value_t = 64)]
    max_clients: usize,
    /// Forget a client after this long without traffic (keep it above your longest outage).
    #[arg(long, default_value = "10min", value_parser = duration_arg)]
    idle_timeout: Duration,
    /// Period of the statistics log line (0s = never).
    #[arg(long, default_value = "10s", value_parser = duration_arg)]
    stats_interval: Duration,
}

fn rate_arg(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}

fn duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn outage_arg(s: &str) -> Result<Outage, String> {
    parse_outage(s).map_err(|e| e.to_string())
}

fn probability(s: &str, allow_one: bool, example: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("not a number; give a probability such as {example}"))?;
    let ok = p.is_finite() && p >= 0.0 && if allow_one { p <= 1.0 } else { p < 1.0 };
    if ok {
        Ok(p)
    } else if allow_one {
        Err(format!(
            "{p} is outside [0, 1]; give a probability such as {example}"
        ))
    } else {
        Err(format!(
            "{p} is outside [0, 1); give a bit error rate such as {example}"
        ))
    }
}

fn ber_arg(s: &str) -> Result<f64, String> {
    probability(s, false, "1e-5")
}

fn loss_arg(s: &str) -> Result<f64, String> {
    probability(s, true, "0.01")
}

impl Args {
    /// The relay configuration these flags describe, validated.
    fn relay_config(&self) -> anyhow::Result<RelayConfig> {
        let mut forward = LinkConfig {
            rate_bps: self.rate,
            delay: self.delay,
            jitter: self.jitter,
            ber: self.ber,
            loss: self.loss,
            outages: self.outages.clone(),
            per_packet_overhead: self.header_bytes,
            protected_prefix: self.header_bytes,
            ..LinkConfig::default()
        };
        if let Some(q) = self.queue {
            anyhow::ensure!(
                q > 0,
                "--queue 0: the queue must hold at least one datagram"
            );
            forward.queue_bytes = q;
        }
        forward
            .validate()
            .context("forward direction (--rate, --delay, --ber, ...)")?;
        let mut reverse = forward.clone();
        if let Some(r) = self.reverse_rate {
            reverse.rate_bps = r;
        }
        if let Some(d) = self.reverse_delay {
            reverse.delay = d;
        }
        reverse
            .validate()
            .context("reverse direction (--reverse-rate, --reverse-delay)")?;
        anyhow::ensure!(
            self.max_clients > 0,
            "--max-clients 0: the relay must accept at least one client"
        );
        let mut config = RelayConfig::new(self.listen, self.to, forward);
        config.reverse = Some(reverse);
        config.seed = self.seed;
        config.max_clients = self.max_clients;
        config.idle_timeout = self.idle_timeout;
        config.stats_interval = (!self.stats_interval.is_zero()).then_some(self.stats_interval);
        Ok(config)
    }
}

/// Runs the relay until Ctrl-C, then prints the final counters as JSON on stdout.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let config = args.relay_config()?;
    let (listen, to) = (config.listen, config.to);
    let shutdown = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C; stop the relay with a signal");
            std::future::pending::<()>().await;
        }
    };
    let stats = run_relay(config, shutdown)
        .await
        .with_context(|| format!("link relay {listen} -> {to}"))?;
    println!("{}", serde_json::to_string_pretty(&stats)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(extra: &[&str]) -> Result<Args, String> {
        let mut argv = vec![
            "link",
            "--listen",
            "127.0.0.1:9000",
            "--to",
            "127.0.0.1:9001",
        ];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv)
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn flags_build_the_link_configs() {
        let args = parse(&[
            "--rate",
            "2.4kbit",
            "--delay",
            "1.5s",
            "--ber",
            "1e-5",
            "--loss",
            "0.1",
            "--outage",
            "2s+1s",
            "--outage",
            "1min+30s",
            "--queue",
            "3000",
            "--reverse-rate",
            "10mbit",
            "--seed",
            "7",
        ])
        .unwrap();
        let c = args.relay_config().unwrap();
        assert_eq!(c.forward.rate_bps, 2400);
        assert_eq!(c.forward.delay, Duration::from_millis(1500));
        assert_eq!(c.forward.ber, 1e-5);
        assert_eq!(c.forward.loss, 0.1);
        assert_eq!(c.forward.outages.len(), 2);
        assert_eq!(c.forward.outages[1].start, Duration::from_secs(60));
        assert_eq!(c.forward.queue_bytes, 3000);
        assert_eq!(c.forward.protected_prefix, 28);
        let reverse = c.reverse.unwrap();
        assert_eq!(reverse.rate_bps, 10_000_000);
        assert_eq!(reverse.delay, Duration::from_millis(1500));
        assert_eq!(c.seed, 7);
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        let err = parse(&["--rate", "fast"]).unwrap_err();
        assert!(err.contains("--rate") && err.contains("no number"), "{err}");
        let err = parse(&["--delay", "10"]).unwrap_err();
        assert!(err.contains("missing unit"), "{err}");
        let err = parse(&["--ber", "2"]).unwrap_err();
        assert!(err.contains("outside [0, 1)"), "{err}");
        let err = parse(&["--loss", "x"]).unwrap_err();
        assert!(err.contains("not a number"), "{err}");
        let err = parse(&["--outage", "5s"]).unwrap_err();
        assert!(err.contains("START+DURATION"), "{err}");
        let err = parse(&["--queue", "0"])
            .unwrap()
            .relay_config()
            .unwrap_err();
        assert!(err.to_string().contains("--queue"), "{err}");
    }
}
