//! Emit → parse is the identity for every message and signal the codec can build, and the
//! parsers survive any byte string.

use std::net::{Ipv4Addr, Ipv6Addr};

use aerotp_dlep::codec::{
    DataItem, Mac, Message, MessagePacket, ParseError, QueueParameter, QueueParameters, Signal,
    StatusCode, MAX_ITEMS,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    "[ -~é日]{0,40}"
}

fn mac() -> impl Strategy<Value = Mac> {
    prop_oneof![
        any::<[u8; 6]>().prop_map(Mac::eui48),
        any::<[u8; 8]>().prop_map(Mac::eui64),
    ]
}

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<[u8; 16]>().prop_map(Ipv6Addr::from)
}

fn queues() -> impl Strategy<Value = QueueParameters> {
    (
        0u8..16,
        vec(
            (any::<u8>(), 0u32..=0xff_ffff, vec(any::<u8>(), 0..6)).prop_map(
                |(index, size, classification)| QueueParameter {
                    index,
                    size,
                    classification,
                },
            ),
            0..5,
        ),
    )
        .prop_map(|(scale, queues)| QueueParameters { scale, queues })
}

fn item() -> impl Strategy<Value = DataItem> {
    prop_oneof![
        (any::<u8>(), text()).prop_map(|(c, text)| DataItem::Status {
            code: StatusCode(c),
            text
        }),
        (any::<bool>(), v4(), any::<Option<u16>>())
            .prop_map(|(tls, addr, port)| DataItem::Ipv4ConnectionPoint { tls, addr, port }),
        (any::<bool>(), v6(), any::<Option<u16>>())
            .prop_map(|(tls, addr, port)| DataItem::Ipv6ConnectionPoint { tls, addr, port }),
        (any::<bool>(), text()).prop_map(|(secured, description)| DataItem::PeerType {
            secured,
            description
        }),
        any::<u32>().prop_map(DataItem::HeartbeatInterval),
        vec(any::<u16>(), 0..8).prop_map(DataItem::ExtensionsSupported),
        mac().prop_map(DataItem::MacAddress),
        (any::<bool>(), v4()).prop_map(|(add, addr)| DataItem::Ipv4Address { add, addr }),
        (any::<bool>(), v6()).prop_map(|(add, addr)| DataItem::Ipv6Address { add, addr }),
        (any::<bool>(), v4(), 0u8..=32)
            .prop_map(|(add, addr, prefix)| DataItem::Ipv4AttachedSubnet { add, addr, prefix }),
        (any::<bool>(), v6(), 0u8..=128)
            .prop_map(|(add, addr, prefix)| DataItem::Ipv6AttachedSubnet { add, addr, prefix }),
        any::<u64>().prop_map(DataItem::MaxDataRateRx),
        any::<u64>().prop_map(DataItem::MaxDataRateTx),
        any::<u64>().prop_map(DataItem::CurrentDataRateRx),
        any::<u64>().prop_map(DataItem::CurrentDataRateTx),
        any::<u64>().prop_map(DataItem::Latency),
        (0u8..=100).prop_map(DataItem::Resources),
        (0u8..=100).prop_map(DataItem::RelativeLinkQualityRx),
        (0u8..=100).prop_map(DataItem::RelativeLinkQualityTx),
        any::<u16>().prop_map(DataItem::Mtu),
        queues().prop_map(DataItem::QueueParameters),
        vec(any::<u8>(), 1..6).prop_map(DataItem::Pause),
        vec(any::<u8>(), 1..6).prop_map(DataItem::Restart),
        (any::<u64>(), any::<u64>()).prop_map(|(max, min)| DataItem::LatencyRange { max, min }),
        // Types no parser claims: 29.. (LL-DLEP's private ids among them).
        (29u16.., vec(any::<u8>(), 0..32)).prop_map(|(ty, value)| DataItem::Unknown { ty, value }),
    ]
}

proptest! {
    #[test]
    fn message_round_trip(ty in any::<u16>(), items in vec(item(), 0..24)) {
        let m = Message::new(ty, items);
        let b = m.to_bytes().unwrap();
        prop_assert_eq!(MessagePacket::new_checked(&b).unwrap().items().count(), m.items.len());
        prop_assert_eq!(Message::parse(&b).unwrap(), m);
    }

    #[test]
    fn signal_round_trip(ty in any::<u16>(), items in vec(item(), 0..24)) {
        let s = Signal::new(ty, items);
        let b = s.to_bytes().unwrap();
        prop_assert_eq!(&b[..4], b"DLEP");
        prop_assert_eq!(Signal::parse(&b).unwrap(), s);
    }

    #[test]
    fn every_truncation_is_an_error(items in vec(item(), 1..8), cut in any::<prop::sample::Index>()) {
        let b = Message::new(7, items).to_bytes().unwrap();
        let n = cut.index(b.len());
        prop_assert!(Message::parse(&b[..n]).is_err());
    }

    #[test]
    fn parsers_take_any_bytes(data in vec(any::<u8>(), 0..300)) {
        aerotp_dlep::fuzz_parse(&data);
    }
}

#[test]
fn bad_lengths_are_typed_errors() {
    // Current Data Rate Transmit with 7 bytes.
    let b = [0, 13, 0, 11, 0, 15, 0, 7, 0, 0, 0, 0, 0, 0, 1];
    assert!(matches!(
        Message::parse(&b),
        Err(ParseError::BadLength { ty: 15, len: 7, .. })
    ));
    // Resources over 100.
    let b = [0, 13, 0, 5, 0, 17, 0, 1, 101];
    assert!(matches!(
        Message::parse(&b),
        Err(ParseError::OutOfRange { ty: 17, .. })
    ));
    assert!(matches!(
        Signal::parse(b"DLEX\0\x01\0\0"),
        Err(ParseError::BadPrefix)
    ));
    assert!(matches!(
        Message::parse(&[0, 16, 0, 0, 9]),
        Err(ParseError::Trailing { extra: 1, .. })
    ));
}

#[test]
fn item_count_is_bounded() {
    // 2000 empty unknown items fit in the 16-bit length but exceed MAX_ITEMS.
    let m = Message::new(
        13,
        (0..2000)
            .map(|_| DataItem::Unknown {
                ty: 9000,
                value: vec![],
            })
            .collect(),
    );
    let b = m.to_bytes().unwrap();
    assert!(matches!(
        Message::parse(&b),
        Err(ParseError::TooManyItems { limit, .. }) if limit == MAX_ITEMS
    ));
}

#[test]
fn too_long_is_an_emit_error_and_leaves_the_buffer() {
    let m = Message::new(
        1,
        vec![DataItem::Status {
            code: StatusCode::SUCCESS,
            text: "x".repeat(70_000),
        }],
    );
    let mut out = vec![1, 2, 3];
    assert!(m.emit(&mut out).is_err());
    assert_eq!(out, vec![1, 2, 3]);
}
