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
