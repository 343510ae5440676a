//! `aerotp send`'s input and addresses as the command line gives them, checked: the file,
//! the name it is announced under, the receiver's address, the other paths and the source
//! address of the first one.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use anyhow::Context;
use tokio::io::AsyncRead;

use crate::common::sanitize_name;

/// Resolves `host:port` to one address.
/// The address `to` given to `flag` (`--to`, `--path`): host:port, a name resolved.
pub async fn resolve(flag: &str, to: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(a) = to.parse() {
        return Ok(a);
    }
    let mut it = tokio::net::lookup_host(to).await.with_context(|| {
        format!("{flag} {to}: not an address (host:port, e.g. 127.0.0.1:9000 or [::1]:9000)")
    })?;
    it.next()
        .with_context(|| format!("{flag} {to}: the name has no address"))
}

/// One `--path`: the peer's address on it and this host's, if given.
#[derive(Debug, Clone)]
pub struct PathArg {
    pub local: Option<IpAddr>,
    pub remote: SocketAddr,
    /// As given, for messages.
    pub arg: String,
}

/// Parses `--path [LOCAL=]ADDR` (ADDR resolved; LOCAL an IP address of `target`'s family).
async fn path_arg(p: &str, target: SocketAddr) -> anyhow::Result<PathArg> {
    let (local, addr) = match p.split_once('=') {
        Some((l, a)) => {
            let ip: IpAddr = l.trim().parse().map_err(|_| {
                anyhow::anyhow!(
                    "--path {p}: '{l}' is not an IP address; give LOCAL=ADDR with LOCAL one of \
                     this host's addresses, e.g. 10.2.0.2=10.2.0.1:47000"
                )
            })?;
            (Some(ip), a)
        }
        None => (None, p),
    };
    let remote = resolve("--path", addr).await?;
    for a in local.iter().copied().chain([remote.ip()]) {
        if a.is_ipv4() != target.is_ipv4() {
            anyhow::bail!(
                "--path {p}: {a} is not of the address family of --to {target}; one socket \
                 carries every path, so give addresses of one family"
            );
        }
    }
    Ok(PathArg {
        local,
        remote,
        arg: p.to_string(),
    })
}

/// An unspecified local address of the family of `remote`, any port.
pub fn local_any(remote: SocketAddr) -> SocketAddr {
    if remote.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    }
}

/// What is sent: the reader, its size when known (a regular file), and the name it goes
/// under unless `--name` gives one.
pub struct Input {
    pub reader: Box<dyn AsyncRead + Unpin + Send>,
    pub size: Option<u64>,
    pub default_name: String,
}

/// Opens the file to send, or standard input for `-`.
pub async fn open_input(file: &str) -> anyhow::Result<Input> {
    if file == "-" {
        return Ok(Input {
            reader: Box::new(tokio::io::stdin()),
            size: None,
            default_name: "stdin".into(),
        });
    }
    let path = Path::new(file);
    let f = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("cannot open {file}"))?;
    let meta = f
        .metadata()
        .await
        .with_context(|| format!("cannot stat {file}"))?;
    if !meta.is_file() {
        anyhow::bail!("{file} is not a regular file");
    }
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    Ok(Input {
        reader: Box::new(f),
        size: Some(meta.len()),
        default_name: name,
    })
}

/// `--name` must leave a usable file name.
pub fn check_name(name: Option<&str>) -> anyhow::Result<()> {
    if let Some(n) = name {
        if sanitize_name(n).is_none() {
            anyhow::bail!(
                "--name '{n}': no usable file name in it; give a name such as flight-42.pcm \
                 (its last path component is what the receiver uses)"
            );
        }
    }
    Ok(())
}

/// The `--path`s, resolved; each another pair of addresses than `target` (from any local
/// address) and the others.
pub async fn checked_paths(args: &[String], target: SocketAddr) -> anyhow::Result<Vec<PathArg>> {
    let mut paths: Vec<PathArg> = Vec::new();
    for p in args {
        let path = path_arg(p, target).await?;
        // A path is both of its addresses: another path to the same peer address needs
        // a local address of its own (another radio).
        let first = path.remote == target && path.local.is_none();
        if first
            || paths
                .iter()
                .any(|q| (q.local, q.remote) == (path.local, path.remote))
        {
            anyhow::bail!(
                "--path {p}: {} is already a path of this connection (--to or another \
                 --path); a path is its local and its peer address, so give each path its \
                 own peer address or its own LOCAL= (one of this host's addresses)",
                path.remote
            );
        }
        paths.push(path);
    }
    Ok(paths)
}

/// `--from`, an address of `target`'s family that makes the first path another pair of
/// addresses than every `--path`.
pub fn source_address(
    from: Option<&str>,
    target: SocketAddr,
    paths: &[PathArg],
) -> anyhow::Result<Option<IpAddr>> {
    let from = match from {
        Some(f) => {
            let ip: IpAddr = f.trim().parse().map_err(|_| {
                anyhow::anyhow!(
                    "--from {f}: not an IP address; give one of this host's addresses, \
                     e.g. 10.1.0.2"
                )
            })?;
            if ip.is_ipv4() != target.is_ipv4() {
                anyhow::bail!("--from {f}: not of the address family of --to {target}");
            }
            Some(ip)
        }
        None => None,
    };
    if let Some(p) = paths
        .iter()
        .find(|p| p.remote == target && from.is_some() && p.local == from)
    {
        anyhow::bail!(
            "--path {}: the same addresses as --from and --to, the first path; give this \
             path another LOCAL= or another peer address",
            p.arg
        );
    }
    Ok(from)
}

/// The connection keeps at most `MAX_PATHS` paths: `--to` and the `--path`s.
pub fn check_path_count(paths: &[PathArg]) -> anyhow::Result<()> {
    if paths.len() + 1 > aerotp_proto::MAX_PATHS {
        anyhow::bail!(
            "{} paths: a connection keeps at most {} (--to and {} --path)",
            paths.len() + 1,
            aerotp_proto::MAX_PATHS,
            aerotp_proto::MAX_PATHS - 1
        );
    }
    Ok(())
}
