//! One session of a TCP flow on one AeroTP connection (docs/gateway.md §Flow protocol). Our
//! custody's bytes go out as the stream itself, the peer's stream goes to our TCP socket;
//! what each side has written to its socket travels in the engine's confirmed `delivered`
//! count (docs/spec.md §4, "Confirmed delivery"), a FIN as the AFIN, a reset as an RST whose
//! reason starts with `frame::RESET_PREFIX`. Nothing is framed: the only bytes in a stream
//! that are not the flow's are the records the handshake put first (`Offsets`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use aerotp_net::{CloseOutcome, Connection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::flow::{Flow, Locked, SessionEnd};
use crate::frame::{flow_reset, reset_reason, MAX_DATA};

/// Where the flow's bytes sit in this connection's two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// Bytes of the record we wrote first (the ingress's open record; the egress's resume
    /// answer), and the flow offset of the first data byte after it.
    pub out_skip: u64,
    pub out_base: u64,
    /// The same for the peer's stream (its record is already read).
    pub in_skip: u64,
    pub in_base: u64,
}

impl Offsets {
    /// The confirmed count for our engine: the peer's record, and the bytes of its direction
    /// written to our TCP socket in this session.
    fn confirm_value(&self, in_delivered: u64) -> u64 {
        self.in_skip + in_delivered.saturating_sub(self.in_base)
    }

    /// The flow offset a peer's confirmed count `v` stands for, and whether it confirms our
    /// FIN too (`v` one past our stream's end, docs/spec.md §4). Refused when it claims more
    /// than we sent (`sent`: flow offset of our next byte; `fin_sent`: the AFIN went).
    fn peer_confirmed(&self, v: u64, sent: u64, fin_sent: bool) -> Result<(u64, bool), String> {
        let stream_end = self.out_skip + (sent - self.out_base);
        if v <= stream_end {
            Ok((self.out_base + v.saturating_sub(self.out_skip), false))
        } else if v == stream_end + 1 && fin_sent {
            Ok((sent, true))
        } else {
            Err(format!(
                "the peer confirmed {v} bytes of a stream of {stream_end}{}",
                if fin_sent { " and its end" } else { "" }
            ))
        }
    }
}

/// Most bytes of the peer's stream taken per read (handed to the TCP writer as one chunk).
const READ_CHUNK: usize = 32 * 1024;

/// What the writer has put in the stream: its own position, and what the confirmation check
/// believes (one record for both).
#[derive(Debug)]
struct Sent {
    next: AtomicU64,
    fin: AtomicBool,
}

/// Runs one session of `flow` on `conn` (the peer's record read; our record of
/// `off.out_skip` bytes written, or still to write as `prefix`): sends the prefix with our first bytes from
/// `off.out_base` (one TPDU for a record, a short request and its FIN), delivers the peer's
/// bytes, carries the confirmations, FINs and resets. Returns when the flow is complete,
/// reset, or the connection broke.
pub async fn run_session(
    flow: Arc<Flow>,
    conn: Connection,
    reader: Connection,
    off: Offsets,
    prefix: Vec<u8>,
) -> SessionEnd {
    debug_assert!(prefix.is_empty() || prefix.len() as u64 == off.out_skip);
    flow.lock().set_conn(conn.clone());
    let sent = Sent {
        next: AtomicU64::new(off.out_base),
        fin: AtomicBool::new(false),
    };
    let end = {
        let w = writer(&flow, conn.clone(), &off, &sent, prefix);
        let r = stream_reader(&flow, &conn, reader, &off, &sent);
        tokio::pin!(w);
        tokio::pin!(r);
        tokio::select! {
            e = &mut r => e,
            e = &mut w => match e {
                // Our side is done: the session ends with the connection.
                None => r.await,
                Some(e) => e,
            },
        }
    };
    if let SessionEnd::Broken(r) = &end {
        // Not a flow reset (no RESET_PREFIX): the peer keeps a custody flow for a resume.
        conn.abort(r);
    }
    flow.session_ended();
    end
}

enum Action {
    Reset(String),
    Confirm(u64, bool),
    Data(u64, usize),
    Fin,
    Done,
    Wait,
}

