//! The ingress's TUN device (`IFF_TUN | IFF_NO_PI`): intercepted reliable-mode TCP is routed
//! into it, and the user-space TCP writes its answers back through it.
//!
//! Written by hand with `libc` (one `open`, one `TUNSETIFF`, one `SIOCSIFFLAGS`), as the lab's
//! TUN device is (crates/lab/src/tun.rs): the `tun` crates bring address configuration and
//! runtimes the gateway does not need.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use tokio::io::unix::AsyncFd;

/// An open TUN device, up; it disappears when dropped.
#[derive(Debug)]
pub struct Tun {
    fd: AsyncFd<File>,
    pub name: String,
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is a plain C struct/union for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req
}

impl Tun {
    /// Creates TUN device `name` in the calling thread's network namespace and sets it up.
    /// Errors say what is missing (root, the tun module, a name in use).
    pub fn create(name: &str) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "TUN device name {name:?}: 1 to {} characters without '/', space or NUL",
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
                        "cannot open /dev/net/tun ({e}): reliable-mode interception with \
                         end-to-end acknowledgements needs a TUN device — run the ingress as \
                         root (CAP_NET_ADMIN) with the tun module loaded (`modprobe tun`)"
                    ),
                )
            })?;
        let mut req = ifreq(name);
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `req` is, on a valid
        // /dev/net/tun descriptor owned by `file`.
        if unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "creating TUN device {name}: {e} (needs root / CAP_NET_ADMIN; or the name \
                     is in use by a device that is not a TUN)"
                ),
            ));
        }
        set_up(name)?;
        // SAFETY: `file` owns its descriptor, which stays open and the same for as long as the
        // AsyncFd (its owner from here on) lives.
        let fd = unsafe { AsyncFd::register(file) }.map_err(|e| e.into_parts().1)?;
        Ok(Tun {
            fd,
            name: name.to_owned(),
        })
    }

    /// Reads one IP packet into `buf`.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut g = self.fd.readable().await?;
            match g.try_io(|f| read(f.get_ref().as_raw_fd(), buf)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes one IP packet into the namespace's stack. A full queue drops it: TCP resends.
    pub fn send(&self, packet: &[u8]) {
        // SAFETY: packet is valid for packet.len() readable bytes; the fd is owned by self.
        let n = unsafe {
            libc::write(
                self.fd.get_ref().as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
            )
        };
        if n < 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "TUN write dropped a segment");
        }
    }
}

fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for buf.len() writable bytes; fd is open.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `ip link set NAME up`, by ioctl.
fn set_up(name: &str) -> io::Result<()> {
    // SAFETY: a plain socket call; the descriptor is closed below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut req = ifreq(name);
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write one `struct ifreq` on an open socket.
    let r = unsafe {
        if libc::ioctl(s, libc::SIOCGIFFLAGS, &mut req) < 0 {
            -1
        } else {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(s, libc::SIOCSIFFLAGS, &mut req)
        }
    };
    let e = io::Error::last_os_error();
    // SAFETY: s is the socket opened above.
    unsafe { libc::close(s) };
    if r < 0 {
        return Err(io::Error::new(e.kind(), format!("setting {name} up: {e}")));
    }
    Ok(())
}
