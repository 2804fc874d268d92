//! headroom's load engine: runs a [`Plan`] and returns exact counts, HDR
//! histograms and a per-second timeline ([`RunOutcome`]). It knows nothing
//! of scenario files, reports, studies or the command line: whatever
//! builds a [`Plan`] can run it.
//!
//! ```text
//!  controller (calling thread) ── spawns ──▶ worker 0..W (a thread each,
//!      ▲  merges intervals,                   single-threaded tokio runtime
//!      │  enforces the hard stop              or `event_loop`'s epoll loop,
//!      │                                      own Recorder, own connections)
//!      └──────── WorkerMsg::Tick / Done ◀─────┘
//! ```
//!
//! Floors, from the bottom: [`metrics`] (error classes, mergeable stats,
//! the recorder; the `headroom-metrics` crate) → [`plan`] (what to run:
//! requests, load, the open-model [`plan::schedule`]) → the two paths a
//! worker runs a load on → the controller (this file):
//!
//! - `event_loop`: the closed model's plain requests — one epoll loop per
//!   worker, a small slot per user, no task per user.
//! - `tasks`: everything else — one tokio task per user (closed model) or
//!   per arrival (open model), on a single-threaded runtime: sessions,
//!   checks, extraction, feeders, TLS, stages, pooled connections.
//! - `connections`: the origins a worker's requests go to and the
//!   connections open to each; both paths take theirs from it. Its `h2`:
//!   HTTP/2 connections, many streams on each, shared by a worker's users.
//! - `negotiate`: the protocol a run speaks, settled before it starts.
//! - `cookies`: a user's jar, alike on both paths.
//! - `shared`: what one worker's users share — the plan, the recorder, the
//!   stop — and the guard that records one request in flight.
//! - `worker`: the thread; picks the path and runs it.
//! - [`stop`]: graceful stop and abort.
//!
//! ```no_run
//! use headroom_engine::plan::{ClosedLoad, Load, Plan};
//! use headroom_engine::{run, StopSignal};
//! use std::time::Duration;
//!
//! let mut plan = Plan::get("http://127.0.0.1:8080/hello").unwrap();
//! plan.load = Load::Closed(ClosedLoad::users(10, Duration::from_secs(5)));
//! let outcome = run(&plan, &StopSignal::new(), |_| {});
//! println!("{} requests, {} ok", outcome.total.requests, outcome.total.ok);
//! ```

pub use headroom_metrics as metrics;
pub mod plan;

mod backoff;
mod connections;
mod cookies;
mod event_loop;
mod negotiate;
mod pacing;
mod script;
mod shared;
pub mod stop;
mod tasks;
mod worker;

use crate::metrics::aggregate::{Aggregate, TimelinePoint};
use crate::metrics::Stats;
use crate::plan::{Plan, INTERRUPT_GRACE};
pub use negotiate::{negotiate, NotNegotiated};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
pub use stop::StopSignal;
use worker::WorkerMsg;

/// The live view after each second, for progress displays.
pub struct Progress<'a> {
    pub elapsed: Duration,
    pub second: &'a TimelinePoint,
    pub total: &'a Stats,
    /// The last finished seconds' figures (up to a minute, newest last),
    /// for judging rolling windows exactly.
    pub recent: &'a std::collections::VecDeque<Stats>,
    /// OK and failed so far per request (index = the plan's request).
    pub by_request: &'a [crate::metrics::RequestCounts],
    /// The slowest traced requests of the seconds just finished (a run
    /// with trace context).
    pub exemplars: &'a [crate::metrics::exemplars::Exemplar],
}

