//! A flow's TCP side: the task reading the socket into custody, and the task owning its write
//! half (a kernel socket's, or a user-space TCP connection's, `crate::sink`). The writer is
//! the only one to touch the write half: it takes the peer's bytes from the session through
//! the flow's queue ([`crate::flow::Out`], bounded in bytes), writes them, and reports in the
//! flow's state what it wrote (`in_delivered`) and, at the egress for a reliable flow, what
//! the destination's TCP acknowledged (`in_acked`, followed every 2 ms from the socket's send
//! queue while some is unacknowledged). With an egress store, the delivery record is written
//! around each write (the intent just before it, what was written just after). On a reset it
//! closes the socket with RST.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::flow::{Flow, Out, OutCmd};
use crate::progress::{self, Record};
use crate::sink::{Sink, UserSink};

/// Bytes read from TCP per read.
const TCP_READ: usize = 64 * 1024;

/// How often the writer of a flow following the destination's acknowledgements reads the
/// socket's send queue while some of what it wrote is unacknowledged.
const ACK_POLL: Duration = Duration::from_millis(2);

/// Attaches the TCP socket: spawns the task reading it into custody and the one writing it.
pub fn attach_tcp(flow: &Arc<Flow>, s: TcpStream) {
    let _ = s.set_nodelay(true);
    let (r, w) = s.into_split();
    start_writer(flow, Sink::Kernel(w));
    let me = flow.clone();
    flow.set_reader(tokio::spawn(read_tcp(me, r)));
}

/// Attaches a connection of the user-space TCP (`aerotp-usertcp`): it hands the source's
/// bytes over with [`Flow::take_source`] and takes the peer's through `sink`.
pub fn attach_user(flow: &Arc<Flow>, sink: Arc<dyn UserSink>) {
    start_writer(flow, Sink::User(sink));
}

fn start_writer(flow: &Arc<Flow>, sink: Sink) {
    let room = Arc::new(Semaphore::new(flow.out_bound() as usize));
    let (tx, rx) = mpsc::unbounded_channel();
    if flow
        .set_out(Out {
            tx,
            room: room.clone(),
        })
        .is_err()
    {
        // Only a new flow is attached, once.
        sink.abort();
        return;
    }
    let follows_acks = flow.lock().follows_acks();
    let ack_poll = follows_acks.then(|| {
        let mut i = tokio::time::interval(ACK_POLL);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        i
    });
    let w = Writer {
        ack_poll,
        follows_acks,
        record: flow.record(),
        flow: Arc::downgrade(flow),
        changed: flow.changed.subscribe(),
        room,
    };
    tokio::spawn(w.run(sink, rx));
}

