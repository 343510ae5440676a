//! A DLEP modem's word into the engine (docs/dlep.md, "What the engine does with it"): the
//! router side of `aerotp_dlep` runs beside the endpoint, and each destination event becomes
//! `aerotp_proto::RadioSignal`s for the peer addresses (and, when the mapping says, the local
//! address whose radio it is: `aerotp_proto::RadioTarget`) that destination stands for.

use crate::driver::{Shared, State};
use crate::tap::wall_clock;
use crate::Endpoint;
use aerotp_dlep::{Destination, Event, Mac};
use aerotp_proto::{RadioApplied, RadioSignal, RadioTarget};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// Most destinations the bridge remembers (the DLEP session's own table bound is lower).
const MAX_DESTINATIONS: usize = 1024;

/// Which peer addresses a DLEP destination stands for: the configured mapping first (a
/// modem that reports no layer-3 address, or one that is not the AeroTP peer's, or a radio
/// that is one of several local addresses' toward one peer address), else the addresses the
/// modem reports for it (every path toward them, whatever its local address).
#[derive(Debug, Clone, Default)]
pub struct DestinationMap {
    configured: HashMap<Mac, Vec<RadioTarget>>,
}

impl DestinationMap {
    /// `mac` stands for `peer`, every path toward it (several calls add several addresses).
    pub fn insert(&mut self, mac: Mac, peer: IpAddr) {
        self.insert_target(mac, RadioTarget::peer(peer));
    }

    /// `mac` stands for the paths `target` names: toward its peer and, when it names one,
    /// from its local address only.
    pub fn insert_target(&mut self, mac: Mac, target: RadioTarget) {
        let v = self.configured.entry(mac).or_default();
        if !v.contains(&target) {
            v.push(target);
        }
    }

    /// One mapping as `--dlep-map` and the gateways' `dlep_map` key give it: `MAC=IP` (every
    /// path toward IP) or `MAC=IP@LOCAL` (only the paths toward IP from this host's address
    /// LOCAL: the modem is the radio of LOCAL). The errors say what is wrong and what is
    /// expected.
    pub fn parse_entry(s: &str) -> Result<(Mac, RadioTarget), String> {
        let (mapping, local) = match s.split_once('@') {
            Some((m, l)) => (m, Some(l.trim())),
            None => (s, None),
        };
        let (mac, peer) = aerotp_dlep::parse_mapping(mapping).map_err(|e| {
            if local.is_some() {
                format!("'{s}': {e}")
            } else {
                e
            }
        })?;
        let Some(l) = local else {
            return Ok((mac, RadioTarget::peer(peer)));
        };
        let local = l.parse::<IpAddr>().map_err(|_| {
            format!(
                "'{s}': the local address '{l}' is not an IP address: after @ give this \
                 host's address whose radio the modem is (the local address of the path it \
                 steers), without a port, e.g. 00:11:22:33:44:55=10.0.0.2@10.0.1.1"
            )
        })?;
        if local.is_unspecified() || local.is_multicast() {
            return Err(format!(
                "'{s}': {local} is not a local address a path leaves from: give this host's \
                 address on that radio's link"
            ));
        }
        if local.is_ipv4() != peer.is_ipv4() {
            return Err(format!(
                "'{s}': the local address {local} and the peer {peer} are not of one family: \
                 no path goes from one to the other"
            ));
        }
        Ok((mac, RadioTarget::on(local, peer)))
    }

    fn targets_of(&self, d: &Destination) -> Vec<RadioTarget> {
        if let Some(v) = self.configured.get(&d.mac) {
            return v.clone();
        }
        let a = &d.addresses;
        a.ipv4
            .iter()
            .map(|&ip| IpAddr::from(ip))
            .chain(a.ipv6.iter().map(|&ip| IpAddr::from(ip)))
            .map(RadioTarget::peer)
            .collect()
    }
}

/// Turns DLEP events into radio signals per target (peer address, and local address when
/// mapped so); remembers which targets each destination stood for, so its Down, Pause and
/// Restart reach them.
#[derive(Debug, Default)]
pub struct RadioBridge {
    map: DestinationMap,
    up: HashMap<Mac, Vec<RadioTarget>>,
}

