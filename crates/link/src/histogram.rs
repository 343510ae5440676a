//! Durations recorded in bounded memory, for percentiles: a log-linear histogram (the
//! HDR-histogram layout) of nanoseconds.
//!
//! Why not keep the samples: a relay runs for days and a simulated flight sends millions of
//! packets; the histogram's size is fixed whatever the count. Why not the `hdrhistogram`
//! crate: it is not in the workspace's lock file, and `LinkStats` (which holds one) must stay
//! `Eq` and serialise as a summary, which its type is not and does not.
//!
//! Layout: values below 2^[`SUB_BITS`] ns have a bucket each (exact); above, each power of
//! two `[2^e, 2^(e+1))` is cut into 2^`SUB_BITS` equal buckets. A value is reported as its
//! bucket's middle, so the error is at most half a bucket: ≤ 2^-(`SUB_BITS`+1) of the value
//! (0.4 %). Values from 2^[`TOP_EXP`] ns (about 13 days) on share the last bucket; the
//! maximum is kept exactly apart. Zeros are counted apart and the buckets are allocated at
//! the first non-zero sample, so a link that never queues (a LAN hop) holds no buckets.

use std::time::Duration;

use serde::{Serialize, Serializer};

/// Buckets per power of two: 2^7 = 128, relative error ≤ 1/256.
pub const SUB_BITS: u32 = 7;
/// Values ≥ 2^TOP_EXP ns (≈ 13 days) are counted in the last bucket.
pub const TOP_EXP: u32 = 50;
const SUB: u64 = 1 << SUB_BITS;
/// Bucket count: the exact ones below 2^SUB_BITS, then 2^SUB_BITS per power of two up to
/// 2^TOP_EXP. 5632 × 8 B = 45 KiB at most.
const BUCKETS: usize = ((TOP_EXP - SUB_BITS + 1) as usize) * SUB as usize;

/// A histogram of durations (nanosecond resolution) of bounded size; see the module docs.
///
/// Serialises as its [`DelaySummary`] (`n`, `p50`, `p99`, `max` in seconds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelayHistogram {
    /// Samples of exactly zero.
    zero: u64,
    /// Non-zero samples per bucket; empty until the first one, then `BUCKETS` long.
    counts: Vec<u64>,
    n: u64,
    max_ns: u64,
    sum_ns: u128,
}

/// Percentiles of a [`DelayHistogram`], in seconds (what the reports print).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DelaySummary {
    /// Samples recorded.
    pub n: u64,
    /// Median (nearest rank), seconds; 0 without samples.
    pub p50: f64,
    /// 99th percentile (nearest rank), seconds; 0 without samples.
    pub p99: f64,
    /// Largest sample, exact, seconds; 0 without samples.
    pub max: f64,
    /// Mean, exact, seconds; 0 without samples.
    pub mean: f64,
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    if e >= TOP_EXP {
        return BUCKETS - 1;
    }
    let shift = e - SUB_BITS;
    // (e − SUB_BITS) octaves of SUB buckets after the exact ones, then the top SUB_BITS
    // bits of v below its leading one: contiguous with the exact buckets at e = SUB_BITS.
    (shift as usize) * SUB as usize + (v >> shift) as usize
}

/// The middle of bucket `i` (its lowest value for the exact buckets), in ns.
fn middle(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        // The exact buckets and the first octave (width 1).
        return i;
    }
    let shift = i / SUB - 1;
    let low = (i - shift * SUB) << shift;
    low + (1u64 << shift) / 2
}

impl DelayHistogram {
    /// An empty histogram.
    pub fn new() -> DelayHistogram {
        DelayHistogram::default()
    }

