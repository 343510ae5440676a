//! The kernel settings `aerotp gw rules install --tcp-tun` changes, recorded before it
//! changes them and put back by `remove` (docs/gateway.md §TCP reliable: end-to-end
//! semantics).
//!
//! The record is a small text file per network namespace under [`STATE_DIR`]
//! (`sysctls.txt` for the current namespace, `sysctls-NETNS.txt` for `--netns NETNS`), one
//! `PATH VALUE` line per setting with its value before the first install: a second install
//! (which replaces the first) keeps the file, so the values put back are those from before
//! any install. `remove` writes each value back (last changed, first restored) and deletes the
//! file. The settings are per namespace, as is the one nftables table the rules live in, so
//! one record per namespace is enough. `/run` is a tmpfs: after a reboot neither the rules
//! nor the changed settings are left, and neither is the record.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Where the records live.
pub const STATE_DIR: &str = "/run/aerotp";

/// Longest record read (a few lines; anything longer is not ours).
const MAX_RECORD: u64 = 4096;

/// One setting: its file under /proc/sys and the value it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub path: String,
    pub value: String,
    /// Given only when the value before is this one (a strict rp_filter made loose).
    pub only_if: Option<String>,
}

/// The settings the TUN path needs, in the order they are changed: forwarding on (segments
/// are forwarded into the device, the answers out of it), the device's reverse-path filter
/// off (its answers carry the destinations' addresses), a strict `conf.all.rp_filter` (1)
/// made loose (2), and IPv6 forwarding when IPv6 is intercepted too.
pub(crate) fn for_tun(dev: &str, ipv6: bool) -> Vec<Setting> {
    let set = |path: String, value: &str, only_if: Option<&str>| Setting {
        path,
        value: value.into(),
        only_if: only_if.map(Into::into),
    };
    let mut v = vec![
        set("/proc/sys/net/ipv4/ip_forward".into(), "1", None),
        set(
            format!("/proc/sys/net/ipv4/conf/{dev}/rp_filter"),
            "0",
            None,
        ),
        set(
            "/proc/sys/net/ipv4/conf/all/rp_filter".into(),
            "2",
            Some("1"),
        ),
    ];
    if ipv6 {
        v.push(set(
            "/proc/sys/net/ipv6/conf/all/forwarding".into(),
            "1",
            None,
        ));
    }
    v
}

/// The shell text that applies `settings` (what `rules print` shows and `install` runs).
pub fn script(settings: &[Setting]) -> String {
    let parts: Vec<String> = settings
        .iter()
        .map(|s| match &s.only_if {
            Some(was) => format!(
                "if [ \"$(cat {p})\" = {was} ]; then echo {v} > {p}; fi",
                p = s.path,
                v = s.value
            ),
            None => format!("echo {} > {}", s.value, s.path),
        })
        .collect();
    parts.join(" && ")
}

/// The record's file for namespace `netns` (none: the current one).
pub fn state_path(netns: Option<&str>) -> PathBuf {
    PathBuf::from(STATE_DIR).join(match netns {
        Some(ns) => format!("sysctls-{ns}.txt"),
        None => "sysctls.txt".into(),
    })
}

/// Runs `sh -c script` in `netns`; its output, or an error naming the script.
fn sh(netns: Option<&str>, script: &str) -> Result<String, String> {
    let mut c = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "sh"]);
            c
        }
        None => Command::new("sh"),
    };
    let out = c
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("sh -c '{script}': cannot run it: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "sh -c '{script}': {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Parses a record: `PATH VALUE` lines, `#` comments; every path under /proc/sys/net.
pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut w = line.split_whitespace();
        let (Some(path), Some(value), None) = (w.next(), w.next(), w.next()) else {
            return Err(format!("line {}: '{line}' is not 'PATH VALUE'", i + 1));
        };
        let plain = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/_.-@".contains(&b))
        };
        if !path.starts_with("/proc/sys/net/") || path.contains("..") || !plain(path) {
            return Err(format!(
                "line {}: '{path}' is not a /proc/sys/net setting",
                i + 1
            ));
        }
        if !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("line {}: '{value}' is not a number", i + 1));
        }
        v.push((path.to_owned(), value.to_owned()));
    }
    Ok(v)
}

