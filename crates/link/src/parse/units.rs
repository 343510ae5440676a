//! Scalar values in their human forms: rates, sizes and durations, parsed and formatted.
//!
//! Numbers are parsed as exact decimals (no floating point), so `"2.4kbit"` is exactly
//! 2400 bit/s and `"1.5s"` exactly 1 500 000 000 ns. Written by hand: the forms are small
//! and the maintained crates (humantime, bytesize) use other unit conventions (`m` = minute,
//! byte rates) that would be surprising next to `tc` style `5mbit`.

use std::time::Duration;

use crate::error::LinkError;

/// Parses a decimal number `int[.frac]` and multiplies it by `scale`, rounding to the
/// nearest integer. Returns `None` for malformed numbers or overflow.
fn scaled_decimal(num: &str, scale: u128) -> Option<u128> {
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 30 {
        return None;
    }
    let int_v: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut value = int_v.checked_mul(scale)?;
    if !frac.is_empty() {
        let frac_v: u128 = frac.parse().ok()?;
        let denom = 10u128.checked_pow(frac.len() as u32)?;
        let num = frac_v.checked_mul(scale)?;
        // Round half up to the nearest unit of the scale.
        value = value.checked_add((num + denom / 2) / denom)?;
    }
    Some(value)
}

/// Splits `"10ms"` into `("10", "ms")` at the first character that is not part of a number.
fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s.split_at(end)
}

/// Parses a link rate into bits per second.
///
/// Accepted: a decimal number followed by an optional unit. Units are bits per second with
/// an optional decimal SI prefix (k = 10^3, M = 10^6, G = 10^9, T = 10^12), written `bit`,
/// `bps`, `bit/s` or `b/s`, case-insensitive: `5mbit`, `10Mbps`, `2.4kbit`, `1gbit`,
/// `500000` (bare number = bit/s). Byte rates (`MB/s`, `MBps`, `mbyte`) are rejected rather
/// than guessed. The result is rounded to the nearest bit/s and must be at least 1.
pub fn parse_rate(input: &str) -> Result<u64, LinkError> {
    const FORMS: &str = "expected a number with an optional unit such as 5mbit, 10Mbps, \
                         2.4kbit, 1gbit or 500000 (bit/s)";
    let s = input.trim();
    let (num, unit) = split_number(s);
    if num.is_empty() {
        return Err(LinkError::parse(
            "rate",
            input,
            format!("no number; {FORMS}"),
        ));
    }
    let unit_t = unit.trim();
    if unit_t.contains("B/s") || unit_t.contains("Bps") || unit_t.to_lowercase().contains("byte") {
        return Err(LinkError::parse(
            "rate",
            input,
            "byte rates are not accepted; give the rate in bits per second, e.g. 8mbit for 1 MB/s",
        ));
    }
    let lower = unit_t.to_lowercase();
    let (prefix, base) = match lower.chars().next() {
        Some('k') => (1_000u128, &lower[1..]),
        Some('m') => (1_000_000, &lower[1..]),
        Some('g') => (1_000_000_000, &lower[1..]),
        Some('t') => (1_000_000_000_000, &lower[1..]),
        _ => (1, lower.as_str()),
    };
    let base_ok = matches!(base, "bit" | "bps" | "bit/s" | "b/s" | "bits" | "bits/s")
        || (base.is_empty() && prefix == 1);
    if !base_ok {
        return Err(LinkError::parse(
            "rate",
            input,
            format!("unknown unit {unit_t:?}; {FORMS}"),
        ));
    }
    let value = scaled_decimal(num, prefix)
        .ok_or_else(|| LinkError::parse("rate", input, format!("malformed number; {FORMS}")))?;
    if value == 0 {
        return Err(LinkError::parse(
            "rate",
            input,
            "the rate must be at least 1 bit/s",
        ));
    }
    u64::try_from(value)
        .map_err(|_| LinkError::parse("rate", input, "rate too large (above 2^64 bit/s)"))
}

/// The forms [`parse_size`] accepts, for error messages and help texts.
pub const SIZE_FORMS: &str = "a whole number of bytes with an optional unit, case-insensitive: \
                              B, k/kB (10^3), M/MB (10^6), G/GB (10^9), T/TB (10^12), KiB, MiB, \
                              GiB, TiB (powers of 1024), e.g. 1MB, 1.5mb, 64KiB, 4096";

