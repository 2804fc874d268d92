//! The study file as written: serde types that reject unknown keys and
//! give the JSON Schema (`headroom schema study`).

use headroom_scenario::raw::{RawCapacity, RawEvent, RawScenario};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawStudy {
    /// A scenario file (relative to the study file), or an inline scenario.
    pub scenario: RawScenarioRef,
    #[serde(rename = "server")]
    pub servers: Vec<RawServer>,
    /// Companion services the servers need (backends, a message bus, a
    /// route registrar), started before them.
    #[serde(default, rename = "service", skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<RawService>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<RawMeasure>,
    /// With `objective = "capacity"`: the objective and the search, as a
    /// scenario's `[capacity]` (and over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<RawCapacity>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum RawScenarioRef {
    File(String),
    Inline(Box<RawScenario>),
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawService {
    pub name: String,
    /// Shell command; `{port}` (its own free port) and
    /// `{service.NAME.port}` (an earlier service's) are filled in.
    pub command: String,
    /// Readiness: "tcp" (its `{port}` accepts connections; the default), or
    /// an HTTP path that must answer 2xx on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// Readiness: a regular expression a line of its output (stdout or
    /// stderr) must match, e.g. "Listening on". With it, `ready` defaults
    /// to nothing more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_log: Option<String>,
    /// How long it may take to become ready (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<headroom_scenario::lenient::DurationText>")]
    pub ready_timeout: Option<String>,
    /// Working directory, relative to the study file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Signal sent to its process group to stop it (default TERM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
    /// Then SIGKILL after this long (default 10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<headroom_scenario::lenient::DurationText>")]
    pub stop_grace: Option<String>,
    /// "config" (default: started before each configuration's server and
    /// stopped after it) or "study" (once for the whole study).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub name: String,
    /// Shell command; `{param}` and `{port}` are filled in.
    pub command: String,
    /// Where the scenario's requests go (default "http://127.0.0.1:{port}").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Readiness: an HTTP path that must answer 2xx, or "tcp" for an open
    /// port (default "tcp").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// How long the server may take to become ready (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<headroom_scenario::lenient::DurationText>")]
    pub ready_timeout: Option<String>,
    /// Working directory, relative to the study file (default: the study
    /// file's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Signal sent to the server's process group to stop it (default TERM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
    /// Then SIGKILL after this long (default 10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<headroom_scenario::lenient::DurationText>")]
    pub stop_grace: Option<String>,
    /// The file the server writes its main process id to (relative to
    /// `dir`): the monitor re-reads it when that process exits, to follow
    /// a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pidfile: Option<String>,
    /// The server's own gauges, read at each sample (with placeholders):
    /// `puma=http://127.0.0.1:{port.2}/stats?token=T` (Puma's control
    /// app), `nginx=URL` (stub_status), `haproxy=SOCKET` (stats socket),
    /// `passenger`, `prometheus=URL#series,series`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<String>,
    /// Events during this server's measured runs (as a scenario's
    /// `[[event]]`, with the server's placeholders), e.g. a restart.
    #[serde(default, rename = "event", skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<RawEvent>,
    /// `--connect-to` rules for the scenario's requests to this server
    /// (placeholders filled), e.g. "::127.0.0.1:{port}" to send every host
    /// name of a router test to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connect_to: Vec<String>,
    /// Every combination of these parameter values is a configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<BTreeMap<String, Vec<Value>>>,
    /// Explicit configurations (parameter tables), besides the grid.
    #[serde(default, rename = "config", skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<BTreeMap<String, Value>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMeasure {
    /// Load before measuring, not counted (default 0s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<headroom_scenario::lenient::DurationText>")]
    pub warmup: Option<String>,
    /// Replaces the scenario's duration for each measured run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<headroom_scenario::lenient::DurationText>")]
    pub duration: Option<String>,
    /// Runs per configuration, interleaved across configurations (default 1).
    #[serde(
        default,
        with = "headroom_scenario::lenient",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<headroom_scenario::lenient::Lenient<std::num::NonZeroU32>>")]
    pub repeat: Option<u32>,
    /// "throughput" (default), "p50", "p90", "p95", "p99" or "mean" (lowest),
    /// "capacity", or "max_gap" (least downtime around events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// Highest error rate for a configuration to win, e.g. "1%" (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_budget: Option<String>,
    /// Pause between configurations (default 1s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<headroom_scenario::lenient::DurationText>")]
    pub pause: Option<String>,
}

/// When a service runs.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Started before each configuration's server, stopped after it: every
    /// configuration meets a fresh one.
    Config,
    /// Started once before the first configuration, stopped at the end.
    Study,
}