/// Before `install` changes `settings` in `netns`: records their values, unless a record is
/// there already (an earlier install not removed: its values are the ones from before).
pub fn save(netns: Option<&str>, settings: &[Setting]) -> Result<(), String> {
    let path = state_path(netns);
    if path.exists() {
        return Ok(());
    }
    let files: Vec<&str> = settings.iter().map(|s| s.path.as_str()).collect();
    // `grep -H .` prints `FILE:VALUE` per file, and fails naming a file that is absent.
    let out = sh(netns, &format!("grep -H . {}", files.join(" ")))?;
    let mut text = String::from(
        "# aerotp gw rules install --tcp-tun: the values before; `aerotp gw rules remove` puts\n\
         # them back and deletes this file\n",
    );
    for l in out.lines() {
        let Some((p, v)) = l.split_once(':') else {
            return Err(format!("reading the settings: unexpected output '{l}'"));
        };
        text += &format!("{p} {}\n", v.trim());
    }
    let got = parse(&text).map_err(|e| format!("reading the settings: {e}"))?;
    if got.len() != files.len() {
        return Err(format!(
            "reading the settings: {} values for {} files ({})",
            got.len(),
            files.len(),
            files.join(" ")
        ));
    }
    std::fs::create_dir_all(STATE_DIR)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|e| {
            format!(
                "{}: cannot record the settings before changing them: {e} (run as root; \
                 {STATE_DIR} must be writable)",
                path.display()
            )
        })
}

/// Whether a record exists for `netns`.
pub fn saved(netns: Option<&str>) -> bool {
    state_path(netns).exists()
}

/// Puts back what the record of `netns` holds and deletes it; `Ok(false)` when there is no
/// record. A setting whose file is gone (the TUN device's, once the ingress stopped) has
/// nothing to put back.
pub fn restore(netns: Option<&str>) -> Result<bool, String> {
    use std::io::Read;
    let path = state_path(netns);
    let mut text = String::new();
    match std::fs::File::open(&path) {
        Ok(f) => f
            .take(MAX_RECORD)
            .read_to_string(&mut text)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let values = parse(&text).map_err(|e| {
        format!(
            "{}: {e}; not ours or damaged: put the settings back by hand and delete the file",
            path.display()
        )
    })?;
    let script: Vec<String> = values
        .iter()
        .rev()
        .map(|(p, v)| format!("if [ -e {p} ]; then echo {v} > {p}; fi"))
        .collect();
    sh(netns, &script.join(" && "))?;
    std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_changes_what_the_tun_path_needs() {
        let s = script(&for_tun("aerotp0", true));
        assert_eq!(
            s,
            "echo 1 > /proc/sys/net/ipv4/ip_forward && \
             echo 0 > /proc/sys/net/ipv4/conf/aerotp0/rp_filter && \
             if [ \"$(cat /proc/sys/net/ipv4/conf/all/rp_filter)\" = 1 ]; then \
             echo 2 > /proc/sys/net/ipv4/conf/all/rp_filter; fi && \
             echo 1 > /proc/sys/net/ipv6/conf/all/forwarding"
        );
        assert_eq!(for_tun("t", false).len(), 3);
        assert_eq!(
            state_path(Some("air")),
            PathBuf::from("/run/aerotp/sysctls-air.txt")
        );
        assert_eq!(state_path(None), PathBuf::from("/run/aerotp/sysctls.txt"));
    }

    #[test]
    fn records_parse_and_bad_ones_are_refused() {
        let ok =
            "# c\n/proc/sys/net/ipv4/ip_forward 0\n\n/proc/sys/net/ipv4/conf/a-b.1/rp_filter 1\n";
        assert_eq!(
            parse(ok).unwrap(),
            vec![
                ("/proc/sys/net/ipv4/ip_forward".into(), "0".into()),
                ("/proc/sys/net/ipv4/conf/a-b.1/rp_filter".into(), "1".into()),
            ]
        );
        for (bad, why) in [
            ("/proc/sys/net/ipv4/ip_forward", "not 'PATH VALUE'"),
            ("/proc/sys/net/ipv4/ip_forward 0 1", "not 'PATH VALUE'"),
            ("/etc/passwd 0", "not a /proc/sys/net setting"),
            (
                "/proc/sys/net/../../kernel/x 0",
                "not a /proc/sys/net setting",
            ),
            ("/proc/sys/net/a;rm 0", "not a /proc/sys/net setting"),
            ("/proc/sys/net/ipv4/ip_forward 1;reboot", "not a number"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why) && e.contains("line 1"), "{bad}: {e}");
        }
    }
}
