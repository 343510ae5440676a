//! Transparent interception (docs/gateway.md §Transparent interception): the ingress receives
//! TCP connections and UDP datagrams addressed to any destination, steered to it by nftables
//! TPROXY rules, learns each one's original destination and carries it to the egress in the
//! flow's open record or datagram header, so the egress connects there. IPv4 and IPv6.
//!
//! Modules, each importing only those listed before it: `policy` (allow/deny lists),
//! `classes` (a class per intercepted TCP destination), `sysctls` (the kernel settings `rules --tcp-tun` changes, recorded and put back), `rules`
//! (the nftables rules and `aerotp gw rules`), `origdst` (the sockets and the original
//! destination). The accept loops live in `crate::ingress`, which owns the flows.

pub mod classes;
pub(crate) mod origdst;
pub mod policy;
pub mod rules;
pub mod sysctls;

use std::net::SocketAddr;

use aerotp_net::Mode;
use serde::Deserialize;

use crate::frame::Class;
pub(crate) use classes::TcpClasses;
pub use policy::{DestPolicy, DestRule};
pub use rules::RuleSpec;

/// The `[transparent]` table of an ingress's config file (flags: `--transparent-*`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TransparentSpec {
    /// Where TPROXY delivers intercepted TCP connections (`--transparent-tcp`).
    pub tcp_listen: Option<String>,
    /// Where TPROXY delivers intercepted UDP datagrams (`--transparent-udp`).
    pub udp_listen: Option<String>,
    /// Mode of intercepted TCP flows: near-reliable (default) or reliable.
    pub mode: Option<String>,
    /// Reliable mode, end to end: the TUN device intercepted TCP is routed into, terminated
    /// by the ingress's user-space TCP (`--transparent-tun`; docs/gateway.md §TCP reliable).
    pub tun: Option<String>,
    /// Class of intercepted flows: control, telemetry, bulk (default).
    pub class: Option<String>,
    /// Class of intercepted UDP flows, where it differs from `class`
    /// (`--transparent-udp-class`): telemetry datagrams beside bulk TCP uploads.
    pub udp_class: Option<String>,
    /// Classes of intercepted TCP flows by destination, `CLASS=PREFIX[:PORTS]`, the first
    /// that matches wins, none: `class` (`--transparent-tcp-class`, repeatable).
    #[serde(default)]
    pub tcp_classes: Vec<String>,
    /// Destinations carried (`PREFIX[:PORTS]`; none: all not denied).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Destinations refused (a TCP connection is reset, a datagram dropped).
    #[serde(default)]
    pub deny: Vec<String>,
}

/// Validated transparent settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Transparent {
    pub tcp: Option<SocketAddr>,
    pub udp: Option<SocketAddr>,
    /// The TUN device of the user-space TCP (reliable mode only).
    pub tun: Option<String>,
    pub mode: Mode,
    pub class: Class,
    /// Class of intercepted UDP flows (`class` unless set apart).
    pub udp_class: Class,
    /// Class of each intercepted TCP flow by its destination (default `class`).
    pub(crate) tcp_classes: TcpClasses,
    pub policy: DestPolicy,
}

impl Transparent {
    /// The class of an intercepted TCP flow to `dest`: the first `tcp_classes` rule that
    /// matches it, else `class`.
    pub fn tcp_class(&self, dest: SocketAddr) -> Class {
        self.tcp_classes.class_for(dest)
    }
}

fn listen_addr(key: &str, s: &str) -> Result<SocketAddr, String> {
    match s.parse::<SocketAddr>() {
        Ok(a) if a.port() != 0 => Ok(a),
        _ => Err(format!(
            "{key} '{s}': give an address and a non-zero port: [::]:7400 for both IPv4 and \
             IPv6, 0.0.0.0:7400 for IPv4 only (the port `aerotp gw rules --tcp-port/--udp-port` \
             steers intercepted traffic to)"
        )),
    }
}

