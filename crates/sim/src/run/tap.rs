//! The two endpoints' addresses and the capture hook: what a tap sees of a run.

pub(super) use aerotp_pair::Dir;
use std::net::SocketAddr;
use std::time::Duration;

/// The port both endpoints use (the receiver listens on it).
pub(super) const PORT: u16 = 7000;

/// The sending endpoint's address in every run (what a tap sees as its source).
pub fn addr_sender() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 9000))
}
pub(super) fn addr_receiver() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], 9000))
}

/// The sender's and the receiver's addresses on path `i` when the engine stripes
/// (`Striping::Engine`): 10.0.i.1 and 10.0.i.2; path 0's are `addr_sender` and
/// `addr_receiver`.
pub(super) fn path_addrs(i: usize) -> (SocketAddr, SocketAddr) {
    let i = u8::try_from(i).unwrap_or(u8::MAX);
    (
        SocketAddr::from(([10, 0, i, 1], 9000)),
        SocketAddr::from(([10, 0, i, 2], 9000)),
    )
}

/// Where a capture hook saw a datagram: as an endpoint sent it (before the link) or as it
/// arrived at the other endpoint (after the link: possibly corrupted, reordered or never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapPoint {
    Sent,
    Arrived,
}

/// A capture hook (`aerotp sim --pcap`): called with every datagram either endpoint sends and
/// every datagram the link delivers, in virtual time. It cannot change the run: it sees copies.
pub trait Tap {
    fn datagram(
        &mut self,
        point: TapPoint,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    );

    /// One endpoint's connection after a step of the run (`side`: "sender" or "receiver";
    /// `--qlog` writes what changed). Captures ignore it.
    fn engine(
        &mut self,
        _at: Duration,
        _side: &str,
        _conn: u64,
        _stats: &aerotp_proto::ConnectionStats,
        _state: aerotp_proto::State,
    ) {
    }

    /// A change a radio made to one of `side`'s paths (`--radio-follows-trace`), at the
    /// engine's time of it (`aerotp_proto::RadioChange::at`; `--qlog` writes it as the
    /// runtime's traces do). Captures ignore it.
    fn radio(&mut self, _side: &str, _change: &aerotp_proto::RadioChange) {}
}

/// Takes the radio changes `ep` applied since the last call and shows them to the tap, if
/// any, as `side`'s (taken either way, so the engine never holds them to its bound).
pub(super) fn tap_radio(
    tap: &mut Option<&mut dyn Tap>,
    side: &str,
    ep: &mut aerotp_proto::Endpoint,
) {
    while let Some(c) = ep.poll_radio_change() {
        if let Some(t) = tap.as_deref_mut() {
            t.radio(side, &c);
        }
    }
}

/// Shows the tap, if any, both endpoints' connections after a step.
pub(super) fn tap_engines(
    tap: &mut Option<&mut dyn Tap>,
    now: Duration,
    ends: [(
        &str,
        &aerotp_proto::Endpoint,
        Option<aerotp_proto::ConnectionHandle>,
    ); 2],
) {
    let Some(tap) = tap.as_deref_mut() else {
        return;
    };
    for (side, ep, h) in ends {
        let Some(h) = h else { continue };
        if let (Some(st), Some(state)) = (ep.stats(h), ep.state(h)) {
            tap.engine(now, side, h.0, &st, state);
        }
    }
}

/// Shows the tap, if any, a datagram at `point`, with the addresses of its direction.
pub(super) fn tap_datagram(
    tap: &mut Option<&mut dyn Tap>,
    point: TapPoint,
    now: Duration,
    dir: Dir,
    bytes: &[u8],
) {
    let Some(tap) = tap.as_deref_mut() else {
        return;
    };
    let (from, to) = match dir {
        Dir::Forward => (addr_sender(), addr_receiver()),
        Dir::Reverse => (addr_receiver(), addr_sender()),
    };
    tap.datagram(point, now, from, to, bytes);
}
