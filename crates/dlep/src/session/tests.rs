use super::*;
use crate::codec::ids::{extension, item};
use crate::codec::DataItem as D;

const MS: Duration = Duration::from_millis(1);

fn mac(n: u8) -> Mac {
    Mac::eui48([2, 0, 0, 0, 0, n])
}

fn bytes(ty: u16, items: Vec<DataItem>) -> Vec<u8> {
    Message::new(ty, items).to_bytes().unwrap()
}

fn ok() -> D {
    D::Status {
        code: StatusCode::SUCCESS,
        text: String::new(),
    }
}

fn sent(s: &mut Session) -> Vec<Message> {
    std::iter::from_fn(|| s.poll_transmit())
        .map(|b| Message::parse(&b).unwrap())
        .collect()
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn up_with(cfg: Config, extra: Vec<D>) -> Session {
    let mut s = Session::new(cfg, Duration::ZERO);
    let init = sent(&mut s);
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].ty, msg::SESSION_INITIALIZATION);
    let mut items = vec![
        ok(),
        D::PeerType {
            secured: false,
            description: "modem".into(),
        },
        D::HeartbeatInterval(1000),
        D::MaxDataRateTx(10_000_000),
        D::CurrentDataRateTx(5_000_000),
        D::Latency(2000),
    ];
    items.extend(extra);
    s.handle_bytes(10 * MS, &bytes(msg::SESSION_INITIALIZATION_RESPONSE, items));
    assert!(s.is_up());
    s
}

fn up() -> Session {
    up_with(Config::default(), vec![])
}

#[test]
fn session_initialization_carries_interval_peer_type_and_extensions() {
    let mut s = Session::new(Config::default(), Duration::ZERO);
    let m = &sent(&mut s)[0];
    assert!(m.items.contains(&D::HeartbeatInterval(5000)));
    assert!(m.items.iter().any(|i| matches!(i, D::PeerType { .. })));
    assert!(m.items.contains(&D::ExtensionsSupported(vec![
        extension::PAUSE,
        extension::LATENCY_RANGE,
        extension::LL_DLEP_LATENCY_RANGE
    ])));
}

#[test]
fn session_up_reports_modem_metrics() {
    let mut s = up();
    let ev = events(&mut s);
    let Event::SessionUp(p) = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(p.peer_type, "modem");
    assert_eq!(p.heartbeat_interval, Duration::from_secs(1));
    assert_eq!(p.metrics.current_rate_tx, Some(5_000_000));
    assert_eq!(p.metrics.latency_us, Some(2000));
}

#[test]
fn destination_up_update_down_with_responses() {
    let mut s = up();
    events(&mut s);
    let m = mac(1);
    s.handle_bytes(
        20 * MS,
        &bytes(
            msg::DESTINATION_UP,
            vec![
                D::MacAddress(m),
                D::CurrentDataRateTx(1_000_000),
                D::Ipv4Address {
                    add: true,
                    addr: [10, 0, 0, 1].into(),
                },
            ],
        ),
    );
    let r = sent(&mut s);
    assert_eq!(r[0].ty, msg::DESTINATION_UP_RESPONSE);
    assert!(r[0].items.contains(&D::MacAddress(m)));
    assert!(r[0].items.contains(&ok()));
    let ev = events(&mut s);
    let Event::DestinationUp(d) = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(d.metrics.current_rate_tx, Some(1_000_000));
    // The modem-wide values stand in for what the destination did not say.
    assert_eq!(d.metrics.max_rate_tx, Some(10_000_000));
    assert_eq!(d.addresses.ipv4, vec![std::net::Ipv4Addr::new(10, 0, 0, 1)]);

    s.handle_bytes(
        30 * MS,
        &bytes(
            msg::DESTINATION_UPDATE,
            vec![D::MacAddress(m), D::CurrentDataRateTx(2_500_000)],
        ),
    );
    assert!(
        sent(&mut s).is_empty(),
        "Destination Update has no response"
    );
    let ev = events(&mut s);
    let Event::DestinationUpdate(d) = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(d.metrics.current_rate_tx, Some(2_500_000));
    assert_eq!(d.addresses.ipv4.len(), 1);

    s.handle_bytes(
        40 * MS,
        &bytes(msg::DESTINATION_DOWN, vec![D::MacAddress(m)]),
    );
    assert_eq!(sent(&mut s)[0].ty, msg::DESTINATION_DOWN_RESPONSE);
    assert_eq!(events(&mut s), vec![Event::DestinationDown { mac: m }]);
    assert_eq!(s.destinations().count(), 0);
}