impl TransparentSpec {
    /// Validates the table; errors name the key and its flag, the value and what is accepted.
    pub fn settings(&self) -> Result<Transparent, String> {
        let tcp = self
            .tcp_listen
            .as_deref()
            .map(|s| listen_addr("transparent.tcp_listen (--transparent-tcp)", s))
            .transpose()?;
        let udp = self
            .udp_listen
            .as_deref()
            .map(|s| listen_addr("transparent.udp_listen (--transparent-udp)", s))
            .transpose()?;
        if !self.tcp_classes.is_empty() && tcp.is_none() && self.tun.is_none() {
            return Err(format!(
                "transparent.tcp_classes (--transparent-tcp-class) '{}': classes of \
                 intercepted TCP need TCP interception: give tcp_listen (--transparent-tcp) or \
                 tun (--transparent-tun) too, or leave the rules out (explicit flows take \
                 `class` in their [[flow]] table)",
                self.tcp_classes.join("', '")
            ));
        }
        if tcp.is_none() && udp.is_none() && self.tun.is_none() {
            return Err(
                "transparent: give tcp_listen (--transparent-tcp), tun (--transparent-tun) \
                 and/or udp_listen (--transparent-udp), or leave the transparent settings out"
                    .into(),
            );
        }
        let mode = self.mode()?;
        self.check_tun(mode, tcp.is_some())?;
        let (class, udp_class) = self.classes(udp.is_some())?;
        let tcp_classes = TcpClasses::parse(
            "transparent.tcp_classes (--transparent-tcp-class)",
            &self.tcp_classes,
            class,
        )?;
        let policy = DestPolicy::parse(
            ("transparent.allow (--transparent-allow)", &self.allow),
            ("transparent.deny (--transparent-deny)", &self.deny),
        )?;
        Ok(Transparent {
            tcp,
            udp,
            tun: self.tun.clone(),
            mode,
            class,
            udp_class,
            tcp_classes,
            policy,
        })
    }

    /// `mode`: near-reliable (the default) or reliable.
    fn mode(&self) -> Result<Mode, String> {
        Ok(match self.mode.as_deref() {
            None => Mode::NearReliable,
            Some(m) => match m.parse::<Mode>() {
                Ok(x @ (Mode::NearReliable | Mode::Reliable)) => x,
                _ => {
                    return Err(format!(
                        "transparent.mode (--transparent-mode) '{m}': give near-reliable or \
                         reliable (intercepted UDP is carried in datagram mode)"
                    ))
                }
            },
        })
    }

    /// `tun`, if given: a device name, in reliable `mode`, and not with `tcp_listen`
    /// (`tcp_given`).
    fn check_tun(&self, mode: Mode, tcp_given: bool) -> Result<(), String> {
        let Some(t) = &self.tun else {
            return Ok(());
        };
        if mode != Mode::Reliable {
            return Err(format!(
                "transparent.tun (--transparent-tun) '{t}': the user-space TCP serves \
                 reliable mode only; add mode = \"reliable\" (--transparent-mode reliable) \
                 — near-reliable flows keep custody semantics on --transparent-tcp"
            ));
        }
        if t.is_empty() || t.len() >= 16 || t.contains(['/', ' ', '\0']) {
            return Err(format!(
                "transparent.tun (--transparent-tun) '{t}': a network device name of 1 to \
                 15 characters without '/' or spaces"
            ));
        }
        if tcp_given {
            return Err(format!(
                "transparent.tun (--transparent-tun) '{t}' and tcp_listen \
                 (--transparent-tcp): intercepted reliable TCP comes in on the TUN device; \
                 give one of the two"
            ));
        }
        Ok(())
    }

