//! The search itself, apart from any server: which load to try next given
//! whether the last step met the objective.
//!
//! 1. Grow geometrically from `min` (× `growth`) until a step fails or
//!    `max` passes.
//! 2. Bisect between the highest pass and the lowest fail until the gap is
//!    within `precision` (relative; one user on the users axis).
//! 3. Re-test the highest pass once: if it fails this time, it was luck —
//!    the fail becomes the new upper end and the bisection goes on below.

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub min: f64,
    pub max: f64,
    pub growth: f64,
    /// Relative width of the final interval, e.g. 0.05.
    pub precision: f64,
    /// Loads are whole numbers (users).
    pub integer: bool,
}

/// How a search ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum End {
    /// Bracketed: `low` passed, `high` failed, within precision.
    Found { low: f64, high: f64 },
    /// Even `max` passed.
    MetUpToMax { max: f64 },
    /// Even `min` failed (or its re-test did).
    FailedAtMin { min: f64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// Run a step at this load; `retest` when it repeats an earlier pass.
    Try {
        load: f64,
        retest: bool,
    },
    Done(End),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Grow,
    Bisect,
    Retest,
}

#[derive(Clone, Debug)]
pub struct Search {
    bounds: Bounds,
    phase: Phase,
    retested: bool,
    /// Every load that passed (a re-test that failed removes its load).
    passes: Vec<f64>,
    /// Lowest load that failed.
    fail: Option<f64>,
}

impl Search {
    pub fn new(bounds: Bounds) -> Search {
        Search {
            bounds,
            phase: Phase::Grow,
            retested: false,
            passes: Vec::new(),
            fail: None,
        }
    }

    pub fn first(&self) -> Next {
        Next::Try {
            load: self.round(self.bounds.min),
            retest: false,
        }
    }

    /// Highest load that passed so far.
    pub fn low(&self) -> Option<f64> {
        self.passes
            .iter()
            .copied()
            .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
    }

    /// Lowest load that failed so far.
    pub fn high(&self) -> Option<f64> {
        self.fail
    }

    fn round(&self, x: f64) -> f64 {
        if self.bounds.integer {
            x.round().max(1.0)
        } else {
            // Two decimals are finer than any server can be told apart by.
            (x * 100.0).round() / 100.0
        }
    }

    fn converged(&self, low: f64, high: f64) -> bool {
        if self.bounds.integer {
            high - low <= 1.0
        } else {
            (high - low) / low <= self.bounds.precision + 1e-12
        }
    }

    fn midpoint(&self, low: f64, high: f64) -> f64 {
        let mid = self.round((low + high) / 2.0);
        if mid <= low || mid >= high {
            // Rounding swallowed the step: the interval is as tight as loads go.
            return f64::NAN;
        }
        mid
    }

    /// Records the outcome of the step at `load` and says what to do next.
    pub fn record(&mut self, load: f64, passed: bool) -> Next {
        if passed {
            self.passes.push(load);
        } else {
            if self.phase == Phase::Retest {
                self.passes.retain(|&p| p < load);
            }
            self.fail = Some(self.fail.map_or(load, |f| f.min(load)));
        }
        match (self.phase, passed) {
            (Phase::Grow, true) => {
                if load >= self.bounds.max {
                    return Next::Done(End::MetUpToMax { max: load });
                }
                let mut next = self.round((load * self.bounds.growth).min(self.bounds.max));
                if next <= load {
                    next = self.round(load + 1.0).min(self.bounds.max);
                }
                Next::Try {
                    load: next,
                    retest: false,
                }
            }
            (Phase::Retest, true) => self.bracket(),
            _ => {
                self.phase = Phase::Bisect;
                self.bracket()
            }
        }
    }

    fn bracket(&mut self) -> Next {
        let Some(low) = self.low() else {
            return Next::Done(End::FailedAtMin {
                min: self.round(self.bounds.min),
            });
        };
        let Some(high) = self.fail else {
            // A re-test passed and nothing above failed: only after MetUpToMax.
            return Next::Done(End::MetUpToMax { max: low });
        };
        let mid = self.midpoint(low, high);
        if self.converged(low, high) || mid.is_nan() {
            if !self.retested {
                self.retested = true;
                self.phase = Phase::Retest;
                return Next::Try {
                    load: low,
                    retest: true,
                };
            }
            return Next::Done(End::Found { low, high });
        }
        self.phase = Phase::Bisect;
        Next::Try {
            load: mid,
            retest: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(min: f64, max: f64, integer: bool) -> Bounds {
        Bounds {
            min,
            max,
            growth: 2.0,
            precision: 0.05,
            integer,
        }
    }

    /// Runs a search against a server that passes exactly below `capacity`
    /// (and fails the first `flaky` passes above `flaky_at`).
    fn drive(b: Bounds, passes: impl Fn(f64) -> bool) -> (End, Vec<f64>) {
        let mut s = Search::new(b);
        let mut next = s.first();
        let mut tried = Vec::new();
        for _ in 0..100 {
            match next {
                Next::Try { load, .. } => {
                    tried.push(load);
                    next = s.record(load, passes(load));
                }
                Next::Done(end) => return (end, tried),
            }
        }
        panic!("search did not end: {tried:?}");
    }

    #[test]
    fn grows_then_bisects_to_precision_then_retests() {
        let (end, tried) = drive(bounds(10.0, 1000.0, false), |x| x <= 41.0);
        let Next::Done(End::Found { low, high }) = Next::Done(end) else {
            panic!("{end:?}")
        };
        assert!(low <= 41.0 && high > 41.0, "{low} {high}");
        assert!((high - low) / low <= 0.05, "{low} {high}");
        assert_eq!(&tried[..4], &[10.0, 20.0, 40.0, 80.0]);
        // The last step re-tests the capacity.
        assert_eq!(*tried.last().unwrap(), low);
    }

    #[test]
    fn a_lucky_pass_that_fails_its_retest_moves_the_capacity_down() {
        let mut s = Search::new(bounds(10.0, 1000.0, false));
        assert_eq!(
            s.first(),
            Next::Try {
                load: 10.0,
                retest: false
            }
        );
        s.record(10.0, true);
        s.record(20.0, true);
        s.record(40.0, false);
        // Bisect 30 (pass, by luck), 35 f, 32.5 f, 31.25 f → re-test 30.
        s.record(30.0, true);
        s.record(35.0, false);
        s.record(32.5, false);
        let next = s.record(31.25, false);
        assert_eq!(
            next,
            Next::Try {
                load: 30.0,
                retest: true
            }
        );
        // 30 fails now: bisect between 20 and 30.
        assert_eq!(
            s.record(30.0, false),
            Next::Try {
                load: 25.0,
                retest: false
            }
        );
        assert_eq!(s.low(), Some(20.0));
        assert_eq!(s.high(), Some(30.0));
    }

    #[test]
    fn stops_at_max_and_at_min() {
        let (end, tried) = drive(bounds(10.0, 50.0, false), |_| true);
        assert_eq!(end, End::MetUpToMax { max: 50.0 });
        assert_eq!(tried, vec![10.0, 20.0, 40.0, 50.0]);
        let (end, tried) = drive(bounds(10.0, 50.0, false), |_| false);
        assert_eq!(end, End::FailedAtMin { min: 10.0 });
        assert_eq!(tried, vec![10.0]);
    }

    #[test]
    fn users_are_whole_and_bracketed_to_one() {
        let (end, _) = drive(bounds(1.0, 1000.0, true), |u| u <= 12.0);
        assert_eq!(
            end,
            End::Found {
                low: 12.0,
                high: 13.0
            }
        );
    }
}
