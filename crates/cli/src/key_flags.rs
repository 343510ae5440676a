//! `--key-file PATH`, `--encrypt` and `--insecure`, shared by `send`, `recv` and the gateways
//! (docs/security.md). A key is only ever read from a file: a key on a command line would
//! show in `ps` and in shell histories. A key is required unless `--insecure` says the user
//! knows the transfer is not authenticated (docs/security.md, "Default posture").

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
    /// Run without a key: nothing is authenticated, so anyone who can reach the port can
    /// send, answer, alter or reset a transfer, and the digest only catches accidents, not
    /// forgeries. A warning says so on stderr at start. `send`, `recv` and the gateways
    /// (key `insecure = true`) refuse to start without --key-file or --insecure
    /// (docs/security.md, "Default posture").
    #[arg(long, conflicts_with_all = ["key_file", "encrypt"])]
    pub insecure: bool,
}

/// What `--insecure` risks, as `cmd` (`send`, `recv`, `gw ingress`, `gw egress`) prints it at
/// start: one line on stderr.
pub fn insecure_warning(cmd: &str) -> String {
    let risk = match cmd {
        "recv" => "send it files, and anyone on the path can alter or end a transfer",
        "send" => "pose as the receiver, and anyone on the path can alter or end the transfer",
        "gw egress" => "open connections to the destinations it allows and write into flows",
        _ => "answer as the egress, and anyone on the path can alter or end flows",
    };
    format!("aerotp {cmd}: warning: not authenticated (--insecure): anyone who can reach this port can {risk}")
}

impl KeyFlags {
    /// The default posture, checked before anything is opened, bound or written: a key file,
    /// or `--insecure` (then the warning goes to stderr now). `cmd` is `send` or `recv`.
    pub fn require(&self, cmd: &str) -> anyhow::Result<()> {
        if self.key_file.is_some() {
            return Ok(());
        }
        if self.insecure {
            eprintln!("{}", insecure_warning(cmd));
            return Ok(());
        }
        anyhow::bail!(
            "no --key-file: AeroTP authenticates every transfer by default. Make a key with \
             `aerotp keygen aerotp.key` (mode 600), copy it to the peer (e.g. `scp -p \
             aerotp.key peer:/etc/aerotp/`) and give --key-file with it at both ends; or pass \
             --insecure at both ends to run without authentication (anyone who can reach the \
             port can then send, answer, alter or reset a transfer)"
        )
    }

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
