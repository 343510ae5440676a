//! The gateway protocol carried inside one AeroTP connection (docs/gateway.md §Flow protocol).
//!
//! The ingress opens the stream with a [`Hello`]; after it both directions carry [`Frame`]s.
//! The egress answers `Accept` (or `Refused`) first.

use std::io;
use tokio::io::{AsyncRead, AsyncReadExt};

pub const MAGIC: &[u8; 4] = b"AGW1";
pub const VERSION: u8 = 1;
/// Largest DATA frame payload.
pub const MAX_DATA: usize = 16 * 1024;
const MAX_TEXT: usize = 1024;

const F_RESUME: u8 = 1;
const F_CUSTODY: u8 = 2;

/// Priority class of a flow: the engine's traffic class (its `as u8` value goes on the
/// flow protocol's wire).
pub use aerotp_proto::TrafficClass as Class;

/// First bytes of the ingress → egress stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Hello {
    pub flow_id: u64,
    /// The flow existed before (restart or broken connection): attach to it.
    pub resume: bool,
    /// Near-reliable custody flow (the egress keeps it across a broken connection).
    pub custody: bool,
    pub class: Class,
    /// Bytes of the egress → ingress direction the ingress has written to its TCP socket.
    pub in_delivered: u64,
    /// Destination `host:port`; empty = the egress's default.
    pub dest: String,
}

impl Hello {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(32 + self.dest.len());
        b.extend_from_slice(MAGIC);
        b.push(VERSION);
        let mut flags = 0;
        if self.resume {
            flags |= F_RESUME;
        }
        if self.custody {
            flags |= F_CUSTODY;
        }
        b.push(flags);
        b.push(self.class as u8);
        b.push(0);
        b.extend_from_slice(&self.flow_id.to_be_bytes());
        b.extend_from_slice(&self.in_delivered.to_be_bytes());
        let d = &self.dest.as_bytes()[..self.dest.len().min(MAX_TEXT)];
        b.extend_from_slice(&(d.len() as u16).to_be_bytes());
        b.extend_from_slice(d);
        b
    }

    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Hello> {
        let mut h = [0u8; 26];
        r.read_exact(&mut h).await?;
        if &h[..4] != MAGIC || h[4] != VERSION {
            return Err(bad("not an AeroGW flow header (magic/version)"));
        }
        let class = Class::from_u8(h[6]).ok_or_else(|| bad("bad class"))?;
        let flow_id = u64::from_be_bytes(h[8..16].try_into().expect("8 bytes"));
        let in_delivered = u64::from_be_bytes(h[16..24].try_into().expect("8 bytes"));
        let n = usize::from(u16::from_be_bytes([h[24], h[25]]));
        if n > MAX_TEXT {
            return Err(bad("destination too long"));
        }
        let mut d = vec![0u8; n];
        r.read_exact(&mut d).await?;
        Ok(Hello {
            flow_id,
            resume: h[5] & F_RESUME != 0,
            custody: h[5] & F_CUSTODY != 0,
            class,
            in_delivered,
            dest: String::from_utf8(d).map_err(|_| bad("destination not UTF-8"))?,
        })
    }
}

/// Frames after the [`Hello`], both directions.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// Egress → ingress, first: destination connected; it has written `delivered` bytes of
    /// this flow to it (`fin`: and the ingress's FIN).
    Accept { delivered: u64, fin: bool },
    /// Egress → ingress, first: the flow cannot be set up (destination refused…).
    Refused(String),
    /// Next bytes of the sender's direction.
    Data(Vec<u8>),
    /// The sender has written `offset` bytes of the other direction to its TCP socket
    /// (`fin`: and has shut that socket's write half after them).
    Confirm { offset: u64, fin: bool },
    /// The sender's TCP side reached EOF: no more data in this direction.
    Fin,
    /// The flow is aborted (TCP reset, destination unreachable…); the receiver resets its TCP.
    Reset(String),
}

const T_ACCEPT: u8 = 1;
const T_REFUSED: u8 = 2;
const T_DATA: u8 = 3;
const T_CONFIRM: u8 = 4;
const T_FIN: u8 = 5;
const T_RESET: u8 = 6;

fn bad(m: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.to_owned())
}

