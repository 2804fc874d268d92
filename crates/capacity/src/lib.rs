//! Capacity search: the highest load that still meets an objective (SLO),
//! the interval around it, the knee, and what ran out first.
//!
//! - [`search`]: which load to try next (grow, bisect, re-test), pure.
//! - the knee and the limiting resource from the steps, and `cap.json`
//!   itself: `headroom_records::capacity`.
//! - [`Settings`] (from `headroom-objectives`): what to search for and how —
//!   one overlay (flags over a study over a scenario), then defaults and
//!   checks ([`Settings::resolve`]).
//!
//! Each step is a full run (`measure`, the same as `headroom run`) of the
//! scenario at one load — an arrival rate (open model) or a number of
//! users (closed model) — after a short warm-up at that load, followed by
//! a pause for the server to drain. `cap.json` is the `CapacityReport`.

pub mod search;

pub use headroom_objectives::capacity::{Axis, Options, Settings, SettingsRecord};

use headroom_engine::plan::schedule::Schedule;
use headroom_engine::plan::{ClosedLoad, Load, OpenLoad, Plan, DEFAULT_MAX_CONNECTIONS};
use headroom_engine::StopSignal;
use headroom_measure::{measure, Recording};
use headroom_monitor::MonitorConfig;
use headroom_records::capacity::{analysis, backlog, CapacityReport, Outcome, Step};
use headroom_records::check::ok_rate;
use headroom_records::results::Results;
use search::{Bounds, End, Next, Search};
use std::time::{Duration, Instant};

/// What the search tells the terminal as it goes.
pub enum Event<'a> {
    Starting {
        index: u32,
        load: f64,
        retest: bool,
        /// The answer's confirmation, `duration` long.
        confirmation: Option<Duration>,
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
    // A search's steps are measured alike; events belong to runs and
    // studies, not to every step.
    p.events.clear();
    p.load = match axis {
        Axis::Rate => Load::Open(OpenLoad {
            users: plan.arrivals_are_users(),
            schedule: Schedule::constant(load, duration)
                .expect("a positive rate and duration make a schedule"),
            max_connections: match &plan.load {
                Load::Open(o) => o.max_connections,
                Load::Closed(_) => DEFAULT_MAX_CONNECTIONS,
            },
        }),
        // The scenario's users keep their ramp-up, iterations and think
        // time: a step is the scenario run with `load` users. Users that
        // stop after their iterations end the step; otherwise it lasts
        // `duration`.
        Axis::Users => match &plan.load {
            Load::Closed(c) => Load::Closed(ClosedLoad {
                vus: load as u32,
                ramp_up: c.ramp_up,
                duration: if c.iterations.is_some() {
                    None
                } else {
                    Some(duration)
                },
                iterations: c.iterations,
                think_time: c.think_time,
                stages: Vec::new(),
            }),
            Load::Open(_) => Load::Closed(ClosedLoad::users(load as u32, duration)),
        },
    };
    p
}

/// The unit of the search's load: on the rate axis a session scenario's
/// arrivals are users starting a session (users/s), not requests.
pub fn unit(axis: Axis, plan: &Plan) -> &'static str {
    if axis == Axis::Rate && plan.arrivals_are_users() {
        "users/s"
    } else {
        axis.unit()
    }
}

