//! Network-namespace lab joined by a TUN link driven by the link model.
//!
//! [`Lab::start`] creates two network namespaces, `aerotp-air-<pid>-<tag>` and
//! `aerotp-ground-<pid>-<tag>`, each holding one layer-3 TUN interface (`atp-air` with
//! 10.77.0.1/30, `atp-ground` with 10.77.0.2/30, MTU 1500). This process reads every IP
//! packet the air stack sends out of `atp-air`, passes it through the forward
//! [`aerotp_link::Link`] and writes what comes out, when it comes out, into `atp-ground`; the
//! reverse direction goes through a second `Link`. Impairments apply to whole IP packets, so
//! the kernels react as on a real link: a flipped IP header is dropped by the receiving stack,
//! a flipped TCP segment fails its checksum, a zero-checksum UDP datagram reaches the socket.
//!
//! A lab may have several paths ([`Lab::start_paths`]): path `i` is its own TUN pair,
//! `atp-air<i>`/`atp-ground<i>` with 10.77.`i`.1/30 and 10.77.`i`.2/30, and its own two links
//! (path 0 keeps the names and addresses above). The kernels pick the path by address.
//!
//! Everything created is removed by [`Lab::stop`] or on drop; namespaces of a lab whose
//! process died are removed by [`cleanup_leftovers`], which every `start` calls first.
//! Needs root (CAP_SYS_ADMIN for namespaces, CAP_NET_ADMIN for TUN) and iproute2's `ip`.
//! See `docs/lab.md`.
//!
//! ```no_run
//! use aerotp_lab::{Lab, LabConfig, LinkConfig, Side};
//!
//! # fn main() -> anyhow::Result<()> {
//! let lab = Lab::start(LabConfig {
//!     forward: LinkConfig { ber: 1e-5, ..LinkConfig::default() }, // 5 Mb/s, 10 ms
//!     reverse: LinkConfig { rate_bps: 1_000_000, ..LinkConfig::default() },
//!     seed: 42,
//!     name: Some("doc".into()),
//! })?;
//! let ping = lab.command(Side::Air, "ping").args(["-c", "3", "10.77.0.2"]).output()?;
//! assert!(ping.status.success());
//! // Sockets opened by a thread inside a namespace belong to it.
//! let ground = std::net::SocketAddr::from((lab.ground_addr(), 5001));
//! let listener = lab
//!     .spawn_in(Side::Ground, move || std::net::TcpListener::bind(ground))?
//!     .join()
//!     .expect("bind thread")?;
//! drop(listener);
//! let (forward, reverse) = lab.stop()?; // final aerotp_link::LinkStats
//! println!("{} / {} packets delivered", forward.delivered_packets, reverse.delivered_packets);
//! # Ok(())
//! # }
//! ```

mod addr;
mod bridge;
mod checked;
mod checksum;
mod config;
mod forward;
mod namespaces;
mod netns;

use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};

pub use addr::{
    path_addrs, path_ifnames, Side, AIR_ADDR, AIR_IF, GROUND_ADDR, GROUND_IF, MAX_LAB_PATHS, MTU,
    PREFIX_LEN,
};
/// The link model crate, re-exported so users need not depend on it separately.
pub use aerotp_link as link;
pub use aerotp_link::{LinkConfig, LinkStats};
pub use config::{LabConfig, LabPath, LabPathsConfig};
pub use forward::TunCounters;
pub use namespaces::cleanup_leftovers;
pub use netns::NsThread;

use bridge::Bridge;
use checked::CheckedLink;
use namespaces::check_tag;

/// The two links of one path.
#[derive(Debug)]
struct PathLinks {
    forward: Arc<Mutex<CheckedLink>>,
    reverse: Arc<Mutex<CheckedLink>>,
}

/// A running lab. Dropping it stops forwarding and removes the namespaces (and so the TUN
/// devices and any process still running in them); [`Lab::stop`] does the same and reports.
#[derive(Debug)]
pub struct Lab {
    air_ns: String,
    ground_ns: String,
    paths: Vec<PathLinks>,
    bridge: Bridge,
}

impl Lab {
    /// Build the namespaces, TUN devices and links and start forwarding. Needs root.
    pub fn start(config: LabConfig) -> Result<Lab> {
        Lab::start_paths(config.into())
    }