    /// Records one duration.
    pub fn record(&mut self, d: Duration) {
        let v = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.n += 1;
        self.sum_ns += u128::from(v);
        self.max_ns = self.max_ns.max(v);
        if v == 0 {
            self.zero += 1;
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.counts[bucket(v)] += 1;
    }

    /// Adds every sample of `other` (pooling runs, or paths).
    pub fn merge(&mut self, other: &DelayHistogram) {
        self.n += other.n;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.zero += other.zero;
        if other.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The largest sample (exact); zero without samples.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// The mean (exact); zero without samples.
    pub fn mean(&self) -> Duration {
        if self.n == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(u64::try_from(self.sum_ns / u128::from(self.n)).unwrap_or(u64::MAX))
    }

    /// The `q` quantile (`q` in [0, 1], clamped), nearest rank: the smallest recorded value
    /// with at least a share `q` of the samples at or below it, to within half its bucket
    /// (≤ 0.4 %), never above the maximum (exact for the last rank). Zero without samples.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.n == 0 {
            return Duration::ZERO;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        if rank <= self.zero {
            return Duration::ZERO;
        }
        if rank == self.n {
            // The largest sample is known exactly.
            return self.max();
        }
        let mut seen = self.zero;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(middle(i).min(self.max_ns));
            }
        }
        self.max()
    }

    /// Median.
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    /// 99th percentile.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    /// Count, p50, p99, max and mean in seconds.
    pub fn summary(&self) -> DelaySummary {
        DelaySummary {
            n: self.n,
            p50: self.p50().as_secs_f64(),
            p99: self.p99().as_secs_f64(),
            max: self.max().as_secs_f64(),
            mean: self.mean().as_secs_f64(),
        }
    }
}

/// `p50 1.234 ms, p99 5.678 ms, max 9.012 ms (N packets)`: the form the drivers print.
impl std::fmt::Display for DelaySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({} packets)",
            self.p50 * 1e3,
            self.p99 * 1e3,
            self.max * 1e3,
            self.n
        )
    }
}

impl Serialize for DelayHistogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.summary().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_bounded() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(SUB - 1), SUB as usize - 1);
        assert_eq!(bucket(SUB), SUB as usize);
        assert_eq!(bucket(2 * SUB - 1), 2 * SUB as usize - 1);
        assert_eq!(bucket(2 * SUB), 2 * SUB as usize);
        assert_eq!(bucket((1 << TOP_EXP) - 1), BUCKETS - 1);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        // Every bucket's middle falls in that bucket, and buckets never go backwards.
        let mut last = 0;
        let mut values: Vec<u64> = (0..TOP_EXP + 2)
            .flat_map(|e| [1u64 << e, (1u64 << e) + 1, (3u64 << e) / 2, (2u64 << e) - 1])
            .collect();
        values.sort_unstable();
        for v in values {
            let b = bucket(v);
            assert!(b >= last, "{v}");
            last = b;
            assert_eq!(bucket(middle(b)), b, "{v}");
        }
    }

    #[test]
    fn relative_error_is_within_half_a_bucket() {
        let mut v = 1u64;
        while v < 1 << 45 {
            let mut h = DelayHistogram::new();
            h.record(Duration::from_nanos(v));
            h.record(Duration::from_nanos(v.saturating_mul(3)));
            let got = h.quantile(0.5).as_nanos() as f64;
            let err = (got - v as f64).abs() / v as f64;
            assert!(err <= 1.0 / 256.0, "{v}: {got}");
            v = v * 7 / 3 + 1;
        }
    }

    #[test]
    fn nearest_rank_over_zeros_and_values() {
        let mut h = DelayHistogram::new();
        assert_eq!(h.p99(), Duration::ZERO);
        for _ in 0..99 {
            h.record(Duration::ZERO);
        }
        h.record(Duration::from_millis(5));
        // 99 of 100 at zero: p99 is zero, the max is exact.
        assert_eq!(h.p99(), Duration::ZERO);
        assert_eq!(h.quantile(1.0), Duration::from_millis(5));
        assert_eq!(h.max(), Duration::from_millis(5));
        assert_eq!(h.mean(), Duration::from_micros(50));
        assert_eq!(h.count(), 100);
        let mut other = DelayHistogram::new();
        other.record(Duration::from_secs(1));
        h.merge(&other);
        assert_eq!(h.max(), Duration::from_secs(1));
        assert_eq!(h.count(), 101);
        assert_eq!(h.quantile(f64::NAN), Duration::from_secs(1));
        let json = serde_json::to_value(&h).unwrap();
        assert_eq!(json["n"], 101);
        assert_eq!(json["max"], 1.0);
        // 5 ms is reported as its bucket's middle (buckets of 32.768 µs there).
        assert_eq!(
            h.summary().to_string(),
            "p50 0.000 ms, p99 4.997 ms, max 1000.000 ms (101 packets)"
        );
    }

    #[test]
    fn a_histogram_of_zeros_holds_no_buckets() {
        let mut h = DelayHistogram::new();
        h.record(Duration::ZERO);
        assert!(h.counts.is_empty());
        h.merge(&DelayHistogram::new());
        assert!(h.counts.is_empty());
    }
}
