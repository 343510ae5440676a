//! Network namespaces: creation and removal through iproute2's `ip`, entering one from a
//! thread with `setns`, and removal of namespaces left behind by a lab whose process died.
//!
//! `ip netns add` is used (rather than `unshare` + a bind mount done here) because it creates
//! the namespace exactly as every other tool expects it (a bind mount under /run/netns), so
//! `ip netns exec`, `ip -n` and `ip netns list` work on it, and a user can inspect a live lab.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Prefix of every namespace a lab creates; `cleanup_leftovers` only ever touches these.
pub(crate) const AIR_PREFIX: &str = "aerotp-air-";
pub(crate) const GROUND_PREFIX: &str = "aerotp-ground-";

/// Fail with a clear message unless we may create namespaces and `ip` is there.
pub(crate) fn check_prerequisites() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "must run as root: creating network namespaces and TUN devices needs CAP_SYS_ADMIN and CAP_NET_ADMIN \
             (run with sudo, or set AEROTP_SKIP_LAB=1 to skip the lab tests)"
        );
    }
    match Command::new("ip").arg("-V").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => bail!(
            "`ip -V` failed ({}): iproute2 looks broken; reinstall it (scripts/lab-deps.sh)",
            out.status
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => bail!(
            "iproute2's `ip` is not in PATH: install iproute2 (scripts/lab-deps.sh or `apt-get install iproute2`)"
        ),
        Err(e) => bail!("cannot run `ip`: {e}"),
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        bail!("/dev/net/tun does not exist: load the tun module (`modprobe tun`) or create the node (`mknod /dev/net/tun c 10 200`)");
    }
    Ok(())
}

/// Run `ip ARGS...` and fail with its stderr if it does not succeed.
pub(crate) fn ip(args: &[&str]) -> Result<Output> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .with_context(|| format!("cannot run `ip {}`", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// Names of all named network namespaces (`ip netns list`).
pub(crate) fn list() -> Result<Vec<String>> {
    let out = ip(&["netns", "list"])?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        // Lines look like "name (id: 3)" or just "name".
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect())
}

pub(crate) fn add(name: &str) -> Result<()> {
    ip(&["netns", "add", name]).map(drop)
}

/// Pids of the processes whose network namespace is `name` (`ip netns pids`).
pub(crate) fn pids(name: &str) -> Result<Vec<i32>> {
    let out = ip(&["netns", "pids", name])?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect())
}

/// Kill every process left in the namespace (SIGTERM, then SIGKILL after `grace`), then
/// delete it. Processes must go first: a namespace with a process in it outlives `ip netns del`.
pub(crate) fn remove(name: &str, grace: Duration) -> Result<()> {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let victims: Vec<i32> = pids(name)?.into_iter().filter(|&p| p != me).collect();
    if !victims.is_empty() {
        tracing::debug!(
            ns = name,
            ?victims,
            "terminating processes left in the namespace"
        );
        for &p in &victims {
            // SAFETY: kill has no memory-safety preconditions; p is a pid `ip` listed in our namespace.
            unsafe { libc::kill(p, libc::SIGTERM) };
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && victims.iter().any(|&p| alive(p)) {
            thread::sleep(Duration::from_millis(20));
        }
        for &p in victims.iter().filter(|&&p| alive(p)) {
            // SAFETY: as above.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    ip(&["netns", "del", name]).map(drop)
}

/// Whether a process with this pid exists and is not a zombie (a zombie has left its
/// namespaces and only waits to be reaped). EPERM from `kill(pid, 0)` means it exists.
pub(crate) fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    if rc != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    // /proc/PID/stat: "pid (comm) S ..."; comm may contain spaces and parentheses.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_none_or(|state| state != "Z" && state != "X"),
        Err(_) => true,
    }
}

/// The owner pid embedded in a lab namespace name (`aerotp-air-<pid>-<tag>`), if it is one.
pub(crate) fn owner_pid(ns: &str) -> Option<i32> {
    let rest = ns
        .strip_prefix(AIR_PREFIX)
        .or_else(|| ns.strip_prefix(GROUND_PREFIX))?;
    rest.split('-')
        .next()?
        .parse()
        .ok()
        .filter(|&p: &i32| p > 0)
}

/// Run `f` on a new thread whose network namespace is `ns`, and return its result.
/// File descriptors made there (TUN devices, sockets) keep belonging to `ns` afterwards.
pub(crate) fn in_ns<T, F>(ns: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    match spawn_in(ns, f)?.join() {
        Ok(r) => r.with_context(|| format!("in network namespace {ns}")),
        Err(_) => bail!("thread in network namespace {ns} panicked"),
    }
}

/// A thread running inside a network namespace (see [`crate::Lab::spawn_in`]).
#[derive(Debug)]
pub struct NsThread<T> {
    handle: thread::JoinHandle<Option<T>>,
}

impl<T> NsThread<T> {
    /// Wait for the closure to return; `Err` carries its panic payload.
    pub fn join(self) -> thread::Result<T> {
        self.handle.join().map(|r| {
            r.expect("spawn_in returned Ok only after setns succeeded, so the closure ran")
        })
    }

    /// Whether the closure has returned.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Spawn a thread that enters network namespace `ns` and then runs `f`. Returns once the
/// thread is inside the namespace, or the reason it could not get there.
pub(crate) fn spawn_in<T, F>(ns: &str, f: F) -> Result<NsThread<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let path = format!("/run/netns/{ns}");
    let file = File::open(&path).with_context(|| {
        format!("cannot open {path}: network namespace {ns} does not exist (was the lab stopped?)")
    })?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<()>>(1);
    let handle = thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || {
            // SAFETY: file is an open namespace fd; setns affects only this thread, which
            // never leaves the namespace again and ends when `f` returns.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            drop(file);
            if rc != 0 {
                let _ = tx.send(Err(io::Error::last_os_error()));
                return None;
            }
            let _ = tx.send(Ok(()));
            Some(f())
        })
        .context("cannot spawn a thread")?;
    match rx.recv() {
        Ok(Ok(())) => Ok(NsThread { handle }),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
                .with_context(|| format!("setns into network namespace {ns} (needs CAP_SYS_ADMIN)"))
        }
        Err(_) => {
            let _ = handle.join();
            bail!("thread entering network namespace {ns} died before reporting")
        }
    }
}