#[test]
fn absurd_rates_are_anomalies_not_metrics() {
    let mut s = up();
    events(&mut s);
    let m = mac(2);
    s.handle_bytes(
        20 * MS,
        &bytes(
            msg::DESTINATION_UP,
            vec![
                D::MacAddress(m),
                D::CurrentDataRateTx(u64::MAX),
                D::MaxDataRateTx(0),
            ],
        ),
    );
    let ev = events(&mut s);
    assert!(ev.contains(&Event::Anomaly(Anomaly::Implausible {
        mac: Some(m),
        item: item::CURRENT_DATA_RATE_TX,
        value: u64::MAX
    })));
    assert!(ev.contains(&Event::Anomaly(Anomaly::Implausible {
        mac: Some(m),
        item: item::MAX_DATA_RATE_TX,
        value: 0
    })));
    // The destination keeps the modem-wide values instead.
    assert_eq!(
        s.destination(&m).unwrap().metrics.current_rate_tx,
        Some(5_000_000)
    );
    assert_eq!(
        s.destination(&m).unwrap().metrics.max_rate_tx,
        Some(10_000_000)
    );
    assert!(s.is_up());
}

#[test]
fn heartbeats_are_sent_and_silence_ends_the_session() {
    let mut s = up_with(
        Config {
            heartbeat_interval: Duration::from_millis(500),
            ..Config::default()
        },
        vec![],
    );
    events(&mut s);
    // Modem interval 1 s, two missed: dead 2 s after the last message (at 10 ms).
    let mut hb = 0;
    let mut t = 10 * MS;
    while t < Duration::from_millis(2000) {
        t = s.poll_timeout().unwrap();
        s.handle_timeout(t);
        hb += sent(&mut s)
            .iter()
            .filter(|m| m.ty == msg::HEARTBEAT)
            .count();
        if t >= Duration::from_millis(1500) {
            // The modem's heartbeat keeps it alive.
            break;
        }
    }
    assert_eq!(hb, 3, "heartbeats at 510, 1010, 1510 ms");
    s.handle_bytes(1600 * MS, &bytes(msg::HEARTBEAT, vec![]));
    assert!(s.is_up());
    s.handle_timeout(3599 * MS);
    assert!(s.is_up());
    s.handle_timeout(3600 * MS);
    let out = sent(&mut s);
    let term = out
        .iter()
        .find(|m| m.ty == msg::SESSION_TERMINATION)
        .unwrap();
    assert!(term
        .items
        .iter()
        .any(|i| matches!(i, D::Status { code, .. } if *code == StatusCode::TIMED_OUT)));
    let ev = events(&mut s);
    assert!(matches!(
        ev.last(),
        Some(Event::SessionLost {
            reason: LostReason::HeartbeatTimeout { .. },
            ..
        })
    ));
    // The Termination Response never comes: closed after the termination timeout.
    s.handle_timeout(4600 * MS);
    assert!(s.is_closed());
}

#[test]
fn init_timeout_and_init_rejected() {
    let mut s = Session::new(Config::default(), Duration::ZERO);
    sent(&mut s);
    s.handle_timeout(Duration::from_secs(5));
    assert!(matches!(
        events(&mut s)[..],
        [Event::SessionLost {
            reason: LostReason::InitTimeout,
            ..
        }]
    ));

    let mut s = Session::new(Config::default(), Duration::ZERO);
    sent(&mut s);
    let refuse = D::Status {
        code: StatusCode::REQUEST_DENIED,
        text: "busy".into(),
    };
    s.handle_bytes(
        MS,
        &bytes(msg::SESSION_INITIALIZATION_RESPONSE, vec![refuse]),
    );
    assert!(matches!(
        &events(&mut s)[..],
        [Event::SessionLost { reason: LostReason::InitRejected { status, .. }, .. }] if *status == StatusCode::REQUEST_DENIED
    ));
}