/// What the writer does next, from the flow's state: `Err` ends the session (a reset the
/// peer needs not be told of).
fn next_action(
    st: &Locked,
    next: u64,
    confirmed: Option<(u64, bool)>,
    fin_sent: bool,
) -> Result<Action, SessionEnd> {
    Ok(if let Some((r, tell)) = st.reset() {
        if *tell {
            Action::Reset(r.clone())
        } else {
            return Err(SessionEnd::Reset(r.clone()));
        }
    } else if confirmed != Some(st.confirmable()) {
        let (d, f) = st.confirmable();
        Action::Confirm(d, f)
    } else if next < st.end() {
        Action::Data(next, ((st.end() - next) as usize).min(MAX_DATA))
    } else if st.fin() && !fin_sent {
        Action::Fin
    } else if fin_sent && Flow::complete(st) {
        Action::Done
    } else {
        Action::Wait
    })
}

/// The sending half of a session. `None`: the flow is complete on our side.
async fn writer(
    flow: &Arc<Flow>,
    mut conn: Connection,
    off: &Offsets,
    sent: &Sent,
    mut prefix: Vec<u8>,
) -> Option<SessionEnd> {
    let mut rx = flow.changed.subscribe();
    let mut confirmed: Option<(u64, bool)> = None;
    loop {
        rx.borrow_and_update();
        let action = {
            let st = flow.lock();
            let (next, fin_sent) = (
                sent.next.load(Ordering::Acquire),
                sent.fin.load(Ordering::Acquire),
            );
            match next_action(&st, next, confirmed, fin_sent) {
                Ok(a) => a,
                Err(end) => return Some(end),
            }
        };
        match action {
            Action::Reset(r) => {
                conn.abort(&reset_reason(&r));
                return Some(SessionEnd::Reset(r));
            }
            Action::Confirm(o, f) => {
                conn.confirm(off.confirm_value(o), f);
                confirmed = Some((o, f));
            }
            Action::Data(at, n) => {
                if let Err(end) = send_data(flow, &mut conn, sent, &mut prefix, at, n).await {
                    return Some(end);
                }
            }
            Action::Fin => {
                sent.fin.store(true, Ordering::Release);
                if let Err(e) = conn.write_last(&std::mem::take(&mut prefix)).await {
                    return Some(SessionEnd::Broken(format!("AeroTP write: {e}")));
                }
            }
            Action::Done => return None,
            Action::Wait => {
                // Nothing of ours to send yet: the record goes alone.
                if !prefix.is_empty() {
                    if let Err(e) = conn.write_all(&std::mem::take(&mut prefix)).await {
                        return Some(SessionEnd::Broken(format!("AeroTP write: {e}")));
                    }
                }
                if rx.changed().await.is_err() {
                    return Some(SessionEnd::Broken("flow dropped".into()));
                }
            }
        }
    }
}

/// Sends custody bytes `at..at + n` (after `prefix`, our record, if it has not gone yet);
/// the source's last bytes go with the AFIN. Updates `sent`.
async fn send_data(
    flow: &Arc<Flow>,
    conn: &mut Connection,
    sent: &Sent,
    prefix: &mut Vec<u8>,
    at: u64,
    n: usize,
) -> Result<(), SessionEnd> {
    let d = match flow.custody().read_at(at, n) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => {
            flow.reset(format!("custody has nothing at {at}"), true);
            return Ok(());
        }
        Err(e) => {
            flow.reset(format!("custody read at {at}: {e}"), true);
            return Ok(());
        }
    };
    // Marked sent before it can arrive, so a confirmation of it is believed.
    let next = at + d.len() as u64;
    sent.next.store(next, Ordering::Release);
    let last = {
        let mut st = flow.lock();
        st.sent(d.len() as u64);
        st.fin() && next == st.end()
    };
    let out = if prefix.is_empty() {
        d
    } else {
        prefix.extend_from_slice(&d);
        std::mem::take(prefix)
    };
    sent.fin.fetch_or(last, Ordering::Release);
    let r = if last {
        conn.write_last(&out).await
    } else {
        conn.write_all(&out).await
    };
    r.map_err(|e| SessionEnd::Broken(format!("AeroTP write: {e}")))
}

