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

/// An egress on loopback that sends every UDP flow to `dest`, at `rate`.
pub async fn udp_egress(dest: SocketAddr, rate: &str) -> std::sync::Arc<aerotp_gw::Gateway> {
    let cfg = aerotp_gw::config::FileConfig {
        listen: Some("127.0.0.1:0".into()),
        udp_connect: Some(dest.to_string()),
        rate: Some(rate.into()),
        ..Default::default()
    };
    aerotp_gw::start(aerotp_gw::Role::Egress, cfg.settings().unwrap())
        .await
        .unwrap()
}

/// An ingress on loopback with one UDP route (`mode`, `class`) towards AeroTP `peer`, at
/// `rate`; returns it with the address UDP clients send to.
pub async fn udp_ingress(
    peer: SocketAddr,
    mode: &str,
    class: &str,
    rate: &str,
) -> (std::sync::Arc<aerotp_gw::Gateway>, SocketAddr) {
    let entry = free_udp();
    let cfg = aerotp_gw::config::FileConfig {
        peer: Some(peer.to_string()),
        rate: Some(rate.into()),
        flows: vec![aerotp_gw::config::FlowSpec {
            udp_listen: Some(entry.to_string()),
            mode: Some(mode.into()),
            class: Some(class.into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let gw = aerotp_gw::start(aerotp_gw::Role::Ingress, cfg.settings().unwrap())
        .await
        .unwrap();
    (gw, entry)
}
