//! Confirmed delivery (`ConnectionConfig::confirm_delivery`, docs/spec.md §4): the
//! acknowledgements' `delivered` field counts what the application has confirmed delivered
//! onward, not what it has read, and the end of the stream counts once confirmed.

use super::Receiver;
use crate::confirmation::Confirmation;
use std::time::Duration;

impl Receiver {
    /// The `delivered` field of the acknowledgements: confirmed bytes (and end) with
    /// confirmed delivery, otherwise the bytes the application has read.
    pub(super) fn delivered_field(&self) -> u64 {
        self.confirmation
            .as_ref()
            .map_or(self.delivery.read_bytes(), Confirmation::value)
    }

    /// The application has delivered the first `upto` bytes onward, and with `end` the end
    /// of the stream too. Clamped to what it has read (and `end` to having read the AFIN
    /// and confirmed every byte); never goes back. An advance is acknowledged within the
    /// receiver's acknowledgement delay, together with data arriving meanwhile; the
    /// confirmed end goes in the AFINACK, which waits for it. Returns the `delivered` value
    /// now confirmed (bytes, plus one once the end is). Without confirmed delivery it does
    /// nothing and returns the bytes read.
    pub fn confirm(&mut self, now: Duration, upto: u64, end: bool) -> u64 {
        let read = self.delivery.read_bytes();
        let eof = self.at_eof();
        let Some(c) = self.confirmation.as_mut() else {
            return read;
        };
        c.bytes = c.bytes.max(upto.min(read));
        c.end |= end && eof && c.bytes == read;
        let value = c.value();
        if value > c.reported && !c.end {
            self.feedback.start_ack_timer(now);
        }
        value
    }

    /// Whether the AFINACK may go: always without confirmed delivery; with it, once the
    /// application has confirmed the end of the stream.
    pub fn end_confirmed(&self) -> bool {
        self.confirmation.as_ref().is_none_or(|c| c.end)
    }

    /// An acknowledgement carrying `delivered_field()` went out.
    pub(super) fn note_reported(&mut self) {
        let value = self.delivered_field();
        if let Some(c) = self.confirmation.as_mut() {
            c.reported = value;
        }
    }

    /// The AFINACK went out: it carried the final count and covers everything received, so
    /// no acknowledgement is pending any more.
    pub fn sent_final_ack(&mut self) {
        if self.confirmation.is_some() {
            self.note_reported();
            self.feedback.stop_ack_timer();
        }
    }
}
