//! Owned messages (TCP) and signals (UDP): a type and its data items, parsed from or emitted
//! to bytes. Parsing checks framing first ([`MessagePacket`] / [`SignalPacket`]), then every item.

use super::error::{EmitError, ParseError};
use super::item::DataItem;
use super::packet::{
    patch_length, Items, MessagePacket, SignalPacket, MESSAGE_HEADER_LEN, SIGNAL_HEADER_LEN,
    SIGNAL_PREFIX,
};

/// A session message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub ty: u16,
    pub items: Vec<DataItem>,
}

/// A discovery signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    pub ty: u16,
    pub items: Vec<DataItem>,
}

/// Every item of a body, typed; the first malformed one is the error.
pub fn parse_items(items: Items<'_>) -> Result<Vec<DataItem>, ParseError> {
    items
        .map(|r| r.and_then(DataItem::parse))
        .collect::<Result<Vec<_>, _>>()
}

fn emit_items(items: &[DataItem], out: &mut Vec<u8>) -> Result<(), EmitError> {
    items.iter().try_for_each(|i| i.emit(out))
}

impl Message {
    pub fn new(ty: u16, items: Vec<DataItem>) -> Message {
        Message { ty, items }
    }

    /// `bytes` must be exactly one message.
    pub fn parse(bytes: &[u8]) -> Result<Message, ParseError> {
        let p = MessagePacket::new_checked(bytes)?;
        Ok(Message {
            ty: p.message_type(),
            items: parse_items(p.items())?,
        })
    }

    /// Appends the message; on error `out` is left as it was.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        let start = out.len();
        out.extend_from_slice(&self.ty.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        let r = emit_items(&self.items, out)
            .and_then(|()| patch_length(out, start, MESSAGE_HEADER_LEN, "message body"));
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, EmitError> {
        let mut v = Vec::new();
        self.emit(&mut v)?;
        Ok(v)
    }

    /// The first item for which `f` returns `Some`.
    pub fn find<'a, T>(&'a self, f: impl FnMut(&'a DataItem) -> Option<T>) -> Option<T> {
        self.items.iter().find_map(f)
    }
}

impl Signal {
    pub fn new(ty: u16, items: Vec<DataItem>) -> Signal {
        Signal { ty, items }
    }

    /// `bytes` must be exactly one signal (one datagram).
    pub fn parse(bytes: &[u8]) -> Result<Signal, ParseError> {
        let p = SignalPacket::new_checked(bytes)?;
        Ok(Signal {
            ty: p.signal_type(),
            items: parse_items(p.items())?,
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        let start = out.len();
        out.extend_from_slice(SIGNAL_PREFIX);
        out.extend_from_slice(&self.ty.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        let r = emit_items(&self.items, out)
            .and_then(|()| patch_length(out, start, SIGNAL_HEADER_LEN, "signal body"));
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, EmitError> {
        let mut v = Vec::new();
        self.emit(&mut v)?;
        Ok(v)
    }
}