#[test]
fn garbage_and_unknown_messages_terminate_with_the_rfc_status() {
    for (input, status) in [
        // A Destination Up whose only item is truncated.
        (vec![0, 7, 0, 3, 0, 7, 0], StatusCode::INVALID_DATA),
        (bytes(999, vec![]), StatusCode::UNKNOWN_MESSAGE),
        (
            bytes(msg::SESSION_INITIALIZATION, vec![]),
            StatusCode::UNEXPECTED_MESSAGE,
        ),
        (bytes(msg::DESTINATION_UP, vec![]), StatusCode::INVALID_DATA),
        (
            bytes(
                msg::DESTINATION_UP,
                vec![D::Unknown {
                    ty: item::MAC_ADDRESS,
                    value: vec![1],
                }],
            ),
            StatusCode::INVALID_DATA,
        ),
    ] {
        let mut s = up();
        events(&mut s);
        s.handle_bytes(20 * MS, &input);
        let term = sent(&mut s);
        assert_eq!(term[0].ty, msg::SESSION_TERMINATION, "{input:?}");
        assert!(
            term[0]
                .items
                .iter()
                .any(|i| matches!(i, D::Status { code, .. } if *code == status)),
            "{input:?}: {term:?}"
        );
        let ev = events(&mut s);
        assert!(
            matches!(&ev[..], [Event::SessionLost { reason: LostReason::ProtocolError { status: st, .. }, .. }] if *st == status),
            "{ev:?}"
        );
        // The modem answers; then the session is closed and reads nothing more.
        s.handle_bytes(30 * MS, &bytes(msg::SESSION_TERMINATION_RESPONSE, vec![]));
        assert!(s.is_closed());
    }
}

#[test]
fn messages_split_and_joined_anywhere_are_read_alike() {
    let m = mac(3);
    let mut stream = bytes(
        msg::DESTINATION_UP,
        vec![D::MacAddress(m), D::CurrentDataRateTx(7)],
    );
    stream.extend(bytes(msg::HEARTBEAT, vec![]));
    stream.extend(bytes(
        msg::DESTINATION_UPDATE,
        vec![D::MacAddress(m), D::CurrentDataRateTx(9)],
    ));
    for chunk in 1..stream.len() {
        let mut s = up();
        events(&mut s);
        for c in stream.chunks(chunk) {
            s.handle_bytes(20 * MS, c);
        }
        let ev = events(&mut s);
        assert_eq!(ev.len(), 2, "chunk {chunk}: {ev:?}");
        assert_eq!(s.destination(&m).unwrap().metrics.current_rate_tx, Some(9));
    }
}

#[test]
fn peer_termination_is_answered() {
    let mut s = up();
    events(&mut s);
    s.handle_bytes(
        20 * MS,
        &bytes(msg::DESTINATION_UP, vec![D::MacAddress(mac(1))]),
    );
    sent(&mut s);
    events(&mut s);
    let bye = D::Status {
        code: StatusCode::SUCCESS,
        text: "bye".into(),
    };
    s.handle_bytes(30 * MS, &bytes(msg::SESSION_TERMINATION, vec![bye]));
    assert_eq!(sent(&mut s)[0].ty, msg::SESSION_TERMINATION_RESPONSE);
    assert_eq!(
        events(&mut s),
        vec![Event::SessionLost {
            reason: LostReason::PeerTerminated {
                status: StatusCode::SUCCESS,
                text: "bye".into()
            },
            destinations: vec![mac(1)]
        }]
    );
    assert!(s.is_closed());
}

