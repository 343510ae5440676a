//! Tests of the control messages: each kind both ways, the layout against libc's `CMSG_*`
//! macros and the kernel, and the parser over arbitrary bytes (bounded, never panicking).
use super::*;
use proptest::prelude::*;

fn every_kind() -> Vec<Message> {
    vec![
        Message::Segment(1_200),
        Message::Gro(1_452),
        Message::Gro(-1),
        Message::PacketInfoV4 {
            ifindex: 3,
            local: Ipv4Addr::new(10, 0, 0, 1),
            dest: Ipv4Addr::new(192, 0, 2, 7),
        },
        Message::PacketInfoV6 {
            addr: "fd00::1".parse().unwrap(),
            ifindex: 9,
        },
        Message::Tos(0xb8),
        Message::TrafficClass(0x28),
        Message::OrigDst("203.0.113.5:7400".parse().unwrap()),
        Message::OrigDst(SocketAddr::V6(SocketAddrV6::new(
            "2001:db8::5".parse().unwrap(),
            443,
            0x12345,
            4,
        ))),
    ]
}

/// The walk libc's macros make over `c`'s bytes: level, type, data.
fn libc_walk(c: &mut Control) -> Vec<(i32, i32, Vec<u8>)> {
    // SAFETY: an all-zero msghdr is valid; the macros walk `c`'s space within
    // msg_controllen, and each message's data lies within its cmsg_len (checked by the
    // assertion before it is read).
    unsafe {
        let mut msg: libc::msghdr = zeroed();
        c.attach(&mut msg);
        let mut out = vec![];
        let mut h = libc::CMSG_FIRSTHDR(&msg);
        while !h.is_null() {
            let len = (*h).cmsg_len as usize;
            let data_at = libc::CMSG_DATA(h).offset_from(h.cast::<u8>()) as usize;
            assert!(data_at <= len && len <= SPACE);
            let data = std::slice::from_raw_parts(libc::CMSG_DATA(h), len - data_at).to_vec();
            out.push(((*h).cmsg_level, (*h).cmsg_type, data));
            h = libc::CMSG_NXTHDR(&msg, h);
        }
        out
    }
}

#[test]
fn each_kind_reads_back_as_written() {
    for m in every_kind() {
        let mut c = Control::new();
        c.push(&m).unwrap();
        assert_eq!(parse(c.as_bytes()).collect::<Vec<_>>(), vec![m], "{m:?}");
        // The space is CMSG_SPACE of the data, as the kernel counts it.
        let (_, _, _, n) = encode(&m);
        // SAFETY: CMSG_SPACE only computes a length.
        assert_eq!(c.as_bytes().len(), unsafe { libc::CMSG_SPACE(n as u32) }
            as usize);
    }
}

#[test]
fn the_layout_is_libcs() {
    // The send side's three messages (segment, IPv6 source, mark), as udp.rs writes them.
    let sent = [
        Message::Segment(1_000),
        Message::PacketInfoV6 {
            addr: "::1".parse().unwrap(),
            ifindex: 0,
        },
        Message::TrafficClass(0xb8),
    ];
    let mut c = Control::new();
    for m in &sent {
        c.push(m).unwrap();
    }
    let walk = libc_walk(&mut c);
    let kinds: Vec<(i32, i32)> = walk.iter().map(|w| (w.0, w.1)).collect();
    assert_eq!(
        kinds,
        vec![
            (libc::SOL_UDP, libc::UDP_SEGMENT),
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO),
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
        ]
    );
    assert_eq!(walk[0].2, 1_000u16.to_ne_bytes());
    // SAFETY: in6_pktinfo is plain data; the bytes are as long as it (asserted).
    let info: libc::in6_pktinfo = unsafe {
        assert_eq!(walk[1].2.len(), size_of::<libc::in6_pktinfo>());
        std::ptr::read_unaligned(walk[1].2.as_ptr().cast())
    };
    assert_eq!(info.ipi6_addr.s6_addr, Ipv6Addr::LOCALHOST.octets());
    assert_eq!(walk[2].2, 0xb8i32.to_ne_bytes());
    // And libc's structures read back through the parser.
    let v4 = libc::in_pktinfo {
        ipi_ifindex: 2,
        ipi_spec_dst: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        },
        ipi_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 9]),
        },
    };
    // SAFETY: in_pktinfo is plain data without padding.
    let raw = unsafe {
        std::slice::from_raw_parts((&v4 as *const libc::in_pktinfo).cast::<u8>(), 12).to_vec()
    };
    assert_eq!(
        decode(libc::IPPROTO_IP, libc::IP_PKTINFO, &raw),
        Some(Message::PacketInfoV4 {
            ifindex: 2,
            local: Ipv4Addr::LOCALHOST,
            dest: Ipv4Addr::new(127, 0, 0, 9),
        })
    );
}

