//! The search itself, apart from any server: which load to try next given
//! whether the last step met the objective.
//!
//! 1. Grow geometrically from `min` (× `growth`) until a step fails or
//!    `max` passes.
//! 2. Bisect between the highest pass and the lowest fail until the gap is
//!    within `precision` (relative; one user on the users axis).
//! 3. Re-test both ends of the bracket once (or the end that stopped the
//!    search: `min` failing, `max` passing). A load's verdict is the
//!    majority of its tries: when a re-test disagrees, a third try decides.
//!    Short steps are noisy both ways — a lucky pass before the queue has
//!    built up, an unlucky fail from a hiccup of the machine — so no single
//!    step decides where the capacity is. If an end's verdict flips, the
//!    bracket moves and the bisection goes on.
//! 4. The answer is then confirmed by a longer run (the caller's, see
//!    `run_with`); a failed confirmation [`Search::refute`]s the load, which
//!    fails from then on whatever its shorter steps said, and the search
//!    goes on below it.

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
    /// Even `min` failed.
    FailedAtMin { min: f64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// Run a step at this load; `retest` when the load was tried before.
    Try {
        load: f64,
        retest: bool,
    },
    Done(End),
}

/// Every try of one load.
#[derive(Clone, Copy, Debug)]
struct Tally {
    load: f64,
    passes: u32,
    fails: u32,
    /// Its confirmation failed: it fails for good, whatever its steps say.
    refuted: bool,
}

impl Tally {
    fn tries(&self) -> u32 {
        self.passes + self.fails
    }

    /// The majority; `None` while the tries are tied.
    fn verdict(&self) -> Option<bool> {
        if self.refuted {
            return Some(false);
        }
        match self.passes.cmp(&self.fails) {
            std::cmp::Ordering::Greater => Some(true),
            std::cmp::Ordering::Less => Some(false),
            std::cmp::Ordering::Equal => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Search {
    bounds: Bounds,
    growing: bool,
    tallies: Vec<Tally>,
}

impl Search {
    pub fn new(bounds: Bounds) -> Search {
        Search {
            bounds,
            growing: true,
            tallies: Vec::new(),
        }
    }

    pub fn first(&self) -> Next {
        Next::Try {
            load: self.round(self.bounds.min),
            retest: false,
        }
    }

    /// Highest load whose verdict is a pass.
    pub fn low(&self) -> Option<f64> {
        self.tallies
            .iter()
            .filter(|t| t.verdict() == Some(true))
            .map(|t| t.load)
            .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
    }

    /// Lowest load above `low` whose verdict is a fail (a fail below a
    /// pass is noise the pass outvotes).
    pub fn high(&self) -> Option<f64> {
        let low = self.low().unwrap_or(f64::NEG_INFINITY);
        self.tallies
            .iter()
            .filter(|t| t.verdict() == Some(false) && t.load > low)
            .map(|t| t.load)
            .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.min(x))))
    }

