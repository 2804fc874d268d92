//! Events during a measured run (`--event`, `[[event]]`), as recorded:
//! when each ran and how it ended, and what users saw around each
//! ([`window`]): requests, failures by class, p99, and the longest time in
//! which no request completed OK — the downtime users felt — after the
//! event, and over the same length of time before it.

pub mod window;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `events[]` in results.json.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct EventRecord {
    pub label: String,
    /// "command" or "signal".
    pub kind: String,
    /// Planned time, s from the start of the load.
    pub at_s: f64,
    /// When it actually began and ended, s from the start (ms precision).
    pub started_s: f64,
    pub ended_s: f64,
    /// A command's exit status (a signal delivered: 0); `None` when it
    /// could not run or was killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The command's output (stdout and stderr), its last 4 KiB.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// Why it did not run as asked (no such pid, the run ended first, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What users saw from the event's start until the latency was back
    /// within the pre-event p99 for 5 s (at most 60 s after its end), or
    /// over the event's `window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<WindowFigures>,
    /// The same figures over the same length of time just before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<WindowFigures>,
    /// 100 ms buckets from the start of `before` to the end of `after`,
    /// fine enough to see a sub-second gap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline_100ms: Vec<FinePoint>,
}

/// What users saw over one stretch of the run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct WindowFigures {
    /// The stretch, s from the start of the run.
    pub from_s: f64,
    pub to_s: f64,
    /// Requests completed in it.
    pub requests: u64,
    pub ok: u64,
    /// Failed requests by error class.
    pub failed: BTreeMap<String, u64>,
    pub failed_total: u64,
    /// From the intended send time, HDR histogram of the stretch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// The longest time without any request completing OK, among the
    /// gaps that overlap the stretch (a gap is measured whole).
    pub max_gap_ms: f64,
    /// Where that gap began, s from the start.
    pub max_gap_from_s: f64,
}

/// One 100 ms bucket of the fine timeline.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct FinePoint {
    /// End of the bucket, s from the start.
    pub t_s: f64,
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}
