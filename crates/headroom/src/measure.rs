//! One measured run: the engine and the monitor on one clock, folded into
//! [`Results`]. Shared by `headroom run`, studies and (later) capacity
//! search, so every run's record has the same shape.

use crate::engine::{self, Progress, StopSignal};
use crate::monitor::{Monitor, MonitorConfig};
use crate::plan::Plan;
use crate::report::results::{Results, ResultsInput};
use crate::sysinfo;

pub struct Measured {
    pub results: Results,
    /// Every request failed to connect.
    pub never_connected: bool,
    /// Each second's latency histogram (base64), for `--hdr-log`.
    pub latency_intervals: Vec<String>,
    pub started_at: std::time::SystemTime,
}

/// Runs `plan` with a monitor per `watch`; `on_second` sees each finished
/// second and the latest monitor sample.
pub fn measure(
    plan: &Plan,
    stop: &StopSignal,
    watch: MonitorConfig,
    buckets_ms: &[u64],
    mut on_second: impl FnMut(&Progress, Option<&crate::monitor::sample::Sample>),
) -> Measured {
    let fd_limit = sysinfo::raise_fd_limit();
    let start = engine::start_soon();
    let monitor = Monitor::start(watch, start);
    let outcome = engine::run_at(plan, stop, start, |p| {
        on_second(&p, monitor.latest().as_ref())
    });
    let mut results = Results::new(ResultsInput {
        plan,
        outcome: &outcome,
        command: std::env::args().collect(),
        buckets_ms,
        fd_limit,
    });
    let report = monitor.finish(sysinfo::available_cores(), &results.client_facts());
    results.attach_server(report);
    let t = &outcome.total;
    Measured {
        results,
        never_connected: t.requests > 0 && t.connections_opened == 0,
        latency_intervals: outcome.latency_intervals,
        started_at: outcome.started_at,
    }
}
