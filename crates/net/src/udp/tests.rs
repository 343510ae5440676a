//! Tests of the batched UDP I/O: trains and their bounds, GSO and GRO over loopback.
use super::*;

fn addr(p: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], p))
}

#[test]
fn trains_group_equal_datagrams_to_one_destination() {
    let mut o = Outbox::default();
    for _ in 0..3 {
        o.push(addr(1), &[1; 100], MAX_SEGMENTS);
    }
    o.push(addr(1), &[2; 40], MAX_SEGMENTS); // shorter: closes the train
    o.push(addr(1), &[3; 40], MAX_SEGMENTS); // new train
    o.push(addr(2), &[4; 40], MAX_SEGMENTS); // other destination
    o.push(addr(2), &[5; 60], MAX_SEGMENTS); // longer than the segment
    let t = o.take();
    let shape: Vec<(u16, usize, usize, usize)> = t
        .iter()
        .map(|t| (t.dest.port(), t.segment, t.count, t.buf.len()))
        .collect();
    assert_eq!(
        shape,
        vec![
            (1, 100, 4, 340),
            (1, 40, 1, 40),
            (2, 40, 1, 40),
            (2, 60, 1, 60)
        ]
    );
    let d: Vec<usize> = t[0].datagrams().map(<[u8]>::len).collect();
    assert_eq!(d, vec![100, 100, 100, 40]);
    o.recycle(t);
    assert!(o.is_empty());
}

/// The driver ends a batch only once its last train is full (`driver::drive`): 64
/// datagrams of 1500 bytes are a full train of 43 and one of 21 that has room for 22 more.
#[test]
fn the_last_train_has_room_until_it_holds_what_a_train_may() {
    let mut o = Outbox::default();
    assert!(!o.last_has_room(MAX_SEGMENTS), "no train yet");
    for _ in 0..64 {
        o.push(addr(1), &[1; 1500], MAX_SEGMENTS);
    }
    assert!(o.last_has_room(MAX_SEGMENTS));
    let mut more = 0;
    while o.last_has_room(MAX_SEGMENTS) {
        o.push(addr(1), &[1; 1500], MAX_SEGMENTS);
        more += 1;
    }
    assert_eq!(more, 22);
    let counts: Vec<usize> = o.take().iter().map(|t| t.count).collect();
    assert_eq!(counts, [43, 43]);
    // Without GSO (one datagram a train) a train never has room.
    o.push(addr(1), &[1; 1500], 1);
    assert!(!o.last_has_room(1));
}

#[test]
fn a_datagram_written_into_a_train_it_may_not_join_moves_out_intact() {
    let mut o = Outbox::default();
    o.push(addr(1), &[1; 100], MAX_SEGMENTS);
    let (to, d) = o
        .fill(MAX_SEGMENTS, |b| {
            b.extend_from_slice(&[9; 100]);
            Some((addr(2), None, 0))
        })
        .unwrap();
    assert_eq!((to, d), ((addr(2), None, 0), &[9u8; 100][..]));
    // Nothing written: nothing changes.
    assert!(o.fill(MAX_SEGMENTS, |_| None).is_none());
    assert!(o
        .fill(MAX_SEGMENTS, |b| {
            b.push(7);
            None
        })
        .is_none());
    let (_, d) = o
        .fill(MAX_SEGMENTS, |b| {
            b.extend_from_slice(&[8; 100]);
            Some((addr(2), None, 0))
        })
        .unwrap();
    assert_eq!(d, &[8u8; 100][..]);
    assert_eq!(o.datagrams, 3);
    let t = o.take();
    assert_eq!(t.len(), 2);
    assert_eq!((t[0].dest, &t[0].buf[..]), (addr(1), &[1u8; 100][..]));
    let second: Vec<&[u8]> = t[1].datagrams().collect();
    assert_eq!(second, vec![&[9u8; 100][..], &[8u8; 100][..]]);
}

/// Two paths to one peer address from two local addresses: their datagrams never share
/// a train (a train has one source).
#[test]
fn datagrams_from_another_local_address_start_a_train_of_their_own() {
    let mut o = Outbox::default();
    let (one, two) = (
        Some(IpAddr::from([127, 0, 0, 2])),
        Some(IpAddr::from([127, 0, 0, 3])),
    );
    for src in [one, one, two, two, one] {
        o.fill(MAX_SEGMENTS, |b| {
            b.extend_from_slice(&[1; 100]);
            Some((addr(1), src, 0))
        });
    }
    let t = o.take();
    let shape: Vec<_> = t.iter().map(|t| (t.src, t.count)).collect();
    assert_eq!(shape, [(one, 2), (two, 2), (one, 1)]);
}

/// Datagrams of two classes to one peer: a train has one DSCP mark, so a change of mark
/// starts a new train and every datagram keeps its own.
#[test]
fn datagrams_of_another_mark_start_a_train_of_their_own() {
    let mut o = Outbox::default();
    for tos in [0xb8, 0xb8, 0, 0, 0, 0xb8] {
        o.fill(MAX_SEGMENTS, |b| {
            b.extend_from_slice(&[1; 100]);
            Some((addr(1), None, tos))
        });
    }
    let shape: Vec<_> = o.take().iter().map(|t| (t.tos, t.count)).collect();
    assert_eq!(shape, [(0xb8, 2), (0, 3), (0xb8, 1)]);
}

