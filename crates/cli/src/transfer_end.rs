//! How a file transfer ends for the people waiting on it: what the receiver's verdict is
//! called (a transfer without a key is never "verified": an unauthenticated digest proves
//! nothing against someone on the path), how a receiver that cannot store the data tells its
//! sender why, and the goodput over the time the sender's user waited.

use std::time::Duration;

use crate::common::{human_rate, Verdict};

/// `aerotp send --help`: what its exit status says (docs/runtime.md, "Exit status").
pub const SEND_EXIT_HELP: &str = "Exits as soon as the receiver's verdict is in. Exit status:
  0  the mode's guarantee was met and the receiver has the file under its name
  1  local error (input, socket, address; the input shrank or grew during the send)
  2  bad command line
  3  nothing heard from the receiver within --connect-timeout
  4  the connection ended before the guarantee (reset, --silence-timeout, no verdict in a
     fully reliable mode)
  6  the receiver's end-to-end check failed (SHA-256 or byte count differs, no digest)
  7  the receiver could not store the file (directory removed or not writable, disk full);
     its reason is printed";

/// Exit status (send): the receiver could not store the file (its directory removed or not
/// writable, disk full); its reason is printed.
pub const EXIT_RECEIVER_STORE: i32 = 7;

/// How the reason of a receiver's reset begins when it cannot store the data (the rest is its
/// error). The sender recognises it and prints the rest as the receiver's reason.
pub const STORE_FAILED: &str = "receiver cannot store the data: ";

/// The RST reason a receiver sends when storing fails with `e`.
pub fn store_failed_reason(e: &anyhow::Error) -> String {
    format!("{STORE_FAILED}{e:#}")
}

/// `r`, or (storing failed) a reset that tells the sender why, and the error.
pub async fn store_or_tell<T>(
    conn: &aerotp_net::Connection,
    r: anyhow::Result<T>,
) -> anyhow::Result<T> {
    if let Err(e) = &r {
        crate::common::abort_and_flush(conn, &store_failed_reason(e)).await;
    }
    r
}

/// The receiver's close after its verdict: waits until the sender has acknowledged the verdict
/// and our close (`settled`), or until nothing at all has been heard from the sender for
/// `max(2 s, 6 RTTs)` while we retransmit: the sender exited and its last acknowledgement was
/// lost (it only exits once it has the verdict), or it is in an outage. The file is stored
/// either way, so the receiver then resets the connection (a sender still there learns why)
/// rather than wait for its silence bound.
pub async fn verdict_acknowledged(conn: &aerotp_net::Connection) -> aerotp_net::Report {
    let settled = conn.settled(false);
    tokio::pin!(settled);
    let mut heard = conn.stats().bytes_received_wire;
    let mut since = tokio::time::Instant::now();
    loop {
        tokio::select! {
            r = &mut settled => return r,
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let s = conn.stats();
        let quiet = Duration::from_secs(2).max(s.srtt * 6);
        if s.bytes_received_wire != heard {
            (heard, since) = (s.bytes_received_wire, tokio::time::Instant::now());
        } else if since.elapsed() >= quiet {
            crate::common::abort_and_flush(
                conn,
                &format!(
                    "the receiver stored the file and sent its verdict, then heard nothing \
                     from the sender for {:.1} s",
                    quiet.as_secs_f64()
                ),
            )
            .await;
            return conn.closed().await;
        }
    }
}

/// The receiver's own words, if a reset's `reason` says it could not store the data.
pub fn store_failure(reason: &str) -> Option<&str> {
    reason.strip_prefix(STORE_FAILED)
}

/// The verdict in words; `authenticated`: the transfer ran with a pre-shared key.
pub fn verdict_text(v: Verdict, authenticated: bool) -> &'static str {
    match v {
        Verdict::Verified if authenticated => {
            "verified (byte count and SHA-256 match; every TPDU authenticated with the key)"
        }
        Verdict::Verified => {
            "byte count and SHA-256 match; NOT authenticated (no --key-file: anyone on the \
             path could have changed the data and its digest together)"
        }
        v => v.describe(),
    }
}

/// The verdict as `--json` names it: `matched` for a keyless match, `verified` only with a key.
pub fn verdict_json(v: Verdict, authenticated: bool) -> String {
    match v {
        Verdict::Verified if !authenticated => "matched".into(),
        v => format!("{v:?}").to_lowercase(),
    }
}

/// Goodput of `bytes` over `waited` (from the start of the send to the receiver's verdict:
/// the time the user waited, set-up and the final acknowledgements included), in words.
pub fn goodput_text(bytes: u64, waited: Duration) -> String {
    format!(
        "goodput {} ({} bytes over the {:.2} s from the start of the send to the receiver's \
         verdict)",
        human_rate(goodput_bps(bytes, waited)),
        bytes,
        waited.as_secs_f64()
    )
}

pub fn goodput_bps(bytes: u64, waited: Duration) -> f64 {
    bytes as f64 * 8.0 / waited.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_keyless_output_says_verified() {
        for v in [
            Verdict::Verified,
            Verdict::Mismatch,
            Verdict::Incomplete,
            Verdict::NoDigest,
            Verdict::WriteFailed,
        ] {
            assert!(!verdict_text(v, false).contains("verified"), "{v:?}");
            assert_ne!(verdict_json(v, false), "verified", "{v:?}");
        }
        assert!(verdict_text(Verdict::Verified, false).contains("NOT authenticated"));
        assert!(verdict_text(Verdict::Verified, true).starts_with("verified"));
        assert_eq!(verdict_json(Verdict::Verified, true), "verified");
        assert_eq!(verdict_json(Verdict::Mismatch, true), "mismatch");
    }

    #[test]
    fn a_store_failure_round_trips_through_the_reset_reason() {
        let e = anyhow::anyhow!("No such file or directory (os error 2)")
            .context("cannot create /x/.f.1.aerotp-tmp");
        let r = store_failed_reason(&e);
        assert_eq!(
            store_failure(&r),
            Some("cannot create /x/.f.1.aerotp-tmp: No such file or directory (os error 2)")
        );
        assert_eq!(store_failure("sender gave up"), None);
    }

    #[test]
    fn goodput_is_over_the_time_waited() {
        let t = goodput_text(1_000_000, Duration::from_secs(2));
        assert!(
            t.starts_with("goodput 4.00 Mb/s") && t.contains("2.00 s"),
            "{t}"
        );
    }
}