impl RadioBridge {
    pub fn new(map: DestinationMap) -> RadioBridge {
        RadioBridge {
            map,
            up: HashMap::new(),
        }
    }

    /// The signals `event` means, each for one target.
    pub fn signals(&mut self, event: &Event) -> Vec<(RadioTarget, RadioSignal)> {
        let mut out = Vec::new();
        match event {
            Event::DestinationUp(d) | Event::DestinationUpdate(d) => {
                let peers = self.map.targets_of(d);
                let fresh = matches!(event, Event::DestinationUp(_));
                for &p in &peers {
                    if fresh {
                        out.push((p, RadioSignal::Up));
                    }
                    out.extend(state_of(d).into_iter().map(|s| (p, s)));
                }
                if self.up.len() < MAX_DESTINATIONS || self.up.contains_key(&d.mac) {
                    self.up.insert(d.mac, peers);
                }
            }
            Event::DestinationDown { mac } => {
                for p in self.up.remove(mac).unwrap_or_default() {
                    out.push((p, RadioSignal::Down));
                }
            }
            Event::SessionLost { destinations, .. } => {
                for mac in destinations {
                    for p in self.up.remove(mac).unwrap_or_default() {
                        out.push((p, RadioSignal::Down));
                    }
                }
            }
            Event::Pause { mac, queues } | Event::Restart { mac, queues } => {
                let signal = if matches!(event, Event::Pause { .. }) {
                    RadioSignal::Pause
                } else {
                    RadioSignal::Restart
                };
                if queues.is_empty() {
                    return out;
                }
                let peers: Vec<RadioTarget> = match mac {
                    Some(m) => self.up.get(m).cloned().unwrap_or_default(),
                    None => self.up.values().flatten().copied().collect(),
                };
                out.extend(peers.into_iter().map(|p| (p, signal)));
            }
            _ => {}
        }
        out
    }
}

/// What a destination's current state says: its transmit rate (or that it says none), its
/// latency, and whether any of its queues is paused (AeroTP's traffic is not mapped to the
/// modem's RFC 8651 queues yet: any paused queue holds it, the safe reading).
fn state_of(d: &Destination) -> Vec<RadioSignal> {
    let m = &d.metrics;
    let mut out = vec![match m.current_rate_tx.or(m.max_rate_tx) {
        Some(r) => RadioSignal::Rate(r),
        None => RadioSignal::RateUnknown,
    }];
    if let Some(l) = m
        .latency_range_us
        .map(|(min, _)| Duration::from_micros(min))
        .or(m.latency())
    {
        out.push(RadioSignal::Latency(l));
    }
    out.push(if d.paused.is_empty() {
        RadioSignal::Restart
    } else {
        RadioSignal::Pause
    });
    out
}

impl State {
    /// Logs the radio changes the engine applied (info level) and hands them to the engine
    /// tap (`--qlog`), each at the engine's time of the change on the wall clock; `now` is
    /// the engine's time of this driver step. Every step drains them, so the engine's bound
    /// (`RADIO_CHANGES_HELD`) is never what loses one.
    pub(crate) fn report_radio_changes(&mut self, now: Duration) {
        let wall = wall_clock();
        while let Some(c) = self.engine.poll_radio_change() {
            let at = wall.saturating_sub(now.saturating_sub(c.at));
            let said = match c.signal {
                RadioSignal::Rate(bps) => format!("rate {bps} b/s"),
                RadioSignal::Latency(d) => format!("latency {d:?}"),
                s => s.name().to_owned(),
            };
            tracing::info!(
                connection = c.connection.0,
                path = c.path,
                remote = %c.remote,
                rate_bps = c.rate_bps,
                rate_reason = c.rate_reason.name(),
                path_rate_bps = c.path_rate_bps,
                "radio: {said} in force"
            );
            if let Some(t) = &self.engine_tap {
                t.radio(at, &c);
            }
        }
    }
}

