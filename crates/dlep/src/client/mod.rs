//! A tokio task that keeps a router-side DLEP session to one modem: it connects over TCP (or
//! finds the modem by Peer Discovery first), runs a [`Session`](crate::Session), reconnects
//! with backoff whenever the modem vanishes, and delivers [`Event`]s on a channel.
//!
//! Nothing the modem does can panic or stall the task: malformed input ends the session (and
//! a new one starts), floods are bounded by the session's queues, a connection that stops
//! accepting writes is dropped after a timeout, and connect failures are retried.

mod config;
mod ctx;
mod discover;
mod run;

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use config::{ClientConfig, Discovery, Target};

use crate::codec::Mac;
use crate::session::Event;
use config::Command;

/// Handle to the running client task. Dropping it stops the task at once; [`Client::shutdown`]
/// ends the session politely first.
#[derive(Debug)]
pub struct Client {
    commands: mpsc::Sender<Command>,
    task: Option<JoinHandle<()>>,
}

/// Starts the client on the current tokio runtime. Events arrive on the returned receiver;
/// dropping the receiver stops the client.
pub fn spawn(cfg: ClientConfig) -> (Client, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel(cfg.channel_capacity.max(1));
    let (ctx, crx) = mpsc::channel(16);
    let task = tokio::spawn(run::run(cfg, tx, crx));
    (
        Client {
            commands: ctx,
            task: Some(task),
        },
        rx,
    )
}

impl Client {
    /// Asks the modem for a destination's link characteristics (RFC 8175 §12.11); the answer
    /// is an [`Event::LinkCharacteristics`]. False when the request could not be queued.
    pub fn request_link_characteristics(
        &self,
        mac: Mac,
        current_rate_tx: Option<u64>,
        latency_us: Option<u64>,
    ) -> bool {
        self.commands
            .try_send(Command::LinkCharacteristics {
                mac,
                current_rate_tx,
                latency_us,
            })
            .is_ok()
    }

    /// Sends Session Termination, waits (briefly) for the modem's response and stops the task.
    pub async fn shutdown(mut self) {
        let _ = self.commands.send(Command::Shutdown).await;
        if let Some(task) = self.task.take() {
            // Bounded: the session's termination timeout, plus the final writes.
            if tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .is_err()
            {
                tracing::warn!("DLEP client did not stop in 10 s");
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
