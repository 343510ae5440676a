//! What the links' queues did in a run: the queueing delay at each path's bottleneck and the
//! tail drops, per direction, read from the link model once the run is over.

use aerotp_link::DelayHistogram;
use aerotp_pair::{Dir, Links};

use super::result::RunResult;

/// Fills the run's queue figures from its links. Delays are pooled over the paths of a
/// direction (each packet waited at its own path's bottleneck); drops are summed over every
/// hop (a drop anywhere is a packet the link never carried).
pub(super) fn record_queues(r: &mut RunResult, links: &Links) {
    let of = |dir| {
        let mut delay = DelayHistogram::new();
        let mut drops = 0;
        for p in links.paths(dir) {
            let s = p.stats();
            delay.merge(&s.queue_delay);
            drops += s.dropped_queue_packets;
        }
        (delay, drops)
    };
    (r.queue_delay_forward, r.queue_drops_forward) = of(Dir::Forward);
    (r.queue_delay_reverse, r.queue_drops_reverse) = of(Dir::Reverse);
}