    /// The class of intercepted flows and of intercepted UDP (that one only with
    /// `udp_listen`, `udp_given`).
    fn classes(&self, udp_given: bool) -> Result<(Class, Class), String> {
        let class = match self.class.as_deref() {
            None => Class::Bulk,
            Some(c) => c
                .parse()
                .map_err(|e: String| format!("transparent.class (--transparent-class): {e}"))?,
        };
        let udp_class = match self.udp_class.as_deref() {
            None => class,
            Some(c) => c.parse().map_err(|e: String| {
                format!("transparent.udp_class (--transparent-udp-class): {e}")
            })?,
        };
        if self.udp_class.is_some() && !udp_given {
            return Err(
                "transparent.udp_class (--transparent-udp-class) is the class of \
                        intercepted UDP: give udp_listen (--transparent-udp) too, or leave it out"
                    .into(),
            );
        }
        Ok((class, udp_class))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_validate_every_key_and_name_it() {
        let ok = TransparentSpec {
            tcp_listen: Some("0.0.0.0:7400".into()),
            udp_listen: Some("0.0.0.0:7401".into()),
            mode: Some("reliable".into()),
            allow: vec!["10.0.0.0/8".into()],
            ..Default::default()
        };
        let t = ok.settings().unwrap();
        let both = TransparentSpec {
            tcp_listen: Some("[::]:7400".into()),
            ..Default::default()
        };
        assert_eq!(
            both.settings().unwrap().tcp,
            Some("[::]:7400".parse().unwrap())
        );
        assert_eq!(t.mode, Mode::Reliable);
        let tun = TransparentSpec {
            tun: Some("aerotp0".into()),
            mode: Some("reliable".into()),
            ..Default::default()
        };
        assert_eq!(tun.settings().unwrap().tun.as_deref(), Some("aerotp0"));
        assert_eq!(t.class, Class::Bulk);
        assert_eq!(
            t.udp_class,
            Class::Bulk,
            "UDP takes the flows' class unless set"
        );
        let split = TransparentSpec {
            class: Some("bulk".into()),
            udp_class: Some("telemetry".into()),
            ..ok.clone()
        };
        let s = split.settings().unwrap();
        assert_eq!((s.class, s.udp_class), (Class::Bulk, Class::Telemetry));
        let ranked = TransparentSpec {
            tcp_classes: vec!["control=*:7100".into(), "telemetry=10.77.0.0/16".into()],
            ..ok.clone()
        }
        .settings()
        .unwrap();
        assert_eq!(
            ranked.tcp_class("10.77.0.2:7100".parse().unwrap()),
            Class::Control
        );
        assert_eq!(
            ranked.tcp_class("10.77.0.2:7200".parse().unwrap()),
            Class::Telemetry
        );
        assert_eq!(
            ranked.tcp_class("10.78.0.2:7200".parse().unwrap()),
            Class::Bulk
        );
        assert_eq!(t.tcp_class("10.77.0.2:7100".parse().unwrap()), Class::Bulk);
        let on_tun = TransparentSpec {
            tcp_classes: vec!["control=*:7100".into()],
            ..tun.clone()
        };
        assert!(
            on_tun.settings().is_ok(),
            "rules apply to the TUN's flows too"
        );
        assert!(t.policy.permits("10.1.2.3:80".parse().unwrap()));
        assert!(!t.policy.permits("11.1.2.3:80".parse().unwrap()));
        let cases = [
            (TransparentSpec::default(), "--transparent-tcp"),
            (
                TransparentSpec {
                    tcp_listen: Some("0.0.0.0:0".into()),
                    ..Default::default()
                },
                "--transparent-tcp) '0.0.0.0:0'",
            ),
            (
                TransparentSpec {
                    udp_listen: Some("7401".into()),
                    ..Default::default()
                },
                "--transparent-udp) '7401'",
            ),
            (
                TransparentSpec {
                    udp_listen: Some("[::]:0".into()),
                    ..Default::default()
                },
                "--transparent-udp) '[::]:0'",
            ),
            (
                TransparentSpec {
                    mode: Some("datagram".into()),
                    ..ok.clone()
                },
                "--transparent-mode) 'datagram'",
            ),
            (
                TransparentSpec {
                    tun: Some("aerotp0".into()),
                    ..ok.clone()
                },
                "--transparent-tun) 'aerotp0' and tcp_listen",
            ),
            (
                TransparentSpec {
                    tun: Some("aerotp0".into()),
                    tcp_listen: None,
                    mode: None,
                    ..ok.clone()
                },
                "reliable mode only",
            ),
            (
                TransparentSpec {
                    tun: Some("a/b".into()),
                    tcp_listen: None,
                    ..ok.clone()
                },
                "--transparent-tun) 'a/b'",
            ),
            (
                TransparentSpec {
                    class: Some("urgent".into()),
                    ..ok.clone()
                },
                "--transparent-class",
            ),
            (
                TransparentSpec {
                    udp_class: Some("urgent".into()),
                    ..ok.clone()
                },
                "--transparent-udp-class): ",
            ),
            (
                TransparentSpec {
                    udp_class: Some("telemetry".into()),
                    udp_listen: None,
                    ..ok.clone()
                },
                "give udp_listen (--transparent-udp) too",
            ),
            (
                TransparentSpec {
                    tcp_classes: vec!["urgent=*:7100".into()],
                    ..ok.clone()
                },
                "--transparent-tcp-class) 'urgent=*:7100': unknown class 'urgent'",
            ),
            (
                TransparentSpec {
                    tcp_classes: vec!["control=10.0.0.0/40:7100".into()],
                    ..ok.clone()
                },
                "prefix length '40' is not 0 to 32",
            ),
            (
                TransparentSpec {
                    tcp_classes: vec!["control=*:7200-7100".into()],
                    ..ok.clone()
                },
                "port range 7200-7100 is empty",
            ),
            (
                TransparentSpec {
                    tcp_classes: vec!["control=*:7100".into()],
                    tcp_listen: None,
                    ..ok.clone()
                },
                "need TCP interception: give tcp_listen (--transparent-tcp) or tun",
            ),
            (
                TransparentSpec {
                    tcp_classes: vec!["control=*:7100".into()],
                    ..Default::default()
                },
                "--transparent-tcp-class) 'control=*:7100': classes of intercepted TCP",
            ),
            (
                TransparentSpec {
                    deny: vec!["10.0.0.0/40".into()],
                    ..ok.clone()
                },
                "--transparent-deny) '10.0.0.0/40'",
            ),
        ];
        for (spec, want) in cases {
            let e = spec.settings().unwrap_err();
            assert!(e.contains(want), "want {want}: {e}");
        }
    }
}
