//! `--key-file PATH` and `--encrypt`, shared by `send` and `recv` (docs/security.md). A key
//! is only ever read from a file: a key on a command line would show in `ps` and in shell
//! histories.

use std::path::PathBuf;

use aerotp_net::{keyfile, Endpoint, EndpointConfig};

#[derive(Debug, Clone, clap::Args)]
pub struct KeyFlags {
    /// Pre-shared key file (from `aerotp keygen`, mode 600): every TPDU is authenticated
    /// with it and anything not sealed with its keys is dropped; the peer needs the same file.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// With --key-file: encrypt TPDU bodies as well (headers stay readable for routing).
    #[arg(long, requires = "key_file")]
    pub encrypt: bool,
}

impl KeyFlags {
    /// `base` with the authentication these flags ask for: the key file is read and checked
    /// now, so a bad one stops the command before any traffic.
    pub fn apply(&self, base: EndpointConfig) -> anyhow::Result<EndpointConfig> {
        let Some(path) = &self.key_file else {
            return Ok(base);
        };
        let keys = keyfile::load(path, "--key-file")?;
        Ok(EndpointConfig {
            auth: Some(keyfile::auth_config(keys, self.encrypt)?),
            ..base
        })
    }

    /// Follows the key file, so a long-running receiver takes a rotated key without a restart.
    pub fn watch(&self, ep: &Endpoint) {
        if let Some(path) = &self.key_file {
            keyfile::watch(ep, path.clone(), "--key-file".into());
        }
    }
}
