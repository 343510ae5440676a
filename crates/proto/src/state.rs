//! The connection state machine of the papers (seed 001 Table 1, seed 002 Table II), as a
//! transition table so each row can be tested on its own.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Closed,
    Listen,
    AsynSent,
    Established,
    AfinSent,
    AfinRcvd,
}

/// Events of the papers' table (plus `DataRx`: any data TPDU, which establishes a listener
/// when the ASYN itself was lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateEvent {
    AppConn,
    AppListen,
    AppClose,
    AsynRx,
    DataRx,
    AsynAckRx,
    AckRx,
    MackRx,
    NackRx,
    AfinRx,
    AfinAckRx,
    CloseTo,
    ListenTo,
}

/// What the protocol does on a transition, besides changing state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    /// Send the ASYN (with data if there is some).
    SendAsyn,
    /// Acknowledge the ASYN: ASYN + MACK bits.
    SendAsynAck,
    /// Send AFIN after the queued data.
    SendAfin,
    /// Acknowledge the AFIN and start LISTEN_TO.
    SendAfinAck,
    /// Release the connection.
    Release,
}

/// The transition table. `None`: the event does not change the state (it is handled by the
/// error-control parts, or ignored).
pub fn transition(state: State, event: StateEvent) -> Option<(State, Action)> {
    use Action as A;
    use State::*;
    use StateEvent as E;
    Some(match (state, event) {
        (Closed, E::AppConn) => (AsynSent, A::SendAsyn),
        (Closed, E::AppListen) => (Listen, A::None),
        (Listen, E::AsynRx) | (Listen, E::DataRx) => (Established, A::SendAsynAck),
        (AsynSent, E::AsynAckRx) | (AsynSent, E::MackRx) | (AsynSent, E::AckRx) => {
            (Established, A::None)
        }
        // A NACK also proves the receiver holds the connection.
        (AsynSent, E::NackRx) => (Established, A::None),
        (AsynSent, E::AppClose) | (Established, E::AppClose) => (AfinSent, A::SendAfin),
        (Established, E::AfinRx) | (AfinSent, E::AfinRx) => (AfinRcvd, A::SendAfinAck),
        (AfinSent, E::AfinAckRx) => (Closed, A::Release),
        (AfinSent, E::CloseTo) | (AsynSent, E::CloseTo) => (Closed, A::Release),
        (AfinRcvd, E::ListenTo) => (Listen, A::Release),
        _ => return None,
    })
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Closed => "CLOSED",
            State::Listen => "LISTEN",
            State::AsynSent => "ASYN_SENT",
            State::Established => "ESTABLISHED",
            State::AfinSent => "AFIN_SENT",
            State::AfinRcvd => "AFIN_RCVD",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::State::*;
    use super::StateEvent as E;
    use super::*;

    /// One row per line of the papers' state/transition table.
    #[test]
    fn papers_table_rows() {
        let rows = [
            (Closed, E::AppConn, AsynSent, Action::SendAsyn),
            (Closed, E::AppListen, Listen, Action::None),
            (Listen, E::AsynRx, Established, Action::SendAsynAck),
            (Listen, E::DataRx, Established, Action::SendAsynAck),
            (AsynSent, E::AsynAckRx, Established, Action::None),
            (AsynSent, E::MackRx, Established, Action::None),
            (AsynSent, E::AckRx, Established, Action::None),
            (Established, E::AppClose, AfinSent, Action::SendAfin),
            (Established, E::AfinRx, AfinRcvd, Action::SendAfinAck),
            (AfinSent, E::AfinAckRx, Closed, Action::Release),
            (AfinSent, E::CloseTo, Closed, Action::Release),
            (AfinRcvd, E::ListenTo, Listen, Action::Release),
        ];
        for (from, ev, to, act) in rows {
            assert_eq!(transition(from, ev), Some((to, act)), "{from} on {ev:?}");
        }
    }

    #[test]
    fn events_that_do_not_apply_leave_the_state() {
        assert_eq!(transition(Established, E::MackRx), None);
        assert_eq!(transition(Established, E::NackRx), None);
        assert_eq!(transition(Closed, E::AfinRx), None);
        assert_eq!(transition(Listen, E::AfinAckRx), None);
        assert_eq!(transition(AfinRcvd, E::DataRx), None);
    }
}