/// Reads what the socket has into `buf`, and whether the EOF came right behind it: after a
/// read that did not fill `buf` the socket is asked once more without waiting, so a short
/// request and its FIN (already arrived) are taken together.
async fn read_with_eof(r: &mut OwnedReadHalf, buf: &mut [u8]) -> io::Result<(usize, bool)> {
    let mut n = r.read(buf).await?;
    if n == 0 {
        return Ok((0, true));
    }
    while n < buf.len() {
        match r.try_read(&mut buf[n..]) {
            Ok(0) => return Ok((n, true)),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok((n, false))
}

/// Backpressure: how much the window and the store have room for, waiting for some (`None`:
/// the flow was reset).
async fn room_to_read(
    flow: &Flow,
    brx: &mut watch::Receiver<u64>,
    frx: &mut watch::Receiver<u64>,
) -> Option<u64> {
    loop {
        brx.borrow_and_update();
        frx.borrow_and_update();
        let room = flow.room()?;
        if room > 0 {
            return Some(room);
        }
        tokio::select! {
            _ = brx.changed() => {}
            _ = frx.changed() => {}
        }
    }
}

async fn read_tcp(flow: Arc<Flow>, mut r: OwnedReadHalf) {
    let record = flow.record();
    let mut brx = flow.budget_changes();
    let mut frx = flow.changed.subscribe();
    let mut buf = vec![0u8; TCP_READ];
    loop {
        let Some(room) = room_to_read(&flow, &mut brx, &mut frx).await else {
            return;
        };
        let want = (room as usize).min(TCP_READ);
        let (n, eof) = match read_with_eof(&mut r, &mut buf[..want]).await {
            Ok(r) => r,
            Err(e) => {
                flow.reset(format!("source TCP error: {e}"), true);
                return;
            }
        };
        if n == 0 {
            take_eof(&flow).await;
            return;
        }
        if let Some(rec) = record.as_ref().filter(|_| flow.lock().end() == 0) {
            // Before the destination's first bytes can leave: an egress restart must know
            // that this conversation has a reverse direction it cannot replay.
            if let Err(e) = rec.persist(|p| p.flags |= progress::REVERSE).await {
                flow.reset(e, true);
                return;
            }
        }
        if let Err(e) = flow.take_read(buf[..n].to_vec()).await {
            flow.reset(e, true);
            return;
        }
        if eof {
            // The bytes and the EOF in one change, so the session sends them together.
            take_eof(&flow).await;
            return;
        }
        flow.bump();
    }
}

/// Our TCP side reached EOF: `end` is final (recorded in the custody store).
async fn take_eof(flow: &Arc<Flow>) {
    match flow.take_eof().await {
        Ok(()) => tracing::debug!(flow = %format!("{:016x}", flow.id), "TCP EOF"),
        Err(e) => flow.reset(e, true),
    }
}

/// Why the writer stops.
enum Stop {
    /// The flow is gone (dropped): after the peer's FIN was written the write half closes as
    /// the flow's socket would; before it the flow ended without completing (a reset seen by
    /// the session before this task saw it), so the socket is aborted: a FIN there would tell
    /// the application its stream had ended whole.
    Gone,
    /// The flow was reset: the socket is aborted.
    Reset,
    /// A write or the record failed: the flow is reset (the peer told), the socket aborted.
    Error(String),
}

/// The task owning a flow's write half. It holds the flow weakly: a flow dropped (finished
/// and forgotten) closes the queue and the writer ends with it.
struct Writer {
    flow: Weak<Flow>,
    changed: watch::Receiver<u64>,
    room: Arc<Semaphore>,
    /// The destination's acknowledgements are read on its ticks (a flow following them
    /// only).
    ack_poll: Option<tokio::time::Interval>,
    /// Egress, reliable flow: the destination's acknowledgements are followed.
    follows_acks: bool,
    /// Egress with a store: the delivery record, written around each write.
    record: Option<Arc<Record>>,
}

impl Writer {
    async fn run(mut self, mut sink: Sink, mut rx: mpsc::UnboundedReceiver<OutCmd>) {
        let mut fin_written = false;
        let stop = loop {
            let Some(flow) = self.flow.upgrade() else {
                break Stop::Gone;
            };
            self.changed.borrow_and_update();
            let (reset, unacked) = {
                let st = flow.lock();
                (st.reset().is_some(), st.unacked())
            };
            if reset {
                break Stop::Reset;
            }
            drop(flow);
            let cmd = tokio::select! {
                c = rx.recv() => c,
                r = self.changed.changed() => match r {
                    Ok(()) => continue,
                    Err(_) => None,
                },
                _ = tick(&mut self.ack_poll), if unacked => {
                    self.follow_acks(&sink);
                    continue;
                }
            };
            let r = match cmd {
                Some(OutCmd::Data(c)) => {
                    // Boxed: the write's state lives only while a chunk is written, not in
                    // every idle flow's task (760 -> 448 bytes).
                    let r = Box::pin(self.write_at(&mut sink, c.at, &c.data)).await;
                    if let Some(flow) = self.flow.upgrade() {
                        self.room.add_permits(flow.out_share(c.data.len()) as usize);
                    }
                    r
                }
                Some(OutCmd::Fin) => {
                    let r = self.fin(&mut sink).await;
                    fin_written = true;
                    r
                }
                None => Err(Stop::Gone),
            };
            if let Err(stop) = r {
                break stop;
            }
        };
        self.room.close();
        match stop {
            Stop::Gone if fin_written => {}
            Stop::Gone | Stop::Reset => sink.abort(),
            Stop::Error(e) => {
                if let Some(flow) = self.flow.upgrade() {
                    flow.reset(e, true);
                }
                sink.abort();
            }
        }
    }

    fn flow(&self) -> Result<Arc<Flow>, Stop> {
        self.flow.upgrade().ok_or(Stop::Gone)
    }

    /// Writes the peer's bytes from flow offset `at`, those the socket does not have yet.
    async fn write_at(&mut self, sink: &mut Sink, at: u64, d: &[u8]) -> Result<(), Stop> {
        let done = self.flow()?.lock().in_delivered();
        if at > done {
            return Err(Stop::Error(format!(
                "peer's bytes from {at} but {done} were written: a gap"
            )));
        }
        let skip = (done - at) as usize;
        if skip >= d.len() {
            return Ok(());
        }
        match sink {
            Sink::Kernel(w) => self.write_kernel(w, &d[skip..]).await,
            Sink::User(u) => self.write_user(&**u, &d[skip..]).await,
        }
    }

    /// Writes `d` to the kernel socket, counting partial writes; the delivery record around
    /// each write (a restart in between knows exactly which bytes are in doubt,
    /// progress.rs).
    async fn write_kernel(&mut self, w: &OwnedWriteHalf, d: &[u8]) -> Result<(), Stop> {
        let mut pos = 0;
        while pos < d.len() {
            self.writable(w).await?;
            let flow = self.flow()?;
            if let Some(rec) = &self.record {
                // Intent just before the syscall, written just after.
                let from = flow.lock().in_delivered();
                let to = from + (d.len() - pos) as u64;
                let intent = move |p: &mut progress::Progress| {
                    p.written = from;
                    p.intent = to;
                };
                rec.note(intent, false).map_err(Stop::Error)?;
            }
            let n = match w.try_write(&d[pos..]) {
                Ok(0) => return Err(Stop::Error("TCP write returned 0".into())),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(Stop::Error(format!("TCP write error: {e}"))),
            };
            pos += n;
            let done = { flow.lock().wrote(n as u64) };
            if self.follows_acks {
                note_acked(&flow, w);
            } else if let Some(rec) = &self.record {
                let written = move |p: &mut progress::Progress| {
                    p.written = done;
                    p.intent = done;
                };
                rec.note(written, false).map_err(Stop::Error)?;
            }
            if n > 0 {
                flow.bump();
            }
        }
        Ok(())
    }

    /// Waits until the socket takes more; a flow following the destination's
    /// acknowledgements reads them meanwhile. A reset stops the wait.
    async fn writable(&mut self, w: &OwnedWriteHalf) -> Result<(), Stop> {
        loop {
            tokio::select! {
                r = w.writable() => {
                    return r.map_err(|e| Stop::Error(format!("TCP write error: {e}")));
                }
                r = self.changed.changed() => {
                    if r.is_err() {
                        return Err(Stop::Gone);
                    }
                    if self.flow()?.lock().reset().is_some() {
                        return Err(Stop::Reset);
                    }
                }
                _ = tick(&mut self.ack_poll), if self.follows_acks => {
                    note_acked(&*self.flow()?, w);
                }
            }
        }
    }

    /// Writes `d` into the user-space connection's send buffer, waiting for room (the
    /// source's window) as a kernel socket's write would.
    async fn write_user(&mut self, u: &dyn UserSink, d: &[u8]) -> Result<(), Stop> {
        let mut pos = 0;
        while pos < d.len() {
            let room = u.room().notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let flow = self.flow()?;
            if flow.lock().reset().is_some() {
                return Err(Stop::Reset);
            }
            let n = u.push(&d[pos..]);
            if n == 0 {
                drop(flow);
                tokio::select! {
                    _ = room => {}
                    r = self.changed.changed() => {
                        if r.is_err() {
                            return Err(Stop::Gone);
                        }
                    }
                }
                continue;
            }
            pos += n;
            flow.lock().wrote(n as u64);
            flow.bump();
        }
        Ok(())
    }

    /// The peer's FIN: our write half shut, then recorded (the store's `IN_FIN` first).
    async fn fin(&mut self, sink: &mut Sink) -> Result<(), Stop> {
        match sink {
            Sink::Kernel(w) => {
                let _ = w.shutdown().await;
            }
            Sink::User(u) => u.finish(),
        }
        let flow = self.flow()?;
        if let Some(rec) = &self.record {
            rec.persist(|p| p.flags |= progress::IN_FIN)
                .await
                .map_err(Stop::Error)?;
        }
        flow.lock().wrote_fin();
        flow.bump();
        if self.follows_acks {
            if let Sink::Kernel(w) = sink {
                note_acked(&flow, w);
            }
        }
        Ok(())
    }

    /// The poll of the destination's acknowledgements.
    fn follow_acks(&self, sink: &Sink) {
        if let (Sink::Kernel(w), Some(flow)) = (sink, self.flow.upgrade()) {
            note_acked(&flow, w);
        }
    }
}

/// The next tick of `p`; never without one.
async fn tick(p: &mut Option<tokio::time::Interval>) {
    match p {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Egress, flow following the destination's acknowledgements: takes what its TCP
/// acknowledged from the socket's send queue (`SIOCOUTQ`: bytes written and not yet
/// acknowledged, the FIN counting one).
fn note_acked(flow: &Flow, w: &OwnedWriteHalf) {
    let s: &TcpStream = w.as_ref();
    let mut outq: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int; the descriptor is the open socket `s` borrows.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut outq) } < 0 {
        return;
    }
    flow.note_outq(outq.max(0) as u64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Budget, EgressParts, FlowInit, FlowRole};
    use crate::frame::Class;
    use crate::store::Custody;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        (a, b)
    }

    /// An egress flow (`follows_acks`: a reliable one, following the destination's
    /// acknowledgements).
    fn flow(follows_acks: bool) -> Arc<Flow> {
        let init = FlowInit::new(1, Class::Bulk, "x".into(), Custody::mem(0), 64 * 1024);
        let role = FlowRole::Egress(EgressParts::new(follows_acks, None));
        Flow::new(init, role, Budget::new(1 << 30))
    }

    async fn until(what: &str, f: impl Fn() -> bool) {
        for _ in 0..1000 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("not within 5 s: {what}");
    }

    #[tokio::test]
    async fn bytes_sent_again_after_a_resume_are_written_once_and_confirmed_when_acked() {
        let (ours, mut theirs) = pair().await;
        let f = flow(true);
        attach_tcp(&f, ours);
        // A session broke with "hello " queued; the next one sends again from offset 0.
        f.deliver(0, b"hello ".to_vec()).await.unwrap();
        f.deliver(0, b"hello world".to_vec()).await.unwrap();
        f.deliver(11, b"!".to_vec()).await.unwrap();
        f.deliver_fin().await.unwrap();
        let mut got = Vec::new();
        theirs.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hello world!");
        // Confirmable once the destination's TCP acknowledged the bytes and the FIN.
        let acked = |f: &Flow| f.lock().egress().and_then(|e| e.acked()).unwrap();
        until("FIN acknowledged", || acked(&f).in_fin_acked).await;
        assert_eq!(f.lock().in_delivered(), 12);
        assert_eq!(acked(&f).in_acked, 12);
        assert_eq!(f.lock().confirmable(), (12, true));
    }

    /// The session saw the peer's reset and the flow was dropped before the writer looked
    /// (`refused_destination_resets_the_source` failed so in 5 % of its runs): the source must
    /// still get a RST, not a FIN that says its stream ended whole.
    /// A socket pair with flow `f`'s writer on one end's write half; returns that end's read
    /// half (its socket closes when it is dropped) and the other end.
    async fn writer_only(f: &Arc<Flow>) -> (OwnedReadHalf, TcpStream) {
        let (ours, theirs) = pair().await;
        let (r, w) = ours.into_split();
        start_writer(f, Sink::Kernel(w));
        (r, theirs)
    }

    #[tokio::test]
    async fn a_flow_dropped_unfinished_before_its_writer_looked_aborts_the_socket() {
        let f = flow(false);
        let (r, mut theirs) = writer_only(&f).await;
        f.reset("reset by peer".into(), false);
        drop(f);
        // The writer runs, finds the flow gone, and leaves the close to the read half.
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(r);
        let mut b = [0u8; 8];
        let got = tokio::time::timeout(Duration::from_secs(5), theirs.read(&mut b)).await;
        let e = got
            .expect("closed within 5 s")
            .expect_err("closed with RST, not FIN");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
    }

    /// A flow dropped after the peer's FIN was written closes its socket as usual (FIN).
    #[tokio::test]
    async fn a_flow_dropped_after_its_fin_closes_the_socket_with_fin() {
        let f = flow(false);
        let (r, mut theirs) = writer_only(&f).await;
        f.deliver(0, b"all".to_vec()).await.unwrap();
        f.deliver_fin().await.unwrap();
        let mut got = [0u8; 3];
        theirs.read_exact(&mut got).await.unwrap();
        until("FIN written", || f.lock().in_fin()).await;
        drop(f);
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(r);
        let mut b = [0u8; 8];
        let n = tokio::time::timeout(Duration::from_secs(5), theirs.read(&mut b))
            .await
            .expect("closed within 5 s")
            .expect("closed with FIN");
        assert_eq!(n, 0);
    }

    #[tokio::test]
    async fn a_gap_resets_the_flow_and_its_socket() {
        let (ours, mut theirs) = pair().await;
        let f = flow(false);
        attach_tcp(&f, ours);
        f.deliver(0, b"abc".to_vec()).await.unwrap();
        f.deliver(5, b"x".to_vec()).await.unwrap();
        let mut got = [0u8; 3];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"abc");
        let mut more = [0u8; 8];
        let r = tokio::time::timeout(Duration::from_secs(5), theirs.read(&mut more)).await;
        let e = r.expect("closed within 5 s").expect_err("closed with RST");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
        let why = f.lock().reset().cloned().expect("reset");
        assert!(why.0.contains("gap") && why.1, "{why:?}");
        assert!(
            f.deliver(3, b"y".to_vec()).await.is_err(),
            "the writer stopped"
        );
    }
}
