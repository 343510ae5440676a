//! Typed data items: every item RFC 8175 §13 defines, RFC 8651's Queue Parameters, Pause and
//! Restart, RFC 8757's Latency Range; anything else is kept as raw bytes ([`DataItem::Unknown`])
//! so that items of extensions this side does not interpret (LL-DLEP's private ids among them)
//! pass through instead of failing the message.
//!
//! Value layouts (after the 4-byte item header; integers big-endian):
//!
//! | item | value |
//! |---|---|
//! | Status (1) | code u8, text UTF-8 |
//! | IPv4 / IPv6 Connection Point (2, 3) | flags u8 (bit 0: TLS), address (4 / 16), optional TCP port u16 |
//! | Peer Type (4) | flags u8 (bit 0: secured medium), description UTF-8 |
//! | Heartbeat Interval (5) | u32 milliseconds |
//! | Extensions Supported (6) | u16 extension type, repeated |
//! | MAC Address (7) | 6 or 8 bytes |
//! | IPv4 / IPv6 Address (8, 9) | flags u8 (bit 0: add, clear: drop), address |
//! | IPv4 / IPv6 Attached Subnet (10, 11) | flags u8 (bit 0: add), address, prefix length u8 |
//! | Max / Current Data Rate Rx / Tx (12..=15) | u64 bit/s |
//! | Latency (16) | u64 microseconds |
//! | Resources, RLQ Rx / Tx (17..=19) | u8 percent, 0..=100 |
//! | MTU (20) | u16 octets |
//! | Queue Parameters (23) | see [`QueueParameters`] |
//! | Pause, Restart (24, 25) | queue index u8, repeated (255: all traffic) |
//! | Latency Range (28) | maximum u64 µs, minimum u64 µs |

use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::{EmitError, ParseError};
use super::ids::item as id;
use super::ids::StatusCode;
use super::mac::Mac;
use super::packet::{patch_length, ItemView, ITEM_HEADER_LEN};
use super::queue::QueueParameters;

/// One data item, owned and typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataItem {
    Status {
        code: StatusCode,
        text: String,
    },
    Ipv4ConnectionPoint {
        tls: bool,
        addr: Ipv4Addr,
        port: Option<u16>,
    },
    Ipv6ConnectionPoint {
        tls: bool,
        addr: Ipv6Addr,
        port: Option<u16>,
    },
    PeerType {
        secured: bool,
        description: String,
    },
    /// Milliseconds.
    HeartbeatInterval(u32),
    ExtensionsSupported(Vec<u16>),
    MacAddress(Mac),
    Ipv4Address {
        add: bool,
        addr: Ipv4Addr,
    },
    Ipv6Address {
        add: bool,
        addr: Ipv6Addr,
    },
    Ipv4AttachedSubnet {
        add: bool,
        addr: Ipv4Addr,
        prefix: u8,
    },
    Ipv6AttachedSubnet {
        add: bool,
        addr: Ipv6Addr,
        prefix: u8,
    },
    /// Bits per second.
    MaxDataRateRx(u64),
    MaxDataRateTx(u64),
    CurrentDataRateRx(u64),
    CurrentDataRateTx(u64),
    /// Microseconds.
    Latency(u64),
    /// Percent.
    Resources(u8),
    RelativeLinkQualityRx(u8),
    RelativeLinkQualityTx(u8),
    Mtu(u16),
    QueueParameters(QueueParameters),
    /// Queue indexes to stop sending to (255: everything).
    Pause(Vec<u8>),
    /// Queue indexes to resume.
    Restart(Vec<u8>),
    /// Microseconds.
    LatencyRange {
        max: u64,
        min: u64,
    },
    /// Any other type, value kept verbatim.
    Unknown {
        ty: u16,
        value: Vec<u8>,
    },
}

fn exact(v: &ItemView<'_>, n: usize, expected: &'static str) -> Result<(), ParseError> {
    if v.value.len() == n {
        Ok(())
    } else {
        Err(ParseError::BadLength {
            ty: v.ty,
            len: v.value.len(),
            expected,
        })
    }
}

fn u64_of(v: &ItemView<'_>) -> Result<u64, ParseError> {
    exact(v, 8, "8")?;
    let mut b = [0u8; 8];
    b.copy_from_slice(v.value);
    Ok(u64::from_be_bytes(b))
}

fn percent(v: &ItemView<'_>, what: &'static str) -> Result<u8, ParseError> {
    exact(v, 1, "1")?;
    match v.value[0] {
        p @ 0..=100 => Ok(p),
        p => Err(ParseError::OutOfRange {
            ty: v.ty,
            what,
            value: p.into(),
        }),
    }
}

