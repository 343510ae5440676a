//! One row of results: a point's summary flattened to named numbers, or a peer's row.

use std::collections::BTreeMap;

use super::template::Lookup;
use crate::summary::Summary;

/// Where the simulator's rows come from (peers' rows name their tool).
pub const SIM_SOURCE: &str = "aerotp-sim";

/// One summarised point (or a peer's row).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub experiment: String,
    pub series: String,
    pub source: String,
    pub x: f64,
    /// Every numeric field of the summary by its JSON name (`goodput_bps`, nested ones as
    /// `goodput.ci95`), `ceiling_share`, and the swept settings as `set.KEY`.
    pub metrics: BTreeMap<String, f64>,
}

impl Row {
    pub fn is_sim(&self) -> bool {
        self.source == SIM_SOURCE
    }

    /// Whether every run of the point was complete.
    pub fn complete(&self) -> bool {
        matches!(
            (self.metrics.get("complete_runs"), self.metrics.get("runs")),
            (Some(c), Some(r)) if c == r
        )
    }
}

impl Lookup for Row {
    fn number(&self, name: &str) -> Option<f64> {
        if name == "x" {
            return Some(self.x);
        }
        self.metrics.get(name).copied()
    }
    fn text(&self, name: &str) -> Option<String> {
        match name {
            "series" => Some(self.series.clone()),
            "experiment" => Some(self.experiment.clone()),
            "source" => Some(self.source.clone()),
            _ => None,
        }
    }
}

/// The numeric fields of a summary by name: top-level numbers as they are, numbers of
/// nested objects as `outer.inner`; text, nulls and lists are left out. Adds
/// `ceiling_share` = goodput / ceiling when the summary has a ceiling.
pub fn flatten(s: &Summary) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    let v = serde_json::to_value(s).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(o) = v {
        for (k, v) in o {
            match v {
                serde_json::Value::Number(n) => {
                    if let Some(f) = n.as_f64() {
                        m.insert(k, f);
                    }
                }
                serde_json::Value::Object(inner) => {
                    for (k2, v2) in inner {
                        if let Some(f) = v2.as_f64() {
                            m.insert(format!("{k}.{k2}"), f);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    if let (Some(&g), Some(&c)) = (m.get("goodput_bps"), m.get("ceiling_bps")) {
        if c > 0.0 {
            m.insert("ceiling_share".into(), g / c);
        }
    }
    m
}
