//! The namespaces a lab owns: their removal (on drop, or of labs whose process is gone)
//! and the check of a lab's name.

use std::time::Duration;

use anyhow::{bail, Result};

use crate::netns;

/// How long processes left in a namespace get between SIGTERM and SIGKILL at teardown.
pub(crate) const KILL_GRACE: Duration = Duration::from_millis(500);

/// Remove lab namespaces (`aerotp-air-*`, `aerotp-ground-*`) whose owner process — the pid
/// embedded in the name — is gone, killing any process still inside them. Returns how many
/// namespaces were removed. A namespace of a live process (this one included) is left alone.
pub fn cleanup_leftovers() -> Result<usize> {
    netns::check_prerequisites()?;
    let mut removed = 0;
    let mut errors = Vec::new();
    for ns in netns::list()? {
        let Some(pid) = netns::owner_pid(&ns) else {
            continue;
        };
        if netns::alive(pid) {
            continue;
        }
        match netns::remove(&ns, KILL_GRACE) {
            Ok(()) => removed += 1,
            Err(e) => errors.push(format!("{ns}: {e:#}")),
        }
    }
    if !errors.is_empty() {
        bail!(
            "could not remove leftover namespaces: {}",
            errors.join("; ")
        );
    }
    Ok(removed)
}

pub(crate) fn check_tag(tag: &str) -> Result<()> {
    if tag.is_empty()
        || tag.len() > 32
        || !tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        bail!("invalid lab name {tag:?}: use 1 to 32 letters, digits, `_` or `.`");
    }
    Ok(())
}

/// Namespaces created so far; dropping removes them (so a failed `start` leaves nothing).
#[derive(Debug, Default)]
pub(crate) struct Namespaces {
    pub(crate) names: Vec<String>,
}

impl Namespaces {
    pub(crate) fn remove_all(&mut self) -> Result<()> {
        let mut errors = Vec::new();
        for ns in self.names.drain(..) {
            if let Err(e) = netns::remove(&ns, KILL_GRACE) {
                errors.push(format!("{e:#}"));
            }
        }
        if !errors.is_empty() {
            bail!(
                "could not remove lab namespaces: {}; remove them with `ip netns del NAME`",
                errors.join("; ")
            );
        }
        Ok(())
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        if let Err(e) = self.remove_all() {
            tracing::error!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_checked() {
        assert!(check_tag("bench_1.a").is_ok());
        assert!(check_tag("").is_err());
        assert!(check_tag("a/b").is_err());
        assert!(check_tag("with-dash").is_err());
        assert!(check_tag(&"x".repeat(33)).is_err());
    }

    #[test]
    fn owner_pid_is_read_from_lab_names_only() {
        assert_eq!(netns::owner_pid("aerotp-air-1234-0"), Some(1234));
        assert_eq!(netns::owner_pid("aerotp-ground-77-bench"), Some(77));
        assert_eq!(netns::owner_pid("aerotp-air-x-0"), None);
        assert_eq!(netns::owner_pid("aerotp-air--0"), None);
        assert_eq!(netns::owner_pid("other-ns"), None);
        assert_eq!(netns::owner_pid("aerotp-air-0-1"), None);
    }
}
