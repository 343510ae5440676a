//! The client task: find the modem, connect, run the session, back off, repeat.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, timeout, Instant};

use super::config::{ClientConfig, Command, Target};
use super::ctx::{Ctx, Stop};
use super::discover;
use crate::session::{Event, Session};

/// Read buffer: any size works (the session reassembles messages); this bounds one read.
const READ_BUF: usize = 16 * 1024;

pub(super) async fn run(
    cfg: ClientConfig,
    events: mpsc::Sender<Event>,
    commands: mpsc::Receiver<Command>,
) {
    let mut ctx = Ctx {
        cfg,
        events,
        commands,
        start: Instant::now(),
    };
    let _ = run_loop(&mut ctx).await;
    tracing::debug!("DLEP client stopped");
}

async fn run_loop(ctx: &mut Ctx) -> Result<(), Stop> {
    let mut backoff = ctx.cfg.backoff_initial;
    loop {
        let addr = match ctx.cfg.target.clone() {
            Target::Connect(a) => a,
            Target::Discover(d) => {
                let a = discover::find_modem(ctx, &d).await?;
                ctx.tell(Event::PeerDiscovered { addr: a })?;
                a
            }
        };
        ctx.tell(Event::Connecting { addr })?;
        let connected = tokio::select! {
            r = timeout(ctx.cfg.connect_timeout, TcpStream::connect(addr)) => match r {
                Ok(Ok(s)) => Ok(s),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer in {:?}", ctx.cfg.connect_timeout)),
            },
            _ = ctx.events.closed() => return Err(Stop::Quit),
        };
        match connected {
            Ok(stream) => {
                tracing::info!("DLEP: connected to modem {addr}");
                if session(ctx, stream).await? {
                    backoff = ctx.cfg.backoff_initial;
                }
            }
            Err(error) => {
                tracing::warn!("DLEP: connecting to {addr} failed: {error} (retry in {backoff:?})");
                ctx.tell(Event::ConnectFailed {
                    addr: Some(addr),
                    error,
                    retry_in: backoff,
                })?;
            }
        }
        ctx.pause(backoff).await?;
        backoff = backoff
            .saturating_mul(2)
            .min(ctx.cfg.backoff_max.max(ctx.cfg.backoff_initial));
    }
}

/// Runs one session over `stream` until it ends. Ok(true) if it came up.
async fn session(ctx: &mut Ctx, stream: TcpStream) -> Result<bool, Stop> {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let mut s = Session::new(ctx.cfg.session.clone(), ctx.now());
    let mut buf = vec![0u8; READ_BUF];
    let mut came_up = false;
    // Shutdown asked for, or (`gone`) nobody reads the events any more.
    let mut quit = false;
    let mut gone = false;
    // A modem that stops reading must not stall the heartbeats: writes get this long.
    let write_limit =
        (ctx.cfg.session.heartbeat_interval.saturating_mul(2)).max(Duration::from_secs(1));
    let mut eof = false;
    loop {
        transmit(&mut s, &mut wr, write_limit).await;
        came_up |= s.is_up();
        if gone {
            // Nobody will read them: without this the loop would spin on a closed channel.
            while s.poll_event().is_some() {}
        }
        if s.is_closed() {
            break;
        }
        let wake = s
            .poll_timeout()
            .and_then(|t| ctx.start.checked_add(t))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            r = rd.read(&mut buf), if !eof => match r {
                Ok(0) => {
                    eof = true;
                    s.handle_eof(ctx.now());
                }
                Ok(n) => s.handle_bytes(ctx.now(), &buf[..n]),
                Err(e) => s.handle_io_error(format!("read: {e}")),
            },
            _ = sleep_until(wake) => s.handle_timeout(ctx.now()),
            permit = ctx.events.reserve(), if s.pending_events() > 0 && !gone => match permit {
                Ok(p) => {
                    if let Some(e) = s.poll_event() {
                        p.send(e);
                    }
                }
                Err(_) => {
                    (quit, gone) = (true, true);
                    s.close(ctx.now());
                }
            },
            _ = ctx.events.closed(), if !gone => {
                // Nobody listens any more: end the session politely and stop.
                (quit, gone) = (true, true);
                s.close(ctx.now());
            }
            c = ctx.commands.recv(), if !quit => quit = on_command(&mut s, c, ctx.now()),
        }
    }
    let _ = timeout(Duration::from_millis(200), wr.shutdown()).await;
    last_events(ctx, &mut s, quit).await?;
    if quit {
        return Err(Stop::Quit);
    }
    Ok(came_up)
}

/// Writes what the session has to send; a write that fails or stalls past `write_limit` is
/// the session's to handle (it ends).
async fn transmit(s: &mut Session, wr: &mut OwnedWriteHalf, write_limit: Duration) {
    while let Some(bytes) = s.poll_transmit() {
        match timeout(write_limit, wr.write_all(&bytes)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => s.handle_io_error(format!("write: {e}")),
            Err(_) => s.handle_io_error(format!("write stalled for {write_limit:?}")),
        }
    }
}

/// A command from the client's owner (`None`: the owner is gone); true when the session is
/// to end.
fn on_command(s: &mut Session, c: Option<Command>, now: Duration) -> bool {
    match c {
        Some(Command::LinkCharacteristics {
            mac,
            current_rate_tx,
            latency_us,
        }) => {
            if !s.request_link_characteristics(mac, current_rate_tx, latency_us) {
                tracing::debug!(
                    "DLEP: link characteristics request for {mac} not sent (no such destination)"
                );
            }
            false
        }
        Some(Command::Shutdown) | None => {
            s.close(now);
            true
        }
    }
}

/// The session's last events (SessionLost above all) reach the consumer before anything else
/// happens; when quitting, only those the channel has room for.
async fn last_events(ctx: &mut Ctx, s: &mut Session, quit: bool) -> Result<(), Stop> {
    while let Some(e) = s.poll_event() {
        if quit {
            let _ = ctx.events.try_send(e);
            continue;
        }
        loop {
            tokio::select! {
                permit = ctx.events.reserve() => {
                    permit.map_err(|_| Stop::Quit)?.send(e);
                    break;
                }
                c = ctx.commands.recv() => match c {
                    Some(Command::LinkCharacteristics { .. }) => {}
                    Some(Command::Shutdown) | None => return Err(Stop::Quit),
                },
            }
        }
    }
    Ok(())
}
