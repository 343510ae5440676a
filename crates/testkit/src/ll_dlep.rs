//! MIT-LL's LL-DLEP (commit 184e148, built by `scripts/build-ll-dlep.sh`) as a modem for the
//! tests that need a real DLEP peer nobody here wrote (crates/net/tests/dlep_radio.rs,
//! crates/cli/tests/dlep_observe.rs): started on 127.0.0.1 with a heartbeat of 1 s and driven
//! through its CLI on stdin (`dest up …`, `dest update … Current_Data_Rate_Transmit N`,
//! `dest down …`). Killed when dropped; a panicking test prints its logs first.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// The LL-DLEP binary: `$AEROTP_LL_DLEP` if set, else
/// `${AEROTP_CACHE:-$HOME/.cache/aerotp}/ll-dlep-184e148/bin/Dlep`; panics (the tests that
/// use it fail, never skip) when it is missing.
pub fn binary() -> PathBuf {
    let p = match std::env::var_os("AEROTP_LL_DLEP") {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = std::env::var_os("AEROTP_CACHE")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/aerotp")))
                .expect("neither AEROTP_CACHE nor HOME is set");
            cache.join("ll-dlep-184e148/bin/Dlep")
        }
    };
    assert!(
        p.is_file(),
        "LL-DLEP not found at {} (set AEROTP_LL_DLEP, or run scripts/build-ll-dlep.sh)",
        p.display()
    );
    p
}

/// Its protocol configuration (`$AEROTP_LL_DLEP_ETC`, else `etc/dlep` beside its `bin`).
pub fn protocol_dir(bin: &Path) -> PathBuf {
    if let Some(d) = std::env::var_os("AEROTP_LL_DLEP_ETC") {
        return PathBuf::from(d);
    }
    let d = bin
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("etc/dlep"))
        .unwrap_or_default();
    assert!(
        d.join("dlep-rfc-8175.xml").is_file(),
        "LL-DLEP protocol configuration not found in {} (set AEROTP_LL_DLEP_ETC)",
        d.display()
    );
    d
}

/// An LL-DLEP modem listening on 127.0.0.1:`port`, heartbeat 1 s, its CLI on our pipe; with
/// a discovery port, it also answers Peer Discovery on [`GROUP`] on the loopback interface.
#[derive(Debug)]
pub struct Modem {
    child: Child,
    dir: PathBuf,
}

/// The multicast group LL-DLEP's own loopback example (config/modem_lo.xml) uses.
pub const GROUP: [u8; 4] = [225, 0, 0, 117];

impl Modem {
    /// Starts it in `dir` (its configuration, log and output files go there).
    pub fn start(dir: &Path, port: u16) -> Modem {
        Modem::start_with(dir, port, None)
    }

    /// As [`Modem::start`], answering Peer Discovery on `discovery_port` if given.
    pub fn start_with(dir: &Path, port: u16, discovery_port: Option<u16>) -> Modem {
        let bin = binary();
        let etc = protocol_dir(&bin);
        let config = format!(
            r#"<?xml version="1.0" ?>
<config>
  <params>
    <local-type>modem</local-type>
    {discovery}
    <session-address>127.0.0.1</session-address>
    <session-port>{port}</session-port>
    <heartbeat-interval>1</heartbeat-interval>
    <heartbeat-threshold>2</heartbeat-threshold>
    <peer-type>ll-dlep-modem</peer-type>
    <log-file>{log}</log-file>
    <log-level>2</log-level>
    <protocol-config-file>{etc}/dlep-rfc-8175.xml</protocol-config-file>
    <protocol-config-schema>{etc}/protocol-config.xsd</protocol-config-schema>
  </params>
</config>
"#,
            discovery = match discovery_port {
                None => "<discovery-enable>0</discovery-enable>".to_string(),
                Some(p) => format!(
                    "<discovery-enable>1</discovery-enable>\n    <discovery-iface>lo</discovery-iface>\n    \
                     <discovery-port>{p}</discovery-port>\n    \
                     <discovery-mcast-address>{}</discovery-mcast-address>",
                    std::net::Ipv4Addr::from(GROUP)
                ),
            },
            log = dir.join("dlep-modem.log").display(),
            etc = etc.display(),
        );
        let cfg = dir.join("modem.xml");
        std::fs::write(&cfg, config).unwrap();
        let child = Command::new(&bin)
            .arg("config-file")
            .arg(&cfg)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(std::fs::File::create(dir.join("stdout.txt")).unwrap())
            .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        Modem {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// One line on the modem's CLI; returns when it is written.
    pub fn cli(&mut self, line: &str) -> Instant {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("modem CLI closed");
        stdin.flush().unwrap();
        Instant::now()
    }

    /// Kills it now (a modem that vanishes mid-session).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last 40 lines of its stdout, stderr and log.
    pub fn logs(&self) -> String {
        let tail = |f: &str| {
            let s = std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
            let lines: Vec<_> = s.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        format!(
            "--- LL-DLEP stdout ---\n{}\n--- stderr ---\n{}\n--- log ---\n{}",
            tail("stdout.txt"),
            tail("stderr.txt"),
            tail("dlep-modem.log")
        )
    }
}

impl Drop for Modem {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        self.kill();
    }
}
