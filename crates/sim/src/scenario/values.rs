//! Values as the simulator reads them: sizes by the workspace's one rule, and `toml` values
//! as text for the CLI-form parsers and for messages.

use super::error::SimError;

/// Parses a byte size by the workspace's one rule ([`aerotp_link::parse_size`]: `1MB` = `1mb`
/// = 1 000 000 bytes, `KiB`… binary, whole bytes of at least 1).
pub fn parse_size(input: &str) -> Result<usize, SimError> {
    let bytes = aerotp_link::parse_size(input).map_err(|e| SimError::Parse(e.to_string()))?;
    usize::try_from(bytes).map_err(|_| {
        SimError::Parse(format!(
            "cannot parse size {input:?}: above this machine's address space"
        ))
    })
}

/// A value as text for parsers that take the CLI form: strings as they are, numbers printed.
pub(super) fn text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value as it appears in messages.
pub(super) fn value_text(v: &toml::Value) -> String {
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_decimal_and_binary() {
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert_eq!(parse_size("500kB").unwrap(), 500_000);
        assert_eq!(parse_size("1.5MB").unwrap(), 1_500_000);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        // The rule the bench and the gateway use too: units are case-insensitive.
        assert_eq!(parse_size("1mb").unwrap(), 1_000_000);
        assert_eq!(parse_size("64kib").unwrap(), 65_536);
        for bad in ["0", "0MB", "", "MB", "1XB", "-1", "0.5"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
