//! What the lab's emulated link (`aerotp-lab`) and the gateway's user-space TCP
//! (`aerotp-usertcp`) both need from the kernel's IP layer, in one place so that neither
//! depends on the other: a layer-3 TUN device ([`Tun`]) and the Internet checksum
//! ([`checksum`], RFC 1071, with the TCP/UDP pseudo-header).
//!
//! [`AsyncTun`] is the device registered with tokio (the gateway's).
//!
//! Modules, each importing only those listed before it: `checksum`, `device`, `async_tun`.

mod async_tun;
pub mod checksum;
mod device;

pub use async_tun::AsyncTun;
pub use device::Tun;