    fn tally(&self, load: f64) -> Option<&Tally> {
        self.tallies.iter().find(|t| t.load == load)
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

    fn try_at(&self, load: f64) -> Next {
        Next::Try {
            load,
            retest: self.tally(load).is_some(),
        }
    }

    /// A try of `load` if it has had only one, so an end of the bracket is
    /// never decided by a single step.
    fn verify(&self, load: f64) -> Option<Next> {
        let decided = self
            .tally(load)
            .is_some_and(|t| t.refuted || t.tries() >= 2);
        (!decided).then(|| self.try_at(load))
    }

    /// Records the outcome of the step at `load` and says what to do next.
    pub fn record(&mut self, load: f64, passed: bool) -> Next {
        let i = match self.tallies.iter().position(|t| t.load == load) {
            Some(i) => i,
            None => {
                self.tallies.push(Tally {
                    load,
                    passes: 0,
                    fails: 0,
                    refuted: false,
                });
                self.tallies.len() - 1
            }
        };
        let t = &mut self.tallies[i];
        if passed {
            t.passes += 1;
        } else {
            t.fails += 1;
        }
        if t.verdict().is_none() {
            // A re-test disagreed: a third try decides.
            return self.try_at(load);
        }
        if self.growing && passed && load < self.bounds.max {
            return self.grow_from(load);
        }
        self.growing = false;
        self.bracket()
    }

    /// `load`'s confirmation failed: a longer window outranks its shorter
    /// steps, so it fails from now on, and the search goes on below it.
    /// With `held` — the rate the server completed while it fell behind,
    /// its throughput at saturation — every load from there up fails too,
    /// so the search goes straight below it rather than one interval at a
    /// time through loads whose short steps pass.
    /// The capacity is then just under that rate: the next try is half the
    /// precision below it, rather than the bisection from the highest load
    /// still passing, which may lie far below (the first growth step).
    pub fn refute(&mut self, load: f64, held: Option<f64>) -> Next {
        self.mark_refuted(load);
        self.growing = false;
        let Some(held) = held.map(|h| self.round(h)).filter(|&h| h > 0.0 && h < load) else {
            return self.bracket();
        };
        self.mark_refuted(held);
        for t in self.tallies.iter_mut().filter(|t| t.load > held) {
            t.refuted = true;
        }
        let just_under = self.round(held * (1.0 - self.bounds.precision / 2.0));
        let untried = self.tally(just_under).is_none();
        if untried && just_under < held && self.low().is_none_or(|low| just_under > low) {
            return self.try_at(just_under);
        }
        self.bracket()
    }

    fn mark_refuted(&mut self, load: f64) {
        match self.tallies.iter_mut().find(|t| t.load == load) {
            Some(t) => t.refuted = true,
            None => self.tallies.push(Tally {
                load,
                passes: 0,
                fails: 0,
                refuted: true,
            }),
        }
    }

    fn grow_from(&self, load: f64) -> Next {
        let mut next = self.round((load * self.bounds.growth).min(self.bounds.max));
        if next <= load {
            next = self.round(load + 1.0).min(self.bounds.max);
        }
        self.try_at(next)
    }

    fn bracket(&mut self) -> Next {
        let (low, high) = (self.low(), self.high());
        match (low, high) {
            (None, _) => {
                let min = self.round(self.bounds.min);
                self.verify(min)
                    .unwrap_or(Next::Done(End::FailedAtMin { min }))
            }
            (Some(low), None) if low >= self.bounds.max => self
                .verify(low)
                .unwrap_or(Next::Done(End::MetUpToMax { max: low })),
            (Some(low), None) => {
                // The only fail above was outvoted: grow again from here.
                self.growing = true;
                self.grow_from(low)
            }
            (Some(low), Some(high)) => {
                let mid = self.midpoint(low, high);
                if !self.converged(low, high) && !mid.is_nan() {
                    return self.try_at(mid);
                }
                self.verify(low)
                    .or_else(|| self.verify(high))
                    .unwrap_or(Next::Done(End::Found { low, high }))
            }
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
    fn drive(b: Bounds, mut passes: impl FnMut(f64) -> bool) -> (End, Vec<f64>) {
        let mut s = Search::new(b);
        let mut next = s.first();
        let mut tried = Vec::new();
        for _ in 0..300 {
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
    fn grows_then_bisects_to_precision_then_retests_both_ends() {
        let (end, tried) = drive(bounds(10.0, 1000.0, false), |x| x <= 41.0);
        let End::Found { low, high } = end else {
            panic!("{end:?}")
        };
        assert!(low <= 41.0 && high > 41.0, "{low} {high}");
        assert!((high - low) / low <= 0.05, "{low} {high}");
        assert_eq!(&tried[..4], &[10.0, 20.0, 40.0, 80.0]);
        // The last two steps re-test the capacity and the lowest fail.
        assert_eq!(&tried[tried.len() - 2..], &[low, high]);
    }

    #[test]
    fn a_lucky_pass_outvoted_by_its_retests_moves_the_capacity_down() {
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
        let retest = Next::Try {
            load: 30.0,
            retest: true,
        };
        assert_eq!(s.record(31.25, false), retest);
        // 30 fails now: one each, so a third try decides.
        assert_eq!(s.record(30.0, false), retest);
        // It fails again: bisect between 20 and 30.
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
    fn an_unlucky_fail_outvoted_by_its_retests_moves_the_capacity_up() {
        // The server passes up to 41, but the first try of 20 hit a hiccup.
        let mut first_20 = true;
        let (end, tried) = drive(bounds(10.0, 1000.0, false), |x| {
            if x == 20.0 && first_20 {
                first_20 = false;
                return false;
            }
            x <= 41.0
        });
        let End::Found { low, high } = end else {
            panic!("{end:?}")
        };
        assert!(low <= 41.0 && high > 41.0, "{low} {high}: {tried:?}");
        assert!((high - low) / low <= 0.05, "{low} {high}");
        // 20 was tried three times (fail, pass, pass), then growth went on.
        assert_eq!(tried.iter().filter(|&&x| x == 20.0).count(), 3, "{tried:?}");
        assert!(tried.contains(&40.0), "{tried:?}");
    }

    #[test]
    fn stops_at_max_and_at_min_after_a_retest() {
        let (end, tried) = drive(bounds(10.0, 50.0, false), |_| true);
        assert_eq!(end, End::MetUpToMax { max: 50.0 });
        assert_eq!(tried, vec![10.0, 20.0, 40.0, 50.0, 50.0]);
        let (end, tried) = drive(bounds(10.0, 50.0, false), |_| false);
        assert_eq!(end, End::FailedAtMin { min: 10.0 });
        assert_eq!(tried, vec![10.0, 10.0]);
    }

    #[test]
    fn ends_whatever_the_noise() {
        // Every try is flipped with probability 1/4 (a fixed LCG, so the
        // test is the same each time): the search still ends, and when
        // it finds a bracket, the bracket is within the precision.
        for seed in 0..300u64 {
            let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let (end, tried) = drive(bounds(10.0, 1000.0, false), |x| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let flip = (state >> 33) % 4 == 0;
                (x <= 41.0) != flip
            });
            if let End::Found { low, high } = end {
                assert!((high - low) / low <= 0.05 + 1e-9, "{low} {high}: {tried:?}");
            }
        }
    }

    #[test]
    fn a_refuted_answer_moves_the_search_below_it() {
        // The short steps pass up to 42 (a queue too slow to show in them),
        // the server holds only 40: the confirmation of each answer above
        // 40 fails, and the search ends on a load at or below 40.
        let (mut end, mut tried) = drive(bounds(10.0, 1000.0, false), |x| x <= 42.0);
        let mut s = Search::new(bounds(10.0, 1000.0, false));
        for &load in &tried {
            s.record(load, load <= 42.0);
        }
        let mut refuted = Vec::new();
        while let End::Found { low, .. } = end {
            if low <= 40.0 {
                break;
            }
            refuted.push(low);
            let mut next = s.refute(low, None);
            loop {
                match next {
                    Next::Try { load, .. } => {
                        tried.push(load);
                        // A refuted load still passes its short steps.
                        next = s.record(load, load <= 42.0);
                    }
                    Next::Done(e) => {
                        end = e;
                        break;
                    }
                }
            }
        }
        let End::Found { low, high } = end else {
            panic!("{end:?}: {tried:?}")
        };
        assert!((38.0..=40.0).contains(&low), "{low} {high}: {tried:?}");
        assert!(!refuted.is_empty());
        assert!(tried.len() < 40, "{tried:?}");
        assert_eq!(s.low(), Some(low));
    }

    #[test]
    fn a_refutation_that_measured_the_throughput_goes_straight_below_it() {
        let mut s = Search::new(bounds(10.0, 1000.0, false));
        for (load, passed) in [(10.0, true), (20.0, true), (40.0, true), (80.0, false)] {
            s.record(load, passed);
        }
        for (load, passed) in [(60.0, false), (50.0, true), (55.0, false), (52.5, true)] {
            s.record(load, passed);
        }
        s.record(52.5, true);
        s.record(55.0, false);
        // The confirmation of 52.5 fell behind while completing 40.1 a
        // second: 40 is re-tested, and nothing above 40.1 is tried again.
        let next = s.refute(52.5, Some(40.1));
        assert_eq!(
            next,
            Next::Try {
                load: 40.0,
                retest: true
            }
        );
        assert_eq!(
            s.record(40.0, true),
            Next::Done(End::Found {
                low: 40.0,
                high: 40.1
            })
        );
    }

    #[test]
    fn a_refutation_far_above_the_last_pass_tries_just_under_the_held_rate() {
        // Short steps pass 40 (the server holds 39.88): growth passed 20 and
        // 40, bisection failed everything from 41.25 up, 40 passed again.
        let mut s = Search::new(bounds(10.0, 1000.0, false));
        for (load, passed) in [(10.0, true), (20.0, true), (40.0, true), (80.0, false)] {
            s.record(load, passed);
        }
        for load in [60.0, 50.0, 45.0, 42.5, 41.25] {
            s.record(load, false);
        }
        s.record(40.0, true);
        s.record(41.25, false);
        // Its confirmation fell behind while completing 39.88 a second:
        // the next try is 2.5 % under that, not the midpoint of 20 and it.
        let next = s.refute(40.0, Some(39.88));
        assert_eq!(
            next,
            Next::Try {
                load: 38.88,
                retest: false
            }
        );
        // It passes: the bracket is within the precision; both ends are
        // settled by a second try of the low one (the high one is refuted).
        assert_eq!(
            s.record(38.88, true),
            Next::Try {
                load: 38.88,
                retest: true
            }
        );
        assert_eq!(
            s.record(38.88, true),
            Next::Done(End::Found {
                low: 38.88,
                high: 39.88
            })
        );
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
