//! How the sender's view of each path's state compared with the link's: the down intervals
//! the engine declared, against the outages the link model applied (docs/results/multipath.md,
//! "Call drops against down declarations"). With one path nothing is recorded.

use std::time::Duration;

use serde::Serialize;

/// A declaration that starts this long after an outage ended still counts as that outage's:
/// what was sent into the outage's last seconds is only found missing a timeout later.
/// Beyond it the declaration is false (the path was carrying).
pub const DECLARATION_GRACE: Duration = Duration::from_secs(10);

/// The sender's path states over a run, sampled after every step of the loop.
#[derive(Debug, Default)]
pub(super) struct PathWatch {
    /// Per path: up as last seen, and the down intervals declared so far (`None` end: still
    /// down).
    up: Vec<bool>,
    downs: Vec<Vec<(Duration, Option<Duration>)>>,
}

impl PathWatch {
    /// Paths' states at `now`: (the scenario's index of the path, `true` if up). The
    /// engine numbers paths in the order they were validated, which is not the scenario's.
    pub(super) fn observe(&mut self, now: Duration, up: impl IntoIterator<Item = (usize, bool)>) {
        for (i, up) in up {
            if i >= self.up.len() {
                self.up.resize(i + 1, true);
                self.downs.resize(i + 1, Vec::new());
            }
            if up == self.up[i] {
                continue;
            }
            self.up[i] = up;
            if up {
                if let Some(last) = self.downs[i].last_mut() {
                    last.1.get_or_insert(now);
                }
            } else {
                self.downs[i].push((now, None));
            }
        }
    }

    /// Path `i`'s declared down intervals, the open one closed at `end`.
    pub(super) fn declared(&self, i: usize, end: Duration) -> Vec<(Duration, Duration)> {
        self.downs
            .get(i)
            .map(|v| v.iter().map(|&(s, e)| (s, e.unwrap_or(end))).collect())
            .unwrap_or_default()
    }
}

/// One path of a run: its outages (forward direction, as the link applied them, up to the
/// run's end) and the engine's down declarations, matched.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathRun {
    /// `[start, end)` seconds of each outage that began before the run ended.
    pub outages: Vec<[f64; 2]>,
    /// `[start, end)` seconds of each interval the sender held the path down.
    pub declared: Vec<[f64; 2]>,
    /// Outages during which (or within `DECLARATION_GRACE` of whose end) a declaration began.
    pub outages_declared: usize,
    /// Declarations that began outside every outage and its grace.
    pub false_declarations: usize,
    /// Per declared outage: from its start to the first declaration, seconds.
    pub detection_s: Vec<f64>,
    /// Seconds the path was held up while its link was down, and held down while its link
    /// was up.
    pub up_while_down_s: f64,
    pub down_while_up_s: f64,
}

impl PathRun {
    pub fn new(outages: &[(Duration, Duration)], declared: &[(Duration, Duration)]) -> PathRun {
        let within =
            |t: Duration, o: &(Duration, Duration)| t >= o.0 && t < o.1 + DECLARATION_GRACE;
        let mut detection_s = Vec::new();
        for o in outages {
            if let Some(d) = declared.iter().find(|d| within(d.0, o)) {
                detection_s.push(d.0.saturating_sub(o.0).as_secs_f64());
            }
        }
        let false_declarations = declared
            .iter()
            .filter(|d| !outages.iter().any(|o| within(d.0, o)))
            .count();
        let overlap = |a: &[(Duration, Duration)], b: &[(Duration, Duration)]| -> Duration {
            let mut sum = Duration::ZERO;
            for x in a {
                for y in b {
                    let (s, e) = (x.0.max(y.0), x.1.min(y.1));
                    sum += e.saturating_sub(s);
                }
            }
            sum
        };
        let total = |v: &[(Duration, Duration)]| -> Duration {
            v.iter().map(|x| x.1.saturating_sub(x.0)).sum()
        };
        let both = overlap(outages, declared);
        let secs = |v: &[(Duration, Duration)]| {
            v.iter()
                .map(|x| [x.0.as_secs_f64(), x.1.as_secs_f64()])
                .collect::<Vec<_>>()
        };
        PathRun {
            outages: secs(outages),
            declared: secs(declared),
            outages_declared: detection_s.len(),
            false_declarations,
            detection_s,
            up_while_down_s: total(outages).saturating_sub(both).as_secs_f64(),
            down_while_up_s: total(declared).saturating_sub(both).as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: f64) -> Duration {
        Duration::from_secs_f64(v)
    }

    #[test]
    fn declarations_are_matched_to_outages_and_the_rest_are_false() {
        let outages = [
            (s(100.0), s(145.0)),
            (s(300.0), s(350.0)),
            (s(500.0), s(545.0)),
        ];
        // The first outage found 4 s in, the second not at all, the third 2 s after it
        // ended (within the grace); one declaration at 200 s with the link up.
        let declared = [
            (s(104.0), s(147.0)),
            (s(200.0), s(203.0)),
            (s(547.0), s(549.0)),
        ];
        let r = PathRun::new(&outages, &declared);
        assert_eq!(r.outages_declared, 2);
        assert_eq!(r.false_declarations, 1);
        assert_eq!(r.detection_s, vec![4.0, 47.0]);
        // Up while down: 4 s of the first, all 50 of the second, all 45 of the third.
        assert!(
            (r.up_while_down_s - 99.0).abs() < 1e-9,
            "{}",
            r.up_while_down_s
        );
        // Down while up: 2 s after the first, 3 s at 200 s, 2 s after the third.
        assert!(
            (r.down_while_up_s - 7.0).abs() < 1e-9,
            "{}",
            r.down_while_up_s
        );
    }

    #[test]
    fn the_watch_records_each_transition_once() {
        let mut w = PathWatch::default();
        w.observe(s(1.0), [(0, true), (1, true)]);
        w.observe(s(2.0), [(1, true), (0, false)]);
        w.observe(s(3.0), [(0, false), (1, true)]);
        w.observe(s(4.0), [(0, true), (1, true)]);
        w.observe(s(5.0), [(0, false), (1, true)]);
        assert_eq!(
            w.declared(0, s(9.0)),
            vec![(s(2.0), s(4.0)), (s(5.0), s(9.0))]
        );
        assert!(w.declared(1, s(9.0)).is_empty());
        assert!(w.declared(2, s(9.0)).is_empty());
    }
}
