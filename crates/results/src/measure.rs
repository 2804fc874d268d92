//! One measured run: the engine and the monitor on one clock, folded into
//! [`Results`]. Shared by `headroom run`, studies and capacity search, so
//! every run's record has the same shape.

use crate::record::{Results, ResultsInput, DEFAULT_BUCKETS_MS};
use headroom_engine::plan::Plan;
use headroom_engine::{Progress, StopSignal};
use headroom_monitor::sample::Sample;
use headroom_monitor::{machine, Monitor, MonitorConfig};

/// How runs are recorded, beyond what their plan says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    /// Bounds of the response-time distribution, in ms.
    pub buckets_ms: Vec<u64>,
    /// The command line that asked for the run, kept in `meta.command`.
    pub command: Vec<String>,
}

impl Default for Recording {
    /// Gatling's buckets (800 ms, 1200 ms) and no command line.
    fn default() -> Recording {
        Recording {
            buckets_ms: DEFAULT_BUCKETS_MS.to_vec(),
            command: Vec::new(),
        }
    }
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
    measure_from(plan, stop, watch, recording, start, on_second)
}

/// As [`measure`], with the run's clock starting at `start` — ahead (the
/// run waits), or already past (the run joins late; see
/// [`headroom_engine::run_at`]).
pub fn measure_from(
    plan: &Plan,
    stop: &StopSignal,
    watch: MonitorConfig,
    recording: &Recording,
    start: std::time::Instant,
    mut on_second: impl FnMut(&Progress, Option<&Sample>),
) -> Measured {
    let fd_limit = machine::raise_fd_limit();
    let monitor = Monitor::start(watch, start, headroom_engine::wall_clock(start));
    let outcome = headroom_engine::run_at(plan, stop, start, |p| {
        on_second(&p, monitor.latest().as_ref())
    });
    let mut results = Results::new(ResultsInput {
        plan,
        outcome: &outcome,
        command: recording.command.clone(),
        buckets_ms: &recording.buckets_ms,
        fd_limit,
    });
    let report = monitor.finish(machine::available_cores(), &results.client_facts());
    results.attach_server(report);
    let t = &outcome.total;
    Measured {
        results,
        never_connected: t.requests > 0 && t.connections_opened() == 0,
        latency_intervals: outcome.latency_intervals,
        started_at: outcome.started_at,
        late_by: outcome.late_by,
    }
}
