//! pcapng captures of AeroTP datagrams, for Wireshark and `tshark` (docs/capture.md).
//!
//! Every datagram is written as an ordinary IP/UDP packet on an interface of link type RAW
//! (101: the packet starts with the IP header, no Ethernet), with the IPv4 or IPv6 and UDP
//! headers synthesized from the real (or, in the simulator, the simulated) addresses and
//! ports, so Wireshark shows plain UDP and the AeroTP dissector (tools/wireshark/aerotp.lua)
//! takes it from there. A capture has one or more interfaces ("sent", "arrived", ...): the
//! drivers use them to put what an endpoint sent beside what arrived after the link, so a
//! corrupted TPDU can be compared with its original.
//!
//! Timestamps are passed in (virtual time in the simulator, wall-clock time in the runtime):
//! this crate reads no clock. Packets are streamed to disk through a fixed-size buffer, so a
//! capture of any length costs bounded memory. Real-time drivers write through
//! [`LiveCapture`]: a writer thread behind a queue bounded in bytes, so the datapath never
//! waits for the disk.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod live;
pub use live::{LiveCapture, LiveSummary, DEFAULT_QUEUE_BYTES};

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

/// Bytes of the write buffer: large enough that a fast transfer issues few system calls,
/// small enough to be irrelevant next to the endpoint's own buffers.
const BUFFER: usize = 256 * 1024;
/// Largest UDP payload an IPv4 packet can carry (65535 − 20 − 8); the same bound is used for
/// IPv6 so both families accept the same datagrams.
pub const MAX_PAYLOAD: usize = 65_507;
/// The snapshot length written in every interface description: whole packets.
const SNAPLEN: u32 = 65_535;

/// Why a capture could not be created or written. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot create capture file {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write capture file {path}: {message}")]
    Write { path: PathBuf, message: String },
    #[error("cannot read capture file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error(
        "capture file {path}: a datagram of {len} bytes cannot be written as one UDP packet \
         (at most {MAX_PAYLOAD} bytes)"
    )]
    TooLong { path: PathBuf, len: usize },
    #[error("capture file {path}: interface {iface} does not exist (the capture has {count})")]
    NoInterface {
        path: PathBuf,
        iface: u32,
        count: u32,
    },
}

/// A pcapng file being written. Drop flushes on a best-effort basis; call [`Capture::finish`]
/// to learn whether the last bytes reached the disk.
pub struct Capture {
    writer: PcapNgWriter<BufWriter<File>>,
    path: PathBuf,
    interfaces: u32,
    /// The packet being assembled (IP + UDP + payload), reused so writing allocates nothing.
    packet: Vec<u8>,
    /// IPv4 identification, incremented per packet as a host would.
    ip_id: u16,
    packets: u64,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("path", &self.path)
            .field("interfaces", &self.interfaces)
            .field("packets", &self.packets)
            .finish()
    }
}

