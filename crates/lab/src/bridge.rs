//! The link-model-independent part of a lab: namespaces, TUN devices at both ends of each
//! path, and the forwarding threads between them.

use std::io;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::addr::{path_addrs, path_ifnames, MTU, PREFIX_LEN};
use crate::forward::{self, Channel, StopSignal, TunCounters};
use crate::namespaces::Namespaces;
use crate::netns;
use aerotp_tun::Tun;

/// The (forward, reverse) channels of one path.
pub(crate) type ChannelPair<C> = (Arc<Mutex<C>>, Arc<Mutex<C>>);

/// The link-model-independent part of a lab: namespaces, TUN devices, forwarding threads.
#[derive(Debug)]
pub(crate) struct Bridge {
    stop: Arc<StopSignal>,
    threads: Vec<(String, thread::JoinHandle<io::Result<()>>)>,
    /// Per path: [forward, reverse].
    counters: Vec<[Arc<Mutex<TunCounters>>; 2]>,
    // Dropped after the threads are joined and before the namespaces are removed.
    tuns: Vec<(Arc<Tun>, Arc<Tun>)>,
    pub(crate) ns: Namespaces,
}

impl Bridge {
    /// One (forward, reverse) channel pair per path.
    pub(crate) fn start<C: Channel + 'static>(
        tag: &str,
        paths: Vec<ChannelPair<C>>,
    ) -> Result<Bridge> {
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
        let mut bridge = Bridge {
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
            bridge.tuns.push((air, ground));
            bridge.counters.push([
                Arc::new(Mutex::new(TunCounters::default())),
                Arc::new(Mutex::new(TunCounters::default())),
            ]);
        }
        // One epoch for every path and direction: outages and traces share one clock.
        let epoch = Instant::now();
        for (i, (forward, reverse)) in paths.into_iter().enumerate() {
            let (air, ground) = bridge.tuns[i].clone();
            let suffix = if i == 0 { String::new() } else { i.to_string() };
            bridge.spawn_direction(
                format!("forward{suffix}"),
                air.clone(),
                ground.clone(),
                forward,
                bridge.counters[i][0].clone(),
                epoch,
            )?;
            bridge.spawn_direction(
                format!("reverse{suffix}"),
                ground,
                air,
                reverse,
                bridge.counters[i][1].clone(),
                epoch,
            )?;
        }
        Ok(bridge)
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

    pub(crate) fn counters(&self, path: usize) -> (TunCounters, TunCounters) {
        let get = |i: usize| {
            *self.counters[path][i]
                .lock()
                .expect("counters lock poisoned")
        };
        (get(0), get(1))
    }

    /// Idempotent teardown: stop and join the threads, close the TUNs, remove the namespaces.
    pub(crate) fn shutdown(&mut self) -> Result<()> {
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

impl Drop for Bridge {
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
