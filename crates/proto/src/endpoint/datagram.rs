//! Datagram mode at the endpoint: messages sent and taken outside any connection.

use super::{DatagramMsg, Endpoint, EndpointError};
use crate::codec;
use aerotp_wire::{Flags, Header, Mode};
use std::net::SocketAddr;

impl Endpoint {
    /// Sends one datagram-mode message (no connection state). `parity` is its FEC strength.
    pub fn send_datagram(
        &mut self,
        remote: SocketAddr,
        src_port: u16,
        dst_port: u16,
        data: &[u8],
        parity: u8,
        mtu: usize,
    ) -> Result<(), EndpointError> {
        if self.out_queue.len() >= self.cfg.max_datagrams {
            return Err(EndpointError::DatagramQueueFull(self.out_queue.len()));
        }
        let room = if self.auth.is_some() {
            aerotp_wire::AUTH_OVERHEAD
        } else {
            0
        };
        let too_large = || EndpointError::DatagramTooLarge {
            len: data.len(),
            mtu,
        };
        if codec::datagram_len(data.len() + room, parity).is_none_or(|l| l > mtu) {
            return Err(too_large());
        }
        let h = Header {
            mode: Mode::Datagram,
            flags: Flags::empty(),
            src_port,
            dst_port,
            seq: 0,
            timestamp: 0,
            fec: parity,
            tag: 0,
            len: 0,
        };
        let mut out = Vec::new();
        codec::encode(h, data, &mut out).map_err(|_| too_large())?;
        if let Some(a) = &mut self.auth {
            if !a.seal(&mut out, 0, mtu, remote) {
                return Err(too_large());
            }
        }
        self.count_datagram_sent(out.len());
        self.out_queue.push_back((remote, out));
        Ok(())
    }

    pub fn take_datagram(&mut self) -> Option<DatagramMsg> {
        self.datagrams_in.pop_front()
    }
}
