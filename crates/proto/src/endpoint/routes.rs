//! The datagram-mode routes that repair (`crate::datagram_repair`), both sides: the routes
//! this endpoint sends on and numbers, and the routes it receives on and decodes. One owner,
//! because both are made from the same configuration and answer the endpoint's questions
//! about repair together (its deadline, what it holds).

use crate::datagram_repair::{RecvRoutes, SendRoutes};
use std::time::Duration;

#[derive(Debug)]
pub(super) struct DatagramRoutes {
    /// Routes this endpoint sends on: their numbering and the repairs they owe.
    pub(super) send: SendRoutes,
    /// Routes this endpoint receives on: their decoders.
    pub(super) recv: RecvRoutes,
}

impl DatagramRoutes {
    /// Each side's table has its own hash seed; both hold at most `max_routes` routes.
    pub(super) fn new(
        send_seed: u64,
        recv_seed: u64,
        max_routes: usize,
        repair_mtu: usize,
    ) -> DatagramRoutes {
        DatagramRoutes {
            send: SendRoutes::new(send_seed, max_routes),
            recv: RecvRoutes::new(recv_seed, max_routes, repair_mtu),
        }
    }

    /// When a sending route's tail flush is due (`SendRoutes::deadline`).
    pub(super) fn deadline(&self) -> Option<Duration> {
        self.send.deadline()
    }

    /// Receiving routes held now and the bytes their decoders hold.
    pub(super) fn held(&self) -> (usize, usize) {
        (self.recv.len(), self.recv.memory_bytes())
    }
}
