//! Pre-shared key files (docs/security.md, "Key file"): reading them with the checks a secret
//! deserves, writing new ones, rotating, and watching a file so a running endpoint takes a
//! rotated key without stopping.
//!
//! The format is TOML:
//!
//! ```toml
//! format = "aerotp-psk-1"
//! [current]
//! id = 2
//! key = "64 hex digits"
//! [previous]            # optional: still accepted, never used to seal
//! id = 1
//! key = "64 hex digits"
//! ```

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use aerotp_proto::{AuthConfig, AuthKey, KeySet, KEY_LEN};
use serde::{Deserialize, Serialize};

use crate::Endpoint;

/// The `format` value of the files this version reads and writes.
pub const FORMAT: &str = "aerotp-psk-1";
/// Longest key file read: a real one is under 300 bytes.
const MAX_FILE: u64 = 64 * 1024;

/// What is wrong with a key file. Every message names `flag` (the option or config key that
/// gave the path), the path, and what would be accepted.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("{flag} {path}: cannot read the key file: {source} (create one with `aerotp keygen {path}`)")]
    Read {
        flag: String,
        path: String,
        source: std::io::Error,
    },
    #[error("{flag} {path}: the key file is readable or writable by others (mode {mode:o}); a secret must be mode 600 or 400: run `chmod 600 {path}`")]
    Permissions {
        flag: String,
        path: String,
        mode: u32,
    },
    #[error(
        "{flag} {path}: not a regular file; give the path of a key file written by `aerotp keygen`"
    )]
    NotAFile { flag: String, path: String },
    #[error("{flag} {path}: {what}; a key file is TOML written by `aerotp keygen`: format = \"{FORMAT}\", [current] with id (0-127) and key (64 hex digits), optional [previous]")]
    Contents {
        flag: String,
        path: String,
        what: String,
    },
    #[error("{path}: the file exists; give --force to replace it (its keys are lost) or --rotate to add a new key")]
    Exists { path: String },
    #[error("{path}: cannot write the key file: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("no random bytes from the operating system")]
    Random,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKey {
    id: u8,
    key: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: String,
    current: FileKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous: Option<FileKey>,
}