fn step_from(index: u32, step: &Planned, (opts, plan): (&Options, &Plan), r: Results) -> Step {
    let achieved = match opts.axis {
        Axis::Rate => ok_rate(&r),
        Axis::Users => r.summary.requests.ok as f64 / r.duration_s.max(f64::MIN_POSITIVE),
    };
    // Sessions' arrivals are not requests: neither the rate achieved nor
    // the backlog (arrivals against completed requests) is held against
    // them.
    let requests_arrive = opts.axis == Axis::Rate && !plan.arrivals_are_users();
    let offered = requests_arrive.then_some(step.load);
    let checks = headroom_records::check::against(&opts.slo, &r, offered);
    let window = step.duration.as_secs_f64();
    let backlog = requests_arrive
        .then(|| backlog::judge(&r.timeline, window))
        .flatten();
    let server_queue = (opts.axis == Axis::Rate)
        .then_some(r.server.as_ref())
        .flatten()
        .and_then(|s| backlog::judge_server_queue(&s.samples, window));
    let sustained = [&backlog, &server_queue]
        .iter()
        .all(|b| b.as_ref().is_none_or(|b| b.sustained));
    Step {
        index,
        offered: step.load,
        achieved,
        passed: checks.iter().all(|c| c.passed) && sustained && !r.interrupted,
        retest: step.retest,
        discarded: false,
        confirmation: step.confirmation,
        checks,
        backlog,
        server_queue,
        results: Some(r),
    }
}

/// The rate a step's server completed while it fell behind (offered less
/// the backlog's growth per second): its throughput at saturation. `None`
/// when it kept up.
fn held_rate(step: &Step) -> Option<f64> {
    let b = step.backlog.as_ref().filter(|b| !b.sustained)?;
    let seconds = b.backlog.len().saturating_sub(1).max(1) as f64;
    Some(step.offered - b.growth / seconds)
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

/// One step for a [`Stepper`] to run: `plan` (the scenario at `load` on
/// `axis` for `duration`, from [`plan_at`]), a warm-up first when
/// `warmup` is not zero.
pub struct StepRun<'a> {
    pub index: u32,
    pub plan: &'a Plan,
    pub axis: Axis,
    pub load: f64,
    pub duration: Duration,
    pub warmup: Duration,
}

/// Runs a search's steps: in this process ([`run`]), or as shards in
/// several processes merged into one record (the CLI's `--processes`).
pub trait Stepper {
    /// The step's results; `None` when it could not be measured (said on
    /// stderr by the stepper): the search ends there, as if interrupted.
    fn step(&mut self, step: &StepRun) -> Option<Results>;
}

/// Each step in this process: the warm-up unmeasured, then the step
/// measured with the monitor.
pub struct InProcess<'a> {
    pub watch: &'a MonitorConfig,
    pub stop: &'a StopSignal,
    pub recording: &'a Recording,
}

impl Stepper for InProcess<'_> {
    fn step(&mut self, s: &StepRun) -> Option<Results> {
        if !s.warmup.is_zero() {
            let warm = plan_at(s.plan, s.axis, s.load, s.warmup);
            let _ = headroom_engine::run(&warm, self.stop, |_| {});
        }
        let step_plan = plan_at(s.plan, s.axis, s.load, s.duration);
        let step_recording = self.recording.labelled("step", s.index.to_string());
        let measured = measure(
            &step_plan,
            self.stop,
            self.watch.clone(),
            &step_recording,
            |_, _| {},
        );
        Some(measured.results)
    }
}

/// Runs the search against `plan`'s server, watching it with `watch`.
pub fn run(
    plan: &Plan,
    opts: &Options,
    watch: &MonitorConfig,
    stop: &StopSignal,
    recording: &Recording,
    event: impl FnMut(Event),
) -> CapacityReport {
    let mut stepper = InProcess {
        watch,
        stop,
        recording,
    };
    run_with(plan, opts, stop, &mut stepper, event)
}

