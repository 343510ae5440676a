//! `--dlep` and `--dlep-map`: follow a radio's DLEP session (RFC 8175) so the paths toward
//! its destinations go at the rate it says and hold while it says they are down or paused
//! (docs/dlep.md, "Using it from the command line").

use std::net::IpAddr;

use aerotp_dlep::{ClientConfig, Mac};
use aerotp_net::{DestinationMap, Endpoint};
use aerotp_proto::RadioTarget;

/// The `--dlep` flags of `send`, `recv` and the gateways.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DlepArgs {
    /// Follow the radio's DLEP session (RFC 8175; default: off). This host acts as the DLEP
    /// router and connects to the modem at ADDR (TCP port 854 unless :PORT is given; IPv6
    /// with a port as [ADDR]:PORT), or finds it with `discover` (DLEP Peer Discovery on
    /// 224.0.0.117:854). What the radio says then steers the paths toward each destination it
    /// reports: its Current Data Rate caps the path's rate at once (the configured or
    /// discovered rate still applies below it); Destination Down holds the path (its data
    /// goes on the other paths) and Destination Up probes it at once; RFC 8651 Pause and
    /// Restart stop and resume sending on it without counting losses; its latency seeds the
    /// first timers. A modem that is unreachable or goes away is retried every 0.1 to 2 s
    /// and the paths go on as without DLEP. A destination stands for the IP addresses the
    /// modem reports for it, or the ones --dlep-map names.
    #[arg(long, value_name = "ADDR[:PORT]|discover", value_parser = target_arg)]
    pub dlep: Option<ClientConfig>,
    /// With --dlep: the DLEP destination MAC stands for the AeroTP peer at IP (repeatable;
    /// several IPs for one MAC are all its). Needed when the modem reports no IP address for
    /// its destinations, or not the one AeroTP sends to. MAC as aa:bb:cc:dd:ee:ff, IP
    /// without a port, e.g. --dlep-map 00:11:22:33:44:55=10.0.0.2. With @LOCAL the modem is
    /// the radio of this host's address LOCAL: its word steers only the paths toward IP that
    /// leave from LOCAL (two radios on two local addresses reaching one peer address), e.g.
    /// --dlep-map 00:11:22:33:44:55=10.0.0.2@10.0.1.1.
    #[arg(
        long = "dlep-map",
        value_name = "MAC=IP[@LOCAL]",
        value_parser = mapping_arg,
        requires = "dlep"
    )]
    pub dlep_map: Vec<Mapping>,
}

/// One `--dlep-map` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub mac: Mac,
    pub ip: IpAddr,
    /// The local address whose radio the modem is (`@LOCAL`): only the paths from it.
    pub local: Option<IpAddr>,
}

fn target_arg(s: &str) -> Result<ClientConfig, String> {
    aerotp_dlep::parse_target(s)
}

fn mapping_arg(s: &str) -> Result<Mapping, String> {
    DestinationMap::parse_entry(s).map(|(mac, t)| Mapping {
        mac,
        ip: t.peer,
        local: t.local,
    })
}

impl DlepArgs {
    /// The destination map of the `--dlep-map` entries.
    pub fn map(&self) -> DestinationMap {
        let mut map = DestinationMap::default();
        for m in &self.dlep_map {
            map.insert_target(
                m.mac,
                RadioTarget {
                    peer: m.ip,
                    local: m.local,
                },
            );
        }
        map
    }