impl Capture {
    /// Creates (truncates) `path` and writes the section header and one interface
    /// description per name in `interfaces` (interface ids are their indexes). Fails before
    /// anything else is started if the file cannot be created or written.
    pub fn create(path: &Path, interfaces: &[&str]) -> Result<Capture, CaptureError> {
        let file = File::create(path).map_err(|source| CaptureError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        let werr = |e: pcap_file::PcapError| CaptureError::Write {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut writer = PcapNgWriter::new(BufWriter::with_capacity(BUFFER, file)).map_err(werr)?;
        for name in interfaces {
            let idb = InterfaceDescriptionBlock {
                linktype: DataLink::RAW,
                snaplen: SNAPLEN,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Owned((*name).to_owned())),
                    // pcap-file writes timestamps in nanoseconds: say so (10^-9).
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            };
            writer.write_pcapng_block(idb).map_err(werr)?;
        }
        let mut c = Capture {
            writer,
            path: path.to_path_buf(),
            interfaces: interfaces.len() as u32,
            packet: Vec::with_capacity(2048),
            ip_id: 0,
            packets: 0,
        };
        // Put the header on disk now, so an unwritable target (full disk) shows at start-up.
        c.flush()?;
        Ok(c)
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Writes `payload` as a UDP datagram from `src` to `dst` on interface `iface`, stamped
    /// `at` (time since the Unix epoch for real captures, virtual time in the simulator).
    pub fn write(
        &mut self,
        iface: u32,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
    ) -> Result<(), CaptureError> {
        self.write_marked(iface, at, src, dst, 0, payload)
    }

    /// [`Capture::write`] with the IP header's TOS / traffic-class byte `tos` (the DSCP mark
    /// the datagram left with, docs/runtime.md "DSCP marks").
    pub fn write_marked(
        &mut self,
        iface: u32,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        tos: u8,
        payload: &[u8],
    ) -> Result<(), CaptureError> {
        if iface >= self.interfaces {
            return Err(CaptureError::NoInterface {
                path: self.path.clone(),
                iface,
                count: self.interfaces,
            });
        }
        if payload.len() > MAX_PAYLOAD {
            return Err(CaptureError::TooLong {
                path: self.path.clone(),
                len: payload.len(),
            });
        }
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut packet = std::mem::take(&mut self.packet);
        ip_udp_packet((src, dst, tos), self.ip_id, payload, &mut packet);
        let epb = EnhancedPacketBlock {
            interface_id: iface,
            timestamp: at,
            original_len: packet.len() as u32,
            data: Cow::Borrowed(&packet),
            options: vec![],
        };
        let r = self.writer.write_pcapng_block(epb);
        self.packet = packet;
        r.map_err(|e| CaptureError::Write {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        self.packets += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), CaptureError> {
        self.writer
            .get_mut()
            .flush()
            .map_err(|e| CaptureError::Write {
                path: self.path.clone(),
                message: e.to_string(),
            })
    }

    /// Flushes the buffer and returns the number of packets written.
    pub fn finish(mut self) -> Result<u64, CaptureError> {
        self.flush()?;
        Ok(self.packets)
    }
}

/// Interface names of a simulator capture: id 0 is what the endpoints sent, id 1 what the
/// link delivered.
pub const SIM_INTERFACES: [&str; 2] = ["sent", "arrived"];

/// The simulator's capture hook writing to a [`Capture`] with [`SIM_INTERFACES`], stamped in
/// virtual time (t = 0 is the run's start). The hook cannot fail the run: the first write
/// error is kept and returned by [`SimCapture::finish`], and nothing more is written after it.
#[cfg(feature = "sim")]
#[derive(Debug)]
pub struct SimCapture {
    cap: Capture,
    error: Option<CaptureError>,
}

#[cfg(feature = "sim")]
impl SimCapture {
    pub fn create(path: &Path) -> Result<SimCapture, CaptureError> {
        Ok(SimCapture {
            cap: Capture::create(path, &SIM_INTERFACES)?,
            error: None,
        })
    }

    /// Flushes and returns the packets written, or the first error.
    pub fn finish(self) -> Result<u64, CaptureError> {
        match self.error {
            Some(e) => Err(e),
            None => self.cap.finish(),
        }
    }
}

#[cfg(feature = "sim")]
impl aerotp_sim::Tap for SimCapture {
    fn datagram(
        &mut self,
        point: aerotp_sim::TapPoint,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    ) {
        if self.error.is_some() {
            return;
        }
        let iface = match point {
            aerotp_sim::TapPoint::Sent => 0,
            aerotp_sim::TapPoint::Arrived => 1,
        };
        if let Err(e) = self.cap.write(iface, at, src, dst, bytes) {
            self.error = Some(e);
        }
    }
}

/// One packet read back from a capture: its interface, timestamp, the addresses and ports of
/// its IP/UDP headers and the UDP payload (the AeroTP datagram).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedPacket {
    pub iface: u32,
    pub at: Duration,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// The IPv4 TOS / IPv6 traffic-class byte (the DSCP mark in its upper six bits).
    pub tos: u8,
    pub payload: Vec<u8>,
}

/// Reads a capture this crate wrote: (interface names, packets in file order). A block that
/// is not an IPv4/IPv6 UDP packet is an error naming its index (never a panic).
pub fn read_capture(path: &Path) -> Result<(Vec<String>, Vec<CapturedPacket>), CaptureError> {
    use pcap_file::pcapng::{Block, PcapNgReader};
    let bad = |message: String| CaptureError::Read {
        path: path.to_path_buf(),
        message,
    };
    let f = File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut r = PcapNgReader::new(f).map_err(|e| bad(e.to_string()))?;
    let mut packets = Vec::new();
    let mut names = Vec::new();
    while let Some(b) = r.next_block() {
        match b.map_err(|e| bad(e.to_string()))? {
            Block::InterfaceDescription(d) => {
                let name = d.options.iter().find_map(|o| match o {
                    InterfaceDescriptionOption::IfName(n) => Some(n.to_string()),
                    _ => None,
                });
                names.push(name.unwrap_or_default());
            }
            Block::EnhancedPacket(e) => {
                let n = packets.len();
                let p = parse_ip_udp(&e.data)
                    .ok_or_else(|| bad(format!("packet {n} is not an IP/UDP packet")))?;
                packets.push(CapturedPacket {
                    iface: e.interface_id,
                    at: e.timestamp,
                    src: p.0,
                    dst: p.1,
                    tos: p.2,
                    payload: p.3.to_vec(),
                });
            }
            _ => {}
        }
    }
    Ok((names, packets))
}

/// Source, destination, TOS byte and payload of an IPv4 or IPv6 UDP packet; `None` if it is
/// not one.
fn parse_ip_udp(p: &[u8]) -> Option<(SocketAddr, SocketAddr, u8, &[u8])> {
    let (src, dst, tos, udp) = match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0F) * 4;
            if ihl < 20 || *p.get(9)? != 17 {
                return None;
            }
            let s: [u8; 4] = p.get(12..16)?.try_into().ok()?;
            let d: [u8; 4] = p.get(16..20)?.try_into().ok()?;
            (IpAddr::from(s), IpAddr::from(d), *p.get(1)?, p.get(ihl..)?)
        }
        6 => {
            if *p.get(6)? != 17 {
                return None;
            }
            let s: [u8; 16] = p.get(8..24)?.try_into().ok()?;
            let d: [u8; 16] = p.get(24..40)?.try_into().ok()?;
            let tos = (p.first()? << 4) | (p.get(1)? >> 4);
            (IpAddr::from(s), IpAddr::from(d), tos, p.get(40..)?)
        }
        _ => return None,
    };
    let port = |i: usize| Some(u16::from_be_bytes([*udp.get(i)?, *udp.get(i + 1)?]));
    let len = usize::from(port(4)?);
    let payload = udp.get(8..len.max(8))?;
    Some((
        SocketAddr::new(src, port(0)?),
        SocketAddr::new(dst, port(2)?),
        tos,
        payload,
    ))
}

