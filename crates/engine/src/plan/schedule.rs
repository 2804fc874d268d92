//! The open model's arrival schedule: pure maths, no clocks.
//!
//! The rate r(t) is piecewise: held constant, or ramped linearly. Arrival n
//! (0-based) happens when the cumulative count N(t) = ∫ r reaches n, so
//! arrivals are placed on absolute times (never summed sleeps, which drift)
//! and a change of rate mid-run carries the fractional arrival over.
//!
//! ```text
//!  rate                                N(t) for a ramp a → b over d:
//!   b |        ______                    N(t) = a·t + (b − a)·t² / 2d
//!     |      /                           arrival x into the stage at
//!   a |_____/                            t = 2x / (a + √(a² + 2(b − a)x/d))
//!     +-----+----+------ t               (stable form of the quadratic root)
//! ```

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stage {
    /// Hold `rate` (per second) for `duration`.
    Hold { rate: f64, duration: Duration },
    /// Ramp linearly from `from` to `to` (per second) over `duration`.
    Ramp {
        from: f64,
        to: f64,
        duration: Duration,
    },
}

impl Stage {
    pub fn duration(&self) -> Duration {
        match *self {
            Stage::Hold { duration, .. } | Stage::Ramp { duration, .. } => duration,
        }
    }

    /// Arrivals in the whole stage.
    fn arrivals(&self) -> f64 {
        match *self {
            Stage::Hold { rate, duration } => rate * duration.as_secs_f64(),
            Stage::Ramp { from, to, duration } => (from + to) / 2.0 * duration.as_secs_f64(),
        }
    }

    /// Cumulative arrivals `t` seconds into the stage: N(t).
    fn arrivals_within(&self, t: f64) -> f64 {
        let d = self.duration().as_secs_f64();
        let t = t.clamp(0.0, d);
        match *self {
            Stage::Hold { rate, .. } => rate * t,
            Stage::Ramp { from, to, .. } => from * t + (to - from) * t * t / (2.0 * d),
        }
    }

