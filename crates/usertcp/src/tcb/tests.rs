//! The user-space TCP connection's unit tests (`tcb.rs`).

use super::*;

/// The flow a connection feeds, as the gateway's (`aerotp-gw`'s `Flow`, window
/// [`TestFlow::WINDOW`]) keeps it: bytes taken up to the window past what the egress confirmed,
/// nothing taken after the FIN or a reset, every change announced.
#[derive(Debug)]
struct TestFlow {
    st: Mutex<FlowSt>,
    changed: tokio::sync::watch::Sender<u64>,
}

/// [`TestFlow`]'s state: bytes confirmed and taken, the FIN taken and confirmed, the reset.
#[derive(Debug, Default)]
struct FlowSt {
    base: u64,
    end: u64,
    fin: bool,
    peer_fin: bool,
    reset: bool,
}

impl TestFlow {
    const WINDOW: u64 = 65_536;

    fn new() -> Arc<TestFlow> {
        Arc::new(TestFlow {
            st: Mutex::default(),
            changed: tokio::sync::watch::channel(0).0,
        })
    }
    fn st(&self) -> MutexGuard<'_, FlowSt> {
        self.st.lock().unwrap()
    }
    fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }
    /// Bytes taken from the source.
    fn end(&self) -> u64 {
        self.st().end
    }
    /// Whether the source's FIN was taken.
    fn fin(&self) -> bool {
        self.st().fin
    }
    /// The egress confirmed `to` (and the destination's end if `fin`); never beyond what was
    /// taken.
    fn confirm(&self, to: u64, fin: bool) {
        let mut st = self.st();
        assert!(
            to <= st.end && (!fin || to == st.end),
            "confirmed {to} beyond {}",
            st.end
        );
        st.base = st.base.max(to);
        st.peer_fin |= fin;
        drop(st);
        self.bump();
    }
}

impl Carrier for TestFlow {
    fn take_source(&self, data: &[u8]) -> usize {
        let mut st = self.st();
        if st.reset || st.fin {
            return 0;
        }
        let room = Self::WINDOW.saturating_sub(st.end - st.base);
        let n = data.len().min(room as usize);
        if n == 0 {
            return 0;
        }
        st.end += n as u64;
        drop(st);
        self.bump();
        n
    }
    fn source_fin(&self) {
        let mut st = self.st();
        if st.fin || st.reset {
            return;
        }
        st.fin = true;
        drop(st);
        self.bump();
    }
    fn confirmed(&self) -> (u64, bool) {
        let st = self.st();
        (st.base, st.peer_fin)
    }
    fn is_reset(&self) -> bool {
        self.st().reset
    }
    fn reset(&self, _reason: String, _tell_peer: bool) {
        let mut st = self.st();
        if st.reset {
            return;
        }
        st.reset = true;
        drop(st);
        self.bump();
    }
    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// Captures what a connection sends.
#[derive(Debug, Default)]
struct Capture(Mutex<Vec<Vec<u8>>>);

impl Wire for Capture {
    fn send(&self, packet: &[u8]) {
        self.0.lock().unwrap().push(packet.to_vec());
    }
}

impl Capture {
    /// (seq, ack, flags, payload length) of each captured segment, taken.
    fn take(&self) -> Vec<(u32, u32, u8, usize)> {
        let v = std::mem::take(&mut *self.0.lock().unwrap());
        v.iter()
            .map(|p| {
                let s = packet::parse(p).expect("we send valid segments");
                (s.seq, s.ack, s.flags, s.payload.len())
            })
            .collect()
    }

    /// The acknowledgement, SACK blocks, timestamps and payload length of each captured
    /// segment, taken.
    fn take_opts(&self) -> Vec<Sent> {
        let v = std::mem::take(&mut *self.0.lock().unwrap());
        v.iter()
            .map(|p| {
                let s = packet::parse(p).expect("we send valid segments");
                Sent {
                    ack: s.ack,
                    sack: s.sack_blocks().collect(),
                    ts: s.ts,
                    len: s.payload.len(),
                }
            })
            .collect()
    }

    /// The acknowledgement and the SACK blocks of each captured segment, taken.
    fn take_sack(&self) -> Vec<(u32, Vec<(u32, u32)>)> {
        let v = std::mem::take(&mut *self.0.lock().unwrap());
        v.iter()
            .map(|p| {
                let s = packet::parse(p).expect("we send valid segments");
                (s.ack, s.sack_blocks().collect())
            })
            .collect()
    }
}

/// What [`Capture::take_opts`] reads of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    ack: u32,
    sack: Vec<(u32, u32)>,
    ts: Option<(u32, u32)>,
    len: usize,
}