#[test]
fn the_kernels_one_byte_tos_and_unknown_or_misshapen_messages() {
    // The kernel reports IP_TOS in one byte.
    assert_eq!(
        decode(libc::IPPROTO_IP, libc::IP_TOS, &[0x2e]),
        Some(Message::Tos(0x2e))
    );
    // Wrong lengths and unknown kinds are passed over; the walk goes on past them.
    assert_eq!(decode(libc::SOL_UDP, libc::UDP_GRO, &[1, 0]), None);
    assert_eq!(decode(libc::IPPROTO_IP, libc::IP_PKTINFO, &[0; 11]), None);
    assert_eq!(decode(libc::SOL_IP, libc::IP_ORIGDSTADDR, &[0; 16]), None); // family 0
    assert_eq!(decode(libc::SOL_SOCKET, libc::SCM_RIGHTS, &[0; 4]), None);
    let mut c = Control::new();
    c.push(&Message::Gro(9)).unwrap();
    let mut b = c.as_bytes().to_vec();
    let level = std::mem::offset_of!(libc::cmsghdr, cmsg_level);
    b[level..level + 4].copy_from_slice(&7i32.to_ne_bytes()); // no such level
    b.extend_from_slice(c.as_bytes());
    assert_eq!(parse(&b).collect::<Vec<_>>(), vec![Message::Gro(9)]);
}

#[test]
fn what_does_not_fit_is_refused() {
    let mut c = Control::new();
    let big = Message::OrigDst("[::1]:1".parse().unwrap()); // CMSG_SPACE(28) = 48
    c.push(&big).unwrap();
    c.push(&big).unwrap();
    let e = c.push(&big).unwrap_err();
    assert!(e.to_string().contains("do not fit"), "{e}");
    assert_eq!(
        c.as_bytes().len(),
        96,
        "a refused message leaves the others as they were"
    );
    assert_eq!(parse(c.as_bytes()).count(), 2);
}

#[test]
fn a_control_length_past_the_space_is_clamped() {
    let mut c = Control::new();
    c.push(&Message::Tos(4)).unwrap();
    // SAFETY: an all-zero msghdr is valid.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_controllen = (SPACE * 4) as _;
    c.received(&msg);
    assert_eq!(c.messages().collect::<Vec<_>>(), vec![Message::Tos(4)]);
}

