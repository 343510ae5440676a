//! The body of the cargo-fuzz target `dlep_parse` (fuzz/fuzz_targets/dlep_parse.rs), public so
//! that the stable test `tests/fuzz_corpus.rs` replays the committed corpus with it too.

use std::time::Duration;

use crate::codec::{EmitError, Message, Signal};
use crate::session::{Config, Session};

/// Runs any input through every parser and a router session; panics only when an invariant
/// breaks: whatever parses must emit and re-parse to itself, and a session fed the bytes (in
/// chunks, with time moving on) must stay within its bounds.
pub fn fuzz_parse(data: &[u8]) {
    round_trip(data);
    let mut s = Session::new(
        Config {
            event_capacity: 64,
            ..Config::default()
        },
        Duration::ZERO,
    );
    // Pretend the session came up, so that destination messages are read too.
    let mut init = Vec::new();
    let up = Message::new(
        crate::codec::ids::message::SESSION_INITIALIZATION_RESPONSE,
        vec![
            crate::codec::DataItem::Status {
                code: crate::StatusCode::SUCCESS,
                text: String::new(),
            },
            crate::codec::DataItem::HeartbeatInterval(1000),
        ],
    );
    let _ = up.emit(&mut init);
    s.handle_bytes(Duration::ZERO, &init);
    let chunk = 1 + data.first().map_or(0, |b| *b as usize % 97);
    for (i, c) in data.chunks(chunk).enumerate() {
        let now = Duration::from_millis(i as u64 * 7);
        s.handle_bytes(now, c);
        s.handle_timeout(now);
        while s.poll_transmit().is_some() {}
        assert!(s.pending_events() <= 2 * 64 + 1, "event queue unbounded");
    }
    while s.poll_event().is_some() {}
    assert!(s.destinations().count() <= Config::default().max_destinations);
}

fn round_trip(data: &[u8]) {
    if let Ok(m) = Message::parse(data) {
        match m.to_bytes() {
            Ok(b) => assert_eq!(Message::parse(&b).as_ref(), Ok(&m), "message round trip"),
            // Lossy UTF-8 can lengthen a text past the 16-bit length.
            Err(EmitError::TooLong { .. }) => {}
            Err(e) => panic!("a parsed message does not emit: {e}"),
        }
    }
    if let Ok(s) = Signal::parse(data) {
        match s.to_bytes() {
            Ok(b) => assert_eq!(Signal::parse(&b).as_ref(), Ok(&s), "signal round trip"),
            Err(EmitError::TooLong { .. }) => {}
            Err(e) => panic!("a parsed signal does not emit: {e}"),
        }
    }
}