/// Everything a run measured.
pub struct RunOutcome {
    pub started_at: SystemTime,
    /// From the start to the last response (or the stop): the denominator
    /// of throughput, as JMeter computes it.
    pub duration: Duration,
    /// From the start to the last request actually sent.
    pub send_window: Duration,
    pub total: Stats,
    pub per_request: Vec<Stats>,
    pub timeline: Vec<TimelinePoint>,
    /// Each second's latency histogram (base64 V2 + DEFLATE), for `--hdr-log`.
    pub latency_intervals: Vec<String>,
    pub interrupted: bool,
    /// Why the run ended before its planned end, when it did.
    pub stop_reason: Option<String>,
    /// When (from the start) the run was told to stop early — Ctrl-C, a
    /// feeder running dry, the caller's stop — if it was.
    pub stopped_after: Option<Duration>,
    pub threads: usize,
    /// How long after its start time the run began: zero, unless it joined
    /// a [`Start::Shared`] late (a shard that missed the shared
    /// `--start-at`); the open-model arrivals due meanwhile are counted
    /// `not_sent`.
    pub late_by: Duration,
    /// Open model: arrivals that waited for a connection because the pool
    /// was at its cap (`--connections`).
    pub waited_for_connection: u64,
    /// Every request completed around the plan's events, in completion
    /// order (empty without events).
    pub trace: crate::metrics::trace::Trace,
    /// A run with trace context (`Plan::trace_context`): each second's
    /// slowest traced requests per request, and the run's slowest.
    pub exemplars: Vec<crate::metrics::exemplars::Exemplar>,
    pub slowest: Vec<crate::metrics::exemplars::Exemplar>,
}

/// How far ahead of "now" a run's clock starts: time for the worker
/// threads to build their runtimes, so the first arrivals are not sent
/// late (which would show as send lag that is the start-up, not the load).
pub const START_LEAD: Duration = Duration::from_millis(25);

/// The start of a run begun now: `START_LEAD` ahead.
pub fn start_soon() -> Start {
    Start::Own(Instant::now() + START_LEAD)
}

/// When a run's clock starts, and what a run that begins after it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// The run's own clock ([`start_soon`]). If starting up took longer
    /// than the lead (a loaded machine), the open-model arrivals due
    /// meanwhile still go out, late, and their wait counts in their
    /// latency: nobody else follows this schedule, so none is skipped.
    Own(Instant),
    /// A time shared with other runs (the shards of `--start-at`). A run
    /// that begins after it joins late: it follows the schedule from
    /// where the others are and counts the arrivals it missed `not_sent`,
    /// so the shards together send what one schedule asks for.
    Shared(Instant),
}

impl Start {
    /// The instant the run's clock starts, shared or not.
    pub fn at(self) -> Instant {
        match self {
            Start::Own(at) | Start::Shared(at) => at,
        }
    }

    /// From when this run sends: the start, or now for a shared start
    /// already past.
    fn joined(self, now: Instant) -> Instant {
        match self {
            Start::Own(at) => at,
            Start::Shared(at) => now.max(at),
        }
    }
}

/// Whether the plan runs on the fast path (one event loop per worker;
/// `event_loop/`) rather than as a task per user or arrival.
pub fn runs_on_event_loop(plan: &Plan) -> bool {
    event_loop::load_of(plan).is_some()
}

/// The wall-clock time of `at` (which may lie a little ahead).
pub fn wall_clock(at: Instant) -> SystemTime {
    let now = Instant::now();
    if at >= now {
        SystemTime::now() + (at - now)
    } else {
        SystemTime::now() - (now - at)
    }
}

/// Runs the plan to its end (or until `stop`), calling `on_second` as each
/// second of the timeline completes.
pub fn run(plan: &Plan, stop: &StopSignal, on_second: impl FnMut(Progress)) -> RunOutcome {
    run_at(plan, stop, start_soon(), on_second)
}