/// Replaces `out` with an IP/UDP packet carrying `payload` from `src` to `dst` with TOS /
/// traffic-class byte `tos`: IPv4 when both addresses are IPv4, otherwise IPv6 (an IPv4
/// address then appears IPv4-mapped). Both the IPv4 header checksum and the UDP checksum are
/// filled in, so Wireshark's checks pass. The payload must be at most [`MAX_PAYLOAD`] bytes
/// (longer lengths are clipped in the length fields).
pub fn ip_udp_packet(
    (src, dst, tos): (SocketAddr, SocketAddr, u8),
    ip_id: u16,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    let udp_len = (8 + payload.len()).min(usize::from(u16::MAX)) as u16;
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + usize::from(udp_len)).min(usize::from(u16::MAX)) as u16;
            out.extend_from_slice(&[0x45, tos]);
            out.extend_from_slice(&total.to_be_bytes());
            out.extend_from_slice(&ip_id.to_be_bytes());
            out.extend_from_slice(&[0x40, 0]); // don't fragment
            out.extend_from_slice(&[64, 17, 0, 0]); // TTL, UDP, checksum (below)
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            let c = !fold(sum(&out[..20], 0));
            out[10..12].copy_from_slice(&c.to_be_bytes());
            let pseudo = sum(&s.octets(), 0) + sum(&d.octets(), 0) + 17 + u32::from(udp_len);
            push_udp(src.port(), dst.port(), udp_len, payload, pseudo, out);
        }
        (s, d) => {
            let s = v6(s).octets();
            let d = v6(d).octets();
            out.extend_from_slice(&[0x60 | (tos >> 4), tos << 4, 0, 0]);
            out.extend_from_slice(&udp_len.to_be_bytes());
            out.extend_from_slice(&[17, 64]); // next header UDP, hop limit
            out.extend_from_slice(&s);
            out.extend_from_slice(&d);
            let pseudo = sum(&s, 0) + sum(&d, 0) + 17 + u32::from(udp_len);
            push_udp(src.port(), dst.port(), udp_len, payload, pseudo, out);
        }
    }
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