fn put_text(b: &mut Vec<u8>, s: &str) {
    let mut n = s.len().min(MAX_TEXT);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    b.extend_from_slice(&(n as u16).to_be_bytes());
    b.extend_from_slice(&s.as_bytes()[..n]);
}

impl Frame {
    /// The frame's type, for log lines (a DATA frame's bytes are not printed).
    pub fn name(&self) -> &'static str {
        match self {
            Frame::Accept { .. } => "ACCEPT",
            Frame::Refused(_) => "REFUSED",
            Frame::Data(_) => "DATA",
            Frame::Confirm { .. } => "CONFIRM",
            Frame::Fin => "FIN",
            Frame::Reset(_) => "RESET",
        }
    }

    pub fn encode(&self, b: &mut Vec<u8>) {
        match self {
            Frame::Accept { delivered, fin } => {
                b.push(T_ACCEPT);
                b.extend_from_slice(&delivered.to_be_bytes());
                b.push(u8::from(*fin));
            }
            Frame::Refused(r) => {
                b.push(T_REFUSED);
                put_text(b, r);
            }
            Frame::Data(d) => {
                b.push(T_DATA);
                b.extend_from_slice(&(d.len() as u32).to_be_bytes());
                b.extend_from_slice(d);
            }
            Frame::Confirm { offset, fin } => {
                b.push(T_CONFIRM);
                b.extend_from_slice(&offset.to_be_bytes());
                b.push(u8::from(*fin));
            }
            Frame::Fin => b.push(T_FIN),
            Frame::Reset(r) => {
                b.push(T_RESET);
                put_text(b, r);
            }
        }
    }

    /// The next frame; `Ok(None)` at a clean end of stream (between frames).
    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Option<Frame>> {
        let mut t = [0u8; 1];
        if r.read(&mut t).await? == 0 {
            return Ok(None);
        }
        async fn text<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<String> {
            let n = usize::from(r.read_u16().await?);
            if n > MAX_TEXT {
                return Err(bad("text too long"));
            }
            let mut d = vec![0u8; n];
            r.read_exact(&mut d).await?;
            Ok(String::from_utf8_lossy(&d).into_owned())
        }
        let f = match t[0] {
            T_ACCEPT => Frame::Accept {
                delivered: r.read_u64().await?,
                fin: r.read_u8().await? != 0,
            },
            T_REFUSED => Frame::Refused(text(r).await?),
            T_DATA => {
                let n = r.read_u32().await? as usize;
                if n == 0 || n > MAX_DATA {
                    return Err(bad("bad DATA length"));
                }
                let mut d = vec![0u8; n];
                r.read_exact(&mut d).await?;
                Frame::Data(d)
            }
            T_CONFIRM => Frame::Confirm {
                offset: r.read_u64().await?,
                fin: r.read_u8().await? != 0,
            },
            T_FIN => Frame::Fin,
            T_RESET => Frame::Reset(text(r).await?),
            _ => return Err(bad("unknown frame type")),
        };
        Ok(Some(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hello_and_frames_round_trip() {
        let h = Hello {
            flow_id: 0x0102_0304_0506_0708,
            resume: true,
            custody: true,
            class: Class::Telemetry,
            in_delivered: 77,
            dest: "10.0.0.1:80".into(),
        };
        let frames = vec![
            Frame::Accept {
                delivered: 5,
                fin: true,
            },
            Frame::Refused("nope".into()),
            Frame::Data(vec![1, 2, 3]),
            Frame::Confirm {
                offset: 1 << 40,
                fin: false,
            },
            Frame::Fin,
            Frame::Reset("rst".into()),
        ];
        let mut b = h.encode();
        for f in &frames {
            f.encode(&mut b);
        }
        let mut r = &b[..];
        assert_eq!(Hello::read(&mut r).await.unwrap(), h);
        for f in &frames {
            assert_eq!(Frame::read(&mut r).await.unwrap().as_ref(), Some(f));
        }
        assert_eq!(Frame::read(&mut r).await.unwrap(), None);
        let mut bad_magic = h.encode();
        bad_magic[0] = b'X';
        assert!(Hello::read(&mut &bad_magic[..]).await.is_err());
        let mut trunc = Vec::new();
        Frame::Data(vec![9; 10]).encode(&mut trunc);
        trunc.truncate(8);
        assert!(Frame::read(&mut &trunc[..]).await.is_err());
    }
}
