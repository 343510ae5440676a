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

mod checksum;
mod forward;
mod netns;
mod tun;

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The link model crate, re-exported so users need not depend on it separately.
pub use aerotp_link as link;
pub use aerotp_link::{LinkConfig, LinkStats};
pub use forward::TunCounters;
pub use netns::NsThread;

use forward::{Channel, StopSignal};
use tun::Tun;

/// Address of the air end of the link (inside the air namespace only).
pub const AIR_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Address of the ground end of the link (inside the ground namespace only).
pub const GROUND_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// Prefix length of the point-to-point subnet 10.77.0.0/30.
pub const PREFIX_LEN: u8 = 30;
/// MTU of both TUN interfaces.
pub const MTU: u32 = 1500;
/// TUN interface name in the air namespace.
pub const AIR_IF: &str = "atp-air";
/// TUN interface name in the ground namespace.
pub const GROUND_IF: &str = "atp-ground";

/// Most paths a lab may have (the third octet of 10.77.i.0/30 numbers them).
pub const MAX_LAB_PATHS: usize = 16;

/// Air and ground addresses of path `i`: 10.77.i.1 and 10.77.i.2 (path 0: [`AIR_ADDR`],
/// [`GROUND_ADDR`]).
pub fn path_addrs(i: usize) -> (Ipv4Addr, Ipv4Addr) {
    let i = u8::try_from(i).unwrap_or(u8::MAX);
    (Ipv4Addr::new(10, 77, i, 1), Ipv4Addr::new(10, 77, i, 2))
}

/// TUN interface names of path `i` (air, ground): `atp-air`/`atp-ground` for path 0,
/// `atp-air<i>`/`atp-ground<i>` after.
pub fn path_ifnames(i: usize) -> (String, String) {
    if i == 0 {
        (AIR_IF.to_owned(), GROUND_IF.to_owned())
    } else {
        (format!("{AIR_IF}{i}"), format!("{GROUND_IF}{i}"))
    }
}

/// How long processes left in a namespace get between SIGTERM and SIGKILL at teardown.
const KILL_GRACE: Duration = Duration::from_millis(500);

/// The reverse link's seed is derived from [`LabConfig::seed`] so both directions draw
/// independent impairments from one seed.
const REVERSE_SEED_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Which end of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The airborne end (sends over the forward link).
    Air,
    /// The ground end (sends over the reverse link).
    Ground,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Air => "air",
            Side::Ground => "ground",
        })
    }
}

impl FromStr for Side {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Side, String> {
        match s {
            "air" => Ok(Side::Air),
            "ground" => Ok(Side::Ground),
            other => Err(format!(
                "unknown side {other:?}: expected `air` or `ground`"
            )),
        }
    }
}

/// What to build.
#[derive(Debug, Clone, Default)]
pub struct LabConfig {
    /// Air → ground link.
    pub forward: LinkConfig,
    /// Ground → air link (often slower).
    pub reverse: LinkConfig,
    /// Seed of the forward link; the reverse link uses `seed ^ 0x9E3779B97F4A7C15`.
    pub seed: u64,
    /// Tag of the namespace names (`aerotp-air-<pid>-<name>`); by default a per-process
    /// counter. Letters, digits, `_` and `.`, at most 32 characters.
    pub name: Option<String>,
}

/// One path of a multi-path lab: its two links and their seeds.
#[derive(Debug, Clone, Default)]
pub struct LabPath {
    /// Air → ground link.
    pub forward: LinkConfig,
    /// Ground → air link.
    pub reverse: LinkConfig,
    /// Seed of the forward link.
    pub forward_seed: u64,
    /// Seed of the reverse link.
    pub reverse_seed: u64,
}

/// What to build for a lab of several paths ([`Lab::start_paths`]).
#[derive(Debug, Clone, Default)]
pub struct LabPathsConfig {
    /// The paths, 1 to [`MAX_LAB_PATHS`]; path i gets 10.77.i.0/30.
    pub paths: Vec<LabPath>,
    /// As [`LabConfig::name`].
    pub name: Option<String>,
}

impl From<LabConfig> for LabPathsConfig {
    fn from(c: LabConfig) -> LabPathsConfig {
        LabPathsConfig {
            paths: vec![LabPath {
                forward: c.forward,
                reverse: c.reverse,
                forward_seed: c.seed,
                reverse_seed: c.seed ^ REVERSE_SEED_MIX,
            }],
            name: c.name,
        }
    }
}

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
    core: Core,
}

/// A link plus the receiving host's transport checksum check (see `checksum`).
#[derive(Debug)]
struct CheckedLink {
    link: aerotp_link::Link,
    /// Packets dropped after the link because a flipped bit broke their TCP/UDP checksum.
    checksum_drops: u64,
}