fn push_udp(sport: u16, dport: u16, udp_len: u16, payload: &[u8], pseudo: u32, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&sport.to_be_bytes());
    out.extend_from_slice(&dport.to_be_bytes());
    out.extend_from_slice(&udp_len.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    let mut c = !fold(sum(&out[start..], pseudo));
    // A computed 0 is sent as 0xFFFF (RFC 768): 0 means "no checksum".
    if c == 0 {
        c = 0xFFFF;
    }
    out[start + 6..start + 8].copy_from_slice(&c.to_be_bytes());
}

/// The ones'-complement sum of `data` as 16-bit big-endian words, added to `acc` unfolded.
/// Summed four bytes at a time (a u32 big-endian word is two 16-bit words, and folding the
/// wider sum gives the same ones'-complement result, RFC 1071 §2(B)): a capture checksums
/// every payload, and this is 2-3× fewer steps than word by word. A u64 accumulator cannot
/// overflow for any packet (16384 words of at most 2^32 − 1).
fn sum(data: &[u8], acc: u32) -> u32 {
    let mut s = u64::from(acc);
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        s += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    // 1 to 3 bytes left: padded with zeros on the right, as the odd last byte of RFC 768.
    let mut last = [0u8; 4];
    let rest = words.remainder();
    last[..rest.len()].copy_from_slice(rest);
    s += u64::from(u32::from_be_bytes(last));
    while s > 0xFFFF_FFFF {
        s = (s & 0xFFFF_FFFF) + (s >> 32);
    }
    s as u32
}

