//! The gateway's flow protocol inside one AeroTP connection (docs/gateway.md §Flow protocol):
//! the TCP flow is *translated*, not framed. The AeroTP header carries the flow's ports
//! (`dst_port` = the TCP destination port, `src_port` = its source port while free), the
//! stream carries the TCP bytes as they are, the AFIN is the TCP FIN, an RST with a
//! [`RESET_PREFIX`] reason is the TCP reset, and the acknowledgements' confirmed `delivered`
//! count (docs/spec.md §4, "Confirmed delivery") says which bytes reached the other TCP
//! socket. What no header field carries goes in one [`Open`] record at the start of the
//! ingress's stream and, on a resume only, one [`Resumed`] record at the start of the
//! egress's.
//!
//! Parsers work on byte slices: they never block and never panic (fuzzed by the `gw_frame`
//! target, crates/fuzz-corpus/src/gw.rs).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// First byte of an [`Open`] record: the protocol and its version (`AGW1`'s framed protocol
/// began with `A`, 0x41, so an old peer's stream is refused, not misread).
pub(crate) const OPEN_KIND: u8 = 0xA2;
/// First byte of a [`Resumed`] record.
pub(crate) const RESUMED_KIND: u8 = 0xA3;
/// Bytes of a [`Resumed`] record.
pub const RESUMED_LEN: usize = 10;
/// Largest piece the writer takes from custody at once.
pub(crate) const MAX_DATA: usize = 16 * 1024;
/// Longest destination host name in an [`Open`] record.
pub const MAX_NAME: usize = 255;
/// Largest [`Open`] record: kind, flags, class, flow id, in_delivered, name length, name, port.
pub const MAX_OPEN: usize = 3 + 8 + 8 + 1 + MAX_NAME + 2;
/// An RST reason that starts with this is the gateway's: the flow is reset (the TCP sockets
/// closed with RST) and never resumed. Any other reset of the AeroTP connection (a peer that
/// restarted, a refused connection) only breaks the connection, which a custody flow
/// resumes.
pub const RESET_PREFIX: &str = "aerogw reset: ";

const F_CUSTODY: u8 = 0x01;
const F_RESUME: u8 = 0x02;
const F_PORT: u8 = 0x04;
const DEST_MASK: u8 = 0x30;
const DEST_DEFAULT: u8 = 0x00;
const DEST_V4: u8 = 0x10;
const DEST_V6: u8 = 0x20;
const DEST_NAME: u8 = 0x30;
const KNOWN_FLAGS: u8 = F_CUSTODY | F_RESUME | F_PORT | DEST_MASK;

/// Priority class of a flow: the engine's traffic class (its `as u8` value goes in the open
/// record).
pub use aerotp_proto::TrafficClass as Class;

/// Where a flow goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// The egress's `--tcp-connect`.
    Default,
    Addr(SocketAddr),
    /// A host name (resolved by the egress) and port.
    Name(String, u16),
}

impl Dest {
    /// From the `host:port` text the ingress's routes and transparent interception give
    /// (empty: the egress's default).
    pub fn parse(text: &str) -> Result<Dest, String> {
        if text.is_empty() {
            return Ok(Dest::Default);
        }
        if let Ok(a) = text.parse::<SocketAddr>() {
            return Ok(Dest::Addr(a));
        }
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("destination {text:?} is not host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("destination {text:?}: bad port"))?;
        if host.is_empty() || host.len() > MAX_NAME {
            return Err(format!(
                "destination {text:?}: the host name must be 1 to {MAX_NAME} bytes"
            ));
        }
        Ok(Dest::Name(host.to_owned(), port))
    }

    /// The TCP destination port, if the destination names one.
    pub fn port(&self) -> Option<u16> {
        match self {
            Dest::Default => None,
            Dest::Addr(a) => Some(a.port()),
            Dest::Name(_, p) => Some(*p),
        }
    }
}

impl fmt::Display for Dest {
    /// `host:port` as the routes write it; empty for the default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dest::Default => Ok(()),
            Dest::Addr(a) => write!(f, "{a}"),
            Dest::Name(h, p) => write!(f, "{h}:{p}"),
        }
    }
}