/// Link tag for packets whose transport checksum the receiver verifies.
const CHECKED: u64 = 1;

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
        let core = Core::start(&tag, channels)?;
        Ok(Lab {
            air_ns: core.ns.names[0].clone(),
            ground_ns: core.ns.names[1].clone(),
            paths,
            core,
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
        self.core.counters(0)
    }

    /// Stop forwarding, remove everything, and return the final (forward, reverse) stats of
    /// path 0. Fails if forwarding had stopped on an error or if something could not be removed.
    pub fn stop(self) -> Result<(LinkStats, LinkStats)> {
        self.stop_all().map(|mut v| v.swap_remove(0))
    }

    /// As [`Lab::stop`], returning the final stats of every path.
    pub fn stop_all(mut self) -> Result<Vec<(LinkStats, LinkStats)>> {
        let result = self.core.shutdown();
        let stats = self.all_stats();
        result.map(|()| stats)
    }
}

/// Remove lab namespaces (`aerotp-air-*`, `aerotp-ground-*`) whose owner process — the pid
/// embedded in the name — is gone, killing any process still inside them. Returns how many
/// namespaces were removed. A namespace of a live process (this one included) is left alone.
pub fn cleanup_leftovers() -> Result<usize> {
    netns::check_prerequisites()?;
    let mut removed = 0;
    let mut errors = Vec::new();
    for ns in netns::list()? {
        let Some(pid) = netns::owner_pid(&ns) else {
            continue;
        };
        if netns::alive(pid) {
            continue;
        }
        match netns::remove(&ns, KILL_GRACE) {
            Ok(()) => removed += 1,
            Err(e) => errors.push(format!("{ns}: {e:#}")),
        }
    }
    if !errors.is_empty() {
        bail!(
            "could not remove leftover namespaces: {}",
            errors.join("; ")
        );
    }
    Ok(removed)
}

fn check_tag(tag: &str) -> Result<()> {
    if tag.is_empty()
        || tag.len() > 32
        || !tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        bail!("invalid lab name {tag:?}: use 1 to 32 letters, digits, `_` or `.`");
    }
    Ok(())
}

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

/// Namespaces created so far; dropping removes them (so a failed `start` leaves nothing).
#[derive(Debug, Default)]
struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    fn remove_all(&mut self) -> Result<()> {
        let mut errors = Vec::new();
        for ns in self.names.drain(..) {
            if let Err(e) = netns::remove(&ns, KILL_GRACE) {
                errors.push(format!("{e:#}"));
            }
        }
        if !errors.is_empty() {
            bail!(
                "could not remove lab namespaces: {}; remove them with `ip netns del NAME`",
                errors.join("; ")
            );
        }
        Ok(())
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        if let Err(e) = self.remove_all() {
            tracing::error!("{e:#}");
        }
    }
}

/// The (forward, reverse) channels of one path.
type ChannelPair<C> = (Arc<Mutex<C>>, Arc<Mutex<C>>);

/// The link-model-independent part of a lab: namespaces, TUN devices, forwarding threads.
#[derive(Debug)]
struct Core {
    stop: Arc<StopSignal>,
    threads: Vec<(String, thread::JoinHandle<io::Result<()>>)>,
    /// Per path: [forward, reverse].
    counters: Vec<[Arc<Mutex<TunCounters>>; 2]>,
    // Dropped after the threads are joined and before the namespaces are removed.
    tuns: Vec<(Arc<Tun>, Arc<Tun>)>,
    ns: Namespaces,
}