const IRS: u32 = 0xFFFF_FF00; // wraps within the test
const ISS: u32 = 1000;

fn seg(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    seg_sack(seq, ack, flags, payload, true)
}

/// A segment of the source; its SYN offers SACK when `sack`.
fn seg_sack(seq: u32, ack: u32, flags: u8, payload: &[u8], sack: bool) -> Vec<u8> {
    seg_ts(seq, ack, flags, payload, sack, None)
}

/// The same with the timestamps option (TSval, TSecr) when `ts`.
fn seg_ts(
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
    sack: bool,
    ts: Option<(u32, u32)>,
) -> Vec<u8> {
    packet::build(&Out {
        src: "10.78.0.2:40000".parse().unwrap(),
        dst: "10.77.0.2:8500".parse().unwrap(),
        seq,
        ack,
        flags,
        window: 512,
        syn_opts: (flags & SYN != 0).then_some((1460, Some(7), sack)),
        sack: Vec::new(),
        ts,
        payload,
    })
}

fn give(c: &Conn, p: &[u8]) -> Event {
    c.on_segment(&packet::parse(p).unwrap())
}

/// A connection past its handshake, with its flow (64 KiB window) and capture.
fn open() -> (Conn, Arc<TestFlow>, Arc<Capture>) {
    open_with(Pool::new(1 << 20), true)
}

/// The same, out-of-order bytes held in `pool`; the source offers SACK when `sack`.
fn open_with(pool: Arc<Pool>, sack: bool) -> (Conn, Arc<TestFlow>, Arc<Capture>) {
    open_ts(pool, sack, None)
}

/// The same; the source's SYN carries timestamps with TSval `ts` when given (and its ACK
/// TSval `ts` + 1).
fn open_ts(pool: Arc<Pool>, sack: bool, ts: Option<u32>) -> (Conn, Arc<TestFlow>, Arc<Capture>) {
    let cap = Arc::new(Capture::default());
    let syn = seg_ts(IRS, 0, SYN, &[], sack, ts.map(|v| (v, 0)));
    let c = Conn::hold(
        &packet::parse(&syn).unwrap(),
        ISS,
        65_536,
        cap.clone(),
        (1500, pool),
        Duration::from_secs(3),
    );
    assert!(cap.take().is_empty(), "the SYN is held");
    c.up();
    let raw = cap.0.lock().unwrap()[0].clone();
    let offered = packet::parse(&raw).unwrap().sack_ok;
    assert_eq!(
        offered, sack,
        "SACK permitted in the SYN-ACK when offered, only then"
    );
    let synack = cap.take();
    assert_eq!(synack, vec![(ISS, IRS.wrapping_add(1), SYN | ACK, 0)]);
    let ack = seg_ts(
        IRS.wrapping_add(1),
        ISS + 1,
        ACK,
        &[],
        sack,
        ts.map(|v| (v + 1, 0)),
    );
    assert_eq!(give(&c, &ack), Event::Established);
    let flow = TestFlow::new();
    c.set_flow(flow.clone());
    assert_eq!(give(&c, &ack), Event::None);
    (c, flow, cap)
}

#[tokio::test]
async fn bytes_are_forwarded_at_once_and_acknowledged_only_when_confirmed() {
    let (c, flow, cap) = open();
    let data = vec![7u8; 1000];
    give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK | PSH, &data));
    assert_eq!(flow.end(), 1000, "taken into the flow at once");
    // Nothing acknowledged beyond the SYN: the egress has confirmed nothing.
    assert!(cap.take().iter().all(|s| s.1 == IRS.wrapping_add(1)));
    // A resend of the same bytes: answered with where we stand, not taken twice.
    give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK | PSH, &data));
    assert_eq!(flow.end(), 1000);
    assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(1), ACK, 0)]);
    // A segment beyond a gap is not taken.
    give(&c, &seg(IRS.wrapping_add(2001), ISS + 1, ACK, &data));
    assert_eq!(flow.end(), 1000);
    cap.take();
    // The egress confirms 600: exactly that is acknowledged.
    flow.confirm(600, false);
    c.pump();
    assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(601), ACK, 0)]);
    // The FIN: taken, acknowledged only once the egress confirmed the end.
    give(&c, &seg(IRS.wrapping_add(1001), ISS + 1, ACK | FIN, &[]));
    assert!(flow.fin());
    flow.confirm(1000, false);
    c.pump();
    assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(1001), ACK, 0)]);
    flow.confirm(1000, true);
    c.pump();
    assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(1002), ACK, 0)]);
}

