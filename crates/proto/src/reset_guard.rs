//! The state a connection keeps to take RSTs a blind attacker cannot forge cheaply, and what
//! an ended connection answers with (the rules: `connection::reset`, docs/spec.md §4 "RST").

use crate::close_outcome::CloseOutcome;
use aerotp_wire::Flags;
use std::time::Duration;

/// At most one challenge per connection per this interval (RFC 5961 §7): a flood of forged
/// in-window RSTs costs the peer one PROBE each 100 ms.
pub(crate) const CHALLENGE_INTERVAL: Duration = Duration::from_millis(100);

/// What this end did with the RSTs it received (docs/stats.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResetStats {
    /// RSTs taken: authenticated, or (no key) echoing this end's challenge.
    pub accepted: u64,
    /// RSTs ignored: their TPDU number cannot be the peer's next (no key).
    pub ignored: u64,
    /// In-window RSTs that echoed nothing of this end's (no key): each was answered with a
    /// challenge, or found one already out.
    pub challenged: u64,
    /// Challenges sent.
    pub challenges_sent: u64,
    /// AFINACKs for an AFIN this end never sent (no key): the peer took a forged AFIN.
    pub forged_fins: u64,
}

/// A connection's side of the above.
#[derive(Debug, Default)]
pub(crate) struct ResetGuard {
    /// The endpoint authenticates every TPDU (a key): RSTs are taken as they come.
    pub authenticated: bool,
    /// Added to this end's 32-bit microsecond clock (random per connection).
    pub clock_offset: u32,
    /// `timestamp` of the latest TPDU heard from the peer (not a RST): the RSTs this end sends
    /// echo it.
    pub peer_ts: u32,
    /// The latest challenge: its timestamp, and when it went.
    pub challenge: Option<(u32, Duration)>,
    /// A challenge is due.
    pub due: bool,
    pub stats: ResetStats,
}

/// A RST proper: not a repair (`RST | RPT`) nor a CHALLENGE (`ASYN | RST`).
pub(crate) fn is_reset(flags: Flags) -> bool {
    flags.contains(Flags::RST) && !flags.is_repair() && !flags.is_challenge()
}

/// What an ended connection answers its peer's TPDUs with, by how it ended: nothing after a
/// finished close (the final acknowledgement goes instead) or to a peer never proven.
pub(crate) fn answer_for(outcome: &CloseOutcome) -> Option<String> {
    Some(match outcome {
        CloseOutcome::Finished { .. } | CloseOutcome::SetupTimeout => return None,
        CloseOutcome::Reset(_) => "connection reset: this end took the peer's reset".into(),
        CloseOutcome::IdleTimeout => "connection closed: nothing heard for the idle timeout".into(),
        CloseOutcome::CloseTimeout => {
            "connection closed: the AFIN was not acknowledged within the close timeout".into()
        }
        CloseOutcome::Aborted => "connection aborted".into(),
    })
}
