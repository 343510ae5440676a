//! A message's data items sorted into what the session uses, with implausible values set aside
//! as anomalies.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::config::Config;
use super::event::Anomaly;
use super::types::{Addresses, Metrics};
use crate::codec::ids::item;
use crate::codec::{DataItem, Mac, QueueParameters, StatusCode};

/// An address added or dropped by an IPv4/IPv6 Address or Attached Subnet item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddrChange {
    V4(bool, Ipv4Addr),
    V6(bool, Ipv6Addr),
    V4Net(bool, Ipv4Addr, u8),
    V6Net(bool, Ipv6Addr, u8),
}

#[derive(Debug, Default)]
pub(crate) struct Digest {
    pub mac: Option<Mac>,
    pub status: Option<(StatusCode, String)>,
    pub heartbeat_ms: Option<u32>,
    pub peer_type: Option<String>,
    pub extensions: Option<Vec<u16>>,
    pub metrics: Metrics,
    pub addresses: Vec<AddrChange>,
    pub pause: Vec<u8>,
    pub restart: Vec<u8>,
    pub queues: Option<QueueParameters>,
}

impl Digest {
    /// Sorts `items`. `ll_latency_range`: LL-DLEP's private latency-range extension was
    /// negotiated, so its private item reads as RFC 8757's. The MAC is taken first so that
    /// anomalies name the destination.
    pub(crate) fn of(
        items: &[DataItem],
        cfg: &Config,
        ll_latency_range: bool,
        anomalies: &mut Vec<Anomaly>,
    ) -> Digest {
        let mut d = Digest {
            mac: items.iter().find_map(|i| match i {
                DataItem::MacAddress(m) => Some(*m),
                _ => None,
            }),
            ..Digest::default()
        };
        let limits = Limits {
            mac: d.mac,
            max_latency_us: u64::try_from(cfg.max_latency.as_micros()).unwrap_or(u64::MAX),
            max_rate_bps: cfg.max_rate_bps,
            ll_latency_range,
        };
        // Implausible rates are reported as found, the other anomalies after every item: the
        // order the session has always reported them in.
        let mut later = Vec::new();
        for it in items {
            if !d.take_session_item(it) && !d.take_address(it) {
                d.take_metric(it, &limits, anomalies, &mut later);
            }
        }
        anomalies.append(&mut later);
        d
    }

    /// An item about the session or the destination's queues; false for any other.
    fn take_session_item(&mut self, it: &DataItem) -> bool {
        match it {
            DataItem::Status { code, text } => self.status = Some((*code, text.clone())),
            DataItem::HeartbeatInterval(ms) => self.heartbeat_ms = Some(*ms),
            DataItem::PeerType { description, .. } => self.peer_type = Some(description.clone()),
            DataItem::ExtensionsSupported(e) => self.extensions = Some(e.clone()),
            DataItem::Pause(q) => self.pause.extend_from_slice(q),
            DataItem::Restart(q) => self.restart.extend_from_slice(q),
            DataItem::QueueParameters(q) => self.queues = Some(q.clone()),
            _ => return false,
        }
        true
    }

    /// An address or subnet added or dropped; false for any other item.
    fn take_address(&mut self, it: &DataItem) -> bool {
        let change = match it {
            DataItem::Ipv4Address { add, addr } => AddrChange::V4(*add, *addr),
            DataItem::Ipv6Address { add, addr } => AddrChange::V6(*add, *addr),
            DataItem::Ipv4AttachedSubnet { add, addr, prefix } => {
                AddrChange::V4Net(*add, *addr, *prefix)
            }
            DataItem::Ipv6AttachedSubnet { add, addr, prefix } => {
                AddrChange::V6Net(*add, *addr, *prefix)
            }
            _ => return false,
        };
        self.addresses.push(change);
        true
    }