/// `signal` for `target` into the engine, and the driver woken to act on it.
fn apply(shared: &Shared, target: RadioTarget, signal: RadioSignal) -> RadioApplied {
    let now = shared.now();
    let applied = shared.lock().engine.radio_on(now, target, signal);
    shared.wake.notify_one();
    applied
}

impl Endpoint {
    /// What a radio said of the link toward `peer` (`aerotp_proto::Endpoint::radio`).
    pub fn radio(&self, peer: IpAddr, signal: RadioSignal) -> RadioApplied {
        apply(self.shared(), RadioTarget::peer(peer), signal)
    }

    /// What a radio said of the paths `target` names (`aerotp_proto::Endpoint::radio_on`):
    /// toward its peer and, when it names one, from its local address only.
    pub fn radio_on(&self, target: RadioTarget, signal: RadioSignal) -> RadioApplied {
        apply(self.shared(), target, signal)
    }

    /// Runs a DLEP router session with `cfg` (crates/dlep) until the returned task is
    /// aborted or the endpoint is gone: every destination event reaches the engine as radio
    /// signals (each change they make to a path logged at info level, traced with `--qlog`
    /// and counted in the metrics), and the modem's session events are logged.
    pub fn follow_dlep(
        &self,
        cfg: aerotp_dlep::ClientConfig,
        map: DestinationMap,
    ) -> tokio::task::JoinHandle<()> {
        let weak = self.shared_weak();
        let (client, mut events) = aerotp_dlep::spawn(cfg);
        tokio::spawn(async move {
            let _client = client;
            let mut bridge = RadioBridge::new(map);
            while let Some(ev) = events.recv().await {
                // Not a user of the endpoint: the bridge ends with it.
                let Some(shared) = weak.upgrade() else { break };
                match &ev {
                    Event::SessionUp(p) => tracing::info!(peer = ?p, "DLEP session up"),
                    Event::SessionLost { reason, .. } => {
                        tracing::warn!(?reason, "DLEP session lost: its destinations are down")
                    }
                    Event::ConnectFailed {
                        addr,
                        error,
                        retry_in,
                    } => tracing::warn!(
                        ?addr, %error, ?retry_in, "DLEP modem not reachable; retrying"
                    ),
                    Event::Anomaly(a) => {
                        tracing::warn!(anomaly = ?a, "DLEP modem said something odd")
                    }
                    _ => {}
                }
                for (target, signal) in bridge.signals(&ev) {
                    let applied = apply(&shared, target, signal);
                    // Every signal, repeats too (a modem restates its destination's whole
                    // state); the changes in force are logged at info by the driver.
                    tracing::debug!(%target, ?signal, paths = applied.paths, "radio signal");
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerotp_dlep::{Addresses, Metrics};
    use std::net::Ipv4Addr;

    fn dest(mac: u8, ip: Option<Ipv4Addr>, rate: Option<u64>) -> Destination {
        Destination {
            mac: Mac::from_slice(&[2, 0, 0, 0, 0, mac]).unwrap(),
            addresses: Addresses {
                ipv4: ip.into_iter().collect(),
                ..Addresses::default()
            },
            metrics: Metrics {
                current_rate_tx: rate,
                latency_us: Some(25_000),
                ..Metrics::default()
            },
            paused: Vec::new(),
        }
    }

    #[test]
    fn a_destination_reaches_its_reported_or_configured_address() {
        let peer = RadioTarget::peer(IpAddr::from(Ipv4Addr::new(10, 0, 0, 2)));
        let mut b = RadioBridge::new(DestinationMap::default());
        let s = b.signals(&Event::DestinationUp(dest(
            1,
            Some(Ipv4Addr::new(10, 0, 0, 2)),
            Some(1_000_000),
        )));
        assert_eq!(
            s,
            vec![
                (peer, RadioSignal::Up),
                (peer, RadioSignal::Rate(1_000_000)),
                (peer, RadioSignal::Latency(Duration::from_millis(25))),
                (peer, RadioSignal::Restart),
            ]
        );
        let mac = Mac::from_slice(&[2, 0, 0, 0, 0, 1]).unwrap();
        assert_eq!(
            b.signals(&Event::Pause {
                mac: Some(mac),
                queues: vec![255]
            }),
            vec![(peer, RadioSignal::Pause)]
        );
        assert_eq!(
            b.signals(&Event::DestinationDown { mac }),
            vec![(peer, RadioSignal::Down)]
        );
        // Gone: a later pause for it reaches nothing.
        assert!(b
            .signals(&Event::Pause {
                mac: Some(mac),
                queues: vec![255]
            })
            .is_empty());

        // A modem that reports no address: the configured mapping names the peer.
        let other = IpAddr::from(Ipv4Addr::new(192, 168, 1, 9));
        let mut map = DestinationMap::default();
        map.insert(Mac::from_slice(&[2, 0, 0, 0, 0, 7]).unwrap(), other);
        let other = RadioTarget::peer(other);
        let mut b = RadioBridge::new(map);
        let s = b.signals(&Event::DestinationUpdate(dest(7, None, None)));
        assert_eq!(s[0], (other, RadioSignal::RateUnknown));
        let lost = b.signals(&Event::SessionLost {
            reason: aerotp_dlep::LostReason::ConnectionClosed,
            destinations: vec![Mac::from_slice(&[2, 0, 0, 0, 0, 7]).unwrap()],
        });
        assert_eq!(lost, vec![(other, RadioSignal::Down)]);
    }

    #[test]
    fn a_mapping_may_name_the_local_address_whose_radio_the_modem_is() {
        let peer = IpAddr::from(Ipv4Addr::new(10, 9, 0, 2));
        let local = IpAddr::from(Ipv4Addr::new(10, 0, 1, 1));
        let mac = Mac::from_slice(&[2, 0, 0, 0, 0, 1]).unwrap();
        let (m, t) = DestinationMap::parse_entry("02:00:00:00:00:01=10.9.0.2@10.0.1.1").unwrap();
        assert_eq!((m, t), (mac, RadioTarget::on(local, peer)));
        let (_, t) = DestinationMap::parse_entry("02:00:00:00:00:01=10.9.0.2").unwrap();
        assert_eq!(t, RadioTarget::peer(peer));
        let (_, t) = DestinationMap::parse_entry("02:00:00:00:00:01 = fe80::2 @ fe80::1").unwrap();
        assert_eq!(t.local, Some("fe80::1".parse().unwrap()));

        for (bad, says) in [
            (
                "02:00:00:00:00:01=10.9.0.2@",
                "the local address '' is not an IP address",
            ),
            (
                "02:00:00:00:00:01=10.9.0.2@eth0",
                "the local address 'eth0'",
            ),
            (
                "02:00:00:00:00:01=10.9.0.2@10.0.1.1:9000",
                "is not an IP address",
            ),
            (
                "02:00:00:00:00:01=10.9.0.2@0.0.0.0",
                "not a local address a path leaves",
            ),
            ("02:00:00:00:00:01=10.9.0.2@fe80::1", "not of one family"),
            ("02:00:00:00:00=10.9.0.2@10.0.1.1", "the MAC address"),
            ("02:00:00:00:00:01=x@10.0.1.1", "'x' is not an IP address"),
        ] {
            let e = DestinationMap::parse_entry(bad).unwrap_err();
            assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
        }

        // The modem's destination reaches only that local address's paths, Down included.
        let mut map = DestinationMap::default();
        map.insert_target(mac, t);
        map.insert_target(mac, RadioTarget::on(local, peer));
        let mut b = RadioBridge::new(map);
        let s = b.signals(&Event::DestinationUp(dest(
            1,
            Some(Ipv4Addr::new(10, 9, 0, 2)),
            None,
        )));
        assert!(
            s.iter().all(|(t, _)| t.local.is_some()),
            "the mapping, not the reported address: {s:?}"
        );
        let down = b.signals(&Event::DestinationDown { mac });
        assert_eq!(
            down,
            vec![
                (
                    RadioTarget::on("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap()),
                    RadioSignal::Down
                ),
                (RadioTarget::on(local, peer), RadioSignal::Down),
            ]
        );
    }
}
