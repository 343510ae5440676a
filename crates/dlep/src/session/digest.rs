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
        let mac = d.mac;
        let max_lat = u64::try_from(cfg.max_latency.as_micros()).unwrap_or(u64::MAX);
        let mut rate = |slot: &mut Option<u64>, ty: u16, v: u64| {
            if v == 0 || v > cfg.max_rate_bps {
                anomalies.push(Anomaly::Implausible {
                    mac,
                    item: ty,
                    value: v,
                });
            } else {
                *slot = Some(v);
            }
        };
        let latency_range = |d: &mut Digest, max: u64, min: u64, anomalies: &mut Vec<_>| {
            if min > max || max > max_lat {
                anomalies.push(Anomaly::Implausible {
                    mac,
                    item: item::LATENCY_RANGE,
                    value: max,
                });
            } else {
                d.metrics.latency_range_us = Some((min, max));
            }
        };
        // Anomalies found outside the `rate` closure (which holds `anomalies`).
        let mut later = Vec::new();
        for it in items {
            let m = &mut d.metrics;
            match it {
                DataItem::Status { code, text } => d.status = Some((*code, text.clone())),
                DataItem::HeartbeatInterval(ms) => d.heartbeat_ms = Some(*ms),
                DataItem::PeerType { description, .. } => d.peer_type = Some(description.clone()),
                DataItem::ExtensionsSupported(e) => d.extensions = Some(e.clone()),
                DataItem::MaxDataRateRx(v) => rate(&mut m.max_rate_rx, item::MAX_DATA_RATE_RX, *v),
                DataItem::MaxDataRateTx(v) => rate(&mut m.max_rate_tx, item::MAX_DATA_RATE_TX, *v),
                DataItem::CurrentDataRateRx(v) => {
                    rate(&mut m.current_rate_rx, item::CURRENT_DATA_RATE_RX, *v)
                }
                DataItem::CurrentDataRateTx(v) => {
                    rate(&mut m.current_rate_tx, item::CURRENT_DATA_RATE_TX, *v)
                }
                DataItem::Latency(v) if *v > max_lat => later.push(Anomaly::Implausible {
                    mac,
                    item: item::LATENCY,
                    value: *v,
                }),
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
                DataItem::LatencyRange { max, min } => {
                    latency_range(&mut d, *max, *min, &mut later)
                }
                DataItem::Unknown { ty, value }
                    if ll_latency_range
                        && *ty == item::LL_DLEP_LATENCY_RANGE
                        && value.len() == 16 =>
                {
                    let max = u64::from_be_bytes(value[..8].try_into().unwrap_or([0; 8]));
                    let min = u64::from_be_bytes(value[8..].try_into().unwrap_or([0; 8]));
                    latency_range(&mut d, max, min, &mut later)
                }
                DataItem::Ipv4Address { add, addr } => {
                    d.addresses.push(AddrChange::V4(*add, *addr))
                }
                DataItem::Ipv6Address { add, addr } => {
                    d.addresses.push(AddrChange::V6(*add, *addr))
                }
                DataItem::Ipv4AttachedSubnet { add, addr, prefix } => {
                    d.addresses.push(AddrChange::V4Net(*add, *addr, *prefix))
                }
                DataItem::Ipv6AttachedSubnet { add, addr, prefix } => {
                    d.addresses.push(AddrChange::V6Net(*add, *addr, *prefix))
                }
                DataItem::Pause(q) => d.pause.extend_from_slice(q),
                DataItem::Restart(q) => d.restart.extend_from_slice(q),
                DataItem::QueueParameters(q) => d.queues = Some(q.clone()),
                // Connection points belong to Peer Offer; the MAC was taken above; anything
                // else is an extension this side does not interpret.
                _ => {}
            }
        }
        anomalies.append(&mut later);
        d
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