    /// A link metric, kept when plausible; an implausible one is an anomaly instead (a rate's
    /// in `anomalies`, the others' in `later`).
    fn take_metric(
        &mut self,
        it: &DataItem,
        limits: &Limits,
        anomalies: &mut Vec<Anomaly>,
        later: &mut Vec<Anomaly>,
    ) {
        let mac = limits.mac;
        let m = &mut self.metrics;
        let mut rate = |slot: &mut Option<u64>, ty: u16, v: u64| {
            if v == 0 || v > limits.max_rate_bps {
                anomalies.push(Anomaly::Implausible {
                    mac,
                    item: ty,
                    value: v,
                });
            } else {
                *slot = Some(v);
            }
        };
        match it {
            DataItem::MaxDataRateRx(v) => rate(&mut m.max_rate_rx, item::MAX_DATA_RATE_RX, *v),
            DataItem::MaxDataRateTx(v) => rate(&mut m.max_rate_tx, item::MAX_DATA_RATE_TX, *v),
            DataItem::CurrentDataRateRx(v) => {
                rate(&mut m.current_rate_rx, item::CURRENT_DATA_RATE_RX, *v)
            }
            DataItem::CurrentDataRateTx(v) => {
                rate(&mut m.current_rate_tx, item::CURRENT_DATA_RATE_TX, *v)
            }
            DataItem::Latency(v) if *v > limits.max_latency_us => {
                later.push(Anomaly::Implausible {
                    mac,
                    item: item::LATENCY,
                    value: *v,
                })
            }
            DataItem::Latency(v) => m.latency_us = Some(*v),
            DataItem::Resources(v) => m.resources = Some(*v),
            DataItem::RelativeLinkQualityRx(v) => m.rlq_rx = Some(*v),
            DataItem::RelativeLinkQualityTx(v) => m.rlq_tx = Some(*v),
            DataItem::Mtu(0) => later.push(Anomaly::Implausible {
                mac,
                item: item::MTU,
                value: 0,
            }),
            DataItem::Mtu(v) => m.mtu = Some(*v),
            DataItem::LatencyRange { max, min } => limits.latency_range(m, *max, *min, later),
            DataItem::Unknown { ty, value }
                if limits.ll_latency_range
                    && *ty == item::LL_DLEP_LATENCY_RANGE
                    && value.len() == 16 =>
            {
                let max = u64::from_be_bytes(value[..8].try_into().unwrap_or([0; 8]));
                let min = u64::from_be_bytes(value[8..].try_into().unwrap_or([0; 8]));
                limits.latency_range(m, max, min, later)
            }
            // Connection points belong to Peer Offer; the MAC was taken first; anything else
            // is an extension this side does not interpret.
            _ => {}
        }
    }
}

/// What makes a metric plausible, and whom an anomaly names.
struct Limits {
    mac: Option<Mac>,
    max_latency_us: u64,
    max_rate_bps: u64,
    /// LL-DLEP's private latency-range item reads as RFC 8757's.
    ll_latency_range: bool,
}

impl Limits {
    /// A latency range, kept when `min <= max <= max_latency_us`.
    fn latency_range(&self, m: &mut Metrics, max: u64, min: u64, later: &mut Vec<Anomaly>) {
        if min > max || max > self.max_latency_us {
            later.push(Anomaly::Implausible {
                mac: self.mac,
                item: item::LATENCY_RANGE,
                value: max,
            });
        } else {
            m.latency_range_us = Some((min, max));
        }
    }
}

fn change<T: PartialEq>(v: &mut Vec<T>, add: bool, x: T, cap: usize) -> bool {
    if add {
        if !v.contains(&x) {
            if v.len() >= cap {
                return false;
            }
            v.push(x);
        }
    } else {
        v.retain(|y| *y != x);
    }
    true
}

/// Applies address changes; false when the cap made some of them be ignored.
pub(crate) fn apply_addresses(a: &mut Addresses, changes: &[AddrChange], cap: usize) -> bool {
    let mut all = true;
    for c in changes {
        all &= match *c {
            AddrChange::V4(add, x) => change(&mut a.ipv4, add, x, cap),
            AddrChange::V6(add, x) => change(&mut a.ipv6, add, x, cap),
            AddrChange::V4Net(add, x, p) => change(&mut a.ipv4_subnets, add, (x, p), cap),
            AddrChange::V6Net(add, x, p) => change(&mut a.ipv6_subnets, add, (x, p), cap),
        };
    }
    all
}

/// Adds queue indexes to a sorted set (Pause) or removes them (Restart).
pub(crate) fn apply_pause(paused: &mut Vec<u8>, pause: &[u8], restart: &[u8]) {
    for q in pause {
        if let Err(i) = paused.binary_search(q) {
            paused.insert(i, *q);
        }
    }
    for q in restart {
        if *q == 255 {
            paused.clear();
        } else if let Ok(i) = paused.binary_search(q) {
            paused.remove(i);
        }
    }
}
