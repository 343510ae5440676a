//! `--max-connections`, `--max-half-open` and `--setup-timeout`: how many peers a listener
//! holds and how long one may stay unproven (docs/security.md, "Half-open connections").

use std::time::Duration;

use aerotp_net::EndpointConfig;

#[derive(Debug, Clone, clap::Args)]
pub struct AdmissionFlags {
    /// Most connections at once (1-65536); a peer beyond it is refused with a reset.
    #[arg(long, default_value_t = 1024, value_parser = connections_arg)]
    pub max_connections: usize,
    /// Most connections whose peer has not yet proven its address (0-65536). Beyond it new
    /// peers get a stateless RETRY and are admitted when they echo its cookie, so a flood of
    /// spoofed ASYNs holds at most this many slots. 0: every new peer gets a RETRY.
    #[arg(long, default_value_t = 128, value_parser = half_open_arg)]
    pub max_half_open: usize,
    /// How long a connection may stay unproven before it is dropped (1s to 10min). Nothing
    /// is written for it meanwhile; size it to a few round trips of the slowest link.
    #[arg(long, default_value = "30s", value_parser = setup_timeout_arg)]
    pub setup_timeout: Duration,
}

impl AdmissionFlags {
    pub fn apply(&self, base: EndpointConfig) -> anyhow::Result<EndpointConfig> {
        if self.max_half_open > self.max_connections {
            anyhow::bail!(
                "--max-half-open {} exceeds --max-connections {}: give at most as many \
                 half-open connections as connections",
                self.max_half_open,
                self.max_connections
            );
        }
        Ok(EndpointConfig {
            max_connections: self.max_connections,
            max_half_open: self.max_half_open,
            setup_timeout: self.setup_timeout,
            ..base
        })
    }
}

fn count(s: &str, lo: usize, hi: usize) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number; give {lo} to {hi}"))?;
    if n < lo || n > hi {
        return Err(format!("'{s}' is out of range; give {lo} to {hi}"));
    }
    Ok(n)
}

fn connections_arg(s: &str) -> Result<usize, String> {
    count(s, 1, 65_536)
}

fn half_open_arg(s: &str) -> Result<usize, String> {
    count(s, 0, 65_536)
}

fn setup_timeout_arg(s: &str) -> Result<Duration, String> {
    let d = aerotp_link::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(600) {
        return Err(format!("'{s}' is out of range; give 1s to 10min"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_refused_with_the_range() {
        for bad in ["0", "-1", "x", "", "65537", "1e3"] {
            let e = connections_arg(bad).unwrap_err();
            assert!(e.contains("1 to 65536"), "{bad}: {e}");
        }
        assert_eq!(half_open_arg("0"), Ok(0));
        for bad in ["0s", "500ms", "11min", "nan", "-1s", "inf"] {
            assert!(setup_timeout_arg(bad).is_err(), "{bad}");
        }
        assert_eq!(setup_timeout_arg("45s"), Ok(Duration::from_secs(45)));
        let f = AdmissionFlags {
            max_connections: 10,
            max_half_open: 11,
            setup_timeout: Duration::from_secs(5),
        };
        let e = f.apply(EndpointConfig::default()).unwrap_err().to_string();
        assert!(
            e.contains("--max-half-open 11 exceeds --max-connections 10"),
            "{e}"
        );
    }
}
