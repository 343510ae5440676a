//! Helpers shared by the gateway's integration tests.

#![allow(dead_code)]

use std::net::SocketAddr;

use rand::{RngCore, SeedableRng};

/// `n` pseudo-random bytes from `seed` (incompressible, reproducible).
pub fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand_pcg::Pcg64::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// A loopback TCP address nothing listens on right now.
pub fn free_tcp() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A loopback UDP address nothing is bound to right now.
pub fn free_udp() -> SocketAddr {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}