/// First bytes of the ingress → egress stream: what the AeroTP header cannot carry.
///
/// ```text
/// kind 0xA2 | flags | class | [flow id u64]  (custody or resume)
///                           | [in_delivered u64]  (resume)
///                           | [dest: IPv4 4 | IPv6 16 | name len u8, name]
///                           | [port u16]  (F_PORT: the header's dst_port could not hold it)
/// flags: 0x01 custody, 0x02 resume, 0x04 port follows, 0x30 dest (0 default, 1 IPv4,
///        2 IPv6, 3 name)
/// ```
/// The destination port is the AeroTP header's `dst_port` unless `F_PORT` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    pub class: Class,
    /// Near-reliable custody flow: the egress records it and keeps it across a broken
    /// connection.
    pub custody: bool,
    /// The flow existed before (a broken connection, a restart): attach to it.
    pub resume: bool,
    /// The ingress's flow id; 0 (not sent) unless `custody` or `resume`.
    pub flow_id: u64,
    /// On a resume: bytes of the egress → ingress direction the ingress has written to its
    /// TCP socket.
    pub in_delivered: u64,
    pub dest: Dest,
    /// The port carried in the record (`F_PORT`), when the header's could not hold it.
    pub port: Option<u16>,
}

/// What an input lacked or broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Too few bytes yet: read at least this many in all and parse again.
    Short(usize),
    Bad(String),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Short(n) => write!(f, "record truncated (needs {n} bytes)"),
            RecordError::Bad(m) => f.write_str(m),
        }
    }
}

fn bad(m: impl Into<String>) -> RecordError {
    RecordError::Bad(m.into())
}

/// A cursor over a slice that reports how much it would need.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self.at + n;
        let s = self.b.get(self.at..end).ok_or(RecordError::Short(end))?;
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, RecordError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, RecordError> {
        let s = self.take(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }
    fn u64(&mut self) -> Result<u64, RecordError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
}

impl Open {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(24);
        let mut flags = 0;
        if self.custody {
            flags |= F_CUSTODY;
        }
        if self.resume {
            flags |= F_RESUME;
        }
        if self.port.is_some() {
            flags |= F_PORT;
        }
        flags |= match &self.dest {
            Dest::Default => DEST_DEFAULT,
            Dest::Addr(a) if a.is_ipv4() => DEST_V4,
            Dest::Addr(_) => DEST_V6,
            Dest::Name(..) => DEST_NAME,
        };
        b.extend_from_slice(&[OPEN_KIND, flags, self.class as u8]);
        if self.custody || self.resume {
            b.extend_from_slice(&self.flow_id.to_be_bytes());
        }
        if self.resume {
            b.extend_from_slice(&self.in_delivered.to_be_bytes());
        }
        match &self.dest {
            Dest::Default => {}
            Dest::Addr(a) => match a.ip() {
                IpAddr::V4(v4) => b.extend_from_slice(&v4.octets()),
                IpAddr::V6(v6) => b.extend_from_slice(&v6.octets()),
            },
            Dest::Name(h, _) => {
                let n = h.len().min(MAX_NAME);
                b.push(n as u8);
                b.extend_from_slice(&h.as_bytes()[..n]);
            }
        }
        if let Some(p) = self.port {
            b.extend_from_slice(&p.to_be_bytes());
        }
        b
    }

    /// Parses a record from the start of `b`: the record and its length, `Short(n)` when
    /// `b` holds fewer than the `n` bytes it needs so far, or what is wrong with it.
    /// `dst_port` is the AeroTP header's (the destination port unless the record holds one).
    pub fn parse(b: &[u8], dst_port: u16) -> Result<(Open, usize), RecordError> {
        let mut c = Cursor { b, at: 0 };
        let kind = c.u8()?;
        if kind != OPEN_KIND {
            return Err(bad(format!(
                "not an AeroGW flow (first byte {kind:#04x}, expected {OPEN_KIND:#04x}): \
                 the ingress runs another version of the flow protocol"
            )));
        }
        let flags = c.u8()?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(bad(format!("unknown open flags {flags:#04x}")));
        }
        let class = c.u8()?;
        let class = Class::from_u8(class).ok_or_else(|| bad(format!("unknown class {class}")))?;
        let custody = flags & F_CUSTODY != 0;
        let resume = flags & F_RESUME != 0;
        let flow_id = if custody || resume { c.u64()? } else { 0 };
        let in_delivered = if resume { c.u64()? } else { 0 };
        /// Where the record points before its port is read.
        enum Target {
            Default,
            Ip(IpAddr),
            Name(String),
        }
        let target = match flags & DEST_MASK {
            DEST_DEFAULT => Target::Default,
            DEST_V4 => {
                let s = c.take(4)?;
                Target::Ip(IpAddr::V4(Ipv4Addr::new(s[0], s[1], s[2], s[3])))
            }
            DEST_V6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(c.take(16)?);
                Target::Ip(IpAddr::V6(Ipv6Addr::from(a)))
            }
            _ => {
                let n = usize::from(c.u8()?);
                let h = c.take(n)?;
                let h = std::str::from_utf8(h)
                    .map_err(|_| bad("destination host name is not UTF-8"))?;
                if h.is_empty() {
                    return Err(bad("empty destination host name"));
                }
                Target::Name(h.to_owned())
            }
        };
        let port = if flags & F_PORT != 0 {
            Some(c.u16()?)
        } else {
            None
        };
        let to_port = port.unwrap_or(dst_port);
        let dest = match target {
            Target::Default => Dest::Default,
            Target::Ip(ip) => Dest::Addr(SocketAddr::new(ip, to_port)),
            Target::Name(h) => Dest::Name(h, to_port),
        };
        let open = Open {
            class,
            custody,
            resume,
            flow_id,
            in_delivered,
            dest,
            port,
        };
        Ok((open, c.at))
    }
}