/// Sequence number of the source's byte `off`.
fn at(off: u32) -> u32 {
    IRS.wrapping_add(1).wrapping_add(off)
}

#[tokio::test]
async fn segments_beyond_a_hole_are_kept_sacked_and_taken_when_it_fills() {
    let pool = Pool::new(1 << 20);
    let (c, flow, cap) = open_with(pool.clone(), true);
    let d = vec![3u8; 1000];
    cap.take();
    // Segments 1-4 of 1000 bytes, shuffled, one twice and one overlapping two others;
    // segment 0 lost.
    for off in [3000u32, 1000, 3000, 2000, 1500] {
        give(
            &c,
            &seg(
                at(off),
                ISS + 1,
                ACK,
                &d[..if off == 1500 { 900 } else { 1000 }],
            ),
        );
    }
    give(&c, &seg(at(4000), ISS + 1, ACK | FIN, &d));
    assert_eq!(flow.end(), 0, "nothing beyond the hole taken yet");
    assert!(!flow.fin());
    assert_eq!(pool.used(), 4000, "each byte held once");
    let acks = cap.take_sack();
    assert!(acks.iter().all(|(_, b)| !b.is_empty()), "{acks:?}");
    assert_eq!(
        acks.last().unwrap().1,
        vec![(at(1000), at(5000))],
        "one block, right of the acknowledgement"
    );
    // The hole fills: everything after it is taken at once, then the FIN.
    give(&c, &seg(at(0), ISS + 1, ACK, &d));
    assert_eq!(flow.end(), 5000);
    assert!(flow.fin(), "the FIN that came out of order");
    assert_eq!(pool.used(), 0);
    // Still acknowledged only as confirmed, and no block left to report.
    flow.confirm(2000, false);
    c.pump();
    let sent = cap.take_sack();
    assert_eq!(sent, vec![(at(2000), vec![])]);
}

#[tokio::test]
async fn without_sack_offered_nothing_is_reported_but_the_bytes_are_kept() {
    let (c, flow, cap) = open_with(Pool::new(1 << 20), false);
    give(&c, &seg(at(1000), ISS + 1, ACK, &[1u8; 1000]));
    assert!(cap.take_sack().iter().all(|(_, b)| b.is_empty()));
    give(&c, &seg(at(0), ISS + 1, ACK, &[1u8; 1000]));
    assert_eq!(flow.end(), 2000);
}

#[tokio::test]
async fn held_bytes_stay_within_the_window_and_the_pool() {
    // Window 64 KiB: of a segment straddling the right edge only what is inside is held.
    let pool = Pool::new(1 << 20);
    let (c, flow, _cap) = open_with(pool.clone(), true);
    give(&c, &seg(at(65_000), ISS + 1, ACK, &[1u8; 1000]));
    give(&c, &seg(at(70_000), ISS + 1, ACK, &[1u8; 1000]));
    assert_eq!(pool.used(), 536, "to the right edge 65,536 only");
    drop(c);
    assert_eq!(pool.used(), 0, "a closed connection gives its bytes back");
    // A pool of 1500 bytes: the second segment beyond the hole is not kept.
    let pool = Pool::new(1500);
    let (c, flow2, _cap) = open_with(pool.clone(), true);
    give(&c, &seg(at(1000), ISS + 1, ACK, &[1u8; 1000]));
    give(&c, &seg(at(2000), ISS + 1, ACK, &[1u8; 1000]));
    assert_eq!(pool.used(), 1000);
    give(&c, &seg(at(0), ISS + 1, ACK, &[1u8; 1000]));
    assert_eq!(
        flow2.end(),
        2000,
        "the hole and the segment held; the rest resent"
    );
    assert_eq!(flow.end(), 0);
}

#[tokio::test]
async fn the_window_bounds_what_is_taken_and_a_rst_resets_the_flow() {
    let (c, flow, cap) = open();
    // The advertised window: 65,536 >> 7.
    give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK, &[]));
    let big = vec![1u8; 40_000];
    give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK, &big));
    give(&c, &seg(IRS.wrapping_add(40_001), ISS + 1, ACK, &big));
    assert_eq!(flow.end(), 65_536, "no more than the window unconfirmed");
    assert!(cap.take().iter().all(|s| s.1 == IRS.wrapping_add(1)));
    give(&c, &seg(IRS.wrapping_add(65_537), ISS + 1, RST, &[]));
    assert!(flow.is_reset());
    assert_eq!(c.pump(), None, "closed");
}

