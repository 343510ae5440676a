//! Forgetting a closed connection: its keys (one per path), its tombstone, its place in the
//! schedule, the share and the migration tables.

use super::{ConnectionHandle, Endpoint};

impl Endpoint {
    /// Forgets a closed connection (its statistics too). Closed connections stay until released
    /// so the application can read their statistics and remaining data.
    pub fn release(&mut self, h: ConnectionHandle) {
        self.admission.settle(h.0);
        self.share_leave(h);
        if let Some(c) = self.conns.remove(&h) {
            let key = (c.remote(), c.local_port, c.remote_port);
            self.migrate
                .on_release(h, (c.local_port, c.remote_port, c.tag));
            self.schedule.remove(h);
            // The other paths' keys: no tombstone (the first path's stands for them).
            for p in c.path_addrs().skip(1) {
                let k = (p.remote, c.local_port, c.remote_port);
                if k != key && self.by_key.get(&k) == Some(&h) {
                    self.by_key.remove(&k);
                }
            }
            // A connection whose key was already freed (set-up timeout) leaves no tombstone.
            if self.by_key.get(&key) == Some(&h) {
                self.by_key.remove(&key);
                let reset = c.answers_with_reset();
                self.tombstones.remember(key, c.tag, c.final_ack(), reset);
            }
        }
    }
}
