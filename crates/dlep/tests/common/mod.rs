//! Helpers shared by the integration tests: bounded waits for client events.

#![allow(dead_code)]

use std::time::Duration;

use aerotp_dlep::Event;
use tokio::sync::mpsc::Receiver;
use tokio::time::{timeout_at, Instant};

/// Logs to the test's output when RUST_LOG is set.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// The first event matching `pred` within `limit`; panics with everything seen otherwise.
pub async fn wait_for(
    rx: &mut Receiver<Event>,
    limit: Duration,
    what: &str,
    mut pred: impl FnMut(&Event) -> bool,
) -> Event {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    loop {
        match timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => {
                if pred(&e) {
                    return e;
                }
                seen.push(e);
            }
            Ok(None) => panic!("event channel closed waiting for {what}; saw {seen:#?}"),
            Err(_) => panic!("no {what} within {limit:?}; saw {seen:#?}"),
        }
    }
}

/// Every event that arrives within `d`.
pub async fn collect_for(rx: &mut Receiver<Event>, d: Duration) -> Vec<Event> {
    let deadline = Instant::now() + d;
    let mut seen = Vec::new();
    while let Ok(Some(e)) = timeout_at(deadline, rx.recv()).await {
        seen.push(e);
    }
    seen
}