    /// As [`Lab::start`], with one TUN pair and two links per path (see the crate docs for
    /// names and addresses). Every config is checked before anything is created.
    pub fn start_paths(config: LabPathsConfig) -> Result<Lab> {
        netns::check_prerequisites()?;
        if config.paths.is_empty() || config.paths.len() > MAX_LAB_PATHS {
            bail!(
                "a lab has 1 to {MAX_LAB_PATHS} paths; {} were given",
                config.paths.len()
            );
        }
        let mut paths = Vec::with_capacity(config.paths.len());
        for (i, p) in config.paths.into_iter().enumerate() {
            // Path 0's messages stay as they were for one-path labs.
            let which = if i == 0 {
                String::new()
            } else {
                format!("path {i} ")
            };
            let forward = aerotp_link::Link::new(p.forward, p.forward_seed)
                .with_context(|| format!("{which}forward (air → ground) link config"))?;
            let reverse = aerotp_link::Link::new(p.reverse, p.reverse_seed)
                .with_context(|| format!("{which}reverse (ground → air) link config"))?;
            let checked = |link| {
                Arc::new(Mutex::new(CheckedLink {
                    link,
                    checksum_drops: 0,
                }))
            };
            paths.push(PathLinks {
                forward: checked(forward),
                reverse: checked(reverse),
            });
        }
        match cleanup_leftovers() {
            Ok(0) => {}
            Ok(n) => tracing::info!("removed {n} namespaces left by labs whose process is gone"),
            Err(e) => tracing::warn!("could not clean up leftover lab namespaces: {e:#}"),
        }
        let tag = match config.name {
            Some(name) => {
                check_tag(&name)?;
                name
            }
            None => {
                static NEXT: AtomicU32 = AtomicU32::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed).to_string()
            }
        };
        let channels: Vec<_> = paths
            .iter()
            .map(|p| (p.forward.clone(), p.reverse.clone()))
            .collect();
        let bridge = Bridge::start(&tag, channels)?;
        Ok(Lab {
            air_ns: bridge.ns.names[0].clone(),
            ground_ns: bridge.ns.names[1].clone(),
            paths,
            bridge,
        })
    }

    /// Number of paths.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Address of the air end of path `i` (10.77.i.1).
    pub fn air_addr_of(&self, i: usize) -> IpAddr {
        IpAddr::V4(path_addrs(i).0)
    }

    /// Address of the ground end of path `i` (10.77.i.2).
    pub fn ground_addr_of(&self, i: usize) -> IpAddr {
        IpAddr::V4(path_addrs(i).1)
    }

    /// Statistics of the (forward, reverse) links of path `i` so far (`None` past the last).
    pub fn path_stats(&self, i: usize) -> Option<(LinkStats, LinkStats)> {
        let p = self.paths.get(i)?;
        let get = |c: &Arc<Mutex<CheckedLink>>| {
            c.lock().expect("link lock poisoned").link.stats().clone()
        };
        Some((get(&p.forward), get(&p.reverse)))
    }

    /// Checksum drops of path `i` (forward, reverse), as [`Lab::checksum_drops`].
    pub fn path_checksum_drops(&self, i: usize) -> Option<(u64, u64)> {
        let p = self.paths.get(i)?;
        let get =
            |c: &Arc<Mutex<CheckedLink>>| c.lock().expect("link lock poisoned").checksum_drops;
        Some((get(&p.forward), get(&p.reverse)))
    }

    /// Statistics of every path, in path order.
    pub fn all_stats(&self) -> Vec<(LinkStats, LinkStats)> {
        (0..self.paths.len())
            .filter_map(|i| self.path_stats(i))
            .collect()
    }

    /// Name of the air network namespace.
    pub fn air_ns(&self) -> &str {
        &self.air_ns
    }

    /// Name of the ground network namespace.
    pub fn ground_ns(&self) -> &str {
        &self.ground_ns
    }

    /// Name of the namespace of `side`.
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::Air => &self.air_ns,
            Side::Ground => &self.ground_ns,
        }
    }

    /// Address of the air end (10.77.0.1), reachable from the ground namespace.
    pub fn air_addr(&self) -> IpAddr {
        IpAddr::V4(AIR_ADDR)
    }

    /// Address of the ground end (10.77.0.2), reachable from the air namespace.
    pub fn ground_addr(&self) -> IpAddr {
        IpAddr::V4(GROUND_ADDR)
    }

    /// `ip netns exec <ns> <program>`: add arguments, then spawn or run it. The process
    /// belongs to the caller, but a lab's teardown kills whatever still runs in its namespaces.
    pub fn command(&self, side: Side, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.ns(side), program]);
        cmd
    }

    /// Run `f` on a new thread inside the namespace of `side`: sockets it opens live there
    /// (e.g. a `TcpListener` on the ground address). Returns once the thread has entered it.
    pub fn spawn_in<T, F>(&self, side: Side, f: F) -> Result<NsThread<T>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        netns::spawn_in(self.ns(side), f)
    }

    /// Statistics of the (forward, reverse) links of path 0 so far.
    pub fn stats(&self) -> (LinkStats, LinkStats) {
        self.path_stats(0).expect("a lab has at least one path")
    }

    /// Packets the (forward, reverse) receivers of path 0 dropped for a broken TCP/UDP
    /// checksum: what the link corrupted and a real host would not accept.
    pub fn checksum_drops(&self) -> (u64, u64) {
        self.path_checksum_drops(0)
            .expect("a lab has at least one path")
    }

    /// Packets read from / written to the TUN devices of path 0 for (forward, reverse).
    pub fn tun_counters(&self) -> (TunCounters, TunCounters) {
        self.bridge.counters(0)
    }

    /// Stop forwarding, remove everything, and return the final (forward, reverse) stats of
    /// path 0. Fails if forwarding had stopped on an error or if something could not be removed.
    pub fn stop(self) -> Result<(LinkStats, LinkStats)> {
        self.stop_all().map(|mut v| v.swap_remove(0))
    }

    /// As [`Lab::stop`], returning the final stats of every path.
    pub fn stop_all(mut self) -> Result<Vec<(LinkStats, LinkStats)>> {
        let result = self.bridge.shutdown();
        let stats = self.all_stats();
        result.map(|()| stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_can_be_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Lab>();
        assert_send_sync::<NsThread<u8>>();
    }
}