/// The receiving half of a session: the peer's stream to our TCP socket, the peer's
/// confirmations to our custody, and the connection's end to the session's.
async fn stream_reader(
    flow: &Arc<Flow>,
    conn: &Connection,
    mut r: Connection,
    off: &Offsets,
    sent: &Sent,
) -> SessionEnd {
    // Filled by `read_buf` without zeroing first: an idle flow's buffer costs the pages its
    // few messages touched, not 32 KiB of resident memory (docs/gateway.md, "Many flows").
    let mut buf = Vec::with_capacity(READ_CHUNK);
    // The flow offset of the peer's next byte.
    let mut at = off.in_base;
    let mut reading = true;
    let mut seen = 0;
    // After the peer's FIN the flow completes when the TCP writer has written (and, at the
    // egress for a reliable flow, the destination acknowledged) everything.
    let mut rx = flow.changed.subscribe();
    loop {
        tokio::select! {
            n = r.read_buf(&mut buf), if reading => match n {
                Ok(0) => {
                    reading = false;
                    if let Err(e) = flow.deliver_fin().await {
                        flow.reset(e, true);
                    }
                }
                Ok(n) => {
                    let chunk = std::mem::replace(&mut buf, Vec::with_capacity(READ_CHUNK));
                    let r = flow.deliver(at, chunk).await;
                    at += n as u64;
                    if let Err(e) = r {
                        // The writer sends the reset and ends the session.
                        flow.reset(e, true);
                    }
                }
                // The connection ended: its outcome, below, says how.
                Err(_) => reading = false,
            },
            r = rx.changed(), if !reading => if r.is_err() {
                return SessionEnd::Broken("flow dropped".into());
            },
            v = conn.confirmed_beyond(seen) => match v {
                Ok(v) => {
                    seen = v;
                    if let Err(e) = apply_confirmation(flow, off, sent, v).await {
                        flow.reset(e, true);
                    }
                }
                Err(outcome) => return ended(flow, conn, off, sent, outcome).await,
            },
        }
        if Flow::complete(&flow.lock()) {
            // Everything confirmed both ways. Our confirmation of the peer's end goes now
            // (the writer may not have run since), so the engine's AFINACK is free to go;
            // the connection then finishes on its own after the handles are dropped.
            let (d, fin) = flow.in_progress();
            conn.confirm(off.confirm_value(d), fin);
            return SessionEnd::Complete;
        }
    }
}

async fn apply_confirmation(
    flow: &Arc<Flow>,
    off: &Offsets,
    sent: &Sent,
    v: u64,
) -> Result<(), String> {
    let (to, fin) = off.peer_confirmed(
        v,
        sent.next.load(Ordering::Acquire),
        sent.fin.load(Ordering::Acquire),
    )?;
    flow.confirm(to, fin).await
}

/// The session's end from the connection's: finished (with the final confirmation taken),
/// reset by the peer's gateway (a flow reset), or broken.
async fn ended(
    flow: &Arc<Flow>,
    conn: &Connection,
    off: &Offsets,
    sent: &Sent,
    outcome: CloseOutcome,
) -> SessionEnd {
    if let Some(v) = conn.peer_delivered() {
        if let Err(e) = apply_confirmation(flow, off, sent, v).await {
            return SessionEnd::Broken(e);
        }
    }
    if let Some((r, _)) = flow.lock().reset() {
        return SessionEnd::Reset(r.clone());
    }
    match outcome {
        CloseOutcome::Finished { .. } if Flow::complete(&flow.lock()) => SessionEnd::Complete,
        CloseOutcome::Reset(reason) => match flow_reset(&reason) {
            Some(why) => {
                flow.reset(format!("reset by peer: {why}"), false);
                SessionEnd::Reset(why.to_owned())
            }
            None => SessionEnd::Broken(format!("connection reset: {reason}")),
        },
        o => SessionEnd::Broken(format!(
            "the connection ended before the flow was complete: {}",
            aerotp_net::outcome_error(&o)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmations_map_to_flow_offsets_and_no_further() {
        // Ingress on a resume: a 20-byte open record, then data from flow offset 1000; the
        // egress's 10-byte answer, then its data from offset 50.
        let off = Offsets {
            out_skip: 20,
            out_base: 1000,
            in_skip: 10,
            in_base: 50,
        };
        assert_eq!(off.confirm_value(50), 10);
        assert_eq!(off.confirm_value(70), 30);
        // 500 bytes sent after the record.
        assert_eq!(off.peer_confirmed(0, 1500, false), Ok((1000, false)));
        assert_eq!(off.peer_confirmed(20, 1500, false), Ok((1000, false)));
        assert_eq!(off.peer_confirmed(120, 1500, false), Ok((1100, false)));
        assert_eq!(off.peer_confirmed(520, 1500, false), Ok((1500, false)));
        assert!(
            off.peer_confirmed(521, 1500, false).is_err(),
            "the end before the AFIN"
        );
        assert_eq!(off.peer_confirmed(521, 1500, true), Ok((1500, true)));
        assert!(off.peer_confirmed(522, 1500, true).is_err());
    }
}