/// Hex by hand: 64 digits each way, not worth a dependency.
fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn from_hex(s: &str) -> Option<[u8; KEY_LEN]> {
    let s = s.as_bytes();
    if s.len() != 2 * KEY_LEN {
        return None;
    }
    let mut out = [0u8; KEY_LEN];
    for (i, pair) in s.chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

fn key_of(k: &FileKey, section: &str) -> Result<AuthKey, String> {
    let secret = from_hex(&k.key).ok_or_else(|| {
        format!(
            "[{section}] key is not 64 hex digits ({} characters)",
            k.key.len()
        )
    })?;
    AuthKey::new(k.id, secret).map_err(|e| format!("[{section}] {e}"))
}

/// Parses a key file's text.
pub fn parse(text: &str) -> Result<KeySet, String> {
    let f: File = toml::from_str(text).map_err(|e| format!("not a key file: {}", e.message()))?;
    if f.format != FORMAT {
        return Err(format!("format \"{}\" is not \"{FORMAT}\"", f.format));
    }
    let keys = KeySet {
        current: key_of(&f.current, "current")?,
        previous: f
            .previous
            .as_ref()
            .map(|k| key_of(k, "previous"))
            .transpose()?,
    };
    keys.validate().map_err(|e| e.to_string())?;
    Ok(keys)
}

/// The text of a key file holding `keys`.
pub fn render(keys: &KeySet) -> String {
    let fk = |k: &AuthKey| FileKey {
        id: k.id(),
        key: to_hex(k.secret()),
    };
    let f = File {
        format: FORMAT.into(),
        current: fk(&keys.current),
        previous: keys.previous.as_ref().map(fk),
    };
    let body = toml::to_string(&f).expect("a key file always serialises");
    format!(
        "# AeroTP pre-shared key file (docs/security.md). Keep it secret: mode 600, never on\n\
         # a command line. `aerotp keygen --rotate` adds a new key and keeps this one as previous.\n{body}"
    )
}

/// Reads and checks the key file at `path`; `flag` names where the path came from
/// (`--key-file`, or a config key) for the error messages.
pub fn load(path: &Path, flag: &str) -> Result<KeySet, KeyFileError> {
    let p = path.display().to_string();
    let read = |source| KeyFileError::Read {
        flag: flag.into(),
        path: p.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return Err(KeyFileError::NotAFile {
            flag: flag.into(),
            path: p,
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Permissions {
            flag: flag.into(),
            path: p,
            mode,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    parse(&text).map_err(|what| KeyFileError::Contents {
        flag: flag.into(),
        path: p,
        what,
    })
}

fn random<const N: usize>() -> Result<[u8; N], KeyFileError> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; N];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| KeyFileError::Random)?;
    Ok(b)
}

/// A new random key with identifier `id`.
pub fn new_key(id: u8) -> Result<AuthKey, KeyFileError> {
    AuthKey::new(id & 0x7F, random()?).map_err(|_| KeyFileError::Random)
}

/// Endpoint settings for `keys`: the nonce seed comes from the operating system, fresh for
/// every endpoint (docs/security.md, "Nonces").
pub fn auth_config(keys: KeySet, encrypt: bool) -> Result<AuthConfig, KeyFileError> {
    Ok(AuthConfig {
        keys,
        encrypt,
        nonce_seed: random()?,
    })
}

/// How `write` treats an existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Refuse if the file exists.
    New,
    /// Replace whatever is there with a new key.
    Force,
    /// Keep the current key as previous and add a new current one (id + 1).
    Rotate,
    /// Drop the previous key (after every peer has the current one).
    Retire,
}

/// Writes a key file at `path` (mode 600, atomically: a temporary file renamed over it) and
/// returns the keys it now holds.
pub fn write(path: &Path, how: WriteMode) -> Result<KeySet, KeyFileError> {
    let p = path.display().to_string();
    let exists = path.exists();
    let keys = match how {
        WriteMode::New if exists => return Err(KeyFileError::Exists { path: p }),
        WriteMode::New | WriteMode::Force => KeySet {
            current: new_key(1)?,
            previous: None,
        },
        WriteMode::Rotate => {
            let old = load(path, "keygen --rotate")?;
            KeySet {
                current: new_key(old.current.id().wrapping_add(1))?,
                previous: Some(old.current),
            }
        }
        WriteMode::Retire => {
            let old = load(path, "keygen --retire")?;
            KeySet {
                current: old.current,
                previous: None,
            }
        }
    };
    let tmp: PathBuf = {
        let mut s = path.as_os_str().to_owned();
        s.push(".tmp");
        s.into()
    };
    let werr = |source| KeyFileError::Write {
        path: p.clone(),
        source,
    };
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(werr)?;
    let res = f
        .write_all(render(&keys).as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(werr(e));
    }
    Ok(keys)
}

/// Watches `path` and gives `ep` its keys again whenever the file changes, so a rotation
/// (`aerotp keygen --rotate`, then `--retire`) reaches a running endpoint without a restart.
/// A file that no longer loads is reported and the keys in use are kept. Checks once a
/// second; ends when the endpoint's last user is gone.
pub fn watch(ep: &Endpoint, path: PathBuf, flag: String) {
    let weak = ep.shared_weak();
    tokio::spawn(async move {
        let stamp = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let mut last: Option<SystemTime> = stamp(&path);
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let Some(shared) = weak.upgrade() else { return };
            if shared.lock().driver_stopped {
                return;
            }
            let now = stamp(&path);
            if now == last {
                continue;
            }
            last = now;
            match load(&path, &flag) {
                Ok(keys) => match shared.lock().engine.set_keys(&keys) {
                    Ok(()) => tracing::info!(
                        current = keys.current.id(),
                        previous = ?keys.previous.as_ref().map(|k| k.id()),
                        "key file reloaded"
                    ),
                    Err(e) => tracing::warn!(error = %e, "key file not applied"),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "key file changed but does not load; keeping the keys in use")
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_parse_round_trip_and_bad_contents_named() {
        let keys = KeySet {
            current: AuthKey::new(2, [0xA5; KEY_LEN]).unwrap(),
            previous: Some(AuthKey::new(1, [7; KEY_LEN]).unwrap()),
        };
        assert_eq!(parse(&render(&keys)).unwrap(), keys);
        for (text, says) in [
            ("garbage", "not a key file"),
            ("format = \"x\"\n[current]\nid = 1\nkey = \"00\"\n", "format"),
            (
                "format = \"aerotp-psk-1\"\n[current]\nid = 1\nkey = \"zz\"\n",
                "64 hex digits",
            ),
            (
                &format!("format = \"aerotp-psk-1\"\n[current]\nid = 200\nkey = \"{}\"\n", "ab".repeat(32)),
                "0 to 127",
            ),
            (
                &format!("format = \"aerotp-psk-1\"\n[current]\nid = 1\nkey = \"{0}\"\n[previous]\nid = 1\nkey = \"{0}\"\n", "ab".repeat(32)),
                "new id",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