fn fold(mut s: u32) -> u16 {
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ipv4_header_and_udp_checksums_verify() {
        let mut p = Vec::new();
        ip_udp_packet(
            (a("10.0.0.1:9000"), a("10.0.0.2:7000"), 0),
            7,
            b"abc",
            &mut p,
        );
        assert_eq!(p.len(), 20 + 8 + 3);
        assert_eq!(p[0], 0x45);
        assert_eq!(u16::from_be_bytes([p[2], p[3]]), 31);
        assert_eq!(&p[12..16], &[10, 0, 0, 1]);
        assert_eq!(&p[16..20], &[10, 0, 0, 2]);
        // A correct header sums to 0xFFFF.
        assert_eq!(fold(sum(&p[..20], 0)), 0xFFFF);
        assert_eq!(u16::from_be_bytes([p[20], p[21]]), 9000);
        assert_eq!(u16::from_be_bytes([p[22], p[23]]), 7000);
        assert_eq!(u16::from_be_bytes([p[24], p[25]]), 11);
        let pseudo = sum(&p[12..20], 0) + 17 + 11;
        assert_eq!(fold(sum(&p[20..], pseudo)), 0xFFFF);
        assert_eq!(&p[28..], b"abc");
    }

    /// The word-by-word definition of the Internet checksum sum (RFC 1071), for comparison.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut s: u64 = 0;
        for w in data.chunks(2) {
            s += u64::from(w[0]) << 8 | u64::from(*w.get(1).unwrap_or(&0));
        }
        while s > 0xFFFF {
            s = (s & 0xFFFF) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn four_byte_sum_equals_the_word_by_word_definition() {
        let mut x = 0x1234_5678_9abc_def1u64;
        for len in (0..300).chain([1471, 1472, 1473, 1474, 65_507]) {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(fold(sum(&data, 0)), reference_sum(&data), "length {len}");
            assert_eq!(
                fold(sum(&vec![0xFF; len], 0)),
                reference_sum(&vec![0xFF; len])
            );
        }
    }

    #[test]
    fn ipv6_when_an_address_is_ipv6() {
        let mut p = Vec::new();
        ip_udp_packet((a("[::1]:1"), a("127.0.0.1:2"), 0), 0, b"hello", &mut p);
        assert_eq!(p[0] >> 4, 6);
        assert_eq!(p.len(), 40 + 8 + 5);
        assert_eq!(u16::from_be_bytes([p[4], p[5]]), 13);
        let pseudo = sum(&p[8..40], 0) + 17 + 13;
        assert_eq!(fold(sum(&p[40..], pseudo)), 0xFFFF);
    }

    #[test]
    fn unwritable_path_is_an_error_naming_the_file() {
        let e = Capture::create(Path::new("/nonexistent-dir/x.pcapng"), &["sent"]).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("/nonexistent-dir/x.pcapng"), "{m}");
    }

    #[test]
    fn bad_interface_and_oversized_datagram_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.pcapng");
        let mut c = Capture::create(&p, &["sent"]).unwrap();
        let (s, d) = (a("10.0.0.1:1"), a("10.0.0.2:2"));
        assert!(matches!(
            c.write(1, Duration::ZERO, s, d, b"x"),
            Err(CaptureError::NoInterface { .. })
        ));
        assert!(matches!(
            c.write(0, Duration::ZERO, s, d, &vec![0; MAX_PAYLOAD + 1]),
            Err(CaptureError::TooLong { .. })
        ));
        c.write(0, Duration::from_millis(1500), s, d, &vec![0; MAX_PAYLOAD])
            .unwrap();
        assert_eq!(c.finish().unwrap(), 1);
    }

    #[test]
    fn file_reads_back_with_interfaces_timestamps_and_packets() {
        use pcap_file::pcapng::{Block, PcapNgReader};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.pcapng");
        let mut c = Capture::create(&p, &["sent", "arrived"]).unwrap();
        let (s, d) = (a("10.0.0.1:9000"), a("10.0.0.2:7000"));
        c.write(0, Duration::from_micros(1_000_001), s, d, b"one")
            .unwrap();
        c.write(1, Duration::from_micros(2_500_000), d, s, b"two!")
            .unwrap();
        assert_eq!(c.finish().unwrap(), 2);
        let mut r = PcapNgReader::new(File::open(&p).unwrap()).unwrap();
        let mut got = Vec::new();
        while let Some(b) = r.next_block() {
            if let Block::EnhancedPacket(e) = b.unwrap() {
                got.push((e.interface_id, e.timestamp, e.data.len()));
            }
        }
        assert_eq!(
            got,
            vec![
                (0, Duration::from_micros(1_000_001), 31),
                (1, Duration::from_micros(2_500_000), 32)
            ]
        );
        assert_eq!(r.interfaces().len(), 2);
        assert_eq!(r.interfaces()[1].linktype, DataLink::RAW);
        let (names, packets) = read_capture(&p).unwrap();
        assert_eq!(names, vec!["sent", "arrived"]);
        assert_eq!(packets[1].src, d);
        assert_eq!(packets[1].dst, s);
        assert_eq!(packets[1].payload, b"two!");
        assert_eq!(packets[0].at, Duration::from_micros(1_000_001));
    }

    #[test]
    fn the_packet_parser_refuses_anything_but_ip_udp_without_panicking() {
        let mut p = Vec::new();
        ip_udp_packet((a("[::1]:5"), a("[::2]:6"), 0), 0, b"v6", &mut p);
        assert_eq!(parse_ip_udp(&p).unwrap().3, b"v6");
        for cut in 0..p.len() {
            let _ = parse_ip_udp(&p[..cut]);
        }
        ip_udp_packet((a("1.2.3.4:5"), a("5.6.7.8:6"), 0), 0, b"v4", &mut p);
        for cut in 0..p.len() {
            assert!(parse_ip_udp(&p[..cut]).is_none(), "{cut}");
        }
        assert!(parse_ip_udp(&[0x45; 40]).is_none());
        assert!(parse_ip_udp(&[]).is_none());
        assert!(parse_ip_udp(&[0x70]).is_none());
    }

    #[test]
    fn the_dscp_mark_is_written_in_both_ip_versions_and_read_back() {
        let mut p = Vec::new();
        for (src, dst) in [("10.0.0.1:1", "10.0.0.2:2"), ("[::1]:1", "[::2]:2")] {
            for tos in [0u8, 0xb8, 0x88, 0xfc] {
                ip_udp_packet((a(src), a(dst), tos), 3, b"marked", &mut p);
                let (_, _, got, payload) = parse_ip_udp(&p).unwrap();
                assert_eq!((got, payload), (tos, &b"marked"[..]), "{src} {tos:#x}");
            }
        }
        // Where Wireshark reads them: IPv4's second byte, IPv6's bits 4-11.
        ip_udp_packet((a("10.0.0.1:1"), a("10.0.0.2:2"), 0xb8), 3, b"", &mut p);
        assert_eq!(p[1], 0xb8);
        ip_udp_packet((a("[::1]:1"), a("[::2]:2"), 0xb8), 3, b"", &mut p);
        assert_eq!(&p[..2], &[0x6b, 0x80]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.pcapng");
        let mut c = Capture::create(&path, &["sent"]).unwrap();
        c.write_marked(
            0,
            Duration::ZERO,
            a("10.0.0.1:1"),
            a("10.0.0.2:2"),
            0x88,
            b"x",
        )
        .unwrap();
        c.finish().unwrap();
        assert_eq!(read_capture(&path).unwrap().1[0].tos, 0x88);
    }
}
