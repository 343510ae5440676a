//! The TUN device registered with tokio: what the gateway's user-space TCP
//! reads intercepted segments from and writes its answers into. The lab's forwarder `ppoll`s
//! a plain [`Tun`] instead.

use std::io;

use tokio::io::unix::AsyncFd;

use crate::Tun;

/// An open TUN device, up, whose reads wait in tokio; it disappears when dropped.
#[derive(Debug)]
pub struct AsyncTun {
    fd: AsyncFd<Tun>,
}

impl AsyncTun {
    /// Creates TUN device `name` in the calling thread's network namespace, sets it up and
    /// registers it with the current tokio runtime (which must have I/O enabled). Errors say
    /// what is missing (root, the tun module, a name in use).
    pub fn create(name: &str) -> io::Result<AsyncTun> {
        let tun = Tun::create(name)?;
        tun.set_up()?;
        // SAFETY: `tun` owns its descriptor (non-blocking, `Tun::create`), which stays open
        // and the same for as long as the AsyncFd, its owner from here on, lives.
        let fd = unsafe { AsyncFd::register(tun) }.map_err(|e| e.into_parts().1)?;
        Ok(AsyncTun { fd })
    }

    /// The interface's name, as the kernel made it.
    pub fn name(&self) -> &str {
        self.fd.get_ref().name()
    }

    /// See [`Tun::set_queue_len`].
    pub fn set_queue_len(&self, packets: u32) -> io::Result<()> {
        self.fd.get_ref().set_queue_len(packets)
    }

    /// Reads one IP packet into `buf`, waiting for one.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.readable().await?;
            match ready.try_io(|f| f.get_ref().recv(buf)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes one IP packet into the namespace's stack, without waiting: a full queue is an
    /// error (`WouldBlock`), the packet dropped.
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
        self.fd.get_ref().send(packet)
    }
}