impl Core {
    /// One (forward, reverse) channel pair per path.
    fn start<C: Channel + 'static>(tag: &str, paths: Vec<ChannelPair<C>>) -> Result<Core> {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let air_ns = format!("{}{pid}-{tag}", netns::AIR_PREFIX);
        let ground_ns = format!("{}{pid}-{tag}", netns::GROUND_PREFIX);
        let mut ns = Namespaces::default();
        for name in [&air_ns, &ground_ns] {
            netns::add(name).with_context(|| {
                format!("creating network namespace {name} (if it exists, another lab uses this name: pick another)")
            })?;
            ns.names.push(name.clone());
        }
        let stop = Arc::new(StopSignal::new().context("creating the stop eventfd")?);
        let mut core = Core {
            stop,
            threads: Vec::new(),
            counters: Vec::new(),
            tuns: Vec::new(),
            ns,
        };
        for i in 0..paths.len() {
            let (air_if, ground_if) = path_ifnames(i);
            let (air_addr, ground_addr) = path_addrs(i);
            let air = make_end(&air_ns, &air_if, air_addr, i == 0)?;
            let ground = make_end(&ground_ns, &ground_if, ground_addr, i == 0)?;
            core.tuns.push((air, ground));
            core.counters.push([
                Arc::new(Mutex::new(TunCounters::default())),
                Arc::new(Mutex::new(TunCounters::default())),
            ]);
        }
        // One epoch for every path and direction: outages and traces share one clock.
        let epoch = Instant::now();
        for (i, (forward, reverse)) in paths.into_iter().enumerate() {
            let (air, ground) = core.tuns[i].clone();
            let suffix = if i == 0 { String::new() } else { i.to_string() };
            core.spawn_direction(
                format!("forward{suffix}"),
                air.clone(),
                ground.clone(),
                forward,
                core.counters[i][0].clone(),
                epoch,
            )?;
            core.spawn_direction(
                format!("reverse{suffix}"),
                ground,
                air,
                reverse,
                core.counters[i][1].clone(),
                epoch,
            )?;
        }
        Ok(core)
    }

    fn spawn_direction<C: Channel + 'static>(
        &mut self,
        label: String,
        src: Arc<Tun>,
        dst: Arc<Tun>,
        chan: Arc<Mutex<C>>,
        counters: Arc<Mutex<TunCounters>>,
        epoch: Instant,
    ) -> Result<()> {
        let stop = self.stop.clone();
        let handle = thread::Builder::new()
            .name(format!("lab-{label}"))
            .spawn(move || forward::run(&src, &dst, &chan, &counters, epoch, &stop))
            .with_context(|| format!("spawning the {label} forwarding thread"))?;
        self.threads.push((label, handle));
        Ok(())
    }

    fn counters(&self, path: usize) -> (TunCounters, TunCounters) {
        let get = |i: usize| {
            *self.counters[path][i]
                .lock()
                .expect("counters lock poisoned")
        };
        (get(0), get(1))
    }

    /// Idempotent teardown: stop and join the threads, close the TUNs, remove the namespaces.
    fn shutdown(&mut self) -> Result<()> {
        self.stop.raise();
        let mut errors = Vec::new();
        for (label, handle) in self.threads.drain(..) {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(format!("{label} forwarding stopped on an error: {e}")),
                Err(_) => errors.push(format!("{label} forwarding thread panicked")),
            }
        }
        self.tuns.clear();
        if let Err(e) = self.ns.remove_all() {
            errors.push(format!("{e:#}"));
        }
        if !errors.is_empty() {
            bail!("{}", errors.join("; "));
        }
        Ok(())
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!("lab teardown: {e:#}");
        }
    }
}

/// Configure one end inside namespace `ns`: IPv6 off (so only the traffic you send crosses
/// the link: no router solicitations or MLD reports), a TUN interface with `addr`/30, MTU
/// 1500, up; loopback up (`first`: done once per namespace).
fn make_end(ns: &str, ifname: &str, addr: Ipv4Addr, first: bool) -> Result<Arc<Tun>> {
    let name = ifname.to_owned();
    let tun = netns::in_ns(ns, move || {
        for knob in ["all", "default"] {
            let path = format!("/proc/sys/net/ipv6/conf/{knob}/disable_ipv6");
            match std::fs::write(&path, "1") {
                Ok(()) => {}
                // No IPv6 in this kernel: nothing to silence.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("writing {path}: {e}"))),
            }
        }
        Tun::create(&name)
    })
    .with_context(|| format!("creating TUN {ifname} in {ns}"))?;
    let cidr = format!("{addr}/{PREFIX_LEN}");
    let mtu = MTU.to_string();
    if first {
        netns::ip(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    netns::ip(&["-n", ns, "addr", "add", &cidr, "dev", tun.name()])?;
    netns::ip(&["-n", ns, "link", "set", tun.name(), "mtu", &mtu, "up"])?;
    Ok(Arc::new(tun))
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

    #[test]
    fn side_round_trips_through_strings() {
        for side in [Side::Air, Side::Ground] {
            assert_eq!(side.to_string().parse::<Side>(), Ok(side));
        }
        assert!("sky".parse::<Side>().unwrap_err().contains("air"));
    }

    #[test]
    fn paths_get_their_own_subnet_and_interfaces() {
        assert_eq!(path_addrs(0), (AIR_ADDR, GROUND_ADDR));
        assert_eq!(path_ifnames(0), (AIR_IF.to_owned(), GROUND_IF.to_owned()));
        assert_eq!(
            path_addrs(3),
            (Ipv4Addr::new(10, 77, 3, 1), Ipv4Addr::new(10, 77, 3, 2))
        );
        let (a, g) = path_ifnames(MAX_LAB_PATHS - 1);
        assert_eq!((a.as_str(), g.as_str()), ("atp-air15", "atp-ground15"));
        // Linux interface names hold at most 15 bytes.
        assert!(g.len() <= 15);
    }

    #[test]
    fn tags_are_checked() {
        assert!(check_tag("bench_1.a").is_ok());
        assert!(check_tag("").is_err());
        assert!(check_tag("a/b").is_err());
        assert!(check_tag("with-dash").is_err());
        assert!(check_tag(&"x".repeat(33)).is_err());
    }

    #[test]
    fn owner_pid_is_read_from_lab_names_only() {
        assert_eq!(netns::owner_pid("aerotp-air-1234-0"), Some(1234));
        assert_eq!(netns::owner_pid("aerotp-ground-77-bench"), Some(77));
        assert_eq!(netns::owner_pid("aerotp-air-x-0"), None);
        assert_eq!(netns::owner_pid("aerotp-air--0"), None);
        assert_eq!(netns::owner_pid("other-ns"), None);
        assert_eq!(netns::owner_pid("aerotp-air-0-1"), None);
    }
}
