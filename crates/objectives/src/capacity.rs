//! Capacity settings: [`Settings`] as given — a scenario's `[capacity]`,
//! a study's `[capacity]`, command-line flags, each unset field `None` —
//! laid over one another with [`Settings::overlay`], then resolved into
//! the search's [`Options`] (defaults filled, the whole checked).
//! [`SettingsRecord`] is the resolved form kept in `cap.json`.

use crate::slo::{Bound, Metric, Op, Slo};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the search varies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// Arrivals per second (open model): the server's throughput capacity.
    #[default]
    Rate,
    /// Concurrent users (closed model), as in Gatling/JMeter user sweeps.
    Users,
}

impl Axis {
    pub fn parse(s: &str) -> Option<Axis> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rate" | "rps" | "arrivals" => Some(Axis::Rate),
            "users" | "vus" | "concurrency" => Some(Axis::Users),
            _ => None,
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Axis::Rate => "req/s",
            Axis::Users => "users",
        }
    }

    fn default_min(self) -> f64 {
        match self {
            Axis::Rate => 10.0,
            Axis::Users => 1.0,
        }
    }

    fn default_max(self) -> f64 {
        match self {
            Axis::Rate => 100_000.0,
            Axis::Users => 10_000.0,
        }
    }
}

/// Capacity settings as given (scenario `[capacity]` or flags); unset
/// fields take the defaults in [`Settings::resolve`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub slo: Option<Slo>,
    pub axis: Option<Axis>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub growth: Option<f64>,
    pub precision: Option<f64>,
    pub step_duration: Option<Duration>,
    pub warmup: Option<Duration>,
    pub pause: Option<Duration>,
    pub max_time: Option<Duration>,
    pub confirm_duration: Option<Duration>,
}

pub const DEFAULT_STEP: Duration = Duration::from_secs(30);
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(5);
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(5);
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_PRECISION: f64 = 0.05;
pub const DEFAULT_GROWTH: f64 = 2.0;
/// The default confirmation: this many steps' length.
pub const CONFIRM_STEPS: u32 = 3;
/// The default achieved-throughput bound on the rate axis: a server that
/// sheds load silently does not pass.
pub const DEFAULT_ACHIEVED_PCT: f64 = 95.0;

/// Resolved settings of one search.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub slo: Slo,
    pub axis: Axis,
    pub min: f64,
    pub max: f64,
    pub growth: f64,
    pub precision: f64,
    pub step_duration: Duration,
    pub warmup: Duration,
    pub pause: Duration,
    pub max_time: Duration,
    /// The answer's confirmation run; zero for none.
    pub confirm_duration: Duration,
}

impl Settings {
    /// `over` wins field by field (flags over the scenario file).
    pub fn overlay(&self, over: &Settings) -> Settings {
        Settings {
            slo: over.slo.clone().or_else(|| self.slo.clone()),
            axis: over.axis.or(self.axis),
            min: over.min.or(self.min),
            max: over.max.or(self.max),
            growth: over.growth.or(self.growth),
            precision: over.precision.or(self.precision),
            step_duration: over.step_duration.or(self.step_duration),
            warmup: over.warmup.or(self.warmup),
            pause: over.pause.or(self.pause),
            max_time: over.max_time.or(self.max_time),
            confirm_duration: over.confirm_duration.or(self.confirm_duration),
        }
    }

    /// Fills defaults and checks the whole; the error says which setting.
    pub fn resolve(&self) -> Result<Options, String> {
        let mut slo = self.slo.clone().ok_or(
            "no objective: give --slo, e.g. --slo 'p90<500ms,errors<5%', or `slo` under \
             [capacity] in the scenario",
        )?;
        let axis = self.axis.unwrap_or_default();
        if axis == Axis::Rate && !slo.has(Metric::Achieved) {
            slo.bounds.push(Bound {
                metric: Metric::Achieved,
                op: Op::AtLeast,
                limit: DEFAULT_ACHIEVED_PCT,
                request: None,
            });
        }
        let min = self.min.unwrap_or(axis.default_min());
        let max = self.max.unwrap_or(axis.default_max().max(min));
        let growth = self.growth.unwrap_or(DEFAULT_GROWTH);
        let precision = self.precision.unwrap_or(DEFAULT_PRECISION);
        if !(min > 0.0 && min.is_finite()) {
            return Err(format!("--min must be above 0 (got {min})"));
        }
        if axis == Axis::Users && (min.fract() != 0.0 || max.fract() != 0.0) {
            return Err("on the users axis --min and --max are whole numbers of users".into());
        }
        if max < min || !max.is_finite() {
            return Err(format!("--max ({max}) must be at least --min ({min})"));
        }
        if growth <= 1.0 || !growth.is_finite() {
            return Err(format!("--growth must be above 1 (got {growth})"));
        }
        if !(precision > 0.0 && precision < 1.0) {
            return Err(format!(
                "--precision must be between 0 and 100 % (got {:.1} %)",
                precision * 100.0
            ));
        }
        let step_duration = self.step_duration.unwrap_or(DEFAULT_STEP);
        if step_duration < Duration::from_secs(1) {
            return Err("--step-duration must be at least 1s".into());
        }
        // Three steps' worth: a queue that grows too slowly to show in one
        // step has three times as long to show.
        let confirm_duration = self
            .confirm_duration
            .unwrap_or(step_duration * CONFIRM_STEPS);
        if !confirm_duration.is_zero() && confirm_duration < Duration::from_secs(1) {
            return Err("--confirm-duration must be at least 1s (or 0s for none)".into());
        }
        Ok(Options {
            slo,
            axis,
            min,
            max,
            growth,
            precision,
            step_duration,
            warmup: self.warmup.unwrap_or(DEFAULT_WARMUP),
            pause: self.pause.unwrap_or(DEFAULT_PAUSE),
            max_time: self.max_time.unwrap_or(DEFAULT_MAX_TIME),
            confirm_duration,
        })
    }
}

/// The resolved settings as recorded in `cap.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SettingsRecord {
    pub min: f64,
    pub max: f64,
    pub growth: f64,
    pub precision: f64,
    pub step_duration_s: f64,
    pub warmup_s: f64,
    pub pause_s: f64,
    pub max_time_s: f64,
    #[serde(default)]
    pub confirm_duration_s: f64,
}

impl From<&Options> for SettingsRecord {
    fn from(o: &Options) -> SettingsRecord {
        SettingsRecord {
            min: o.min,
            max: o.max,
            growth: o.growth,
            precision: o.precision,
            step_duration_s: o.step_duration.as_secs_f64(),
            warmup_s: o.warmup.as_secs_f64(),
            pause_s: o.pause.as_secs_f64(),
            max_time_s: o.max_time.as_secs_f64(),
            confirm_duration_s: o.confirm_duration.as_secs_f64(),
        }
    }
}