#[test]
fn pause_and_restart_per_destination_and_session_wide() {
    let mut s = up();
    events(&mut s);
    let m = mac(4);
    s.handle_bytes(20 * MS, &bytes(msg::DESTINATION_UP, vec![D::MacAddress(m)]));
    events(&mut s);
    s.handle_bytes(
        30 * MS,
        &bytes(
            msg::DESTINATION_UPDATE,
            vec![D::MacAddress(m), D::Pause(vec![255])],
        ),
    );
    let ev = events(&mut s);
    assert!(ev.contains(&Event::Pause {
        mac: Some(m),
        queues: vec![255]
    }));
    assert_eq!(s.destination(&m).unwrap().paused, vec![255]);
    s.handle_bytes(
        40 * MS,
        &bytes(
            msg::DESTINATION_UPDATE,
            vec![D::MacAddress(m), D::Restart(vec![255])],
        ),
    );
    assert!(events(&mut s).contains(&Event::Restart {
        mac: Some(m),
        queues: vec![255]
    }));
    assert!(s.destination(&m).unwrap().paused.is_empty());
    s.handle_bytes(
        50 * MS,
        &bytes(msg::SESSION_UPDATE, vec![D::Pause(vec![0, 1])]),
    );
    assert_eq!(
        sent(&mut s).last().unwrap().ty,
        msg::SESSION_UPDATE_RESPONSE
    );
    assert!(events(&mut s).contains(&Event::Pause {
        mac: None,
        queues: vec![0, 1]
    }));
}

#[test]
fn destination_table_is_capped() {
    let mut s = up_with(
        Config {
            max_destinations: 2,
            ..Config::default()
        },
        vec![],
    );
    for n in 0..3 {
        s.handle_bytes(
            20 * MS,
            &bytes(msg::DESTINATION_UP, vec![D::MacAddress(mac(n))]),
        );
    }
    let r = sent(&mut s);
    assert!(r[2]
        .items
        .iter()
        .any(|i| matches!(i, D::Status { code, .. } if *code == StatusCode::REQUEST_DENIED)));
    assert_eq!(s.destinations().count(), 2);
    // Updates for the refused destination are ignored, not fatal.
    s.handle_bytes(
        30 * MS,
        &bytes(
            msg::DESTINATION_UPDATE,
            vec![D::MacAddress(mac(2)), D::CurrentDataRateTx(1)],
        ),
    );
    assert!(s.is_up());
}

#[test]
fn update_flood_coalesces_and_an_unpolled_consumer_drops_the_session() {
    let mut s = up_with(
        Config {
            event_capacity: 4,
            ..Config::default()
        },
        vec![],
    );
    s.handle_bytes(
        20 * MS,
        &bytes(msg::DESTINATION_UP, vec![D::MacAddress(mac(1))]),
    );
    for r in 1..=1000u64 {
        s.handle_bytes(
            30 * MS,
            &bytes(
                msg::DESTINATION_UPDATE,
                vec![D::MacAddress(mac(1)), D::CurrentDataRateTx(r)],
            ),
        );
    }
    assert!(s.is_up());
    let ev = events(&mut s);
    assert!(ev.len() <= 8, "{}", ev.len());
    let Some(Event::DestinationUpdate(d)) = ev.last() else {
        panic!("{ev:?}")
    };
    assert_eq!(
        d.metrics.current_rate_tx,
        Some(1000),
        "the latest state survives"
    );
    assert!(s.stats().events_coalesced > 900);
    // Up/Down flapping cannot be coalesced: past twice the capacity the session gives up.
    for n in 0..20 {
        s.handle_bytes(
            40 * MS,
            &bytes(msg::DESTINATION_DOWN, vec![D::MacAddress(mac(1))]),
        );
        s.handle_bytes(
            40 * MS,
            &bytes(msg::DESTINATION_UP, vec![D::MacAddress(mac(1)), D::Mtu(n)]),
        );
    }
    assert!(s.is_closed());
    let ev = events(&mut s);
    assert!(matches!(
        ev.last(),
        Some(Event::SessionLost {
            reason: LostReason::Overloaded,
            ..
        })
    ));
}

