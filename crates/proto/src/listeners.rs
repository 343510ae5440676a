//! The ports an endpoint listens on, each with the configuration of the connections it
//! accepts: by name, or any port without a listener of its own (`Endpoint::listen_any`).
//! A leaf the endpoint holds; `endpoint::ports` changes it.

use crate::config::ConnectionConfig;
use std::collections::HashMap;

/// The listening ports and their connection configurations.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    pub(crate) ports: HashMap<u16, ConnectionConfig>,
    /// Accepts on every port without a listener of its own (`Endpoint::listen_any`).
    pub(crate) any: Option<ConnectionConfig>,
}

impl Listeners {
    /// The configuration a connection to `port` is accepted with, if any.
    pub(crate) fn get(&self, port: u16) -> Option<&ConnectionConfig> {
        self.ports.get(&port).or(self.any.as_ref())
    }

    pub(crate) fn accepts(&self, port: u16) -> bool {
        self.get(port).is_some()
    }
}