/// The egress's answer to a resume, first bytes of its stream: how much of the ingress's
/// direction it has written to the destination, and whether the FIN too.
///
/// ```text
/// kind 0xA3 | fin u8 (0 or 1) | delivered u64
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resumed {
    pub delivered: u64,
    pub fin: bool,
}

impl Resumed {
    pub fn encode(&self) -> [u8; RESUMED_LEN] {
        let mut b = [0u8; RESUMED_LEN];
        b[0] = RESUMED_KIND;
        b[1] = u8::from(self.fin);
        b[2..].copy_from_slice(&self.delivered.to_be_bytes());
        b
    }

    pub fn parse(b: &[u8]) -> Result<Resumed, RecordError> {
        let mut c = Cursor { b, at: 0 };
        let kind = c.u8()?;
        if kind != RESUMED_KIND {
            return Err(bad(format!(
                "bad resume answer (first byte {kind:#04x}, expected {RESUMED_KIND:#04x})"
            )));
        }
        let fin = match c.u8()? {
            0 => false,
            1 => true,
            f => return Err(bad(format!("bad resume answer fin {f}"))),
        };
        Ok(Resumed {
            delivered: c.u64()?,
            fin,
        })
    }
}

/// The reason an RST carries for a flow reset.
pub fn reset_reason(why: &str) -> String {
    let mut r = format!("{RESET_PREFIX}{why}");
    // The engine's RST body holds 256 bytes; cut on a character boundary.
    let mut n = r.len().min(256);
    while !r.is_char_boundary(n) {
        n -= 1;
    }
    r.truncate(n);
    r
}

