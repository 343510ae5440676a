//! AeroGW: gateways between TCP/UDP applications and AeroTP (docs/gateway.md).
//!
//! An ingress accepts local TCP connections (and UDP datagrams) and carries each over one
//! AeroTP connection to an egress, which connects to the destination. TCP flows are
//! `near-reliable` (custody transfer: the ingress keeps the bytes in a crash-safe store until
//! the egress confirms they were written to the destination) or `reliable` (end-to-end:
//! the ingress reads only a small window ahead of what the destination confirmed).
//!
//! Modules, each importing only those listed before it (no cycle): `consts`, `appsock`, `frame`,
//! `transparent` (interception: rules, allow/deny, original destination), `config`, `store`, `progress`, `policer`, `dgram`, `sink` (leaves and codecs); `flow` (one TCP
//! flow); `ctx` (what both roles share; the engine's link share paces the flows by class); `udp`, `udpstream` (UDP
//! flows); `ingress`, `egress` (the roles); `metrics`. `scripts/check-module-cycles.py`
//! checks it.
//!
//! Reliable interception's user-space TCP on a TUN device is its own crate, `aerotp-usertcp`:
//! the ingress starts it (`ingress`), a flow is what its connections feed (`flow::Flow` is
//! its `Carrier`), and each of its connections is where a flow writes the reverse direction
//! (its `UserSink`, re-exported by `sink`).
//!
//! The public API is what the CLI (`aerotp gw`) uses: [`start`], [`Gateway`], [`Role`], the
//! settings (`config`), interception's specs (`transparent`) and `metrics::fetch`; `frame`,
//! `store` and `progress` (records the fuzz corpus parses, a store the restart tests edit) and
//! `ctx` (the registry the integration tests read) stay public too. Every other module is
//! `pub(crate)`: a flow's state (`flow::FlowState`) is read through getters and moved only
//! through its methods.

pub(crate) mod appsock;
pub mod config;
pub(crate) mod consts;
pub mod ctx;
pub(crate) mod dgram;
pub(crate) mod egress;
pub(crate) mod flow;
pub mod frame;
pub(crate) mod ingress;
pub mod metrics;
pub(crate) mod policer;
pub mod progress;
pub(crate) mod session;
pub(crate) mod sink;
pub mod store;
pub(crate) mod tcpside;
pub mod transparent;
pub(crate) mod tunroutes;
pub(crate) mod udp;
pub(crate) mod udpstream;

pub use config::{FileConfig, Settings};
pub use ctx::{Ctx, Role};
pub use egress::Egress;
pub use ingress::Ingress;

use std::sync::Arc;

/// A running gateway of either role: its role's object and, through `Deref`, the shared
/// context (settings, endpoint, registry).
#[derive(Debug)]
pub enum Gateway {
    Ingress(Arc<Ingress>),
    Egress(Arc<Egress>),
}

impl std::ops::Deref for Gateway {
    type Target = Ctx;
    fn deref(&self) -> &Ctx {
        match self {
            Gateway::Ingress(i) => &i.ctx,
            Gateway::Egress(e) => &e.ctx,
        }
    }
}

impl Gateway {
    /// The shared context, owned.
    pub fn ctx(&self) -> Arc<Ctx> {
        match self {
            Gateway::Ingress(i) => i.ctx.clone(),
            Gateway::Egress(e) => e.ctx.clone(),
        }
    }
}

/// Starts a gateway of `role` with its metrics endpoint (if `settings.metrics`).
pub async fn start(role: Role, settings: Settings) -> anyhow::Result<Arc<Gateway>> {
    let metrics = settings.metrics;
    let gw = match role {
        Role::Ingress => Gateway::Ingress(Ingress::start(settings).await?),
        Role::Egress => Gateway::Egress(Egress::start(settings).await?),
    };
    if let Some(a) = metrics {
        let local = metrics::serve(gw.ctx(), a).await?;
        tracing::info!(%local, "metrics endpoint");
    }
    Ok(Arc::new(gw))
}
