//! The radio's families of an endpoint's exposition (`crate::metrics`; docs/stats.md,
//! "Radio"): the changes a radio made to the paths, by kind, summed over every connection
//! the endpoint has had, and each live path's radio rate.

use crate::counters::{Totals, RADIO_CHANGE_KINDS};
use crate::exposition::{family, sample, Kind};
use aerotp_proto::{ConnectionHandle, ConnectionStats, Mode};

pub(crate) const CHANGES: &str = "aerotp_radio_changes_total";
pub(crate) const RATE: &str = "aerotp_radio_rate_bytes_per_second";

/// Writes the radio families to `out`: the changes from `totals`, the rates from the `live`
/// connections (handle, mode, statistics).
pub(crate) fn render<'a>(
    out: &mut String,
    totals: &Totals,
    live: impl Iterator<Item = (ConnectionHandle, Mode, &'a ConnectionStats)>,
) {
    family(
        out,
        CHANGES,
        Kind::Counter,
        "Changes a radio (DLEP) made to a path, by kind; repeats of what it said are none. Summed over connections and paths.",
    );
    for ((kind, _), v) in RADIO_CHANGE_KINDS.iter().zip(totals.radio_changes()) {
        sample(out, CHANGES, &[("kind", kind)], *v);
    }
    family(
        out,
        RATE,
        Kind::Gauge,
        "What a path's radio last said it carries (DLEP Current Data Rate Tx), bytes per second; no sample without one.",
    );
    for (handle, mode, stats) in live {
        let h = handle.0.to_string();
        for (i, p) in stats.paths.iter().enumerate() {
            let Some(bps) = p.rate.radio_bps else {
                continue;
            };
            let (path, remote) = (i.to_string(), p.remote.to_string());
            let labels = [
                ("connection", h.as_str()),
                ("path", path.as_str()),
                ("remote", remote.as_str()),
                ("mode", mode.name()),
            ];
            sample(out, RATE, &labels, bps as f64 / 8.0);
        }
    }
}