/// The gateway's reason from a connection reset, if the reset was a flow reset.
pub fn flow_reset(reason: &str) -> Option<&str> {
    reason.strip_prefix(RESET_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opens() -> Vec<Open> {
        let base = Open {
            class: Class::Telemetry,
            custody: false,
            resume: false,
            flow_id: 0,
            in_delivered: 0,
            dest: Dest::Default,
            port: None,
        };
        vec![
            base.clone(),
            Open {
                custody: true,
                flow_id: 0x0102_0304_0506_0708,
                dest: Dest::Addr("10.0.0.1:80".parse().unwrap()),
                ..base.clone()
            },
            Open {
                custody: true,
                resume: true,
                flow_id: 9,
                in_delivered: 1 << 40,
                dest: Dest::Addr("[2001:db8::1]:3".parse().unwrap()),
                port: Some(3),
                ..base.clone()
            },
            Open {
                dest: Dest::Name("ground.example".into(), 443),
                ..base.clone()
            },
            Open {
                dest: Dest::Name("g".into(), 3),
                port: Some(3),
                ..base
            },
        ]
    }

    #[test]
    fn open_records_round_trip_and_report_what_they_lack() {
        for o in opens() {
            let b = o.encode();
            let dst = o.dest.port().unwrap_or(1);
            assert_eq!(Open::parse(&b, dst), Ok((o.clone(), b.len())), "{o:?}");
            // Followed by stream bytes: the record's length still.
            let mut more = b.clone();
            more.extend_from_slice(b"GET / HTTP/1.1");
            assert_eq!(Open::parse(&more, dst).unwrap().1, b.len());
            for cut in 0..b.len() {
                match Open::parse(&b[..cut], dst) {
                    Err(RecordError::Short(n)) => assert!(n > cut && n <= b.len(), "{o:?} {cut}"),
                    r => panic!("{o:?} cut at {cut}: {r:?}"),
                }
            }
        }
    }

    #[test]
    fn sizes_against_the_framed_protocol() {
        // Transparent flow to an IPv4 destination: kind, flags, class, address.
        let o = Open {
            dest: Dest::Addr("10.77.0.9:8080".parse().unwrap()),
            ..opens()[0].clone()
        };
        assert_eq!(o.encode().len(), 7);
        assert_eq!(opens()[0].encode().len(), 3);
    }

    #[test]
    fn bad_records_are_refused_with_a_reason() {
        for (b, what) in [
            (&b"AGW1\x01"[..], "another version"),
            (&[OPEN_KIND, 0x40, 0][..], "unknown open flags"),
            (&[OPEN_KIND, 0, 9][..], "unknown class"),
            (&[OPEN_KIND, DEST_NAME, 0, 0][..], "empty destination"),
            (&[OPEN_KIND, DEST_NAME, 0, 2, 0xFF, 0xFE][..], "not UTF-8"),
        ] {
            match Open::parse(b, 80) {
                Err(RecordError::Bad(m)) => assert!(m.contains(what), "{m}"),
                r => panic!("{b:?}: {r:?}"),
            }
        }
    }

    #[test]
    fn resumed_round_trips() {
        let r = Resumed {
            delivered: 77,
            fin: true,
        };
        assert_eq!(Resumed::parse(&r.encode()), Ok(r));
        assert_eq!(
            Resumed::parse(&r.encode()[..4]),
            Err(RecordError::Short(10))
        );
        let mut b = r.encode();
        b[1] = 2;
        assert!(matches!(Resumed::parse(&b), Err(RecordError::Bad(_))));
    }

    #[test]
    fn destinations_parse_from_route_text() {
        assert_eq!(Dest::parse(""), Ok(Dest::Default));
        assert_eq!(
            Dest::parse("10.0.0.1:80"),
            Ok(Dest::Addr("10.0.0.1:80".parse().unwrap()))
        );
        assert_eq!(
            Dest::parse("ground:8080"),
            Ok(Dest::Name("ground".into(), 8080))
        );
        assert!(Dest::parse("ground").is_err());
        assert!(Dest::parse("ground:x").is_err());
        for d in ["10.0.0.1:80", "[::1]:22", "ground:8080", ""] {
            assert_eq!(Dest::parse(d).unwrap().to_string(), d);
        }
    }

    #[test]
    fn reset_reasons_round_trip_and_stay_within_an_rst() {
        assert_eq!(flow_reset(&reset_reason("refused")), Some("refused"));
        assert_eq!(flow_reset("connection reset: this end restarted"), None);
        let long = "é".repeat(300);
        let r = reset_reason(&long);
        assert!(r.len() <= 256 && flow_reset(&r).is_some());
    }
}
