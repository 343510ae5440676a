//! The ingress's TUN device (`IFF_TUN | IFF_NO_PI`, `aerotp_tun::Tun`, shared with the lab),
//! registered with tokio: intercepted reliable-mode TCP is routed into it, and the user-space
//! TCP writes its answers back through it.

use std::io;

use tokio::io::unix::AsyncFd;

/// An open TUN device, up; it disappears when dropped.
#[derive(Debug)]
pub struct Tun {
    fd: AsyncFd<aerotp_tun::Tun>,
    pub name: String,
}

impl Tun {
    /// Creates TUN device `name` in the calling thread's network namespace and sets it up.
    /// Errors say what is missing (root, the tun module, a name in use).
    pub fn create(name: &str) -> io::Result<Tun> {
        let tun = aerotp_tun::Tun::create(name)?;
        tun.set_up()?;
        let name = tun.name().to_owned();
        // SAFETY: `tun` owns its descriptor, which stays open and the same for as long as the
        // AsyncFd (its owner from here on) lives.
        let fd = unsafe { AsyncFd::register(tun) }.map_err(|e| e.into_parts().1)?;
        Ok(Tun { fd, name })
    }

    /// Sets the device's transmit queue — the packets the kernel holds for us to read — to
    /// `packets` (`ip link set NAME txqueuelen`). Why: a source whose window opens by a
    /// confirmation jump sends the whole opening at once (a cubic source does not pace), and
    /// the default 500 packets overflowed when the ingress was slow to read on a busy host:
    /// the dropped segments were real losses to the source, and cost it a timeout.
    pub fn set_queue_len(&self, packets: u32) -> io::Result<()> {
        // SAFETY: `ifreq` is plain data (a name and a union of integers, addresses and a
        // pointer), for which all zeroes is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        // The name fits: the kernel made it (at most IFNAMSIZ - 1 bytes); the last byte stays
        // the terminating zero.
        for (d, s) in req
            .ifr_name
            .iter_mut()
            .zip(self.name.bytes().take(libc::IFNAMSIZ - 1))
        {
            *d = s as libc::c_char;
        }
        req.ifr_ifru.ifru_metric = packets.min(i32::MAX as u32) as libc::c_int;
        // SAFETY: a plain socket call; the descriptor is closed below.
        let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if s < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: SIOCSIFTXQLEN reads one `struct ifreq` (the length in its int member, which
        // `ifru_metric` is) on an open socket.
        let r = unsafe { libc::ioctl(s, libc::SIOCSIFTXQLEN, &mut req) };
        let e = io::Error::last_os_error();
        // SAFETY: s is the socket opened above.
        unsafe { libc::close(s) };
        if r < 0 {
            return Err(e);
        }
        Ok(())
    }

    /// Reads one IP packet into `buf`.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut g = self.fd.readable().await?;
            match g.try_io(|f| f.get_ref().recv(buf)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes one IP packet into the namespace's stack. A full queue drops it: TCP resends.
    pub fn send(&self, packet: &[u8]) {
        if let Err(e) = self.fd.get_ref().send(packet) {
            tracing::debug!(error = %e, "TUN write dropped a segment");
        }
    }
}
