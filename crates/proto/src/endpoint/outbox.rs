//! What the endpoint holds for its caller between calls: events to poll, datagram-mode
//! messages to take, and TPDUs it made itself (answers to strangers, datagram-mode
//! messages) waiting for `poll_transmit`. Each queue is bounded, so a flood of arrivals
//! the caller does not drain costs no more than the bounds.

use super::{DatagramMsg, Event, PathAddr};
use crate::TrafficClass;
use std::collections::VecDeque;

/// Most queued answers (`Outbox::has_room_for_answer`): beyond them, further ones are not
/// sent.
const ANSWER_LIMIT: usize = 256;

/// A TPDU the endpoint made, encoded (and sealed), with where and in which class it goes.
pub(super) type Outgoing = (PathAddr, Option<TrafficClass>, Vec<u8>);

/// The endpoint's three queues and their bounds (`EndpointConfig::max_events`,
/// `EndpointConfig::max_datagrams`, `ANSWER_LIMIT`).
#[derive(Debug)]
pub(super) struct Outbox {
    events: VecDeque<Event>,
    datagrams_in: VecDeque<DatagramMsg>,
    outgoing: VecDeque<Outgoing>,
    max_events: usize,
    max_datagrams: usize,
}

impl Outbox {
    pub(super) fn new(max_events: usize, max_datagrams: usize) -> Outbox {
        Outbox {
            events: VecDeque::new(),
            datagrams_in: VecDeque::new(),
            outgoing: VecDeque::new(),
            max_events,
            max_datagrams,
        }
    }

    /// Queues `e` unless `max_events` are waiting (then it is dropped).
    pub(super) fn push_event(&mut self, e: Event) {
        if self.events.len() < self.max_events {
            self.events.push_back(e);
        }
    }

    pub(super) fn pop_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub(super) fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Queues a datagram-mode message for the application; false (not queued) when
    /// `max_datagrams` are waiting.
    pub(super) fn deliver(&mut self, m: DatagramMsg) -> bool {
        if self.datagrams_in.len() >= self.max_datagrams {
            return false;
        }
        self.datagrams_in.push_back(m);
        true
    }

    pub(super) fn take_datagram(&mut self) -> Option<DatagramMsg> {
        self.datagrams_in.pop_front()
    }

    /// TPDUs waiting to be sent, when `max_datagrams` or more are (a datagram-mode message
    /// is refused then); `None` when there is room.
    pub(super) fn outgoing_full(&self) -> Option<usize> {
        let n = self.outgoing.len();
        (n >= self.max_datagrams).then_some(n)
    }

    /// Whether another answer may be queued (fewer than `ANSWER_LIMIT` TPDUs wait).
    pub(super) fn has_room_for_answer(&self) -> bool {
        self.outgoing.len() < ANSWER_LIMIT
    }

    /// Queues a TPDU to send; the caller has checked the bound that applies to it.
    pub(super) fn push_outgoing(&mut self, t: Outgoing) {
        self.outgoing.push_back(t);
    }

    pub(super) fn pop_outgoing(&mut self) -> Option<Outgoing> {
        self.outgoing.pop_front()
    }

    pub(super) fn has_outgoing(&self) -> bool {
        !self.outgoing.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConnectionHandle;

    fn msg(n: u8) -> DatagramMsg {
        DatagramMsg {
            remote: "10.0.0.1:1".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            data: vec![n],
        }
    }

    #[test]
    fn events_and_datagrams_stop_at_their_bounds_and_come_out_in_order() {
        let mut o = Outbox::new(2, 1);
        for h in 1..=3 {
            o.push_event(Event::Readable(ConnectionHandle(h)));
        }
        assert!(matches!(
            o.pop_event(),
            Some(Event::Readable(ConnectionHandle(1)))
        ));
        assert!(matches!(
            o.pop_event(),
            Some(Event::Readable(ConnectionHandle(2)))
        ));
        assert!(o.pop_event().is_none(), "the third was over the bound");
        assert!(o.deliver(msg(1)));
        assert!(!o.deliver(msg(2)));
        assert_eq!(o.take_datagram().map(|m| m.data), Some(vec![1]));
        assert!(o.take_datagram().is_none());
    }

    #[test]
    fn outgoing_tpdus_have_two_bounds() {
        let to = PathAddr::from("10.0.0.2:9".parse::<std::net::SocketAddr>().unwrap());
        let mut o = Outbox::new(8, 3);
        for i in 0..3u8 {
            assert!(o.outgoing_full().is_none());
            o.push_outgoing((to, None, vec![i]));
        }
        assert_eq!(o.outgoing_full(), Some(3));
        assert!(o.has_room_for_answer());
        for i in 3..ANSWER_LIMIT {
            o.push_outgoing((to, None, vec![i as u8]));
        }
        assert!(!o.has_room_for_answer());
        assert_eq!(o.pop_outgoing().map(|t| t.2), Some(vec![0]));
        assert!(o.has_room_for_answer());
        assert!(o.has_outgoing());
    }
}
