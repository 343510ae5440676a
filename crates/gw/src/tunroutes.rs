//! Explicit `reliable` TCP routes served end to end by the user-space TCP
//! (docs/gateway.md §TCP reliable, "Explicit routes through the TUN device").
//!
//! A kernel listener acknowledges whatever lands in its receive queue, so an explicit route
//! (`[[flow]] listen = …`) in `reliable` mode cannot keep the end-to-end guarantee there.
//! With `--transparent-tun`, a reliable route whose listen address is *not* one of this
//! host's own is served by the user-space TCP instead: the ingress routes that address into
//! its TUN device (`ip route replace ADDR/32 dev TUN`, gone with the device), and a SYN to
//! the route's address and port becomes a flow to the route's destination, acknowledged
//! only as far as the egress confirmed. Any other port of that address is the gateway's and
//! is answered with RST. A route on one of the host's own addresses stays on a kernel
//! listener (the kernel delivers locally before it routes), with the warning it had.

use std::net::{IpAddr, SocketAddr};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

use crate::config::{FlowKind, Route};
use aerotp_net::Mode;

/// The explicit routes the user-space TCP serves, by their listen address.
#[derive(Debug, Clone, Default)]
pub struct TunRoutes {
    routes: Vec<Route>,
}

/// Whether `ip` is an address of this host (in the calling thread's network namespace): a
/// socket can be bound to it. The wildcard counts as local.
pub fn is_local(ip: IpAddr) -> bool {
    ip.is_unspecified() || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Whether `route` is served by the user-space TCP when the ingress has a TUN device: a
/// reliable TCP route whose listen address is not this host's own (loopback and the
/// wildcard are).
pub fn served_on_tun(route: &Route, tun: bool) -> bool {
    tun && route.kind == FlowKind::Tcp
        && route.mode == Mode::Reliable
        && !is_local(route.local.ip())
}

/// The error of a route whose kernel listener could not bind: for an address this host does
/// not have, what to do about it.
pub fn bind_error(e: std::io::Error, route: &Route, tun: Option<&str>) -> anyhow::Error {
    let base = format!("cannot listen on TCP {}: {e}", route.local);
    if e.kind() != std::io::ErrorKind::AddrNotAvailable {
        return anyhow!(base);
    }
    match (route.mode, tun) {
        (Mode::Reliable, None) => anyhow!(
            "{base}: {} is not an address of this host. Give one of its addresses, or serve \
             the route end to end through the user-space TCP: add --transparent-tun NAME \
             (transparent.tun) and the ingress routes the address into that device",
            route.local.ip()
        ),
        _ => anyhow!(
            "{base}: {} is not an address of this host; give one of its addresses (only a \
             reliable route, with --transparent-tun, may take an address the host does not \
             have)",
            route.local.ip()
        ),
    }
}

impl TunRoutes {
    /// Routes of `routes` served on the device (`served_on_tun`); two on one address and
    /// port are refused by the configuration already.
    pub fn new(routes: Vec<Route>) -> TunRoutes {
        TunRoutes { routes }
    }

    /// The route a connection to `dst` takes, if it addressed one.
    pub fn route_for(&self, dst: SocketAddr) -> Option<&Route> {
        self.routes.iter().find(|r| r.local == dst)
    }

    /// Whether `ip` is a route's address (the gateway's, whatever the port).
    pub fn owns(&self, ip: IpAddr) -> bool {
        self.routes.iter().any(|r| r.local.ip() == ip)
    }

    /// Routes every route's address into device `dev`, one host route each (removed by the
    /// kernel with the device).
    pub fn install(&self, dev: &str) -> Result<()> {
        let mut done: Vec<IpAddr> = Vec::new();
        for r in &self.routes {
            let ip = r.local.ip();
            if done.contains(&ip) {
                continue;
            }
            let (family, prefix) = match ip {
                IpAddr::V4(_) => ("-4", format!("{ip}/32")),
                IpAddr::V6(_) => ("-6", format!("{ip}/128")),
            };
            let args = [family, "route", "replace", &prefix, "dev", dev];
            let out = Command::new("ip").args(args).output().with_context(|| {
                format!(
                    "route {}: cannot run `ip {}` (install iproute2)",
                    r.local,
                    args.join(" ")
                )
            })?;
            if !out.status.success() {
                bail!(
                    "route {}: `ip {}` failed: {} (the ingress needs CAP_NET_ADMIN to route a \
                     reliable route's address into its TUN device)",
                    r.local,
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            tracing::info!(listen = %r.local, dest = %r.dest, device = dev,
                "reliable TCP route through the user-space TCP (end to end)");
            done.push(ip);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Class;

    fn route(local: &str, mode: Mode) -> Route {
        Route {
            kind: FlowKind::Tcp,
            local: local.parse().unwrap(),
            dest: "10.77.0.2:8500".into(),
            mode,
            class: Class::Bulk,
            fec: aerotp_net::FecSetting::Off,
            erasure: Default::default(),
        }
    }

    #[test]
    fn only_reliable_routes_on_foreign_addresses_go_through_the_device() {
        // 192.0.2.0/24 is TEST-NET-1: no host has it.
        let foreign = route("192.0.2.7:8080", Mode::Reliable);
        assert!(served_on_tun(&foreign, true));
        assert!(!served_on_tun(&foreign, false), "no device, no route");
        assert!(!served_on_tun(
            &route("192.0.2.7:8080", Mode::NearReliable),
            true
        ));
        assert!(!served_on_tun(
            &route("127.0.0.1:8080", Mode::Reliable),
            true
        ));
        assert!(!served_on_tun(&route("0.0.0.0:8080", Mode::Reliable), true));
        let t = TunRoutes::new(vec![foreign]);
        assert!(t.route_for("192.0.2.7:8080".parse().unwrap()).is_some());
        assert!(t.route_for("192.0.2.7:8081".parse().unwrap()).is_none());
        assert!(t.owns("192.0.2.7".parse().unwrap()));
        assert!(!t.owns("192.0.2.8".parse().unwrap()));
    }
}