#[tokio::test]
async fn the_reverse_direction_is_sent_resent_and_acknowledged() {
    let (c, _flow, cap) = open();
    // The source's window: 512 << 7 = 64 KiB.
    give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK, &[]));
    assert_eq!(c.push(&[9u8; 3000]), 3000);
    let sent = cap.take();
    let data: Vec<_> = sent.iter().filter(|s| s.3 > 0).collect();
    assert_eq!(data.len(), 3, "{sent:?}");
    assert_eq!((data[0].0, data[0].3), (ISS + 1, 1460));
    assert_eq!((data[2].0, data[2].3), (ISS + 1 + 2920, 80));
    // No acknowledgement within the timeout: everything again from the first byte.
    std::thread::sleep(RTO_INIT + Duration::from_millis(20));
    c.pump();
    let again = cap.take();
    assert_eq!(again.first().map(|s| (s.0, s.3)), Some((ISS + 1, 1460)));
    // An acknowledgement of all of it (sent before the timeout) still counts.
    give(&c, &seg(IRS.wrapping_add(1), ISS + 3001, ACK, &[]));
    c.finish();
    c.pump();
    let fin = cap.take();
    assert!(
        fin.iter().any(|s| s.2 & FIN != 0 && s.0 == ISS + 3001),
        "the FIN after the 3000 bytes: {fin:?}"
    );
}

#[tokio::test]
async fn timestamps_echo_the_original_of_the_edge_byte_not_a_resend_of_it() {
    let (c, flow, cap) = open_ts(Pool::new(1 << 20), true, Some(100));
    let d = vec![5u8; 1000];
    let ts = |v: u32| Some((v, 7));
    // Originals: [0,1000) at TSval 200, [1000,2000) at 210; nothing confirmed yet.
    give(&c, &seg_ts(at(0), ISS + 1, ACK, &d, true, ts(200)));
    give(&c, &seg_ts(at(1000), ISS + 1, ACK, &d, true, ts(210)));
    cap.take();
    // The source's timer fires during an air repair: [0,1000) again at TSval 900.
    give(&c, &seg_ts(at(0), ISS + 1, ACK, &d, true, ts(900)));
    let dup = cap.take_opts();
    assert_eq!(dup.len(), 1, "{dup:?}");
    assert_eq!(dup[0].ack, at(0));
    assert_eq!(
        dup[0].ts.map(|t| t.1),
        Some(200),
        "the edge byte came at 200"
    );
    // The repair done, the egress confirms 1000: the acknowledgement that moves the source's
    // left edge echoes the original's 200, older than the resend (Linux's Eifel undo).
    flow.confirm(1000, false);
    c.pump();
    let adv = cap.take_opts();
    assert_eq!(adv.len(), 1, "{adv:?}");
    assert_eq!((adv[0].ack, adv[0].ts.map(|t| t.1)), (at(1000), Some(200)));
    // The next one echoes the segment now at the edge.
    flow.confirm(2000, false);
    c.pump();
    let next = cap.take_opts();
    assert_eq!(
        (next[0].ack, next[0].ts.map(|t| t.1)),
        (at(2000), Some(210))
    );
    // Our TSval never goes back, and every segment carries the option.
    assert!(adv[0].ts.unwrap().0 <= next[0].ts.unwrap().0);
}

#[tokio::test]
async fn timestamps_a_hole_filled_by_a_retransmission_echoes_the_retransmission() {
    let (c, flow, cap) = open_ts(Pool::new(1 << 20), true, Some(100));
    let d = vec![5u8; 1000];
    let ts = |v: u32| Some((v, 7));
    // [0,1000) lost on the source's side; [1000,2000) at 210 kept; the resend at 500 fills.
    give(&c, &seg_ts(at(1000), ISS + 1, ACK, &d, true, ts(210)));
    give(&c, &seg_ts(at(0), ISS + 1, ACK, &d, true, ts(500)));
    assert_eq!(flow.end(), 2000);
    cap.take();
    flow.confirm(2000, false);
    c.pump();
    let adv = cap.take_opts();
    assert_eq!(
        (adv[0].ack, adv[0].ts.map(|t| t.1)),
        (at(2000), Some(500)),
        "a real loss is not taken for a delay: the resend's TSval, not the earlier 210"
    );
}

