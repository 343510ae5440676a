//! RFC 8651 (control-plane-based pause) Queue Parameters data item (§3.1):
//!
//! ```text
//! | Num Queues u8 | Scale (4 bits) | Reserved (20 bits) |
//! | Queue Parameter sub-data item 1 | ... | sub-data item Num Queues |
//! sub-data item: | type u16 = 1 | length u16 | Queue Index u8 | Queue Size u24 | classification |
//! ```
//! The traffic classification that follows the queue size (the DSCPs the queue carries) is
//! kept as raw bytes: the router side only needs to know which queue index a Pause names.

use super::error::{EmitError, ParseError};
use super::ids::item;

/// Sub-data item type of a Queue Parameter (RFC 8651 §3.1.1).
pub const QUEUE_PARAMETER_SUB_ITEM: u16 = 1;

/// The modem's queues, announced so that Pause and Restart can name them by index.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueParameters {
    /// Unit of every queue size: 0 bytes, 1 KiB, 2 MiB, 3 GiB (4 bits on the wire).
    pub scale: u8,
    pub queues: Vec<QueueParameter>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueParameter {
    /// The index Pause and Restart data items use (255 means every queue there).
    pub index: u8,
    /// Queue size in units of the scale (24 bits on the wire).
    pub size: u32,
    /// The traffic classification sub-data item(s) after the size, raw.
    pub classification: Vec<u8>,
}

impl QueueParameter {
    /// The queue's size in bytes, given the data item's scale.
    pub fn size_bytes(&self, scale: u8) -> u64 {
        u64::from(self.size) << (10 * u32::from(scale.min(3)))
    }
}

impl QueueParameters {
    pub(crate) fn parse(v: &[u8]) -> Result<Self, ParseError> {
        let ty = item::QUEUE_PARAMETERS;
        if v.len() < 4 {
            return Err(ParseError::BadLength {
                ty,
                len: v.len(),
                expected: "at least 4",
            });
        }
        let num = v[0] as usize;
        let scale = v[1] >> 4;
        let mut rest = &v[4..];
        let mut queues = Vec::with_capacity(num.min(rest.len() / 8));
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err(ParseError::Truncated {
                    what: "queue parameter sub-data item",
                    need: 4,
                    have: rest.len(),
                });
            }
            let sub_ty = u16::from_be_bytes([rest[0], rest[1]]);
            let len = u16::from_be_bytes([rest[2], rest[3]]) as usize;
            if sub_ty != QUEUE_PARAMETER_SUB_ITEM {
                return Err(ParseError::OutOfRange {
                    ty,
                    what: "sub-data item type",
                    value: sub_ty.into(),
                });
            }
            if rest.len() < 4 + len {
                return Err(ParseError::Truncated {
                    what: "queue parameter sub-data item",
                    need: 4 + len,
                    have: rest.len(),
                });
            }
            if len < 4 {
                return Err(ParseError::BadLength {
                    ty,
                    len,
                    expected: "a queue parameter of at least 4 bytes",
                });
            }
            let s = &rest[4..4 + len];
            queues.push(QueueParameter {
                index: s[0],
                size: u32::from_be_bytes([0, s[1], s[2], s[3]]),
                classification: s[4..].to_vec(),
            });
            rest = &rest[4 + len..];
        }
        if queues.len() != num {
            return Err(ParseError::OutOfRange {
                ty,
                what: "Num Queues (it disagrees with the sub-data items present)",
                value: num as u64,
            });
        }
        Ok(QueueParameters { scale, queues })
    }

    pub(crate) fn emit_value(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        let num = u8::try_from(self.queues.len()).map_err(|_| EmitError::OutOfRange {
            what: "number of queues",
            value: self.queues.len() as u64,
        })?;
        if self.scale > 15 {
            return Err(EmitError::OutOfRange {
                what: "queue scale",
                value: self.scale.into(),
            });
        }
        out.extend_from_slice(&[num, self.scale << 4, 0, 0]);
        for q in &self.queues {
            if q.size > 0x00ff_ffff {
                return Err(EmitError::OutOfRange {
                    what: "queue size",
                    value: q.size.into(),
                });
            }
            let len = 4 + q.classification.len();
            let len = u16::try_from(len).map_err(|_| EmitError::TooLong {
                what: "queue parameter sub-data item",
                len,
            })?;
            out.extend_from_slice(&QUEUE_PARAMETER_SUB_ITEM.to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
            out.push(q.index);
            out.extend_from_slice(&q.size.to_be_bytes()[1..]);
            out.extend_from_slice(&q.classification);
        }
        Ok(())
    }
}
