//! Capacity search: the highest load that still meets an objective (SLO),
//! the interval around it, the knee, and what ran out first.
//!
//! - [`search`]: which load to try next (grow, bisect, re-test), pure.
//! - [`analysis`]: the knee and the limiting resource from the steps.
//! - [`table`]: the step table for the terminal.
//!
//! Each step is a full run (`measure`, the same as `headroom run`) of the
//! scenario at one load — an arrival rate (open model) or a number of
//! users (closed model) — after a short warm-up at that load, followed by
//! a pause for the server to drain. `cap.json` is the [`CapacityReport`].

pub mod analysis;
pub mod search;
pub mod table;

use crate::engine::schedule::Schedule;
use crate::engine::StopSignal;
use crate::measure::measure;
use crate::monitor::MonitorConfig;
use crate::plan::{ClosedLoad, Load, OpenLoad, Plan, DEFAULT_MAX_CONNECTIONS};
use crate::report::results::Results;
use crate::slo::{ok_rate, Bound, BoundCheck, Metric, Op, Slo};
use search::{Bounds, End, Next, Search};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

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
}

pub const DEFAULT_STEP: Duration = Duration::from_secs(30);
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(5);
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(5);
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_PRECISION: f64 = 0.05;
pub const DEFAULT_GROWTH: f64 = 2.0;
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
        }
    }
}

/// One step of the search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub index: u32,
    /// The load tried, in the axis's unit.
    pub offered: f64,
    /// OK responses per second (rate axis: of the planned step length).
    pub achieved: f64,
    pub passed: bool,
    /// A repeat of an earlier passing load, to guard against a lucky step.
    pub retest: bool,
    /// The step failed because the generator could not keep up (often a
    /// hiccup of a shared machine): the same load was tried again and this
    /// step counts for nothing. A second such step in a row ends the search
    /// as `generator_bound`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discarded: bool,
    pub checks: Vec<BoundCheck>,
    /// The step's run, in the shape of `results.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Results>,
}

/// How the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Bracketed within the precision.
    Found,
    /// Even the maximum tried met the objective.
    MetUpToMax,
    /// Even the minimum failed.
    FailedAtMin,
    /// `--max-time` ran out before the search ended.
    TimeLimit,
    /// The generator, not the server, failed the objective.
    GeneratorBound,
    /// The server died during a step.
    ServerExited,
    Interrupted,
    /// The search goes on: a snapshot written after each step, so a crash
    /// of headroom itself mid-search still leaves every finished step.
    InProgress,
}

/// `cap.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    pub headroom_version: String,
    pub target: String,
    pub axis: Axis,
    /// The unit of `capacity`, `interval`, `knee` and steps' `offered`.
    pub unit: String,
    pub slo: String,
    /// The highest load that met the objective; null when none did.
    pub capacity: Option<f64>,
    /// [highest pass, lowest fail]; either end null when not found.
    pub interval: [Option<f64>; 2],
    pub outcome: Outcome,
    /// The answer in one sentence.
    pub verdict: String,
    /// What saturated at the lowest failing load: generator, server_exited,
    /// memory, fds, listen_queue, server_cpu, machine_cpu, none_observed.
    pub limited_by: Option<String>,
    pub limited_by_detail: Option<String>,
    /// The objective failed because of the generator: not a server capacity.
    pub generator_bound: bool,
    /// Where latency bends upward (Kneedle), in the axis's unit.
    pub knee: Option<f64>,
    /// The latency figure the knee follows (e.g. "p90").
    pub knee_metric: String,
    pub settings: SettingsRecord,
    pub elapsed_s: f64,
    pub steps: Vec<Step>,
}

