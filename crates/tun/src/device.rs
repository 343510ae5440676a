//! A layer-3 TUN device (`IFF_TUN | IFF_NO_PI`) opened directly through `/dev/net/tun`.
//!
//! Why raw `libc` instead of the `tun`/`tokio-tun` crates: the device must be created inside
//! a network namespace, which means opening `/dev/net/tun` and issuing `TUNSETIFF` on a thread
//! that has `setns`'d into that namespace (the device is created in the namespace of the
//! opener). Those crates bring their own address configuration, async runtimes and many
//! dependencies, for what is one `open`, one `ioctl` and (to bring it up) two more. The fd is
//! non-blocking: the lab's forwarder `ppoll`s it, the gateway registers it with tokio.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

/// An open TUN device. The interface disappears when this value is dropped (it is not
/// persistent), so a crashed process leaves no device behind.
#[derive(Debug)]
pub struct Tun {
    file: File,
    name: String,
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is a plain C struct/union for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // The last byte stays the terminating zero (names are at most IFNAMSIZ - 1 bytes).
    for (dst, src) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    req
}

/// Checks an interface name: 1 to 15 bytes, no '/', space or NUL.
pub(crate) fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "TUN device name {name:?}: give 1 to {} characters without '/', space or NUL",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    Ok(())
}

/// Runs `call` (ioctls returning < 0 on error) with an `ifreq` naming interface `name` and a
/// datagram socket of the calling thread's namespace, which is closed after; the error of the
/// call that failed.
fn interface_ioctl(
    name: &str,
    call: impl FnOnce(libc::c_int, &mut libc::ifreq) -> libc::c_int,
) -> io::Result<()> {
    // SAFETY: a plain socket call; the descriptor is closed below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut req = ifreq(name);
    let r = call(s, &mut req);
    let e = io::Error::last_os_error();
    // SAFETY: s is the socket opened above.
    unsafe { libc::close(s) };
    if r < 0 {
        return Err(e);
    }
    Ok(())
}

impl Tun {
    /// Creates TUN interface `name` in the calling thread's network namespace (down; see
    /// [`Tun::set_up`]). Errors say what is missing: root (CAP_NET_ADMIN), the tun module, a
    /// name in use by another kind of device.
    pub fn create(name: &str) -> io::Result<Tun> {
        check_name(name)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot open /dev/net/tun ({e}): run as root (CAP_NET_ADMIN) with the \
                         tun module loaded (`modprobe tun`)"
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
        // SAFETY: the kernel NUL-terminates ifr_name (IFNAMSIZ bytes, zero-initialised).
        let actual = unsafe { CStr::from_ptr(req.ifr_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(Tun { file, name: actual })
    }

    /// The interface's name, as the kernel made it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip link set NAME up`, by ioctl (in the calling thread's namespace, which must be the
    /// device's).
    pub fn set_up(&self) -> io::Result<()> {
        interface_ioctl(&self.name, |s, req| {
            // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write one `struct ifreq` on an open
            // socket.
            unsafe {
                if libc::ioctl(s, libc::SIOCGIFFLAGS, &mut *req) < 0 {
                    return -1;
                }
                req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
                libc::ioctl(s, libc::SIOCSIFFLAGS, &mut *req)
            }
        })
        .map_err(|e| io::Error::new(e.kind(), format!("setting {} up: {e}", self.name)))
    }

    /// Sets the device's transmit queue — the packets the kernel holds for the reader — to
    /// `packets` (`ip link set NAME txqueuelen`; the default is 500), by ioctl in the calling
    /// thread's namespace. A reader that is sometimes slow (the gateway on a busy host, while
    /// a source sends a whole window at once) needs more: each packet the queue drops is a
    /// loss to the sender.
    pub fn set_queue_len(&self, packets: u32) -> io::Result<()> {
        interface_ioctl(&self.name, |s, req| {
            req.ifr_ifru.ifru_metric = packets.min(i32::MAX as u32) as libc::c_int;
            // SAFETY: SIOCSIFTXQLEN reads one `struct ifreq` (the length in its int member,
            // which `ifru_metric` is) on an open socket.
            unsafe { libc::ioctl(s, libc::SIOCSIFTXQLEN, &mut *req) }
        })
    }

    /// Reads one IP packet into `buf`; `WouldBlock` when none is queued.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
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

    /// Injects one IP packet into the namespace's stack, as if received on the interface.
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
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

    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_before_anything_is_opened() {
        for bad in ["", "sixteen-chars-xx", "a/b", "a b", "a\0b"] {
            let e = Tun::create(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
            assert!(e.to_string().contains("1 to 15 characters"), "{e}");
        }
        assert!(check_name("aerotp0").is_ok());
        assert!(check_name("fifteen-chars-x").is_ok());
    }
}