#[test]
fn ll_dlep_private_latency_range_is_read_when_negotiated() {
    let range = |max: u64, min: u64| {
        let mut v = max.to_be_bytes().to_vec();
        v.extend(min.to_be_bytes());
        D::Unknown {
            ty: item::LL_DLEP_LATENCY_RANGE,
            value: v,
        }
    };
    let mut s = up_with(
        Config::default(),
        vec![
            D::ExtensionsSupported(vec![extension::LL_DLEP_LATENCY_RANGE]),
            range(900, 100),
        ],
    );
    assert_eq!(s.peer().unwrap().metrics.latency_range_us, Some((100, 900)));
    events(&mut s);
    s.handle_bytes(
        20 * MS,
        &bytes(
            msg::DESTINATION_UP,
            vec![D::MacAddress(mac(1)), D::LatencyRange { max: 50, min: 10 }],
        ),
    );
    assert_eq!(
        s.destination(&mac(1)).unwrap().metrics.latency_range_us,
        Some((10, 50))
    );
    // Without the extension, the private id is just an unknown item.
    let s = up_with(Config::default(), vec![range(900, 100)]);
    assert_eq!(s.peer().unwrap().metrics.latency_range_us, None);
}

#[test]
fn close_sends_termination_and_link_characteristics_round_trip() {
    let mut s = up();
    events(&mut s);
    let m = mac(5);
    assert!(!s.request_link_characteristics(m, Some(1), None));
    s.handle_bytes(20 * MS, &bytes(msg::DESTINATION_UP, vec![D::MacAddress(m)]));
    sent(&mut s);
    events(&mut s);
    assert!(s.request_link_characteristics(m, Some(3_000_000), Some(100)));
    let req = sent(&mut s);
    assert_eq!(req[0].ty, msg::LINK_CHARACTERISTICS_REQUEST);
    assert!(req[0].items.contains(&D::CurrentDataRateTx(3_000_000)));
    s.handle_bytes(
        30 * MS,
        &bytes(
            msg::LINK_CHARACTERISTICS_RESPONSE,
            vec![D::MacAddress(m), D::CurrentDataRateTx(2_000_000), ok()],
        ),
    );
    let ev = events(&mut s);
    assert!(ev.iter().any(|e| matches!(e, Event::LinkCharacteristics { mac, status, metrics } if *mac == m && *status == StatusCode::SUCCESS && metrics.current_rate_tx == Some(2_000_000))));
    s.close(40 * MS);
    assert_eq!(sent(&mut s)[0].ty, msg::SESSION_TERMINATION);
    assert!(matches!(
        events(&mut s)[..],
        [Event::SessionLost {
            reason: LostReason::LocalShutdown,
            ..
        }]
    ));
    // A heartbeat still in flight, then the response, in one read.
    let mut tail = bytes(msg::HEARTBEAT, vec![]);
    tail.extend(bytes(msg::SESSION_TERMINATION_RESPONSE, vec![]));
    s.handle_bytes(50 * MS, &tail);
    assert!(s.is_closed());
}

#[test]
fn eof_loses_the_session_once() {
    let mut s = up();
    events(&mut s);
    s.handle_eof(20 * MS);
    s.handle_eof(30 * MS);
    s.handle_io_error("x".into());
    assert!(matches!(
        events(&mut s)[..],
        [Event::SessionLost {
            reason: LostReason::ConnectionClosed,
            ..
        }]
    ));
    assert!(s.is_closed());
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn extreme_configuration_and_intervals_do_not_overflow() {
    let cfg = Config {
        heartbeat_interval: Duration::MAX,
        missed_heartbeats: u32::MAX,
        init_timeout: Duration::MAX,
        termination_timeout: Duration::MAX,
        max_latency: Duration::MAX,
        event_capacity: 0,
        ..Config::default()
    };
    let mut s = Session::new(cfg, Duration::MAX / 2);
    sent(&mut s);
    s.handle_bytes(
        Duration::MAX / 2,
        &bytes(
            msg::SESSION_INITIALIZATION_RESPONSE,
            vec![ok(), D::HeartbeatInterval(u32::MAX), D::Latency(u64::MAX)],
        ),
    );
    assert!(s.is_up());
    let t = s.poll_timeout().unwrap();
    s.handle_timeout(t);
    s.handle_timeout(Duration::MAX);
    s.close(Duration::MAX);
    s.handle_timeout(Duration::MAX);
    assert!(s.is_closed());
}