#[test]
fn trains_are_bounded() {
    let mut o = Outbox::default();
    for _ in 0..200 {
        o.push(addr(1), &[0; 1500], MAX_SEGMENTS);
    }
    for t in &o.trains {
        assert!(t.count <= MAX_SEGMENTS && t.buf.len() <= MAX_TRAIN_BYTES);
    }
    assert_eq!(o.trains.iter().map(|t| t.count).sum::<usize>(), 200);
    let mut one = Outbox::default();
    for _ in 0..5 {
        one.push(addr(1), &[0; 10], 1);
    }
    assert_eq!(one.trains.len(), 5, "max_segments 1: no trains");
}

/// A train sent with GSO arrives as the same datagrams, whether the receiver reads it
/// whole (GRO) or the kernel cut it; with a source address set (`IP_PKTINFO` beside
/// `UDP_SEGMENT` in one `sendmsg`) it comes from that address, and a receiver on the
/// unspecified address reads the address it was sent to.
#[tokio::test]
async fn gso_train_arrives_as_the_same_datagrams() {
    for (gro_receiver, pktinfo) in [(true, false), (false, false), (true, true), (false, true)] {
        let any = if pktinfo { "0.0.0.0:0" } else { "127.0.0.1:0" };
        let a = UdpSocket::bind(any).await.unwrap();
        let b = UdpSocket::bind(any).await.unwrap();
        let port = b.local_addr().unwrap().port();
        // On loopback every 127/8 address is this host's.
        let (src, to): (IpAddr, IpAddr) = if pktinfo {
            ("127.0.0.7".parse().unwrap(), "127.0.0.9".parse().unwrap())
        } else {
            ("127.0.0.1".parse().unwrap(), "127.0.0.1".parse().unwrap())
        };
        let dest = SocketAddr::new(to, port);
        let mut tx = UdpIo::new(a, true, false);
        let rx = if gro_receiver {
            UdpIo::new(b, false, pktinfo)
        } else {
            if pktinfo {
                sys::enable_pktinfo(&b).unwrap();
            }
            UdpIo {
                socket: b,
                max_segments: 1,
                destinations: pktinfo,
            }
        };
        let mut o = Outbox::default();
        let sent: Vec<Vec<u8>> = (0..10u8)
            .map(|i| vec![i; if i == 9 { 700 } else { 1200 }])
            .collect();
        for d in &sent {
            o.push(dest, d, tx.max_segments());
        }
        for mut t in o.take() {
            t.src = pktinfo.then_some(src);
            assert_eq!(tx.send(&t).await, 0);
        }
        let mut got = Vec::new();
        let mut buf = BytesMut::new();
        while got.len() < sent.len() {
            rx.readable().await.unwrap();
            match rx.try_recv(&mut buf) {
                Ok(r) => {
                    assert_eq!(r.from.ip(), src, "pktinfo {pktinfo}");
                    assert_eq!(r.to, pktinfo.then_some(to), "pktinfo {pktinfo}");
                    got.extend(buf[..r.len].chunks(r.stride).map(<[u8]>::to_vec));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, sent, "GRO receiver: {gro_receiver}, pktinfo {pktinfo}");
    }
}

/// A GSO train with a DSCP mark, alone and beside a source address (`UDP_SEGMENT`,
/// `IP_PKTINFO` and `IP_TOS` in one `sendmsg`), and over IPv6 (`IPV6_TCLASS`): every
/// datagram the kernel cuts from it carries the mark.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn every_datagram_of_a_marked_train_carries_the_mark() {
    use aerotp_testkit::tos::{read_marked, tos_reader};
    for (bind, reader, src) in [
        ("127.0.0.1:0", "127.0.0.1:0", None),
        ("0.0.0.0:0", "127.0.0.1:0", Some("127.0.0.7")),
        ("[::1]:0", "[::1]:0", None),
    ] {
        let r = tos_reader(reader);
        let dest = r.local_addr().unwrap();
        let mut tx = UdpIo::new(UdpSocket::bind(bind).await.unwrap(), true, false);
        assert!(tx.max_segments() > 1, "GSO on loopback");
        let mut o = Outbox::default();
        for i in 0..6u8 {
            o.fill(tx.max_segments(), |b| {
                b.extend_from_slice(&[i; 1000]);
                Some((dest, src.map(|s| s.parse().unwrap()), 0x88))
            });
        }
        let trains = o.take();
        assert_eq!(trains.len(), 1, "one train");
        assert_eq!(tx.send(&trains[0]).await, 0);
        for i in 0..6u8 {
            let m = read_marked(&r, std::time::Duration::from_secs(2)).await;
            assert_eq!(m.data, vec![i; 1000], "{bind}");
            assert_eq!(m.tos, Some(0x88), "{bind} datagram {i}");
            if let Some(s) = src {
                assert_eq!(m.from.ip().to_string(), s);
            }
        }
    }
}

/// A path's local address that this host no longer has (a radio back with another
/// address): the datagrams still go, from routing's choice, so the peer sees the new
/// address and validates it.
#[tokio::test]
async fn a_source_address_gone_from_the_host_falls_back_to_routing() {
    let a = UdpSocket::bind("0.0.0.0:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let dest = b.local_addr().unwrap();
    let mut tx = UdpIo::new(a, false, true);
    let rx = UdpIo::new(b, false, false);
    let mut o = Outbox::default();
    o.fill(1, |buf| {
        buf.extend_from_slice(b"after the handover");
        Some((dest, Some("203.0.113.9".parse().unwrap()), 0))
    });
    for t in o.take() {
        assert_eq!(tx.send(&t).await, 0, "the datagram was not sent");
    }
    let mut buf = BytesMut::new();
    let r = loop {
        rx.readable().await.unwrap();
        match rx.try_recv(&mut buf) {
            Ok(r) => break r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(&buf[..r.len], b"after the handover");
    assert_eq!(r.from.ip(), "127.0.0.1".parse::<IpAddr>().unwrap());
}
