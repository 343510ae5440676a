//! The `dlep` and `dlep_map` keys: the radio's DLEP session the gateway's endpoint follows
//! (docs/dlep.md), parsed as `aerotp`'s `--dlep` and `--dlep-map` flags are.

use anyhow::{bail, Result};

use super::FileConfig;

impl FileConfig {
    /// The DLEP client settings (`dlep`) and the destination map (`dlep_map`), checked; the
    /// errors name the key and the entry.
    pub(super) fn dlep(
        &self,
    ) -> Result<(
        Option<aerotp_dlep::ClientConfig>,
        aerotp_net::DestinationMap,
    )> {
        let mut map = aerotp_net::DestinationMap::default();
        for entry in &self.dlep_map {
            let (mac, target) = aerotp_net::DestinationMap::parse_entry(entry)
                .map_err(|e| anyhow::anyhow!("dlep_map (--dlep-map or the `dlep_map` key): {e}"))?;
            map.insert_target(mac, target);
        }
        let Some(target) = &self.dlep else {
            if !self.dlep_map.is_empty() {
                bail!(
                    "dlep_map needs dlep: name the modem to follow (dlep = \"ADDR[:PORT]\" or \
                     \"discover\", or --dlep), or remove dlep_map"
                );
            }
            return Ok((None, map));
        };
        let cfg = aerotp_dlep::parse_target(target)
            .map_err(|e| anyhow::anyhow!("dlep (--dlep or the `dlep` key): {e}"))?;
        Ok((Some(cfg), map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerotp_dlep::Target;

    fn load(toml_text: &str) -> Result<crate::config::Settings> {
        let f: FileConfig = toml::from_str(toml_text)?;
        f.settings()
    }

    #[test]
    fn off_unless_set() {
        let s = load("listen = \"127.0.0.1:0\"").unwrap();
        assert!(s.dlep.is_none());
    }

    #[test]
    fn a_modem_and_mappings_from_the_file() {
        let s = load(
            r#"
listen = "127.0.0.1:0"
dlep = "192.0.2.1"
dlep_map = ["00:11:22:33:44:55=10.77.1.2", "00:11:22:33:44:66=10.77.2.2@10.77.2.1"]
"#,
        )
        .unwrap();
        let map = format!("{:?}", s.dlep_map);
        assert!(map.contains("local: Some(10.77.2.1)"), "{map}");
        let cfg = s.dlep.unwrap();
        assert_eq!(
            cfg.target,
            Target::Connect("192.0.2.1:854".parse().unwrap())
        );
        let s = load("dlep = \"discover\"\nlisten = \"127.0.0.1:0\"").unwrap();
        assert!(matches!(s.dlep.unwrap().target, Target::Discover(_)));
    }

    #[test]
    fn the_flags_win_over_the_file() {
        let file: FileConfig =
            toml::from_str("dlep = \"192.0.2.1\"\ndlep_map = [\"00:11:22:33:44:55=10.0.0.2\"]")
                .unwrap();
        let flags = FileConfig {
            dlep: Some("127.0.0.1:9854".into()),
            ..FileConfig::default()
        };
        let m = flags.merge(file);
        assert_eq!(m.dlep.as_deref(), Some("127.0.0.1:9854"));
        assert_eq!(m.dlep_map, ["00:11:22:33:44:55=10.0.0.2"]);
    }

    /// The key is in force: a gateway's endpoint opens the DLEP session to the modem named.
    #[tokio::test]
    async fn a_gateway_endpoint_opens_the_session() {
        use tokio::io::AsyncReadExt;
        let modem = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s = load(&format!(
            "listen = \"127.0.0.1:0\"\ndlep = \"{}\"",
            modem.local_addr().unwrap()
        ))
        .unwrap();
        let ep = crate::ctx::bind_endpoint(&s, s.egress.listen.unwrap()).unwrap();
        let (mut sock, _) = tokio::time::timeout(std::time::Duration::from_secs(5), modem.accept())
            .await
            .expect("the gateway connects to the modem")
            .unwrap();
        // Its first message: Session Initialization (message type 1).
        let mut head = [0u8; 4];
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            sock.read_exact(&mut head),
        )
        .await
        .expect("a message")
        .unwrap();
        assert_eq!(u16::from_be_bytes([head[0], head[1]]), 1, "{head:?}");
        drop(ep);
    }

    #[test]
    fn bad_values_name_the_key_and_what_is_expected() {
        let e = format!("{:#}", load("dlep = \"modem:x\"").unwrap_err());
        assert!(
            e.contains("dlep (--dlep or the `dlep` key): 'modem:x'"),
            "{e}"
        );
        assert!(e.contains("discover"), "{e}");
        let e = format!(
            "{:#}",
            load("dlep = \"discover\"\ndlep_map = [\"00:11:22:33:44=10.0.0.2\"]").unwrap_err()
        );
        assert!(
            e.contains("dlep_map") && e.contains("'00:11:22:33:44'"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            load("dlep = \"discover\"\ndlep_map = [\"00:11:22:33:44:55=x\"]").unwrap_err()
        );
        assert!(e.contains("'x' is not an IP address"), "{e}");
        let e = format!(
            "{:#}",
            load("dlep = \"discover\"\ndlep_map = [\"00:11:22:33:44:55=10.0.0.2@lan0\"]")
                .unwrap_err()
        );
        assert!(
            e.contains("dlep_map") && e.contains("the local address 'lan0' is not an IP address"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            load("dlep_map = [\"00:11:22:33:44:55=10.0.0.2\"]").unwrap_err()
        );
        assert!(e.contains("dlep_map needs dlep"), "{e}");
        // An unknown spelling is refused by name, as every key is.
        assert!(load("dlep_mapping = []").is_err());
    }
}