/// As [`run`], with the run's clock starting at `start` (so a monitor can
/// sample on the same interval boundaries, or shards on several machines
/// share one time axis). A [`Start::Shared`] already past is joined late:
/// the run follows the schedule from now on, and counts the open-model
/// arrivals it missed as `not_sent`.
pub fn run_at(
    plan: &Plan,
    stop: &StopSignal,
    start: Start,
    mut on_second: impl FnMut(Progress),
) -> RunOutcome {
    let mut plan = negotiate::settle(plan);
    // The run's own signal: its hard stop (or a feeder running dry) ends
    // this run only, never the caller's signal, so a study or a capacity
    // search goes on to its next run. The caller's stops are passed on.
    let caller = stop;
    let stop = &StopSignal::new();
    stop.follow(caller);
    let scripts = ScriptRun::setup(&mut plan, stop);
    let (joined, start) = (start.joined(Instant::now()), start.at());
    let threads = plan.effective_threads();
    let plan = Arc::new(plan);
    let started_at = wall_clock(start);
    let (handles, rx) = spawn_workers(&plan, threads, (start, joined), stop);

    let mut aggregate = Aggregate::new(threads, plan.requests.len())
        .keeping_second_histograms(plan.keep_second_histograms || !plan.shard.is_whole());
    let mut ending = Ending {
        hard_stop: plan.load_duration().map(|d| start + d + plan.graceful_stop),
        stopped_after: None,
        aborted: false,
    };
    let mut finished = Finished::default();
    while finished.workers < threads {
        stop.follow(caller);
        let wait = ending.watch(&plan, start, (stop, caller));
        let msg = match rx.recv_timeout(wait) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let new_seconds = finished.take(&mut aggregate, msg);
        if new_seconds > 0 {
            if let (Some(second), total) = aggregate.last_second_and_total() {
                on_second(Progress {
                    elapsed: start.elapsed(),
                    second,
                    total,
                    recent: aggregate.recent(),
                    by_request: aggregate.by_request(),
                    exemplars: aggregate.newest_exemplars(),
                });
            }
        }
    }
    for h in handles {
        let _ = h.join();
    }
    let end = finished.last_done.unwrap_or_else(Instant::now);
    let crate::metrics::aggregate::Finished {
        mut total,
        per_request,
        mut timeline,
        latency_intervals,
        exemplars,
        slowest,
    } = aggregate.finish();
    scripts.teardown(&plan, &mut total);
    set_offered(&plan, &mut timeline);
    RunOutcome {
        started_at,
        duration: end.saturating_duration_since(start),
        send_window: finished
            .last_sent
            .map_or(Duration::ZERO, |s| s.saturating_duration_since(start)),
        total,
        per_request,
        timeline,
        latency_intervals,
        interrupted: caller.was_interrupted(),
        stop_reason: stop.reason().or_else(|| caller.reason()),
        stopped_after: ending.stopped_after,
        threads,
        late_by: joined - start,
        waited_for_connection: finished.waited_for_connection,
        trace: crate::metrics::trace::Trace::merge(finished.traces),
        exemplars,
        slowest,
    }
}

/// The run's worker threads, and the channel their seconds come on.
fn spawn_workers(
    plan: &Arc<Plan>,
    threads: usize,
    (start, joined): (Instant, Instant),
    stop: &StopSignal,
) -> (Vec<std::thread::JoinHandle<()>>, mpsc::Receiver<WorkerMsg>) {
    let (tx, rx) = mpsc::channel();
    // A shard's budget is its share of the plan's.
    let budget = plan
        .max_requests
        .map(|n| Arc::new(AtomicU64::new(plan.shard.share(n))));
    let handles = (0..threads)
        .map(|id| {
            worker::spawn(worker::WorkerCtx {
                id,
                workers: threads,
                plan: plan.clone(),
                start,
                joined,
                stop: stop.clone(),
                tx: tx.clone(),
                budget: budget.clone(),
            })
        })
        .collect();
    (handles, rx)
}

/// The script's `setup()` and `teardown()` around the load, in an engine
/// of their own, and what their calls cost.
struct ScriptRun {
    /// The engine, when the file exports `teardown`.
    engine: Option<headroom_js::Worker>,
    calls: crate::metrics::ScriptStats,
}

impl ScriptRun {
    /// `setup()`, once before the load: what it returns becomes every
    /// user's `ctx.data`. A setup that fails stops the run before any
    /// request, saying why.
    fn setup(plan: &mut Plan, stop: &StopSignal) -> ScriptRun {
        use crate::metrics::scripts::CallEnd;
        let mut run = ScriptRun {
            engine: None,
            calls: Default::default(),
        };
        let Some(program) = plan.scripts.clone() else {
            return run;
        };
        // The file's exports, compiled once.
        let exports = program.file.as_ref().map(headroom_js::exports);
        let has =
            |name: &str| matches!(&exports, Some(Ok(names)) if names.iter().any(|n| n == name));
        let (setup, teardown) = (has("setup"), has("teardown"));
        if !setup && !teardown {
            return run;
        }
        let seed = program.seed.unwrap_or(0);
        let engine = match headroom_js::Worker::new(&program, None, seed) {
            Ok(engine) => engine,
            Err(problems) => {
                stop.stop_because(format!("the scenario's script: {}", problems.join("; ")));
                return run;
            }
        };
        if setup {
            let started = Instant::now();
            let result = engine.run_export("setup", None);
            let ns = started.elapsed().as_nanos() as u64;
            match result {
                Ok(data) => {
                    run.calls.record("setup", ns, CallEnd::Returned);
                    plan.script_data = data;
                }
                Err(e) => {
                    run.calls
                        .record("setup", ns, CallEnd::Threw(&e.to_string()));
                    stop.stop_because(format!("setup() failed: {e}"));
                }
            }
        }
        run.engine = teardown.then_some(engine);
        run
    }

