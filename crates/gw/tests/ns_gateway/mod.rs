//! A gateway running on a tokio runtime whose threads live in a lab namespace: shared by the
//! gateway's lab tests (`lab.rs`, `transparent.rs`, `e2e_ack.rs`, `telemetry.rs`).

#![allow(dead_code)]

use std::process::{Child, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerotp_gw::config::FileConfig;
use aerotp_gw::Gateway;
use aerotp_lab::{Lab, Side};

/// A gateway on a runtime whose threads live in a lab namespace.
pub struct NsGateway {
    pub gw: Arc<Gateway>,
    stop: std::sync::mpsc::Sender<()>,
    thread: aerotp_lab::NsThread<()>,
}

pub fn start_gateway(lab: &Lab, side: Side, role: aerotp_gw::Role, cfg: FileConfig) -> NsGateway {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
    let thread = lab
        .spawn_in(side, move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            let r = rt.block_on(async { aerotp_gw::start(role, cfg.settings()?).await });
            let ok = r.is_ok();
            let _ = tx.send(r.map_err(|e| format!("{e:#}")));
            if ok {
                let _ = stop_rx.recv();
            }
            rt.shutdown_timeout(Duration::from_secs(2));
        })
        .expect("gateway thread in the namespace");
    let gw = rx
        .recv()
        .expect("gateway thread")
        .unwrap_or_else(|e| panic!("{role}: {e}"));
    NsGateway { gw, stop, thread }
}

impl NsGateway {
    pub fn stop(self) {
        drop(self.gw);
        let _ = self.stop.send(());
        self.thread.join().expect("gateway thread");
    }
}

/// Waits for `c` to exit within `deadline` and returns its output; kills it and fails the test
/// otherwise (a lab test's every program is bounded in time).
pub fn wait_output(mut c: Child, what: &str, deadline: Instant) -> Output {
    loop {
        if c.try_wait().expect("try_wait").is_some() {
            return c.wait_with_output().expect("output");
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("{what} did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
