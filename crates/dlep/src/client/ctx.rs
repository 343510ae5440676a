//! State the client's phases share, and how they stop.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{sleep, Instant};

use super::config::{ClientConfig, Command};
use crate::session::Event;

/// Why a phase of the loop ended early.
pub(super) enum Stop {
    /// Shutdown asked for, or nobody listens to the events any more.
    Quit,
}

pub(super) struct Ctx {
    pub(super) cfg: ClientConfig,
    pub(super) events: mpsc::Sender<Event>,
    pub(super) commands: mpsc::Receiver<Command>,
    pub(super) start: Instant,
}

impl Ctx {
    pub(super) fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Client-side events are informational: dropped (and logged) rather than waited for when
    /// the channel is full. A closed channel stops the client.
    pub(super) fn tell(&self, e: Event) -> Result<(), Stop> {
        match self.events.try_send(e) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(e)) => {
                tracing::debug!("DLEP client: event channel full, dropped {e:?}");
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Stop::Quit),
        }
    }

    /// Waits `d`, or less if a shutdown arrives (link-characteristics requests made while no
    /// session is up are dropped: there is no destination to ask about).
    pub(super) async fn pause(&mut self, d: Duration) -> Result<(), Stop> {
        let until = sleep(d);
        tokio::pin!(until);
        loop {
            tokio::select! {
                _ = &mut until => return Ok(()),
                c = self.commands.recv() => match c {
                    Some(Command::LinkCharacteristics { .. }) => {}
                    Some(Command::Shutdown) | None => return Err(Stop::Quit),
                },
                _ = self.events.closed() => return Err(Stop::Quit),
            }
        }
    }
}
