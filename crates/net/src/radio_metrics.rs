//! The radio's families of an endpoint's exposition (`crate::metrics`; docs/stats.md,
//! "Radio"): the changes a radio made to the paths, by kind, summed over every connection
//! the endpoint has had, and each live path's radio rate.

use crate::counters::{Totals, RADIO_CHANGE_KINDS};
use crate::exposition::{family, sample, Kind};
use aerotp_proto::{ConnectionHandle, ConnectionStats, Mode};

/// The families' names after the exposition's prefix (`aerotp_` for an endpoint's,
/// `aerotp_gw_` for a gateway's).
pub(crate) const CHANGES: &str = "radio_changes_total";
pub(crate) const RATE: &str = "radio_rate_bytes_per_second";

/// Writes the radio families to `out`, named `prefix` + name, every sample with the `extra`
/// labels first: the changes from `totals`, the rates from the `live` connections (handle,
/// mode, statistics).
pub(crate) fn render<'a>(
    out: &mut String,
    prefix: &str,
    extra: &[(&str, &str)],
    totals: &Totals,
    live: impl Iterator<Item = (ConnectionHandle, Mode, &'a ConnectionStats)>,
) {
    let (changes, rate) = (format!("{prefix}{CHANGES}"), format!("{prefix}{RATE}"));
    family(
        out,
        &changes,
        Kind::Counter,
        "Changes a radio (DLEP) made to a path, by kind; repeats of what it said are none. Summed over connections and paths.",
    );
    for ((kind, _), v) in RADIO_CHANGE_KINDS.iter().zip(totals.radio_changes()) {
        let labels: Vec<_> = extra.iter().copied().chain([("kind", *kind)]).collect();
        sample(out, &changes, &labels, *v);
    }
    family(
        out,
        &rate,
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
            let labels: Vec<_> = extra
                .iter()
                .copied()
                .chain([
                    ("connection", h.as_str()),
                    ("path", path.as_str()),
                    ("remote", remote.as_str()),
                    ("mode", mode.name()),
                ])
                .collect();
            sample(out, &rate, &labels, bps as f64 / 8.0);
        }
    }
}
