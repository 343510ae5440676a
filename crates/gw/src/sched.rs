//! Shares the air link's rate among the flows' AeroTP connections: control before telemetry
//! before bulk, strict or weighted (docs/gateway.md §Priorities). Recomputed every
//! [`PERIOD`] from which flows have bytes waiting.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aerotp_net::Connection;

use crate::flow::{Flow, SessionLoad};
use crate::frame::Class;

pub const PERIOD: Duration = Duration::from_millis(50);
/// Engine's lowest rate.
const MIN_RATE: u64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// A class gets the link only when no higher class has bytes waiting (lower classes keep
    /// `floor` of it to stay alive).
    Strict { floor: f64 },
    /// Busy flows share the link in proportion to their class weight.
    Weighted { weights: [u32; 3] },
}

struct Entry {
    conn: Connection,
    class: Class,
    load: Arc<SessionLoad>,
    flow: Option<Arc<Flow>>,
    rate: u64,
}

impl Entry {
    /// Busy: bytes wait in the gateway for this connection, or in the engine's send buffer
    /// (queued or not yet acknowledged). The engine's buffer matters: a flow's writer hands
    /// the engine up to a whole send buffer at once, so a gateway-only count would call a
    /// saturating flow idle and hand every flow an as-if-busy rate (the link oversubscribed).
    fn busy(&self) -> bool {
        self.load.backlog.load(Ordering::Relaxed) > 0
            || (self.conn.outcome().is_none() && self.conn.writable() < crate::gateway::SEND_BUFFER)
    }
}

/// The rate allocator of one gateway.
pub struct Scheduler {
    total: u64,
    policy: Policy,
    entries: Mutex<HashMap<u64, Entry>>,
    next: Mutex<u64>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("total", &self.total)
            .field("policy", &self.policy)
            .finish()
    }
}

/// Removes its session from the scheduler when dropped.
#[derive(Debug)]
pub struct Registration {
    sched: Arc<Scheduler>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.sched
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.sched.recompute();
    }
}

impl Scheduler {
    pub fn new(total: u64, policy: Policy) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            total,
            policy,
            entries: Mutex::new(HashMap::new()),
            next: Mutex::new(0),
        })
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Rate for a connection about to open (as if it were busy).
    pub fn initial_rate(&self, class: Class) -> u64 {
        let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let busy: Vec<Class> = e.values().filter(|x| x.busy()).map(|x| x.class).collect();
        self.share(class, &busy, true)
    }

    pub fn register(
        self: &Arc<Self>,
        conn: Connection,
        class: Class,
        load: Arc<SessionLoad>,
        flow: Option<Arc<Flow>>,
    ) -> Registration {
        let id = {
            let mut n = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Entry {
                    conn,
                    class,
                    load,
                    flow,
                    rate: 0,
                },
            );
        self.recompute();
        Registration {
            sched: self.clone(),
            id,
        }
    }

    /// The rate of a flow of `class` given the classes of the busy flows (`busy` includes the
    /// flow itself if it is busy; `add_self` counts it in when it is not listed).
    fn share(&self, class: Class, busy: &[Class], add_self: bool) -> u64 {
        let mut busy = busy.to_vec();
        if add_self {
            busy.push(class);
        }
        let r = match self.policy {
            Policy::Weighted { weights } => {
                let w = |c: Class| u64::from(weights[c as usize].max(1));
                let sum: u64 = busy.iter().map(|&c| w(c)).sum();
                self.total * w(class) / sum.max(1)
            }
            Policy::Strict { floor } => {
                let top = busy.iter().min().copied().unwrap_or(class);
                let floor_bps = (self.total as f64 * floor) as u64;
                if class == top {
                    let n = busy.iter().filter(|&&c| c == top).count() as u64;
                    let lower = busy.iter().filter(|&&c| c != top).count() as u64;
                    self.total.saturating_sub(lower * floor_bps) / n.max(1)
                } else {
                    floor_bps
                }
            }
        };
        r.clamp(MIN_RATE, self.total.max(MIN_RATE))
    }

    /// Recomputes every connection's rate from which flows have bytes waiting.
    pub fn recompute(&self) {
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let busy: Vec<Class> = e.values().filter(|x| x.busy()).map(|x| x.class).collect();
        for x in e.values_mut() {
            let is_busy = x.busy();
            let r = self.share(x.class, &busy, !is_busy);
            if r != x.rate {
                x.rate = r;
                x.conn.set_rate(r);
                if let Some(f) = &x.flow {
                    f.rate.store(r, Ordering::Relaxed);
                }
            }
        }
    }

    /// Recomputes every [`PERIOD`] until the scheduler is dropped elsewhere.
    pub fn spawn(self: &Arc<Self>) {
        let w = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut t = tokio::time::interval(PERIOD);
            loop {
                t.tick().await;
                match w.upgrade() {
                    Some(s) => s.recompute(),
                    None => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_the_policy() {
        let w = Scheduler::new(9_000_000, Policy::Weighted { weights: [8, 4, 1] });
        let busy = [Class::Control, Class::Bulk];
        assert_eq!(w.share(Class::Control, &busy, false), 8_000_000);
        assert_eq!(w.share(Class::Bulk, &busy, false), 1_000_000);
        // Alone, a flow gets the whole link.
        assert_eq!(w.share(Class::Bulk, &[], true), 9_000_000);
        let s = Scheduler::new(10_000_000, Policy::Strict { floor: 0.01 });
        let busy = [Class::Telemetry, Class::Bulk, Class::Bulk];
        assert_eq!(s.share(Class::Telemetry, &busy, false), 9_800_000);
        assert_eq!(s.share(Class::Bulk, &busy, false), 100_000);
        assert_eq!(
            s.share(Class::Bulk, &[Class::Bulk, Class::Bulk], false),
            5_000_000
        );
    }
}