    /// Seconds into the stage at which cumulative arrivals reach `x`.
    fn time_of(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        match *self {
            Stage::Hold { rate, .. } => x / rate,
            Stage::Ramp { from, to, duration } => {
                let d = duration.as_secs_f64();
                let disc = from * from + 2.0 * (to - from) * x / d;
                2.0 * x / (from + disc.max(0.0).sqrt())
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error("a schedule needs at least one stage")]
    Empty,
    #[error("stage {stage}: rate {rate} is not a finite number ≥ 0")]
    BadRate { stage: usize, rate: f64 },
    #[error("stage {stage}: rate {rate} req/s is more than headroom sends (at most 10000000 req/s per run)")]
    RateTooHigh { stage: usize, rate: f64 },
    #[error("stage {stage}: longer than headroom accepts (at most 366 days)")]
    TooLong { stage: usize },
    #[error("stage {stage}: duration must be greater than zero")]
    ZeroDuration { stage: usize },
    #[error("the schedule sends no request (every rate is 0)")]
    NoArrivals,
}

#[derive(Clone, Debug, PartialEq)]
struct Span {
    stage: Stage,
    start_s: f64,
    /// Cumulative arrivals at the start of the stage.
    start_n: f64,
    end_n: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    spans: Vec<Span>,
    duration: Duration,
}

/// Guards against float error turning N = 5000.0000001 into an extra arrival.
const EPSILON: f64 = 1e-9;

impl Schedule {
    pub fn constant(rate: f64, duration: Duration) -> Result<Schedule, ScheduleError> {
        Schedule::new(vec![Stage::Hold { rate, duration }])
    }

    pub fn new(stages: Vec<Stage>) -> Result<Schedule, ScheduleError> {
        if stages.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let mut spans = Vec::with_capacity(stages.len());
        let (mut t, mut n) = (0.0, 0.0);
        for (i, stage) in stages.iter().enumerate() {
            let rates: &[f64] = match stage {
                Stage::Hold { rate, .. } => &[*rate],
                Stage::Ramp { from, to, .. } => &[*from, *to],
            };
            if let Some(&rate) = rates.iter().find(|r| !r.is_finite() || **r < 0.0) {
                return Err(ScheduleError::BadRate { stage: i + 1, rate });
            }
            if let Some(&rate) = rates.iter().find(|r| **r > super::limits::MAX_RATE) {
                return Err(ScheduleError::RateTooHigh { stage: i + 1, rate });
            }
            if stage.duration() > super::limits::MAX_DURATION {
                return Err(ScheduleError::TooLong { stage: i + 1 });
            }
            if stage.duration().is_zero() {
                return Err(ScheduleError::ZeroDuration { stage: i + 1 });
            }
            let arrivals = stage.arrivals();
            spans.push(Span {
                stage: *stage,
                start_s: t,
                start_n: n,
                end_n: n + arrivals,
            });
            t += stage.duration().as_secs_f64();
            n += arrivals;
        }
        if n < 1.0 - EPSILON {
            return Err(ScheduleError::NoArrivals);
        }
        Ok(Schedule {
            spans,
            duration: stages.iter().map(Stage::duration).sum(),
        })
    }

    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The stages the schedule was made from.
    pub fn stages(&self) -> Vec<Stage> {
        self.spans.iter().map(|s| s.stage).collect()
    }

    /// Total arrivals in the schedule.
    pub fn arrivals(&self) -> u64 {
        let n = self.spans.last().map_or(0.0, |s| s.end_n);
        (n - EPSILON).ceil().max(0.0) as u64
    }

    /// Mean requested rate over the whole schedule.
    pub fn mean_rate(&self) -> f64 {
        self.spans.last().map_or(0.0, |s| s.end_n) / self.duration.as_secs_f64()
    }

    /// Intended time of arrival `n`, from the start; `None` past the end.
    pub fn at(&self, n: u64) -> Option<Duration> {
        let x = n as f64;
        let i = self.spans.partition_point(|s| s.end_n - EPSILON <= x);
        let span = self.spans.get(i)?;
        let into = span.stage.time_of(x - span.start_n);
        Some(Duration::from_secs_f64(span.start_s + into))
    }

    /// Arrivals due before `t` (those with `at(n) < t`): what the part of
    /// the schedule up to `t` asked for.
    pub fn arrivals_before(&self, t: Duration) -> u64 {
        let secs = t.as_secs_f64();
        let i = self
            .spans
            .partition_point(|s| s.start_s + s.stage.duration().as_secs_f64() <= secs);
        let n = match self.spans.get(i) {
            Some(span) => span.start_n + span.stage.arrivals_within(secs - span.start_s),
            None => return self.arrivals(),
        };
        // N(t) is the estimate; `at` is the definition, so settle the
        // count against it (float error, and arrival 0 at a stage's start).
        let mut count = ((n - EPSILON).ceil().max(0.0) as u64).min(self.arrivals());
        while count < self.arrivals() && self.at(count).is_some_and(|a| a < t) {
            count += 1;
        }
        while count > 0 && self.at(count - 1).is_some_and(|a| a >= t) {
            count -= 1;
        }
        count
    }

    /// Requested rate at a time (for display and reports).
    pub fn rate_at(&self, t: Duration) -> f64 {
        let t = t.as_secs_f64();
        for span in &self.spans {
            let d = span.stage.duration().as_secs_f64();
            if t < span.start_s + d {
                return match span.stage {
                    Stage::Hold { rate, .. } => rate,
                    Stage::Ramp { from, to, .. } => from + (to - from) * (t - span.start_s) / d,
                };
            }
        }
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn arrivals_before_counts_what_was_due() {
        let s = Schedule::constant(100.0, Duration::from_secs(10)).unwrap();
        assert_eq!(s.arrivals_before(Duration::ZERO), 0);
        // arrivals at 0, 10 ms, …, 490 ms: 50 before 0.5 s (none at 0.5 s itself)
        assert_eq!(s.arrivals_before(Duration::from_millis(500)), 50);
        assert_eq!(s.arrivals_before(Duration::from_millis(501)), 51);
        assert_eq!(s.arrivals_before(Duration::from_secs(10)), 1000);
        assert_eq!(s.arrivals_before(Duration::from_secs(99)), 1000);
        let ramp = Schedule::new(vec![
            Stage::Ramp {
                from: 0.0,
                to: 100.0,
                duration: Duration::from_secs(10),
            },
            Stage::Hold {
                rate: 50.0,
                duration: Duration::from_secs(2),
            },
        ])
        .unwrap();
        // N(5 s) = 100 · 25 / 20 = 125
        assert_eq!(ramp.arrivals_before(Duration::from_secs(5)), 125);
        assert_eq!(ramp.arrivals_before(Duration::from_secs(11)), 500 + 50);
        for n in [0u64, 1, 7, 124, 499, 500, 549] {
            let t = ramp.at(n).unwrap();
            assert_eq!(
                ramp.arrivals_before(t + Duration::from_micros(1)),
                n + 1,
                "n={n}"
            );
        }
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn constant_rate_table() {
        // (rate, duration s, arrivals, [(n, expected t in s)])
        type Case = (f64, f64, u64, &'static [(u64, f64)]);
        let cases: &[Case] = &[
            (500.0, 10.0, 5000, &[(0, 0.0), (1, 0.002), (4999, 9.998)]),
            (1.0, 3.0, 3, &[(0, 0.0), (2, 2.0)]),
            (0.3, 10.0, 3, &[(1, 3.333_333), (2, 6.666_667)]),
            (2.5, 1.0, 3, &[(2, 0.8)]),
        ];
        for &(rate, d, arrivals, points) in cases {
            let s = Schedule::constant(rate, secs(d)).unwrap();
            assert_eq!(s.arrivals(), arrivals, "rate {rate} for {d}s");
            assert_eq!(s.at(arrivals), None);
            assert!(s.at(arrivals - 1).is_some());
            for &(n, t) in points {
                let got = s.at(n).unwrap().as_secs_f64();
                assert!(
                    (got - t).abs() < 1e-6,
                    "rate {rate}: n={n} at {got}, want {t}"
                );
            }
        }
    }

    #[test]
    fn steps_as_in_the_seeds() {
        // 002: 10 → 15 → 20 req/s, one second each (10 minutes in the seed).
        let s = Schedule::new(
            [10.0, 15.0, 20.0]
                .iter()
                .map(|&rate| Stage::Hold {
                    rate,
                    duration: secs(1.0),
                })
                .collect(),
        )
        .unwrap();
        assert_eq!(s.arrivals(), 45);
        assert_eq!(s.at(10).unwrap(), secs(1.0));
        assert!((s.at(11).unwrap().as_secs_f64() - (1.0 + 1.0 / 15.0)).abs() < 1e-9);
        assert_eq!(s.at(25).unwrap(), secs(2.0));
        assert_eq!(s.rate_at(secs(1.5)), 15.0);
    }

    #[test]
    fn linear_ramp() {
        // 0 → 100/s over 10 s: N(t) = 5 t², 500 arrivals, arrival n at √(n/5).
        let s = Schedule::new(vec![Stage::Ramp {
            from: 0.0,
            to: 100.0,
            duration: secs(10.0),
        }])
        .unwrap();
        assert_eq!(s.arrivals(), 500);
        for n in [0u64, 1, 5, 80, 499] {
            let want = (n as f64 / 5.0).sqrt();
            assert!(
                (s.at(n).unwrap().as_secs_f64() - want).abs() < 1e-9,
                "n={n}"
            );
        }
        // Ramp down 100 → 0 over 10 s: the same count, front-loaded.
        let down = Schedule::new(vec![Stage::Ramp {
            from: 100.0,
            to: 0.0,
            duration: secs(10.0),
        }])
        .unwrap();
        assert_eq!(down.arrivals(), 500);
        assert!(down.at(250).unwrap() < secs(3.0));
    }

    #[test]
    fn invalid_schedules() {
        assert_eq!(Schedule::new(vec![]), Err(ScheduleError::Empty));
        assert!(matches!(
            Schedule::constant(-1.0, secs(1.0)),
            Err(ScheduleError::BadRate { stage: 1, .. })
        ));
        assert!(matches!(
            Schedule::constant(f64::NAN, secs(1.0)),
            Err(ScheduleError::BadRate { .. })
        ));
        assert_eq!(
            Schedule::constant(5.0, Duration::ZERO),
            Err(ScheduleError::ZeroDuration { stage: 1 })
        );
        assert_eq!(
            Schedule::constant(0.0, secs(5.0)),
            Err(ScheduleError::NoArrivals)
        );
    }

    proptest! {
        /// Arrival times never go backwards and stay inside the schedule,
        /// whatever the stages.
        #[test]
        fn monotone_and_bounded(stages in proptest::collection::vec(
            (0.0f64..500.0, 0.0f64..500.0, 1u64..3000, any::<bool>()), 1..5)) {
            let stages: Vec<Stage> = stages.into_iter().map(|(a, b, ms, ramp)| {
                let duration = Duration::from_millis(ms);
                if ramp { Stage::Ramp { from: a, to: b, duration } } else { Stage::Hold { rate: a, duration } }
            }).collect();
            let Ok(s) = Schedule::new(stages) else { return Ok(()) };
            let mut last = Duration::ZERO;
            for n in 0..s.arrivals() {
                let t = s.at(n).unwrap();
                prop_assert!(t >= last, "arrival {} at {:?} before {:?}", n, t, last);
                prop_assert!(t <= s.duration());
                last = t;
            }
            prop_assert_eq!(s.at(s.arrivals()), None);
        }
    }
}