/// Parses a byte size.
///
/// Accepted: a decimal number followed by an optional unit, case-insensitive: none or `B`
/// (bytes), `k`/`kB`, `M`/`MB`, `G`/`GB`, `T`/`TB` (decimal: 10^3 … 10^12), `KiB`, `MiB`,
/// `GiB`, `TiB` (binary: 2^10 … 2^40). `1MB` = `1mb` = 1 000 000 bytes, `1.5kB` = 1500,
/// `1MiB` = 1 048 576. A size counts bytes, so bit units (`Mbit`, `Mb/s`) are unknown
/// units, and the result must be a whole number of bytes from 1 to 2^64 − 1 (`0.5`, `1.0001kB`
/// and `0` are refused, never rounded).
pub fn parse_size(input: &str) -> Result<u64, LinkError> {
    let s = input.trim();
    let (num, unit) = split_number(s);
    if num.is_empty() {
        return Err(LinkError::parse(
            "size",
            input,
            format!("no number; expected {SIZE_FORMS}"),
        ));
    }
    let unit_t = unit.trim();
    let scale: u128 = match unit_t.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => {
            return Err(LinkError::parse(
                "size",
                input,
                format!("unknown unit {unit_t:?}; expected {SIZE_FORMS}"),
            ))
        }
    };
    let malformed = || {
        LinkError::parse(
            "size",
            input,
            format!("malformed number; expected {SIZE_FORMS}"),
        )
    };
    // Exactness: the value times the scale must be a whole number of bytes; scaled_decimal
    // rounds, so compare with the value computed at a finer scale.
    let frac_digits = num.split_once('.').map_or(0, |(_, f)| f.len());
    let fine = 10u128
        .checked_pow(frac_digits as u32)
        .ok_or_else(malformed)?;
    let exact = scale.checked_mul(fine).ok_or_else(malformed)?;
    let bytes = scaled_decimal(num, scale).ok_or_else(malformed)?;
    let fine_bytes = scaled_decimal(num, exact).ok_or_else(malformed)?;
    if bytes.checked_mul(fine) != Some(fine_bytes) {
        return Err(LinkError::parse(
            "size",
            input,
            "not a whole number of bytes; give a size of at least 1 B",
        ));
    }
    if bytes == 0 {
        return Err(LinkError::parse(
            "size",
            input,
            "the size must be at least 1 B",
        ));
    }
    u64::try_from(bytes)
        .map_err(|_| LinkError::parse("size", input, "size too large (above 2^64 - 1 bytes)"))
}

/// Parses a duration.
///
/// Accepted: a decimal number followed by a unit: `ns`, `us` (or `µs`), `ms`, `s`, `min`,
/// `h`. Examples: `10ms`, `1.5s`, `30min`, `250us`. A unit is required (a bare `10` is
/// ambiguous), and `m` is rejected as ambiguous between minutes and milliseconds.
/// Sub-nanosecond fractions are rounded to the nearest nanosecond.
pub fn parse_duration(input: &str) -> Result<Duration, LinkError> {
    const FORMS: &str = "expected a number and a unit (ns, us, ms, s, min, h), e.g. 10ms, \
                         1.5s, 30min, 250us";
    let s = input.trim();
    let (num, unit) = split_number(s);
    if num.is_empty() {
        return Err(LinkError::parse(
            "duration",
            input,
            format!("no number; {FORMS}"),
        ));
    }
    let unit_ns: u128 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => {
            return Err(LinkError::parse(
                "duration",
                input,
                format!("missing unit; {FORMS}"),
            ))
        }
        "m" => {
            return Err(LinkError::parse(
                "duration",
                input,
                "unit `m` is ambiguous; write `min` for minutes or `ms` for milliseconds",
            ))
        }
        other => {
            return Err(LinkError::parse(
                "duration",
                input,
                format!("unknown unit {other:?}; {FORMS}"),
            ))
        }
    };
    let ns = scaled_decimal(num, unit_ns)
        .ok_or_else(|| LinkError::parse("duration", input, format!("malformed number; {FORMS}")))?;
    let secs = u64::try_from(ns / 1_000_000_000)
        .map_err(|_| LinkError::parse("duration", input, "duration too large"))?;
    Ok(Duration::new(secs, (ns % 1_000_000_000) as u32))
}

/// Formats a duration exactly in the largest unit that divides it (`2400us`, `1500ms`,
/// `30min`), so that [`parse_duration`] reads back the same value.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_owned();
    }
    const UNITS: [(u128, &str); 6] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "min"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    for (unit, name) in UNITS {
        if ns.is_multiple_of(unit) {
            return format!("{}{name}", ns / unit);
        }
    }
    unreachable!("every duration is a whole number of nanoseconds")
}

