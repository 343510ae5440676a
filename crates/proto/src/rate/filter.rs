//! Windowed extrema: the largest (or smallest) value seen over the last `window` units of a
//! clock (round trips for the bandwidth, time for the round trip). Kept as the best three
//! samples of the window's start, middle and end (Kathleen Nichols' scheme, as Linux's
//! `lib/minmax.c` and quinn's `MinMax` do), so the extreme ages out in steps instead of
//! being held by one stale sample. Written here because no maintained crate offers a
//! windowed extremum over a caller-supplied clock (the engine reads no clock of its own).

/// One kept sample: its value and when (in the filter's clock) it was taken.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Kept {
    at: u64,
    value: f64,
}

/// The largest value over a sliding window of the caller's clock (round trips, or
/// microseconds). Use [`WindowedMin`] for the smallest.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowedMax {
    window: u64,
    kept: [Kept; 3],
    empty: bool,
}

impl WindowedMax {
    pub fn new(window: u64) -> WindowedMax {
        WindowedMax {
            window,
            kept: [Kept::default(); 3],
            empty: true,
        }
    }

    /// The extreme over the window, if any sample was taken since the last reset.
    pub fn get(&self) -> Option<f64> {
        (!self.empty).then_some(self.kept[0].value)
    }

    /// Changes how long a value is kept, from the next update on.
    pub fn set_window(&mut self, window: u64) {
        self.window = window;
    }

    /// Forgets everything and starts from `value` at `at`.
    pub fn reset(&mut self, at: u64, value: f64) {
        self.kept = [Kept { at, value }; 3];
        self.empty = false;
    }

    /// Takes `value` measured at `at` (`at` never decreases between calls).
    pub fn update(&mut self, at: u64, value: f64) {
        let s = Kept { at, value };
        if self.empty
            || value >= self.kept[0].value
            || at.saturating_sub(self.kept[2].at) > self.window
        {
            self.reset(at, value);
            return;
        }
        if value >= self.kept[1].value {
            self.kept[1] = s;
            self.kept[2] = s;
        } else if value >= self.kept[2].value {
            self.kept[2] = s;
        }
        self.age(s);
    }

    /// Moves the kept samples along when the best is older than the window.
    fn age(&mut self, s: Kept) {
        let dt = s.at.saturating_sub(self.kept[0].at);
        if dt > self.window {
            self.kept = [self.kept[1], self.kept[2], s];
            if s.at.saturating_sub(self.kept[0].at) > self.window {
                self.kept = [self.kept[1], self.kept[2], s];
            }
        } else if self.kept[1].at == self.kept[0].at && dt > self.window / 4 {
            self.kept[1] = s;
            self.kept[2] = s;
        } else if self.kept[2].at == self.kept[1].at && dt > self.window / 2 {
            self.kept[2] = s;
        }
    }
}

/// The smallest value over a sliding window: a [`WindowedMax`] of the negated values.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowedMin(WindowedMax);

impl WindowedMin {
    pub fn new(window: u64) -> WindowedMin {
        WindowedMin(WindowedMax::new(window))
    }

    pub fn get(&self) -> Option<f64> {
        self.0.get().map(|v| -v)
    }

    pub fn update(&mut self, at: u64, value: f64) {
        self.0.update(at, -value);
    }

    pub fn set_window(&mut self, window: u64) {
        self.0.set_window(window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_holds_for_the_window_then_ages_out() {
        let mut f = WindowedMax::new(10);
        assert_eq!(f.get(), None);
        f.update(0, 100.0);
        for t in 1..=10 {
            f.update(t, 50.0);
            assert_eq!(f.get(), Some(100.0), "round {t}");
        }
        // Past the window the old peak is gone and the best recent sample remains.
        for t in 11..=14 {
            f.update(t, 50.0);
        }
        assert_eq!(f.get(), Some(50.0));
    }

    #[test]
    fn a_higher_sample_takes_over_at_once_and_reset_forgets() {
        let mut f = WindowedMax::new(10);
        f.update(0, 10.0);
        f.update(1, 30.0);
        assert_eq!(f.get(), Some(30.0));
        f.reset(2, 5.0);
        assert_eq!(f.get(), Some(5.0));
    }

    #[test]
    fn a_falling_series_is_followed_within_the_window() {
        let mut f = WindowedMax::new(4);
        for t in 0..40u64 {
            f.update(t, 1000.0 - t as f64 * 10.0);
            let got = f.get().unwrap();
            // Never more than the window's worth of samples behind.
            assert!(
                got <= 1000.0 - t.saturating_sub(5) as f64 * 10.0,
                "{t}: {got}"
            );
        }
    }

    #[test]
    fn min_is_the_mirror() {
        let mut f = WindowedMin::new(10);
        f.update(0, 5.0);
        f.update(3, 9.0);
        assert_eq!(f.get(), Some(5.0));
        f.update(20, 9.0);
        assert_eq!(f.get(), Some(9.0));
    }
}
