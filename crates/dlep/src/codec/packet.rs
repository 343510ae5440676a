//! Zero-copy views of DLEP framing (RFC 8175 §11): a signal or message header, and the data
//! items after it. Nothing here allocates; every accessor is bounds-checked by construction.
//!
//! ```text
//! message (TCP):  | type u16 | length u16 | data items (length bytes) |
//! signal (UDP):   | "DLEP" | type u16 | length u16 | data items (length bytes) |
//! data item:      | type u16 | length u16 | value (length bytes) |
//! ```
//! All integers are big-endian; `length` never counts the header it is part of.

use super::error::{EmitError, ParseError};

/// Bytes before a message's data items: type and length.
pub const MESSAGE_HEADER_LEN: usize = 4;
/// The ASCII prefix every signal starts with (RFC 8175 §11.1).
pub const SIGNAL_PREFIX: &[u8; 4] = b"DLEP";
/// Bytes before a signal's data items: prefix, type and length.
pub const SIGNAL_HEADER_LEN: usize = 8;
/// Bytes before a data item's value.
pub const ITEM_HEADER_LEN: usize = 4;
/// The largest message the 16-bit length field allows, header included.
pub const MAX_MESSAGE_LEN: usize = MESSAGE_HEADER_LEN + u16::MAX as usize;
/// Data items accepted in one signal or message. The 16-bit length alone would allow 16 383
/// empty items; no message RFC 8175 defines needs more than a few dozen, and the cap bounds what
/// one message can make a parser allocate.
pub const MAX_ITEMS: usize = 1024;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The total length (header included) of the message at the start of `buf`, once its header
/// has arrived; `None` while fewer than [`MESSAGE_HEADER_LEN`] bytes are there. This is how a
/// TCP stream is cut into messages.
pub fn message_frame_len(buf: &[u8]) -> Option<usize> {
    (buf.len() >= MESSAGE_HEADER_LEN).then(|| MESSAGE_HEADER_LEN + be16(buf, 2) as usize)
}

/// A whole message: header plus exactly the data items its length announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagePacket<'a> {
    bytes: &'a [u8],
}

impl<'a> MessagePacket<'a> {
    /// Checks that `bytes` is one complete message, no more and no less.
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self, ParseError> {
        let total = message_frame_len(bytes).ok_or(ParseError::Truncated {
            what: "message header",
            need: MESSAGE_HEADER_LEN,
            have: bytes.len(),
        })?;
        check_total("message", bytes.len(), total)?;
        Ok(MessagePacket { bytes })
    }

    pub fn message_type(&self) -> u16 {
        be16(self.bytes, 0)
    }

    /// The data items' bytes.
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[MESSAGE_HEADER_LEN..]
    }

    pub fn items(&self) -> Items<'a> {
        Items::new(self.body(), "message")
    }

    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// A whole signal (one UDP datagram): prefix, header and data items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalPacket<'a> {
    bytes: &'a [u8],
}

impl<'a> SignalPacket<'a> {
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self, ParseError> {
        if bytes.len() < SIGNAL_HEADER_LEN {
            return Err(ParseError::Truncated {
                what: "signal header",
                need: SIGNAL_HEADER_LEN,
                have: bytes.len(),
            });
        }
        if &bytes[..4] != SIGNAL_PREFIX {
            return Err(ParseError::BadPrefix);
        }
        let total = SIGNAL_HEADER_LEN + be16(bytes, 6) as usize;
        check_total("signal", bytes.len(), total)?;
        Ok(SignalPacket { bytes })
    }

    pub fn signal_type(&self) -> u16 {
        be16(self.bytes, 4)
    }

    pub fn body(&self) -> &'a [u8] {
        &self.bytes[SIGNAL_HEADER_LEN..]
    }

    pub fn items(&self) -> Items<'a> {
        Items::new(self.body(), "signal")
    }

    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

fn check_total(what: &'static str, have: usize, total: usize) -> Result<(), ParseError> {
    if have < total {
        return Err(ParseError::Truncated {
            what,
            need: total,
            have,
        });
    }
    if have > total {
        return Err(ParseError::Trailing {
            what,
            extra: have - total,
        });
    }
    Ok(())
}

/// One data item, borrowed: its type and value bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemView<'a> {
    pub ty: u16,
    pub value: &'a [u8],
}

/// The data items of a body, in order. Yields an error (and then nothing) when an item's
/// header or value runs past the body, or after [`MAX_ITEMS`] items.
#[derive(Debug, Clone)]
pub struct Items<'a> {
    rest: &'a [u8],
    what: &'static str,
    seen: usize,
    done: bool,
}

impl<'a> Items<'a> {
    pub fn new(body: &'a [u8], what: &'static str) -> Self {
        Items {
            rest: body,
            what,
            seen: 0,
            done: false,
        }
    }
}

impl<'a> Iterator for Items<'a> {
    type Item = Result<ItemView<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        let fail = |this: &mut Self, e| {
            this.done = true;
            Some(Err(e))
        };
        if self.seen == MAX_ITEMS {
            return fail(
                self,
                ParseError::TooManyItems {
                    what: self.what,
                    limit: MAX_ITEMS,
                },
            );
        }
        if self.rest.len() < ITEM_HEADER_LEN {
            let have = self.rest.len();
            return fail(
                self,
                ParseError::Truncated {
                    what: "data item header",
                    need: ITEM_HEADER_LEN,
                    have,
                },
            );
        }
        let ty = be16(self.rest, 0);
        let len = be16(self.rest, 2) as usize;
        let end = ITEM_HEADER_LEN + len;
        if self.rest.len() < end {
            let have = self.rest.len();
            return fail(
                self,
                ParseError::Truncated {
                    what: "data item value",
                    need: end,
                    have,
                },
            );
        }
        let value = &self.rest[ITEM_HEADER_LEN..end];
        self.rest = &self.rest[end..];
        self.seen += 1;
        Some(Ok(ItemView { ty, value }))
    }
}

/// Appends a data item with the given value bytes.
pub fn emit_item(out: &mut Vec<u8>, ty: u16, value: &[u8]) -> Result<(), EmitError> {
    let len = u16::try_from(value.len()).map_err(|_| EmitError::TooLong {
        what: "data item value",
        len: value.len(),
    })?;
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(value);
    Ok(())
}

/// Writes a header whose length field is patched once the body is written: `start` is where
/// the header begins in `out`, `header_len` its size (the length field is its last two bytes).
pub(crate) fn patch_length(
    out: &mut [u8],
    start: usize,
    header_len: usize,
    what: &'static str,
) -> Result<(), EmitError> {
    let body = out.len() - start - header_len;
    let len = u16::try_from(body).map_err(|_| EmitError::TooLong { what, len: body })?;
    let at = start + header_len - 2;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    Ok(())
}