/// What the search tells the terminal as it goes.
pub enum Event<'a> {
    Starting {
        index: u32,
        load: f64,
        retest: bool,
    },
    Finished(&'a Step),
    /// The report so far (outcome `in_progress`), after each step that is
    /// not the last.
    Snapshot(&'a CapacityReport),
}

/// The plan at one load for `duration`: a constant rate (open) or a fixed
/// number of users (closed), with the scenario's requests and settings.
pub fn plan_at(plan: &Plan, axis: Axis, load: f64, duration: Duration) -> Plan {
    let mut p = plan.clone();
    p.max_requests = None;
    p.load = match axis {
        Axis::Rate => Load::Open(OpenLoad {
            schedule: Schedule::constant(load, duration)
                .expect("a positive rate and duration make a schedule"),
            max_connections: match &plan.load {
                Load::Open(o) => o.max_connections,
                Load::Closed(_) => DEFAULT_MAX_CONNECTIONS,
            },
        }),
        Axis::Users => Load::Closed(ClosedLoad {
            vus: load as u32,
            ramp_up: Duration::ZERO,
            duration: Some(duration),
            iterations: None,
            think_time: match &plan.load {
                Load::Closed(c) => c.think_time,
                Load::Open(_) => Duration::ZERO,
            },
        }),
    };
    p
}

fn step_from(index: u32, load: f64, retest: bool, opts: &Options, r: Results) -> Step {
    let achieved = match opts.axis {
        Axis::Rate => ok_rate(&r),
        Axis::Users => r.summary.requests.ok as f64 / r.duration_s.max(f64::MIN_POSITIVE),
    };
    let offered = (opts.axis == Axis::Rate).then_some(load);
    let checks = opts.slo.check(&r, offered);
    Step {
        index,
        offered: load,
        achieved,
        passed: checks.iter().all(|c| c.passed) && !r.interrupted,
        retest,
        discarded: false,
        checks,
        results: Some(r),
    }
}

fn server_died(r: &Results) -> bool {
    r.server
        .as_ref()
        .is_some_and(|s| s.findings.iter().any(|f| f.kind == "server_exited"))
}

fn num(x: f64, unit: &str) -> String {
    let text = if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    };
    format!("{text} {unit}")
}

/// Runs the search against `plan`'s server, watching it with `watch`.
pub fn run(
    plan: &Plan,
    opts: &Options,
    watch: &MonitorConfig,
    stop: &StopSignal,
    buckets_ms: &[u64],
    mut event: impl FnMut(Event),
) -> CapacityReport {
    let started = Instant::now();
    let mut search = Search::new(Bounds {
        min: opts.min,
        max: opts.max,
        growth: opts.growth,
        precision: opts.precision,
        integer: opts.axis == Axis::Users,
    });
    let mut steps: Vec<Step> = Vec::new();
    let mut next = search.first();
    // The previous step was generator-bound and is being tried again.
    let mut trying_again = false;
    let outcome: Result<End, Outcome> = loop {
        let (load, retest) = match next {
            Next::Try { load, retest } => (load, retest),
            Next::Done(end) => break Ok(end),
        };
        if stop.is_stopping() {
            break Err(Outcome::Interrupted);
        }
        let needed = opts.warmup + opts.step_duration;
        if started.elapsed() + needed > opts.max_time {
            break Err(Outcome::TimeLimit);
        }
        let index = steps.len() as u32 + 1;
        event(Event::Starting {
            index,
            load,
            retest,
        });
        if !opts.warmup.is_zero() {
            let warm = plan_at(plan, opts.axis, load, opts.warmup);
            let _ = crate::engine::run(&warm, stop, |_| {});
        }
        let step_plan = plan_at(plan, opts.axis, load, opts.step_duration);
        let measured = measure(&step_plan, stop, watch.clone(), buckets_ms, |_, _| {});
        let mut step = step_from(index, load, retest, opts, measured.results);
        let interrupted = step.results.as_ref().is_some_and(|r| r.interrupted);
        let died = step.results.as_ref().is_some_and(server_died);
        let generator = !step.passed && step.results.as_ref().is_some_and(|r| r.generator_bound);
        let try_again = generator && !trying_again && !interrupted && !died;
        step.discarded = try_again;
        event(Event::Finished(&step));
        let passed = step.passed;
        steps.push(step);
        if interrupted {
            break Err(Outcome::Interrupted);
        }
        if died {
            break Err(Outcome::ServerExited);
        }
        if generator && !try_again {
            break Err(Outcome::GeneratorBound);
        }
        trying_again = try_again;
        if !try_again {
            next = search.record(load, passed);
        }
        if matches!(next, Next::Try { .. }) {
            let so_far = report(
                plan,
                opts,
                steps.clone(),
                &search,
                Err(Outcome::InProgress),
                started.elapsed(),
            );
            event(Event::Snapshot(&so_far));
            if !opts.pause.is_zero() {
                stop.sleep(opts.pause);
            }
        }
    };
    report(plan, opts, steps, &search, outcome, started.elapsed())
}