    /// `teardown(data)`, once after the load; the calls into `total`.
    fn teardown(mut self, plan: &Plan, total: &mut crate::metrics::Stats) {
        use crate::metrics::scripts::CallEnd;
        if let Some(engine) = &self.engine {
            let started = Instant::now();
            let result = engine.run_export("teardown", plan.script_data.as_deref());
            let ns = started.elapsed().as_nanos() as u64;
            match result {
                Ok(_) => self.calls.record("teardown", ns, CallEnd::Returned),
                Err(e) => self
                    .calls
                    .record("teardown", ns, CallEnd::Threw(&e.to_string())),
            }
        }
        total.scripts += &self.calls;
    }
}

/// How the run ends: its hard stop (the load's end and the graceful stop,
/// or sooner once stopped), when it was stopped, whether it was aborted.
struct Ending {
    hard_stop: Option<Instant>,
    stopped_after: Option<Duration>,
    aborted: bool,
}

impl Ending {
    /// Acts on a stop begun (the hard stop brought nearer) or a hard stop
    /// reached (the workers aborted); how long to wait for a worker's next
    /// message.
    fn watch(
        &mut self,
        plan: &Plan,
        start: Instant,
        (stop, caller): (&StopSignal, &StopSignal),
    ) -> Duration {
        let now = Instant::now();
        if stop.is_stopping() && self.stopped_after.is_none() {
            // Ctrl-C gives in-flight requests a moment; a stop with a reason
            // (a feeder ran dry) the usual graceful stop.
            self.stopped_after = Some(now.saturating_duration_since(start));
            let grace = if caller.was_interrupted() {
                INTERRUPT_GRACE.min(plan.graceful_stop)
            } else {
                plan.graceful_stop
            };
            let grace = now + grace;
            self.hard_stop = Some(self.hard_stop.map_or(grace, |h| h.min(grace)));
        }
        if !self.aborted && self.hard_stop.is_some_and(|h| now >= h) {
            stop.abort();
            self.aborted = true;
        }
        // Wake at least every 50 ms to pass a Ctrl-C on to the workers.
        self.hard_stop
            .map_or(Duration::from_millis(50), |h| {
                h.saturating_duration_since(now)
            })
            .clamp(Duration::from_millis(1), Duration::from_millis(50))
    }
}

/// What the workers handed over as they finished.
#[derive(Default)]
struct Finished {
    /// Workers done.
    workers: usize,
    last_sent: Option<Instant>,
    last_done: Option<Instant>,
    waited_for_connection: u64,
    traces: Vec<crate::metrics::trace::Trace>,
}

impl Finished {
    /// A worker's message taken into the run's figures; how many seconds
    /// every worker has now finished, newly.
    fn take(&mut self, aggregate: &mut Aggregate, msg: WorkerMsg) -> usize {
        match msg {
            WorkerMsg::Tick {
                worker,
                upto,
                intervals,
            } => {
                aggregate.add_intervals(intervals);
                aggregate.worker_reached(worker, upto)
            }
            WorkerMsg::Done { worker, report } => {
                self.workers += 1;
                self.last_sent = self.last_sent.max(report.last_sent);
                self.last_done = self.last_done.max(report.last_done);
                self.waited_for_connection += report.waited_for_connection;
                self.traces.extend(report.trace);
                aggregate.add_intervals(report.intervals);
                aggregate.add_per_request(&report.per_request);
                aggregate.add_slowest(&report.slowest);
                aggregate.worker_done(worker)
            }
        }
    }
}

/// Open model: what each second offered, this shard's share of the
/// schedule.
fn set_offered(plan: &Plan, timeline: &mut [TimelinePoint]) {
    let crate::plan::Load::Open(open) = &plan.load else {
        return;
    };
    let due = |secs: u64| {
        let arrivals = open.schedule.arrivals_before(Duration::from_secs(secs));
        plan.shard.share(arrivals)
    };
    for p in timeline {
        let t = p.t_s as u64;
        p.offered = Some(due(t) - due(t - 1));
    }
}
