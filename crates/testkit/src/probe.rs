//! What the loopback figure examples (`crates/net/examples/`) share: a count flag read from
//! the command line, and a process's resident memory from /proc.

/// The value of `--name N` on the command line, or `default`; a value that is not a count
/// stops the program with a message naming the flag (exit 2).
pub fn count_flag(name: &str, default: u64) -> u64 {
    let v: Vec<String> = std::env::args().collect();
    v.iter()
        .position(|a| a == name)
        .and_then(|i| v.get(i + 1))
        .map(|s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!("{name}: '{s}' is not a count");
                std::process::exit(2)
            })
        })
        .unwrap_or(default)
}

/// Peak and current resident memory of process `pid` (VmHWM, VmRSS), kB; 0 when unreadable.
pub fn memory_kb(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_resident_memory() {
        let (hwm, rss) = super::memory_kb(std::process::id());
        assert!(hwm >= rss && rss > 0, "{hwm} {rss}");
        assert_eq!(super::memory_kb(u32::MAX), (0, 0));
        assert_eq!(super::count_flag("--no-such-flag", 7), 7);
    }
}
