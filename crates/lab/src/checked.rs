//! A link plus the receiving host's transport checksum check: what the forwarding threads
//! put each direction's packets through.

use std::time::Duration;

use crate::checksum;
use crate::forward::Channel;

/// A link plus the receiving host's transport checksum check (see `checksum`).
#[derive(Debug)]
pub(crate) struct CheckedLink {
    pub(crate) link: aerotp_link::Link,
    /// Packets dropped after the link because a flipped bit broke their TCP/UDP checksum.
    pub(crate) checksum_drops: u64,
}

/// Link tag for packets whose transport checksum the receiver verifies.
const CHECKED: u64 = 1;

impl Channel for CheckedLink {
    fn offer(&mut self, now: Duration, mut packet: Vec<u8>) {
        let tag = if checksum::normalise(&mut packet) {
            CHECKED
        } else {
            0
        };
        // The link's own stats count what it accepted and dropped.
        let _ = self.link.send_tagged(now, packet, tag);
    }
    fn take(&mut self, now: Duration) -> Option<Vec<u8>> {
        while let Some(d) = self.link.recv_delivery(now) {
            if d.tag == CHECKED && d.flipped_bits > 0 && !checksum::passes(&d.packet) {
                self.checksum_drops += 1;
                continue;
            }
            return Some(d.packet);
        }
        None
    }
    fn next_arrival(&self) -> Option<Duration> {
        self.link.next_arrival()
    }
}
