//! A layer-3 TUN device (`IFF_TUN | IFF_NO_PI`) opened directly through `/dev/net/tun`.
//!
//! Why raw `libc` instead of the `tun`/`tokio-tun` crates: the device must be created inside
//! a network namespace, which means opening `/dev/net/tun` and issuing `TUNSETIFF` on a thread
//! that has `setns`'d into that namespace (the device is created in the namespace of the
//! opener). Those crates bring their own address/up configuration (done here with `ip -n`),
//! async runtimes and many dependencies, for what is one `open` and one `ioctl`.
//! The forwarder only needs a non-blocking fd it can `ppoll`, `read` and `write`.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

/// An open TUN device. The interface disappears when this value is dropped (it is not
/// persistent), which is what makes a crashed lab leave no device behind.
#[derive(Debug)]
pub(crate) struct Tun {
    file: File,
    name: String,
}

impl Tun {
    /// Create the TUN interface `name` in the calling thread's network namespace.
    /// The fd is non-blocking; packets carry no packet-information header (`IFF_NO_PI`).
    pub(crate) fn create(name: &str) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "invalid interface name {name:?}: it must be 1..={} characters without '/', space or NUL",
                    libc::IFNAMSIZ - 1
                ),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot open /dev/net/tun ({e}): load the tun module (`modprobe tun`) and run as root"
                    ),
                )
            })?;
        // SAFETY: ifreq is a plain C struct/union for which all-zero bytes are valid.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `req` is, and the fd
        // is a valid open /dev/net/tun descriptor owned by `file`.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "TUNSETIFF {name}: {e} (needs CAP_NET_ADMIN; the name may already be in use)"
                ),
            ));
        }
        // SAFETY: the kernel NUL-terminates ifr_name (IFNAMSIZ bytes, zero-initialised).
        let actual = unsafe { CStr::from_ptr(req.ifr_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(Tun { file, name: actual })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Read one IP packet. `WouldBlock` when none is queued.
    pub(crate) fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: buf is valid for buf.len() writable bytes; the fd is owned by self.
            let n = unsafe { libc::read(self.fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Inject one IP packet into the namespace's stack, as if received on the interface.
    pub(crate) fn send(&self, packet: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: packet is valid for packet.len() readable bytes; the fd is owned by self.
            let n = unsafe { libc::write(self.fd(), packet.as_ptr().cast(), packet.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}
