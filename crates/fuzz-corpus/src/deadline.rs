//! The deadline contract both two-endpoint targets check (`endpoint`, `keyed`): after
//! `handle_timeout(now)` and draining `poll_transmit(now)`, no deadline may stay at or before
//! `now`, within a few catch-up rounds after a jump — else a driver would spin.

use aerotp_proto::Endpoint;
use std::time::Duration;

/// Catch-up rounds of `handle_timeout` allowed after a jump before a deadline that stays at
/// or before `now` counts as a livelock.
const CATCH_UP_ROUNDS: usize = 8;

/// A target's world of two endpoints on a link it pumps.
pub(crate) trait TwoEnds {
    /// Both endpoints and the world's time.
    fn ends(&mut self) -> (&mut Endpoint, &mut Endpoint, Duration);
    /// Drains what both endpoints send onto the link; false if it gave up (a burst past the
    /// target's bound), which ends the check for this step.
    fn pump_link(&mut self) -> bool;

    /// Jumps both endpoints to `now` and checks the deadline contract.
    fn advance(&mut self) {
        for round in 0..=CATCH_UP_ROUNDS {
            let (a, b, now) = self.ends();
            a.handle_timeout(now);
            b.handle_timeout(now);
            if !self.pump_link() {
                return;
            }
            let (a, b, now) = self.ends();
            let late = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .find(|&t| t <= now);
            match late {
                None => return,
                Some(t) => assert!(
                    round < CATCH_UP_ROUNDS,
                    "deadline {t:?} at or before now {now:?} survives {} rounds of \
                     handle_timeout and poll_transmit: a driver would spin",
                    CATCH_UP_ROUNDS + 1
                ),
            }
        }
    }
}
