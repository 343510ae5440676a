//! The gateways' default posture (docs/security.md, "Default posture"), as `send` and `recv`
//! have it: every TPDU between the gateways authenticated with a pre-shared key, unless the
//! user says `insecure` (`--insecure`), and then a warning at start.

use anyhow::{bail, Result};

use super::{FileConfig, Settings};
use crate::consts::Role;

impl FileConfig {
    /// The `insecure` key, which a key file contradicts: both set is refused rather than
    /// one of them silently ignored (a `--insecure` given to try something out beside a
    /// config file's `key_file`, say).
    pub(super) fn insecure(&self) -> Result<bool> {
        match (self.insecure, &self.key_file) {
            (Some(true), Some(k)) => bail!(
                "insecure (--insecure or `insecure = true`) and key_file {} (--key-file or the \
                 `key_file` key) are both set: drop insecure to authenticate with the key, or \
                 drop key_file to run without authentication",
                k.display()
            ),
            (i, _) => Ok(i.unwrap_or(false)),
        }
    }
}

impl Settings {
    /// Refuses a gateway with neither a key file nor `insecure`, saying how to make the key
    /// and where both gateways read it. Called by the command before anything is opened,
    /// bound or written; the library's own callers (tests, other programs) choose for
    /// themselves.
    pub fn require_key(&self, role: Role) -> Result<()> {
        if self.auth.key_file.is_some() || self.auth.insecure {
            return Ok(());
        }
        let other = match role {
            Role::Ingress => "egress",
            Role::Egress => "ingress",
        };
        bail!(
            "no key_file: the gateways authenticate every TPDU between them by default. Make a \
             key with `aerotp keygen /etc/aerotp/gw.key` (mode 600; for the packaged units \
             `chown aerotp:aerotp` it), copy it to the {other} gateway (e.g. `scp -p \
             /etc/aerotp/gw.key {other}-host:/etc/aerotp/`), and give it to both with \
             --key-file or `key_file = \"/etc/aerotp/gw.key\"`; or give --insecure (`insecure \
             = true`) to both to run without authentication (anyone who can reach the port \
             can then open flows, inject data or end them)"
        )
    }
}