fn flag(b: u8) -> bool {
    b & 0x01 != 0
}

fn v4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

fn v6(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

/// Strings are UTF-8 by RFC 8175; a peer that sends anything else still gets its message read
/// (the text is informational), with the bad bytes replaced.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn prefix(v: &ItemView<'_>, p: u8, max: u8) -> Result<u8, ParseError> {
    if p <= max {
        Ok(p)
    } else {
        Err(ParseError::OutOfRange {
            ty: v.ty,
            what: "prefix length",
            value: p.into(),
        })
    }
}

impl DataItem {
    /// Reads one item's value. Unknown types are never an error.
    pub fn parse(v: ItemView<'_>) -> Result<DataItem, ParseError> {
        // By the items' roles in RFC 8175 (and its extensions); each group answers `None` for
        // a type that is not its own.
        let groups: [ItemGroup; 4] = [session_item, destination_item, metric_item, extension_item];
        for group in groups {
            if let Some(item) = group(&v)? {
                return Ok(item);
            }
        }
        Ok(DataItem::Unknown {
            ty: v.ty,
            value: v.value.to_vec(),
        })
    }

    /// The item's type on the wire.
    pub fn type_id(&self) -> u16 {
        match self {
            DataItem::Status { .. } => id::STATUS,
            DataItem::Ipv4ConnectionPoint { .. } => id::IPV4_CONNECTION_POINT,
            DataItem::Ipv6ConnectionPoint { .. } => id::IPV6_CONNECTION_POINT,
            DataItem::PeerType { .. } => id::PEER_TYPE,
            DataItem::HeartbeatInterval(_) => id::HEARTBEAT_INTERVAL,
            DataItem::ExtensionsSupported(_) => id::EXTENSIONS_SUPPORTED,
            DataItem::MacAddress(_) => id::MAC_ADDRESS,
            DataItem::Ipv4Address { .. } => id::IPV4_ADDRESS,
            DataItem::Ipv6Address { .. } => id::IPV6_ADDRESS,
            DataItem::Ipv4AttachedSubnet { .. } => id::IPV4_ATTACHED_SUBNET,
            DataItem::Ipv6AttachedSubnet { .. } => id::IPV6_ATTACHED_SUBNET,
            DataItem::MaxDataRateRx(_) => id::MAX_DATA_RATE_RX,
            DataItem::MaxDataRateTx(_) => id::MAX_DATA_RATE_TX,
            DataItem::CurrentDataRateRx(_) => id::CURRENT_DATA_RATE_RX,
            DataItem::CurrentDataRateTx(_) => id::CURRENT_DATA_RATE_TX,
            DataItem::Latency(_) => id::LATENCY,
            DataItem::Resources(_) => id::RESOURCES,
            DataItem::RelativeLinkQualityRx(_) => id::RELATIVE_LINK_QUALITY_RX,
            DataItem::RelativeLinkQualityTx(_) => id::RELATIVE_LINK_QUALITY_TX,
            DataItem::Mtu(_) => id::MTU,
            DataItem::QueueParameters(_) => id::QUEUE_PARAMETERS,
            DataItem::Pause(_) => id::PAUSE,
            DataItem::Restart(_) => id::RESTART,
            DataItem::LatencyRange { .. } => id::LATENCY_RANGE,
            DataItem::Unknown { ty, .. } => *ty,
        }
    }

