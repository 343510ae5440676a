//! What an application confirmed delivered onward, for confirmed delivery
//! (`ConnectionConfig::confirm_delivery`, docs/spec.md §4): a leaf the receiver holds and
//! `receiver::confirm` drives.

/// What the application has confirmed, and what the peer has been told.
#[derive(Debug, Default)]
pub(crate) struct Confirmation {
    /// Bytes confirmed delivered onward (never more than the application has read).
    pub(crate) bytes: u64,
    /// The end of the stream is confirmed too (the application read to the AFIN, delivered
    /// everything and, say, shut its socket's write half).
    pub(crate) end: bool,
    /// The `delivered` value the last acknowledgement carried.
    pub(crate) reported: u64,
}

impl Confirmation {
    /// The wire value: the bytes, plus one for a confirmed end (as TCP's FIN takes a
    /// sequence number), so a peer can tell "everything but the end" from "everything".
    pub(crate) fn value(&self) -> u64 {
        self.bytes + u64::from(self.end)
    }
}