#[tokio::test]
async fn the_syn_ack_echoes_the_syn_and_data_leaves_room_for_the_option() {
    let cap = Arc::new(Capture::default());
    let syn = seg_ts(IRS, 0, SYN, &[], true, Some((4242, 0)));
    let c = Conn::hold(
        &packet::parse(&syn).unwrap(),
        ISS,
        65_536,
        cap.clone(),
        (1500, Pool::new(1 << 20)),
        Duration::from_secs(3),
    );
    c.up();
    let synack = cap.take_opts();
    assert_eq!(synack[0].ts.map(|t| t.1), Some(4242));
    drop(c);
    let (c, _flow, cap) = open_ts(Pool::new(1 << 20), true, Some(100));
    give(&c, &seg_ts(at(0), ISS + 1, ACK, &[], true, Some((101, 7))));
    assert_eq!(c.push(&[9u8; 3000]), 3000);
    let sent = cap.take_opts();
    let data: Vec<_> = sent.iter().filter(|s| s.len > 0).collect();
    assert_eq!(data[0].len, 1460 - 12, "the MSS less the 12 option bytes");
    assert!(sent.iter().all(|s| s.ts.is_some()), "{sent:?}");
}

#[tokio::test]
async fn without_timestamps_offered_none_are_sent() {
    let (c, flow, cap) = open_ts(Pool::new(1 << 20), true, None);
    give(&c, &seg(at(0), ISS + 1, ACK, &[1u8; 1000]));
    give(&c, &seg(at(0), ISS + 1, ACK, &[1u8; 1000]));
    flow.confirm(1000, false);
    c.pump();
    assert_eq!(c.push(&[9u8; 3000]), 3000);
    let sent = cap.take_opts();
    assert!(sent.iter().all(|s| s.ts.is_none()), "{sent:?}");
    assert_eq!(sent.iter().map(|s| s.len).max(), Some(1460));
}

#[tokio::test]
async fn dsack_reports_a_duplicate_below_the_acknowledgement_once() {
    let (c, flow, cap) = open();
    let d = vec![5u8; 1000];
    give(&c, &seg(at(0), ISS + 1, ACK, &d));
    flow.confirm(1000, false);
    c.pump();
    cap.take();
    // The source resends what we acknowledged: the next acknowledgement's first block.
    give(&c, &seg(at(0), ISS + 1, ACK, &d));
    let sent = cap.take_opts();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].ack, at(1000));
    assert_eq!(
        sent[0].sack,
        vec![(at(0), at(1000))],
        "below the ack: a D-SACK"
    );
    // Reported once.
    give(&c, &seg(at(1000), ISS + 1, ACK, &d));
    flow.confirm(2000, false);
    c.pump();
    let later = cap.take_opts();
    assert_eq!(later.len(), 1, "{later:?}");
    assert!(later[0].sack.is_empty(), "{later:?}");
}

#[tokio::test]
async fn dsack_reports_a_duplicate_of_a_taken_unconfirmed_segment_once_it_is_acknowledged() {
    let (c, flow, cap) = open();
    let d = vec![5u8; 1000];
    give(&c, &seg(at(0), ISS + 1, ACK, &d));
    give(&c, &seg(at(1000), ISS + 1, ACK, &d));
    // The source's timer fires: [0,1000) again, taken but not confirmed. A block starting at
    // the acknowledgement number is no D-SACK to Linux: nothing yet.
    give(&c, &seg(at(0), ISS + 1, ACK, &d));
    assert!(cap.take_opts().iter().all(|s| s.sack.is_empty()));
    flow.confirm(500, false);
    c.pump();
    let part = cap.take_opts();
    assert_eq!(part[0].ack, at(500));
    assert!(part[0].sack.is_empty(), "not all of it below the ack yet");
    flow.confirm(2000, false);
    c.pump();
    let sent = cap.take_opts();
    assert_eq!(
        (sent[0].ack, sent[0].sack.clone()),
        (at(2000), vec![(at(0), at(1000))])
    );
}

#[tokio::test]
async fn dsack_reports_a_duplicate_of_a_held_out_of_order_segment_with_its_block() {
    let (c, _flow, cap) = open();
    let d = vec![5u8; 1000];
    give(&c, &seg(at(2000), ISS + 1, ACK, &d));
    give(&c, &seg(at(4000), ISS + 1, ACK, &d));
    cap.take();
    give(&c, &seg(at(2000), ISS + 1, ACK, &d));
    let sent = cap.take_opts();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0].sack,
        vec![
            (at(2000), at(3000)),
            (at(2000), at(3000)),
            (at(4000), at(5000))
        ],
        "the D-SACK, then the block holding it (RFC 2883 §4), then the others"
    );
}