    /// Appends the item, header included.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        let start = out.len();
        out.extend_from_slice(&self.type_id().to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        let r = self
            .emit_value(out)
            .and_then(|()| patch_length(out, start, ITEM_HEADER_LEN, "data item value"));
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    fn emit_value(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        match self {
            DataItem::Status { code, text } => {
                out.push(code.0);
                out.extend_from_slice(text.as_bytes());
            }
            DataItem::Ipv4ConnectionPoint { tls, addr, port } => {
                emit_flagged(out, *tls, &addr.octets());
                if let Some(p) = port {
                    out.extend_from_slice(&p.to_be_bytes());
                }
            }
            DataItem::Ipv6ConnectionPoint { tls, addr, port } => {
                emit_flagged(out, *tls, &addr.octets());
                if let Some(p) = port {
                    out.extend_from_slice(&p.to_be_bytes());
                }
            }
            DataItem::PeerType {
                secured,
                description,
            } => emit_flagged(out, *secured, description.as_bytes()),
            DataItem::HeartbeatInterval(ms) => out.extend_from_slice(&ms.to_be_bytes()),
            DataItem::ExtensionsSupported(ids) => {
                for e in ids {
                    out.extend_from_slice(&e.to_be_bytes());
                }
            }
            DataItem::MacAddress(m) => out.extend_from_slice(m.as_bytes()),
            DataItem::Ipv4Address { add, addr } => emit_flagged(out, *add, &addr.octets()),
            DataItem::Ipv6Address { add, addr } => emit_flagged(out, *add, &addr.octets()),
            DataItem::Ipv4AttachedSubnet { add, addr, prefix } => {
                check_prefix(*prefix, 32)?;
                emit_flagged(out, *add, &addr.octets());
                out.push(*prefix);
            }
            DataItem::Ipv6AttachedSubnet { add, addr, prefix } => {
                check_prefix(*prefix, 128)?;
                emit_flagged(out, *add, &addr.octets());
                out.push(*prefix);
            }
            DataItem::MaxDataRateRx(r)
            | DataItem::MaxDataRateTx(r)
            | DataItem::CurrentDataRateRx(r)
            | DataItem::CurrentDataRateTx(r)
            | DataItem::Latency(r) => out.extend_from_slice(&r.to_be_bytes()),
            DataItem::Resources(p)
            | DataItem::RelativeLinkQualityRx(p)
            | DataItem::RelativeLinkQualityTx(p) => out.push(check_percent(*p)?),
            DataItem::Mtu(m) => out.extend_from_slice(&m.to_be_bytes()),
            DataItem::QueueParameters(q) => q.emit_value(out)?,
            DataItem::Pause(q) | DataItem::Restart(q) => {
                if q.is_empty() {
                    return Err(EmitError::OutOfRange {
                        what: "number of queue indexes",
                        value: 0,
                    });
                }
                out.extend_from_slice(q);
            }
            DataItem::LatencyRange { max, min } => {
                out.extend_from_slice(&max.to_be_bytes());
                out.extend_from_slice(&min.to_be_bytes());
            }
            DataItem::Unknown { value, .. } => out.extend_from_slice(value),
        }
        Ok(())
    }
}

/// Reads the items of one group (`None`: a type of another group).
type ItemGroup = fn(&ItemView<'_>) -> Result<Option<DataItem>, ParseError>;

/// The session's own items: status, connection points, peer type, heartbeat, extensions;
/// `None` for a type of another group.
fn session_item(v: &ItemView<'_>) -> Result<Option<DataItem>, ParseError> {
    let b = v.value;
    Ok(Some(match v.ty {
        id::STATUS => {
            if b.is_empty() {
                return Err(ParseError::BadLength {
                    ty: v.ty,
                    len: 0,
                    expected: "at least 1",
                });
            }
            DataItem::Status {
                code: StatusCode(b[0]),
                text: text(&b[1..]),
            }
        }
        id::IPV4_CONNECTION_POINT => {
            let port = match b.len() {
                5 => None,
                7 => Some(u16::from_be_bytes([b[5], b[6]])),
                _ => return Err(bad(v, "5 or 7")),
            };
            DataItem::Ipv4ConnectionPoint {
                tls: flag(b[0]),
                addr: v4(&b[1..]),
                port,
            }
        }
        id::IPV6_CONNECTION_POINT => {
            let port = match b.len() {
                17 => None,
                19 => Some(u16::from_be_bytes([b[17], b[18]])),
                _ => return Err(bad(v, "17 or 19")),
            };
            DataItem::Ipv6ConnectionPoint {
                tls: flag(b[0]),
                addr: v6(&b[1..]),
                port,
            }
        }
        id::PEER_TYPE => {
            if b.is_empty() {
                return Err(bad(v, "at least 1"));
            }
            DataItem::PeerType {
                secured: flag(b[0]),
                description: text(&b[1..]),
            }
        }
        id::HEARTBEAT_INTERVAL => {
            exact(v, 4, "4")?;
            DataItem::HeartbeatInterval(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        }
        id::EXTENSIONS_SUPPORTED => {
            if !b.len().is_multiple_of(2) {
                return Err(bad(v, "a multiple of 2"));
            }
            DataItem::ExtensionsSupported(
                b.chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .collect(),
            )
        }
        _ => return Ok(None),
    }))
}

/// A destination's identity: its MAC, addresses and attached subnets; `None` for a type of
/// another group.
fn destination_item(v: &ItemView<'_>) -> Result<Option<DataItem>, ParseError> {
    let b = v.value;
    Ok(Some(match v.ty {
        id::MAC_ADDRESS => DataItem::MacAddress(Mac::from_slice(b).ok_or(bad(v, "6 or 8"))?),
        id::IPV4_ADDRESS => {
            exact(v, 5, "5")?;
            DataItem::Ipv4Address {
                add: flag(b[0]),
                addr: v4(&b[1..]),
            }
        }
        id::IPV6_ADDRESS => {
            exact(v, 17, "17")?;
            DataItem::Ipv6Address {
                add: flag(b[0]),
                addr: v6(&b[1..]),
            }
        }
        id::IPV4_ATTACHED_SUBNET => {
            exact(v, 6, "6")?;
            DataItem::Ipv4AttachedSubnet {
                add: flag(b[0]),
                addr: v4(&b[1..]),
                prefix: prefix(v, b[5], 32)?,
            }
        }
        id::IPV6_ATTACHED_SUBNET => {
            exact(v, 18, "18")?;
            DataItem::Ipv6AttachedSubnet {
                add: flag(b[0]),
                addr: v6(&b[1..]),
                prefix: prefix(v, b[17], 128)?,
            }
        }
        _ => return Ok(None),
    }))
}

/// Link metrics: data rates, latency, resources, link quality, MTU; `None` for a type of
/// another group.
fn metric_item(v: &ItemView<'_>) -> Result<Option<DataItem>, ParseError> {
    let b = v.value;
    Ok(Some(match v.ty {
        id::MAX_DATA_RATE_RX => DataItem::MaxDataRateRx(u64_of(v)?),
        id::MAX_DATA_RATE_TX => DataItem::MaxDataRateTx(u64_of(v)?),
        id::CURRENT_DATA_RATE_RX => DataItem::CurrentDataRateRx(u64_of(v)?),
        id::CURRENT_DATA_RATE_TX => DataItem::CurrentDataRateTx(u64_of(v)?),
        id::LATENCY => DataItem::Latency(u64_of(v)?),
        id::RESOURCES => DataItem::Resources(percent(v, "resources")?),
        id::RELATIVE_LINK_QUALITY_RX => {
            DataItem::RelativeLinkQualityRx(percent(v, "relative link quality")?)
        }
        id::RELATIVE_LINK_QUALITY_TX => {
            DataItem::RelativeLinkQualityTx(percent(v, "relative link quality")?)
        }
        id::MTU => {
            exact(v, 2, "2")?;
            DataItem::Mtu(u16::from_be_bytes([b[0], b[1]]))
        }
        _ => return Ok(None),
    }))
}

/// The extensions' items: queue parameters, pause and restart, latency range; `None` for a
/// type of another group.
fn extension_item(v: &ItemView<'_>) -> Result<Option<DataItem>, ParseError> {
    let b = v.value;
    Ok(Some(match v.ty {
        id::QUEUE_PARAMETERS => DataItem::QueueParameters(QueueParameters::parse(b)?),
        id::PAUSE | id::RESTART => {
            if b.is_empty() {
                return Err(bad(v, "at least 1"));
            }
            if v.ty == id::PAUSE {
                DataItem::Pause(b.to_vec())
            } else {
                DataItem::Restart(b.to_vec())
            }
        }
        id::LATENCY_RANGE => {
            exact(v, 16, "16")?;
            let mut hi = [0u8; 8];
            let mut lo = [0u8; 8];
            hi.copy_from_slice(&b[..8]);
            lo.copy_from_slice(&b[8..]);
            DataItem::LatencyRange {
                max: u64::from_be_bytes(hi),
                min: u64::from_be_bytes(lo),
            }
        }
        _ => return Ok(None),
    }))
}

fn bad(v: &ItemView<'_>, expected: &'static str) -> ParseError {
    ParseError::BadLength {
        ty: v.ty,
        len: v.value.len(),
        expected,
    }
}

/// A one-byte flag (TLS, secured, add/drop) and the value it qualifies.
fn emit_flagged(out: &mut Vec<u8>, flag: bool, rest: &[u8]) {
    out.push(u8::from(flag));
    out.extend_from_slice(rest);
}

/// A percentage (resources, link quality): 0 to 100.
fn check_percent(p: u8) -> Result<u8, EmitError> {
    if p > 100 {
        return Err(EmitError::OutOfRange {
            what: "percentage",
            value: p.into(),
        });
    }
    Ok(p)
}

fn check_prefix(p: u8, max: u8) -> Result<(), EmitError> {
    if p > max {
        return Err(EmitError::OutOfRange {
            what: "prefix length",
            value: p.into(),
        });
    }
    Ok(())
}