/// The kernel writes and reads these messages as the module does: a datagram sent with a
/// source address and a mark arrives with that destination address and that mark, on each
/// family.
#[test]
fn the_kernel_reads_what_is_written_and_writes_what_is_read() {
    for (at, ip) in [("127.0.0.1:0", "127.0.0.1"), ("[::1]:0", "::1")] {
        let rx = std::net::UdpSocket::bind(at).unwrap();
        let tx = std::net::UdpSocket::bind(at).unwrap();
        let v4 = rx.local_addr().unwrap().is_ipv4();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&rx);
        let on = |level, name| crate::socket::set_int_option(fd, level, name, 1).unwrap();
        if v4 {
            on(libc::IPPROTO_IP, libc::IP_PKTINFO);
            on(libc::IPPROTO_IP, libc::IP_RECVTOS);
        } else {
            on(libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO);
            on(libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS);
        }
        let ip: std::net::IpAddr = ip.parse().unwrap();
        let mut c = Control::new();
        match ip {
            std::net::IpAddr::V4(local) => {
                c.push(&Message::PacketInfoV4 {
                    ifindex: 0,
                    local,
                    dest: Ipv4Addr::UNSPECIFIED,
                })
                .unwrap();
                c.push(&Message::Tos(0xb8)).unwrap();
            }
            std::net::IpAddr::V6(addr) => {
                c.push(&Message::PacketInfoV6 { addr, ifindex: 0 }).unwrap();
                c.push(&Message::TrafficClass(0xb8)).unwrap();
            }
        }
        let dest = socket2::SockAddr::from(rx.local_addr().unwrap());
        let payload = *b"marked";
        assert_eq!(sendmsg(&tx, &dest, &payload, &c).unwrap(), payload.len());
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 64];
        let mut back = Control::new();
        let r = recvmsg_into(&rx, &mut buf, &mut back).unwrap();
        assert_eq!(&buf[..r.len], &payload);
        assert_eq!(r.from.as_socket(), Some(tx.local_addr().unwrap()));
        assert_eq!(r.flags & libc::MSG_TRUNC, 0);
        let got: Vec<Message> = back.messages().collect();
        let (to, mark) = got.iter().fold((None, None), |(to, mark), m| match *m {
            Message::PacketInfoV4 { dest, .. } => (Some(std::net::IpAddr::V4(dest)), mark),
            Message::PacketInfoV6 { addr, .. } => (Some(std::net::IpAddr::V6(addr)), mark),
            Message::Tos(t) | Message::TrafficClass(t) => (to, Some(t)),
            _ => (to, mark),
        });
        assert_eq!((to, mark), (Some(ip), Some(0xb8)), "{got:?}");
    }
}

fn any_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        any::<u16>().prop_map(Message::Segment),
        any::<i32>().prop_map(Message::Gro),
        (any::<i32>(), any::<[u8; 4]>(), any::<[u8; 4]>()).prop_map(|(i, l, d)| {
            Message::PacketInfoV4 {
                ifindex: i,
                local: l.into(),
                dest: d.into(),
            }
        }),
        (any::<[u8; 16]>(), any::<u32>()).prop_map(|(a, i)| Message::PacketInfoV6 {
            addr: a.into(),
            ifindex: i
        }),
        any::<u8>().prop_map(Message::Tos),
        any::<u8>().prop_map(Message::TrafficClass),
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(a, p)| Message::OrigDst(SocketAddrV4::new(a.into(), p).into())),
        (any::<[u8; 16]>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(|(a, p, f, s)| {
            Message::OrigDst(SocketAddrV6::new(a.into(), p, f, s).into())
        }),
    ]
}

/// Walks `bytes` with the parser, checking it ends within the bound a walk can take (each
/// message at least a header).
fn bounded_walk(bytes: &[u8]) -> Vec<Message> {
    let mut it = parse(bytes);
    let mut out = vec![];
    for _ in 0..=bytes.len() / HEADER {
        match it.next() {
            Some(m) => out.push(m),
            None => return out,
        }
    }
    assert!(it.next().is_none(), "more messages than headers fit");
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Any bytes: the walk ends, within its bound, without panicking.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4 * SPACE)) {
        bounded_walk(&bytes);
    }

    /// Valid messages with bytes changed anywhere (lengths, levels, data): the walk ends
    /// without panicking, and never yields more messages than were written plus what the
    /// changed lengths could make.
    #[test]
    fn corrupted_messages_never_panic(
        ms in proptest::collection::vec(any_message(), 0..4),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut c = Control::new();
        for m in &ms {
            if c.push(m).is_err() {
                break;
            }
        }
        let mut b = c.as_bytes().to_vec();
        if !b.is_empty() {
            for (at, v) in flips {
                let i = at % b.len();
                b[i] = v;
            }
            b.truncate(cut % (b.len() + 1));
        }
        bounded_walk(&b);
    }

    /// Whatever fits reads back whole and in order; what does not is refused, not cut.
    #[test]
    fn messages_read_back_in_order(ms in proptest::collection::vec(any_message(), 0..6)) {
        let mut c = Control::new();
        let mut fitted = vec![];
        for m in &ms {
            match c.push(m) {
                Ok(()) => fitted.push(*m),
                Err(_) => break,
            }
        }
        prop_assert_eq!(bounded_walk(c.as_bytes()), fitted.clone());
        let walked = libc_walk(&mut c);
        prop_assert_eq!(walked.len(), fitted.len());
    }
}
