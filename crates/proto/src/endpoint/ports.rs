//! Ports: which the endpoint listens on (each port, or any port), and which local port a new
//! connection gets — the one asked for when it is free (a gateway carries a TCP flow's
//! source port in `src_port`, docs/gateway.md), else the next free one of the ephemeral
//! range.

use super::{ConnectionHandle, Endpoint, EndpointError};
use crate::config::ConnectionConfig;
use std::net::SocketAddr;
use std::time::Duration;

/// First and last port `alloc_port` hands out.
const EPHEMERAL: (u16, u16) = (49152, 65000);

impl Endpoint {
    /// Accept connections to `port`; `config` gives the rate, buffers and timers of the
    /// accepted connections (their mode is the initiator's).
    pub fn listen(&mut self, port: u16, config: ConnectionConfig) -> Result<(), EndpointError> {
        let config = self.sealed_room(config)?;
        self.listeners.ports.insert(port, config);
        Ok(())
    }

    pub fn unlisten(&mut self, port: u16) {
        self.listeners.ports.remove(&port);
    }

    /// Accept connections to any port that has no listener of its own (`listen` takes
    /// precedence): the destination port of a translated TCP flow is the flow's own
    /// (docs/gateway.md, "Flow protocol"). `config` as for `listen`.
    pub fn listen_any(&mut self, config: ConnectionConfig) -> Result<(), EndpointError> {
        let config = self.sealed_room(config)?;
        self.listeners.any = Some(config);
        Ok(())
    }

    pub fn unlisten_any(&mut self) {
        self.listeners.any = None;
    }

    /// Opens a connection; data written before the peer answers rides on the ASYN.
    pub fn connect(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        remote_port: u16,
        config: ConnectionConfig,
    ) -> Result<ConnectionHandle, EndpointError> {
        self.connect_from(now, remote, remote_port, None, config)
    }

    /// The local port of a new connection to `remote_port` at `remote`: `preferred` if it is
    /// not 0, not a port this endpoint listens on by name, and no connection to that peer
    /// and port uses it; otherwise the next free port of the ephemeral range.
    pub(super) fn alloc_port(
        &mut self,
        remote: SocketAddr,
        remote_port: u16,
        preferred: Option<u16>,
    ) -> Result<u16, EndpointError> {
        let free = |me: &Endpoint, p: u16| {
            !me.by_key.contains_key(&(remote, p, remote_port))
                && !me.listeners.ports.contains_key(&p)
        };
        if let Some(p) = preferred.filter(|&p| p != 0 && free(self, p)) {
            return Ok(p);
        }
        for _ in 0..=(EPHEMERAL.1 - EPHEMERAL.0) {
            let p = self.next_port;
            self.next_port = if self.next_port >= EPHEMERAL.1 {
                EPHEMERAL.0
            } else {
                self.next_port + 1
            };
            if free(self, p) {
                return Ok(p);
            }
        }
        Err(EndpointError::NoPorts)
    }
}