/// The search, each step run by `stepper`; its answer confirmed by a
/// longer run before it is given (`confirm_duration`).
pub fn run_with(
    plan: &Plan,
    opts: &Options,
    stop: &StopSignal,
    stepper: &mut dyn Stepper,
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
    let mut answer = Answer::default();
    let mut next = search.first();
    // The previous step was generator-bound and is being tried again.
    let mut trying_again = false;
    let outcome: Result<End, Outcome> = loop {
        let Some(planned) = answer.next_step(next, opts) else {
            let Next::Done(end) = next else {
                unreachable!("a step is planned for every try")
            };
            break Ok(end);
        };
        if stop.is_stopping() {
            break Err(Outcome::Interrupted);
        }
        if started.elapsed() + opts.warmup + planned.duration > opts.max_time {
            break Err(Outcome::TimeLimit);
        }
        let index = steps.len() as u32 + 1;
        event(Event::Starting {
            index,
            load: planned.load,
            retest: planned.retest,
            confirmation: planned.confirmation.then_some(planned.duration),
        });
        let Some(results) = stepper.step(&StepRun {
            index,
            plan,
            axis: opts.axis,
            load: planned.load,
            duration: planned.duration,
            warmup: opts.warmup,
        }) else {
            break Err(Outcome::Interrupted);
        };
        let mut step = step_from(index, &planned, (opts, plan), results);
        let interrupted = step.results.as_ref().is_some_and(|r| r.interrupted);
        let died = step.results.as_ref().is_some_and(server_died);
        let generator = !step.passed && step.results.as_ref().is_some_and(|r| r.generator_bound);
        let try_again = generator && !trying_again && !interrupted && !died;
        step.discarded = try_again;
        event(Event::Finished(&step));
        let (passed, held) = (step.passed, held_rate(&step));
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
            next = answer.record(&mut search, &planned, (passed, held));
        }
        if answer.next_step(next, opts).is_some() {
            let so_far = (&search, &answer);
            let elapsed = started.elapsed();
            let so_far = report(
                plan,
                opts,
                steps.clone(),
                so_far,
                Err(Outcome::InProgress),
                elapsed,
            );
            event(Event::Snapshot(&so_far));
            if !opts.pause.is_zero() {
                stop.sleep(opts.pause);
            }
        }
    };
    report(
        plan,
        opts,
        steps,
        (&search, &answer),
        outcome,
        started.elapsed(),
    )
}

/// One step to run: its load, how long, and why.
struct Planned {
    load: f64,
    duration: Duration,
    retest: bool,
    confirmation: bool,
}

/// The confirmations: the answer the search ended on is run again for
/// `confirm_duration`; one that holds is given, one that does not is
/// refuted and the search goes on below it.
#[derive(Default)]
struct Answer {
    confirmed: Option<f64>,
    refuted: Vec<f64>,
}

impl Answer {
    /// The step after `next`: the search's try, or the confirmation of the
    /// load it ended on; `None` when the search is over.
    fn next_step(&self, next: Next, opts: &Options) -> Option<Planned> {
        let end = match next {
            Next::Try { load, retest } => {
                return Some(Planned {
                    load,
                    duration: opts.step_duration,
                    retest,
                    confirmation: false,
                })
            }
            Next::Done(end) => end,
        };
        let load = match end {
            End::Found { low, .. } => low,
            End::MetUpToMax { max } => max,
            End::FailedAtMin { .. } => return None,
        };
        let confirming = !opts.confirm_duration.is_zero() && self.confirmed != Some(load);
        confirming.then_some(Planned {
            load,
            duration: opts.confirm_duration,
            retest: true,
            confirmation: true,
        })
    }

    /// Gives the step's verdict to the search (a confirmation's, as the
    /// answer's) and says what is next.
    fn record(
        &mut self,
        search: &mut Search,
        step: &Planned,
        (passed, held): (bool, Option<f64>),
    ) -> Next {
        match (step.confirmation, passed) {
            (false, _) => search.record(step.load, passed),
            (true, true) => {
                self.confirmed = Some(step.load);
                search.record(step.load, true)
            }
            (true, false) => {
                self.refuted.push(step.load);
                search.refute(step.load, held)
            }
        }
    }
}

/// What the confirmations said, for the verdict: held over how long, and
/// which answers did not hold.
fn confirmation_said(
    confirmed: Option<f64>,
    refuted: &[f64],
    opts: &Options,
    unit: &str,
) -> String {
    let mut said = String::new();
    if let Some(load) = confirmed {
        said = format!(
            "; confirmed: {} held for {}",
            num(load, unit),
            humantime::format_duration(opts.confirm_duration)
        );
    }
    if !refuted.is_empty() {
        let loads: Vec<String> = refuted.iter().map(|&l| num(l, unit)).collect();
        said.push_str(&format!(
            "; not held in a confirmation of {}, so the answer moved down: {}",
            humantime::format_duration(opts.confirm_duration),
            loads.join(", ")
        ));
    }
    said
}