fn report(
    plan: &Plan,
    opts: &Options,
    steps: Vec<Step>,
    search: &Search,
    outcome: Result<End, Outcome>,
    elapsed: Duration,
) -> CapacityReport {
    let unit = opts.axis.unit();
    // A step that ended the search early (generator-bound, server died)
    // was not given to the search: it still bounds the interval.
    // A fail at or below the capacity was outvoted by passes (noise).
    let above = |s: &&Step, low: Option<f64>| low.is_none_or(|l| s.offered > l);
    let lowest_fail = steps
        .iter()
        .filter(|s| !s.passed && !s.discarded && above(s, search.low()))
        .map(|s| s.offered)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))));
    let (low, high) = (search.low(), search.high().or(lowest_fail));
    let (capacity, interval, kind) = match outcome {
        Ok(End::Found { low, high }) => (Some(low), [Some(low), Some(high)], Outcome::Found),
        Ok(End::MetUpToMax { max }) => (Some(max), [Some(max), None], Outcome::MetUpToMax),
        Ok(End::FailedAtMin { .. }) => (None, [None, high], Outcome::FailedAtMin),
        Err(kind) => (low, [low, high], kind),
    };
    // What ran out: at the lowest load that failed.
    let first_fail = steps
        .iter()
        .filter(|s| !s.passed && !s.discarded && above(s, low))
        .min_by(|a, b| a.offered.total_cmp(&b.offered));
    let limit = first_fail.map(analysis::limited_by);
    let generator_bound =
        kind == Outcome::GeneratorBound || limit.as_ref().is_some_and(|l| l.kind == "generator");
    let failed_bounds = first_fail
        .map(|s| {
            s.checks
                .iter()
                .filter(|c| !c.passed)
                .map(BoundCheck::describe)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let at_least = |x: Option<f64>| {
        x.map_or("no load passed".to_string(), |x| {
            format!("it met the objective up to {}", num(x, unit))
        })
    };
    let verdict = match kind {
        Outcome::Found => format!(
            "capacity {} (between {} passing and {} failing) at {}",
            num(interval[0].unwrap_or(0.0), unit),
            num(interval[0].unwrap_or(0.0), unit),
            num(interval[1].unwrap_or(0.0), unit),
            opts.slo
        ),
        Outcome::MetUpToMax => format!(
            "objective met up to the maximum tried ({}): the capacity is higher — raise --max",
            num(capacity.unwrap_or(opts.max), unit)
        ),
        Outcome::FailedAtMin => format!(
            "objective not met even at the minimum tried ({}): {failed_bounds} — lower --min",
            num(high.unwrap_or(opts.min), unit)
        ),
        Outcome::TimeLimit => format!(
            "time limit ({}) reached before the search ended: {}{}",
            humantime::format_duration(opts.max_time),
            at_least(low),
            high.map_or(String::new(), |h| format!(
                " and failed at {}",
                num(h, unit)
            ))
        ),
        Outcome::GeneratorBound => format!(
            "generator-bound: at {} the generator, not the server, could not meet the \
             objective ({}) — this is not a server capacity; {}",
            num(high.unwrap_or(0.0), unit),
            limit.as_ref().map_or("", |l| l.detail.as_str()),
            at_least(low)
        ),
        Outcome::ServerExited => format!(
            "the server exited during the step at {}; {}",
            num(steps.last().map_or(0.0, |s| s.offered), unit),
            at_least(low)
        ),
        Outcome::Interrupted => format!("interrupted; {}", at_least(low)),
        Outcome::InProgress => format!(
            "search in progress after {} steps; {}",
            steps.len(),
            at_least(low)
        ),
    };
    let metric = analysis::knee_metric(&opts.slo);
    CapacityReport {
        headroom_version: env!("CARGO_PKG_VERSION").into(),
        target: plan.label.clone(),
        axis: opts.axis,
        unit: unit.into(),
        slo: opts.slo.to_string(),
        capacity,
        interval,
        outcome: kind,
        verdict,
        limited_by: limit.as_ref().map(|l| l.kind.clone()),
        limited_by_detail: limit.map(|l| l.detail),
        generator_bound,
        knee: analysis::knee(&steps, metric),
        knee_metric: metric.name().into(),
        settings: SettingsRecord::from(opts),
        elapsed_s: elapsed.as_secs_f64(),
        steps,
    }
}