/// Formats a rate in bit/s in the largest SI unit that divides it (`5mbit`, `2400bit`).
pub fn format_rate(bps: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "tbit"),
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ];
    for (unit, name) in UNITS {
        if bps != 0 && bps.is_multiple_of(unit) {
            return format!("{}{name}", bps / unit);
        }
    }
    format!("{bps}bit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("5mbit").unwrap(), 5_000_000);
        assert_eq!(parse_rate("10Mbps").unwrap(), 10_000_000);
        assert_eq!(parse_rate("2.4kbit").unwrap(), 2_400);
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("500000").unwrap(), 500_000);
        assert_eq!(parse_rate(" 10 Gbit/s ").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("4.416Mbps").unwrap(), 4_416_000);
    }

    #[test]
    fn rate_errors_say_what_is_wrong() {
        let msg = |s: &str| parse_rate(s).unwrap_err().to_string();
        assert!(msg("fast").contains("no number"), "{}", msg("fast"));
        assert!(msg("5 furlongs").contains("unknown unit"));
        assert!(msg("1MB/s").contains("byte rates"));
        assert!(msg("0mbit").contains("at least 1 bit/s"));
        assert!(msg("1.2.3mbit").contains("malformed"));
        assert!(msg("").contains("no number"));
        assert!(msg("99999999999tbit").contains("too large"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("30min").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("0.1s").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("7ns").unwrap(), Duration::from_nanos(7));
    }

    #[test]
    fn duration_errors_say_what_is_wrong() {
        let msg = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert!(msg("10").contains("missing unit"));
        assert!(msg("10m").contains("ambiguous"));
        assert!(msg("10 parsecs").contains("unknown unit"));
        assert!(msg("ms").contains("no number"));
        assert!(msg("1..5s").contains("malformed"));
    }

    #[test]
    fn format_round_trips() {
        for s in ["2400us", "1500ms", "30min", "0s", "7ns", "2h", "10ms"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
        for s in ["5mbit", "2400bit", "10gbit", "1bit"] {
            assert_eq!(format_rate(parse_rate(s).unwrap()), s);
        }
    }

    #[test]
    fn sizes_accepted_forms() {
        let cases: &[(&str, u64)] = &[
            ("4096", 4096),
            ("1", 1),
            ("1B", 1),
            ("10b", 10),
            ("1k", 1_000),
            ("64kB", 64_000),
            ("64KB", 64_000),
            ("1MB", 1_000_000),
            ("1mb", 1_000_000),
            ("1M", 1_000_000),
            ("1.5MB", 1_500_000),
            ("1.5kB", 1_500),
            ("0.5kB", 500),
            (".5kB", 500),
            ("2GB", 2_000_000_000),
            ("1g", 1_000_000_000),
            ("3TB", 3_000_000_000_000),
            ("1KiB", 1024),
            ("1kib", 1024),
            ("1MiB", 1 << 20),
            ("1.5MiB", 1_572_864),
            ("1GiB", 1 << 30),
            ("1TiB", 1 << 40),
            ("  100 MB ", 100_000_000),
            ("18446744073709551615", u64::MAX),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text), Ok(*want), "{text}");
        }
    }

    #[test]
    fn sizes_refused_forms_name_input_and_forms() {
        for bad in [
            "",
            "MB",
            "0",
            "0MB",
            "0.0",
            "0.5",
            "1.0001kB",
            "1.3B",
            "-1",
            "+1",
            "1XB",
            "1Mbit",
            "1Mb/s",
            "1 M B",
            "1.2.3",
            "1e6",
            "abc",
            "1mib2",
            "18446744073709551616",
            "99999999TB",
        ] {
            let e = parse_size(bad).expect_err(bad);
            let text = e.to_string();
            assert!(text.contains("size"), "{bad}: {text}");
            assert!(text.contains(&format!("{bad:?}")), "{bad}: {text}");
        }
        let unit = parse_size("1XB").unwrap_err().to_string();
        assert!(unit.contains("KiB") && unit.contains("MB"), "{unit}");
        assert!(parse_size("0.5")
            .unwrap_err()
            .to_string()
            .contains("whole number"));
        assert!(parse_size("0")
            .unwrap_err()
            .to_string()
            .contains("at least 1 B"));
    }
}
