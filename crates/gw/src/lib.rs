//! AeroGW: gateways between TCP/UDP applications and AeroTP (docs/gateway.md).
//!
//! An ingress accepts local TCP connections (and UDP datagrams) and carries each over one
//! AeroTP connection to an egress, which connects to the destination. TCP flows are
//! `near-reliable` (custody transfer: the ingress keeps the bytes in a crash-safe store until
//! the egress confirms they were written to the destination) or `reliable` (end-to-end:
//! the ingress reads only a small window ahead of what the destination confirmed).

pub mod config;
pub mod flow;
pub mod frame;
pub mod gateway;
pub mod metrics;
pub mod policer;
pub mod progress;
pub mod sched;
pub mod store;
pub mod udp;
pub mod udpstream;

pub use config::{FileConfig, Settings};
pub use gateway::Gateway;

use std::sync::Arc;

/// Starts a gateway of `role` ("ingress" or "egress") with its metrics endpoint.
pub async fn start(role: &str, settings: Settings) -> anyhow::Result<Arc<Gateway>> {
    let metrics = settings.metrics;
    let gw = match role {
        "ingress" => Gateway::ingress(settings).await?,
        "egress" => Gateway::egress(settings).await?,
        r => anyhow::bail!("unknown role {r}"),
    };
    if let Some(a) = metrics {
        let local = metrics::serve(gw.clone(), a).await?;
        tracing::info!(%local, "metrics endpoint");
    }
    Ok(gw)
}