#[tokio::test]
async fn without_sack_offered_no_dsack_either() {
    let (c, flow, cap) = open_with(Pool::new(1 << 20), false);
    let d = vec![5u8; 1000];
    give(&c, &seg(at(0), ISS + 1, ACK, &d));
    give(&c, &seg(at(2000), ISS + 1, ACK, &d));
    give(&c, &seg(at(2000), ISS + 1, ACK, &d));
    flow.confirm(1000, false);
    c.pump();
    std::thread::sleep(DUP_ACK_GAP);
    give(&c, &seg(at(0), ISS + 1, ACK, &d));
    let sent = cap.take_opts();
    assert!(sent.len() >= 3, "{sent:?}");
    assert!(sent.iter().all(|s| s.sack.is_empty()), "{sent:?}");
}

/// A held connection (hold `hold`), its flow attached as the ingress does at the SYN, and
/// its capture.
fn held(hold: Duration) -> (Conn, Arc<TestFlow>, Arc<Capture>) {
    let cap = Arc::new(Capture::default());
    let syn = seg_ts(IRS, 0, SYN, &[], true, Some((500, 0)));
    let c = Conn::hold(
        &packet::parse(&syn).unwrap(),
        ISS,
        65_536,
        cap.clone(),
        (1500, Pool::new(1 << 20)),
        hold,
    );
    let flow = TestFlow::new();
    c.set_flow(flow.clone());
    (c, flow, cap)
}

#[tokio::test]
async fn a_held_syn_is_answered_once_the_connection_is_up_and_not_before() {
    let (c, flow, cap) = held(Duration::from_secs(3));
    assert!(c.pump().is_some());
    assert!(
        cap.take().is_empty(),
        "no SYN-ACK before the connection is up"
    );
    // The source's SYN resent (its timer: 1 s) waits for the same answer.
    give(&c, &seg_ts(IRS, 0, SYN, &[], true, Some((1500, 0))));
    c.pump();
    assert!(cap.take().is_empty(), "a resent SYN is not answered early");
    c.up();
    let sent = cap.take_opts();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].ts.map(|t| t.1),
        Some(500),
        "the SYN-ACK echoes the first SYN: the source's sample spans the hold"
    );
    c.up();
    assert!(cap.take().is_empty(), "answered once");
    let ack = seg_ts(IRS.wrapping_add(1), ISS + 1, ACK, &[], true, Some((501, 0)));
    assert_eq!(give(&c, &ack), Event::Established);
    give(&c, &ack);
    let data = vec![1u8; 100];
    give(
        &c,
        &seg_ts(
            IRS.wrapping_add(1),
            ISS + 1,
            ACK | PSH,
            &data,
            true,
            Some((502, 0)),
        ),
    );
    assert_eq!(flow.end(), 100, "the flow made at the SYN takes the bytes");
}

#[tokio::test]
async fn a_held_syn_is_answered_at_the_deadline_if_the_connection_is_slow() {
    let (c, _flow, cap) = held(Duration::ZERO);
    c.pump();
    assert_eq!(cap.take(), vec![(ISS, IRS.wrapping_add(1), SYN | ACK, 0)]);
}

#[tokio::test]
async fn a_flow_that_fails_before_it_is_up_resets_the_held_syn() {
    let (c, flow, cap) = held(Duration::from_secs(3));
    // The flow's connection failed: the flow is reset, and the sink told (`UserSink::reset`).
    flow.reset("connection lost: set-up timed out".into(), false);
    UserSink::reset(&c);
    assert_eq!(c.pump(), None, "the connection is over");
    let sent = cap.take();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (_, ack, flags, _) = sent[0];
    assert_eq!(flags, RST | ACK);
    assert_eq!(
        ack,
        IRS.wrapping_add(1),
        "the RST acknowledges the SYN, so the source's connect() is refused"
    );
    c.up();
    assert!(cap.take().is_empty(), "no SYN-ACK after the RST");
}

#[tokio::test]
async fn a_source_that_gives_up_while_held_resets_the_flow() {
    let (c, flow, cap) = held(Duration::from_secs(3));
    give(&c, &seg(IRS.wrapping_add(1), 0, RST, &[]));
    assert!(flow.is_reset(), "the flow made at the SYN is reset");
    assert_eq!(c.pump(), None);
    c.up();
    assert!(cap.take().is_empty(), "nothing to a source that reset");
}