/// Where the search ended: the capacity, its interval, the highest load
/// that passed and the lowest that failed.
struct Found {
    capacity: Option<f64>,
    interval: [Option<f64>; 2],
    low: Option<f64>,
    high: Option<f64>,
}

/// The report's one line: what the search found, or why it found none.
fn verdict(
    kind: Outcome,
    found: &Found,
    (opts, unit): (&Options, &str),
    steps: &[Step],
    (first_fail, detail): (Option<&Step>, &str),
) -> String {
    let failed_bounds = first_fail
        .map(|s| s.failed_checks().join(", "))
        .unwrap_or_default();
    let at_least = |x: Option<f64>| {
        x.map_or("no load passed".to_string(), |x| {
            format!("it met the objective up to {}", num(x, unit))
        })
    };
    match kind {
        Outcome::Found => format!(
            "capacity {} (between {} passing and {} failing) at {}",
            num(found.interval[0].unwrap_or(0.0), unit),
            num(found.interval[0].unwrap_or(0.0), unit),
            num(found.interval[1].unwrap_or(0.0), unit),
            opts.slo
        ),
        Outcome::MetUpToMax => format!(
            "objective met up to the maximum tried ({}): the capacity is higher — raise --max",
            num(found.capacity.unwrap_or(opts.max), unit)
        ),
        Outcome::FailedAtMin => format!(
            "objective not met even at the minimum tried ({}): {failed_bounds} — lower --min",
            num(found.high.unwrap_or(opts.min), unit)
        ),
        Outcome::TimeLimit => format!(
            "time limit ({}) reached before the search ended: {}{}",
            humantime::format_duration(opts.max_time),
            at_least(found.low),
            found.high.map_or(String::new(), |h| format!(
                " and failed at {}",
                num(h, unit)
            ))
        ),
        Outcome::GeneratorBound => format!(
            "generator-bound: at {} the generator, not the server, could not meet the \
             objective ({}) — this is not a server capacity; {}",
            num(found.high.unwrap_or(0.0), unit),
            detail,
            at_least(found.low)
        ),
        Outcome::ServerExited => format!(
            "the server exited during the step at {}; {}",
            num(steps.last().map_or(0.0, |s| s.offered), unit),
            at_least(found.low)
        ),
        Outcome::Interrupted => format!("interrupted; {}", at_least(found.low)),
        Outcome::InProgress => format!(
            "search in progress after {} steps; {}",
            steps.len(),
            at_least(found.low)
        ),
    }
}

fn report(
    plan: &Plan,
    opts: &Options,
    steps: Vec<Step>,
    (search, answer): (&Search, &Answer),
    outcome: Result<End, Outcome>,
    elapsed: Duration,
) -> CapacityReport {
    let unit = unit(opts.axis, plan);
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
    let found = Found {
        capacity,
        interval,
        low,
        high,
    };
    let detail = limit.as_ref().map_or("", |l| l.detail.as_str());
    let mut verdict = verdict(kind, &found, (opts, unit), &steps, (first_fail, detail));
    let confirmed = answer.confirmed.filter(|&c| Some(c) == capacity);
    verdict.push_str(&confirmation_said(confirmed, &answer.refuted, opts, unit));
    let metric = analysis::knee_metric(&opts.slo);
    CapacityReport {
        headroom_version: env!("CARGO_PKG_VERSION").into(),
        target: plan.label.clone(),
        axis: opts.axis,
        unit: unit.into(),
        slo: opts.slo.to_string(),
        capacity,
        interval,
        confirmed,
        refuted: answer.refuted.clone(),
        noise: capacity.and_then(|c| analysis::noise(&steps, c, metric)),
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
