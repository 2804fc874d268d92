//! One measured run: the engine and the monitor on one clock, folded into
//! [`Results`]. Shared by `headroom run`, studies and capacity search, so
//! every run's record has the same shape.

use crate::abort::AbortWatch;
use crate::act;
use crate::assemble::{results, ResultsInput};
use crate::prometheus::LiveMetrics;
use headroom_engine::plan::Plan;
use headroom_engine::{Progress, StopSignal};
use headroom_monitor::{machine, Monitor, MonitorConfig};
use headroom_objectives::abort::AbortRule;
use headroom_records::events::window;
use headroom_records::results::{Results, DEFAULT_BUCKETS_MS};
use headroom_records::server::sample::Sample;

/// How runs are recorded, beyond what their plan says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    /// Bounds of the response-time distribution, in ms.
    pub buckets_ms: Vec<u64>,
    /// The command line that asked for the run, kept in `meta.command`.
    pub command: Vec<String>,
    /// Live metrics to keep current (`--metrics-listen`, `--metrics-push`),
    /// and the labels of this run's series (`config`, `step`).
    pub live: Option<LiveMetrics>,
    pub live_labels: crate::prometheus::Labels,
    /// The live dashboard's feed (`--dashboard`).
    pub dashboard: Option<crate::dashboard::Feed>,
}

impl Recording {
    /// The same, with the live series labelled `key` = `value` too.
    pub fn labelled(&self, key: &str, value: String) -> Recording {
        let mut r = self.clone();
        r.live_labels.push((key.to_string(), value));
        r
    }
}

impl Default for Recording {
    /// Gatling's buckets (800 ms, 1200 ms) and no command line.
    fn default() -> Recording {
        Recording {
            buckets_ms: DEFAULT_BUCKETS_MS.to_vec(),
            command: Vec::new(),
            live: None,
            live_labels: Vec::new(),
            dashboard: None,
        }
    }
}

/// What happens during a measured run beyond its plan (whose events are
/// acted on in any case): thresholds that stop it early, and where event
/// commands run.
#[derive(Clone, Debug, Default)]
pub struct During {
    pub aborts: Vec<AbortRule>,
    /// Run event commands in this process group (a study's server's, so
    /// what they start is stopped with the server).
    pub event_group: Option<i32>,
    /// Where event commands run (a study's server's folder).
    pub event_dir: Option<std::path::PathBuf>,
}

pub struct Measured {
    pub results: Results,
    /// Every request failed to connect.
    pub never_connected: bool,
    /// Each second's latency histogram (base64), for `--hdr-log`.
    pub latency_intervals: Vec<String>,
    pub started_at: std::time::SystemTime,
    /// How long after its start time the run began (a late shard).
    pub late_by: std::time::Duration,
}

/// Runs `plan` with a monitor per `watch`; `on_second` sees each finished
/// second and the latest monitor sample.
pub fn measure(
    plan: &Plan,
    stop: &StopSignal,
    watch: MonitorConfig,
    recording: &Recording,
    on_second: impl FnMut(&Progress, Option<&Sample>),
) -> Measured {
    let start = headroom_engine::start_soon();
    let during = During::default();
    measure_from(plan, stop, watch, recording, &during, start, on_second)
}

/// As [`measure`], with the run's clock starting at `start` — ahead (the
/// run waits), or already past (a shared start is joined late; see
/// [`headroom_engine::run_at`]).
pub fn measure_from(
    plan: &Plan,
    stop: &StopSignal,
    watch: MonitorConfig,
    recording: &Recording,
    during: &During,
    start: headroom_engine::Start,
    mut on_second: impl FnMut(&Progress, Option<&Sample>),
) -> Measured {
    let fd_limit = machine::raise_fd_limit();
    let monitor = Monitor::start(watch, start.at(), headroom_engine::wall_clock(start.at()));
    // Events act once for the whole plan: in its first shard only.
    let events: Vec<_> = plan
        .events
        .iter()
        .filter(|_| plan.shard.index == 0)
        .filter_map(|e| plan.event_time(e.at).map(|at| (e.clone(), at)))
        .collect();
    let target = act::Target {
        main_pid: monitor.main_pid_handle(),
        process_group: during.event_group,
        dir: during.event_dir.clone(),
    };
    let acting = act::start(&events, start.at(), &target, stop);
    let aborts = AbortWatch::new(&during.aborts, plan);
    let mut aborted = None;
    if let Some(feed) = &recording.dashboard {
        feed.run_start(plan);
    }
    let outcome = headroom_engine::run_at(plan, stop, start, |p| {
        if aborted.is_none() {
            aborted = aborts.judge(&p);
            if aborted.is_some() {
                stop.stop_because("threshold".into());
            }
        }
        let sample = monitor.latest();
        if let Some(live) = &recording.live {
            live.second(&recording.live_labels, plan, &p, sample.as_ref());
        }
        if let Some(feed) = &recording.dashboard {
            feed.second(plan, &p, sample.as_ref());
        }
        on_second(&p, sample.as_ref())
    });
    let mut records = acting.finish();
    let mut results = results(ResultsInput {
        plan,
        outcome: &outcome,
        command: recording.command.clone(),
        buckets_ms: &recording.buckets_ms,
        fd_limit,
    });
    let report = monitor.finish(
        headroom_records::server::machine::available_cores(),
        &results.client_facts(),
    );
    results.attach_server(report);
    let run_end_s = outcome.duration.as_secs_f64();
    for (record, (event, _)) in records.iter_mut().zip(&events) {
        window::measure(record, &outcome.trace.completions, run_end_s, event.window);
    }
    records.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    if outcome.trace.truncated > 0 {
        results.warnings.push(format!(
            "the trace around events kept {} requests and left out {} (the figures around \
             events are cut short)",
            outcome.trace.completions.len(),
            outcome.trace.truncated
        ));
    }
    for r in &records {
        if let Some(e) = &r.error {
            results.warnings.push(format!("event `{}`: {e}", r.label));
        }
    }
    results.events = records;
    results.abort = aborted;
    if let Some(live) = &recording.live {
        live.finish(&recording.live_labels, &results);
    }
    if let Some(feed) = &recording.dashboard {
        feed.finish(&results);
    }
    let t = &outcome.total;
    Measured {
        results,
        never_connected: t.requests > 0 && t.connections_opened() == 0,
        latency_intervals: outcome.latency_intervals,
        started_at: outcome.started_at,
        late_by: outcome.late_by,
    }
}