    /// With `--dlep`: runs the DLEP session beside `ep` (its signals reach `ep`'s paths) and
    /// returns its task, which ends when it is aborted or `ep` is gone. Without: `None`.
    /// Call it inside the tokio runtime.
    pub fn start(&self, ep: &Endpoint) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
        let Some(cfg) = &self.dlep else {
            return Ok(None);
        };
        tracing::info!(
            modem = %aerotp_dlep::target_text(cfg),
            mapped = self.dlep_map.len(),
            "following the radio's DLEP session"
        );
        Ok(Some(ep.follow_dlep(cfg.clone(), self.map())))
    }

    /// `--dlep` as the gateways' `dlep` configuration key (the flags win over the file).
    pub fn dlep_key(&self) -> Option<String> {
        self.dlep.as_ref().map(aerotp_dlep::target_text)
    }

    /// `--dlep-map` as the gateways' `dlep_map` configuration key.
    pub fn dlep_map_keys(&self) -> Vec<String> {
        self.dlep_map
            .iter()
            .map(|m| match m.local {
                Some(l) => format!("{}={}@{l}", m.mac, m.ip),
                None => format!("{}={}", m.mac, m.ip),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerotp_dlep::Target;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        dlep: DlepArgs,
    }

    fn parse(args: &[&str]) -> Result<DlepArgs, String> {
        Cli::try_parse_from(std::iter::once("aerotp").chain(args.iter().copied()))
            .map(|c| c.dlep)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn off_by_default() {
        let a = parse(&[]).unwrap();
        assert!(a.dlep.is_none() && a.dlep_map.is_empty());
        assert_eq!(a.dlep_key(), None);
    }

    #[test]
    fn modem_address_port_and_discovery() {
        let a = parse(&["--dlep", "192.0.2.1"]).unwrap();
        assert_eq!(
            a.dlep.unwrap().target,
            Target::Connect("192.0.2.1:854".parse().unwrap())
        );
        let a = parse(&["--dlep", "[fe80::1]:9000"]).unwrap();
        assert_eq!(a.dlep_key().as_deref(), Some("[fe80::1]:9000"));
        let a = parse(&["--dlep", "discover"]).unwrap();
        let Some(Target::Discover(d)) = a.dlep.map(|c| c.target) else {
            panic!("not discovery")
        };
        assert_eq!(d.group, "224.0.0.117:854".parse().unwrap());
    }

    #[test]
    fn mappings_go_into_the_destination_map() {
        let a = parse(&[
            "--dlep",
            "127.0.0.1:8854",
            "--dlep-map",
            "00:11:22:33:44:55=10.0.0.2",
            "--dlep-map",
            "00:11:22:33:44:66=fe80::2",
            "--dlep-map",
            "00:11:22:33:44:77=10.9.0.2@10.0.1.1",
        ])
        .unwrap();
        assert_eq!(
            a.dlep_map,
            vec![
                Mapping {
                    mac: Mac::eui48([0, 0x11, 0x22, 0x33, 0x44, 0x55]),
                    ip: IpAddr::from([10, 0, 0, 2]),
                    local: None,
                },
                Mapping {
                    mac: Mac::eui48([0, 0x11, 0x22, 0x33, 0x44, 0x66]),
                    ip: "fe80::2".parse().unwrap(),
                    local: None,
                },
                Mapping {
                    mac: Mac::eui48([0, 0x11, 0x22, 0x33, 0x44, 0x77]),
                    ip: IpAddr::from([10, 9, 0, 2]),
                    local: Some(IpAddr::from([10, 0, 1, 1])),
                },
            ]
        );
        assert_eq!(
            a.dlep_map_keys(),
            [
                "00:11:22:33:44:55=10.0.0.2",
                "00:11:22:33:44:66=fe80::2",
                "00:11:22:33:44:77=10.9.0.2@10.0.1.1"
            ]
        );
        // The keys read back to the same flags (the gateways' path).
        let again = parse(&[
            "--dlep",
            &a.dlep_key().unwrap(),
            "--dlep-map",
            &a.dlep_map_keys()[0],
            "--dlep-map",
            &a.dlep_map_keys()[1],
            "--dlep-map",
            &a.dlep_map_keys()[2],
        ])
        .unwrap();
        assert_eq!(again.dlep, a.dlep);
        assert_eq!(again.dlep_map, a.dlep_map);
    }

    #[test]
    fn bad_values_name_the_flag_and_what_is_expected() {
        let e = parse(&["--dlep", "modem.local"]).unwrap_err();
        assert!(e.contains("--dlep") && e.contains("'modem.local'"), "{e}");
        assert!(e.contains("discover") && e.contains("192.0.2.1:854"), "{e}");
        let e = parse(&["--dlep", "127.0.0.1:0"]).unwrap_err();
        assert!(e.contains("port 0"), "{e}");

        let e = parse(&[
            "--dlep",
            "discover",
            "--dlep-map",
            "00:11:22:33:44=10.0.0.2",
        ])
        .unwrap_err();
        assert!(e.contains("--dlep-map"), "{e}");
        assert!(e.contains("the MAC address '00:11:22:33:44'"), "{e}");
        let e = parse(&[
            "--dlep",
            "discover",
            "--dlep-map",
            "00:11:22:33:44:55=10.0.0",
        ])
        .unwrap_err();
        assert!(e.contains("'10.0.0' is not an IP address"), "{e}");
        let e = parse(&["--dlep", "discover", "--dlep-map", "10.0.0.2"]).unwrap_err();
        assert!(e.contains("give MAC=IP"), "{e}");
        let e = parse(&[
            "--dlep",
            "discover",
            "--dlep-map",
            "00:11:22:33:44:55=10.0.0.2@eth1",
        ])
        .unwrap_err();
        assert!(e.contains("--dlep-map <MAC=IP[@LOCAL]>"), "{e}");
        assert!(
            e.contains("the local address 'eth1' is not an IP address"),
            "{e}"
        );
        // A mapping means nothing without a modem to follow.
        let e = parse(&["--dlep-map", "00:11:22:33:44:55=10.0.0.2"]).unwrap_err();
        assert!(e.contains("--dlep <ADDR[:PORT]|discover>"), "{e}");
    }

    #[tokio::test]
    async fn start_follows_the_modem_only_when_asked() {
        let ep = Endpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            aerotp_net::EndpointConfig::default(),
        )
        .unwrap();
        assert!(DlepArgs::default().start(&ep).unwrap().is_none());
        // A port where nothing listens: the session task runs (retrying) until aborted.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let a = parse(&["--dlep", &format!("127.0.0.1:{port}")]).unwrap();
        let task = a.start(&ep).unwrap().expect("a task");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!task.is_finished(), "the DLEP task ended on its own");
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
    }
}
