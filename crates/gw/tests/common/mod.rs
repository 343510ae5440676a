//! Helpers shared by the gateway's integration tests.

#![allow(dead_code)]

use std::net::SocketAddr;

// The generic helpers (ports, random data, waits) live once, in aerotp-testkit.
use aerotp_testkit::free_udp;

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
