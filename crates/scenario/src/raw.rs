//! The scenario file as written (TOML or YAML, one schema): every field
//! optional where a default exists, unknown keys rejected. `headroom
//! schema` prints the JSON Schema generated from these same types.
//! Durations are strings ("500ms", "30s", "2m") checked during validation,
//! so an error can point at the value.

use crate::lenient;
use headroom_engine::plan::feeder::{FeederOrder, FeederScope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A headroom scenario: what to request, how, and under which load.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    /// Base URL that request paths are joined to, e.g. "http://127.0.0.1:8080".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `[load]`: the load model and how long it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<RawLoad>,
    /// `[http]`: connections, timeouts, headers, cookies, threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<RawHttp>,
    /// `[tls]`: certificates for `https://` (CA file, insecure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RawTls>,
    /// Test data files (CSV with a header row, or JSON arrays of objects).
    #[serde(default, rename = "feeder", skip_serializing_if = "Vec::is_empty")]
    pub feeders: Vec<RawFeeder>,
    /// The requests. Without sessions, each iteration picks one by weight.
    #[serde(default, rename = "request", skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RawRequest>,
    /// Sequences of steps; each iteration runs one session, picked by weight.
    #[serde(default, rename = "session", skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<RawSession>,
    /// Settings for `headroom capacity` (flags override them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<RawCapacity>,
    /// Pass/fail bounds for CI: metric = bound, e.g. p95 = "<500ms",
    /// errors = "<1%" (`<` is implied for latency and errors, `>` for
    /// achieved and throughput). A breach makes the exit code 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<BTreeMap<String, RawThreshold>>,
    /// Commands or signals at planned moments of the run, e.g. a server
    /// restarted under load; what users saw around each is measured.
    #[serde(default, rename = "event", skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<RawEvent>,
    /// Connect somewhere else than a URL's host says, keeping its URL and
    /// `Host` header (curl's --connect-to): `["HOST1:PORT1:HOST2:PORT2"]`
    /// (an empty field matches any / keeps the request's own), or a table
    /// `{ "HOST1:PORT1" = "HOST2:PORT2" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_to: Option<RawRoutes>,
    /// Fixed addresses for host names (curl's --resolve):
    /// `["HOST:PORT:ADDRESS"]`, or a table `{ "HOST:PORT" = "ADDRESS" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve: Option<RawRoutes>,
    /// `[script]`: the JavaScript file whose exported functions steps
    /// (`js`) and hooks (`before`, `after`) call, and the budgets of a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<RawScript>,
    /// `[grpc]`: where the message types of `grpc` requests come from —
    /// `.proto` files or a protoset; neither: the server's reflection
    /// service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<RawGrpc>,
    /// `[trace]`: W3C trace context (`traceparent`) on every request, so
    /// the run's slowest requests (its exemplars) lead to their traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<RawTrace>,
}

/// `[trace]`: trace context on every request. The table turns it on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTrace {
    /// Send trace context (default true: the table turns it on; false
    /// turns it off, e.g. from `${TRACE}`).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub enabled: Option<bool>,
    /// A fresh trace ID for every `request` (default), or one per session
    /// `iteration` whose requests are its spans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<headroom_engine::plan::trace_context::TracePer>,
    /// `traceparent`'s sampled flag (default true: the server's tracer is
    /// asked to record every trace).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub sampled: Option<bool>,
    /// A `tracestate` header sent as given, e.g. "vendor=value".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// Where a trace ID leads in the report: a URL with `{id}`, e.g.
    /// "http://127.0.0.1:16686/trace/{id}".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// `[grpc]`: the schema of the scenario's gRPC calls.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGrpc {
    /// `.proto` files (relative to the scenario), compiled when the run
    /// starts (no `protoc` needed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proto: Vec<String>,
    /// Folders their imports are found in (each file's own folder is one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import_path: Vec<String>,
    /// A protoset (`protoc --descriptor_set_out --include_imports`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protoset: Option<String>,
    /// Message compression both ways: `gzip` (sent compressed, and
    /// compressed answers accepted), or `identity` (the default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// An HTTP/2 PING on each connection this often (gRPC's keepalive,
    /// e.g. `"10s"`); one unanswered when the next is due closes the
    /// connection. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub keepalive: Option<String>,
}

/// `[script]`: a JavaScript module next to the scenario, and what one call
/// of a script may take.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawScript {
    /// The module (relative to the scenario): its exported functions are
    /// what `js`, `before` and `after` name; `setup()` runs once before
    /// the load (its return value is every user's `ctx.data`),
    /// `teardown(data)` once after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Longest one call may run (default 100ms); past it the call is
    /// stopped and counted as a script error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub timeout: Option<String>,
    /// Memory one call may add, in MiB (default 64); past it the call is
    /// stopped and counted as a script error.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub memory_mib: Option<u32>,
    /// Seed of `Math.random` and `crypto.uuidv4` (default: a fresh one
    /// each run), so a run's random choices can be repeated.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u64>>")]
    pub seed: Option<u64>,
}

/// `--connect-to` / `--resolve` rules in a scenario file: curl's strings,
/// or a table whose keys are the left part and values the right part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawRoutes {
    List(Vec<String>),
    Table(BTreeMap<String, String>),
}

impl RawRoutes {
    /// Every rule in curl's one-string form.
    pub fn rules(&self) -> Vec<String> {
        match self {
            RawRoutes::List(list) => list.clone(),
            RawRoutes::Table(table) => table.iter().map(|(k, v)| format!("{k}:{v}")).collect(),
        }
    }

    /// Adds rules given on the command line (after the file's).
    pub fn extend(slot: &mut Option<RawRoutes>, more: &[String]) {
        if more.is_empty() {
            return;
        }
        let mut rules = slot.as_ref().map(RawRoutes::rules).unwrap_or_default();
        rules.extend(more.iter().cloned());
        *slot = Some(RawRoutes::List(rules));
    }
}

/// A threshold: a bound ("<500ms"), or a table that may also stop the run
/// early when the bound is breached (k6's abortOnFail).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawThreshold {
    Bound(String),
    Table(RawThresholdTable),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawThresholdTable {
    /// The bound, e.g. "<2s" or "<5%".
    pub bound: String,
    /// Stop the run as soon as the bound is breached over the rolling
    /// window (results are written; exit code 1).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub abort: Option<bool>,
    /// Do not judge for abort before this long into the run (default 0s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub delay: Option<String>,
    /// The rolling window an abort is judged on (default 10s, at most 60s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub window: Option<String>,
}

impl RawThreshold {
    pub fn bound(&self) -> &str {
        match self {
            RawThreshold::Bound(b) => b,
            RawThreshold::Table(t) => &t.bound,
        }
    }
}

/// `[[event]]`: one command or signal at a planned moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEvent {
    /// A time from the start of the load ("10s") or the start of a stage
    /// of the open model's stages ("stage:2").
    pub at: String,
    /// A shell command (run with `sh -c`, output captured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A signal ("USR2", "HUP", "TERM", …) for the monitored server's main
    /// process, or for the process named in `pidfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// With `signal`: the file holding the pid to signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pidfile: Option<String>,
    /// The event's name in reports (default: the command or signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// How long after the event users are watched (default: until the
    /// latency is back within the pre-event p99 for 5 s, at most 60 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub window: Option<String>,
}

/// `[capacity]`: the objective and how to search for the highest load
/// that meets it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCapacity {
    /// The objective, e.g. "p90<500ms, errors<5%" (achieved>=95% is added
    /// on the rate axis unless given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<String>,
    /// "rate" (arrivals per second, open model; default) or "users".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<String>,
    /// First load tried (default 10 req/s or 1 user).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub min: Option<f64>,
    /// Highest load tried (default 100000 req/s or 10000 users).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub max: Option<f64>,
    /// Factor between loads while growing (default 2).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub growth: Option<f64>,
    /// Width of the final interval, e.g. "5%" (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// Length of each measured step (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub step_duration: Option<String>,
    /// Load before each step, not counted (default 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub warmup: Option<String>,
    /// Pause between steps for the server to drain (default 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub pause: Option<String>,
    /// Bound on the whole search (default 30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub max_time: Option<String>,
    /// The answer run again this long before it is given; "0s" for none
    /// (default 3 × step_duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub confirm_duration: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// N users looping request → response.
    Closed,
    /// Arrivals at a rate, whatever the server does.
    Open,
}

/// The load. Closed: `vus` (+ `ramp_up`, `duration` or `iterations`,
/// `think_time`). Open: `rate` + `duration`, or `stages`, or `users` +
/// `over` (N users arriving evenly over D), or `users_per_second` +
/// `duration`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLoad {
    /// "closed" (users looping) or "open" (arrivals at a rate); guessed from the other fields when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Model>,
    /// Closed: number of virtual users.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<std::num::NonZeroU32>>")]
    pub vus: Option<u32>,
    /// Closed: start users evenly over this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub ramp_up: Option<String>,
    /// How long to apply load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub duration: Option<String>,
    /// Closed: iterations per user.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u64>>")]
    pub iterations: Option<u64>,
    /// Closed: pause after each iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub think_time: Option<String>,
    /// Open: arrivals (requests or session starts) per second.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub rate: Option<f64>,
    /// Open: stages of held or ramped rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<RawStage>>,
    /// Open: this many users arrive evenly over `over` (Gatling rampUsers).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u64>>")]
    pub users: Option<u64>,
    /// Open: the time over which `users` arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub over: Option<String>,
    /// Open: users arriving per second for `duration` (Gatling constantUsersPerSec).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub users_per_second: Option<f64>,
    /// Open: most connections (sessions in progress) at once.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<std::num::NonZeroU32>>")]
    pub max_connections: Option<u32>,
    /// Stop after this many requests in all.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<std::num::NonZeroU64>>")]
    pub max_requests: Option<u64>,
    /// After the load ends, how long in-flight requests may finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub graceful_stop: Option<String>,
}

/// One stage. Open model: `{ duration, rate }` holds a rate;
/// `{ duration, from, to }` ramps it linearly. Closed model (user counts,
/// k6's ramping-vus): `{ duration, target }` goes from the previous count
/// (0 at first) to `target` linearly; `{ duration, from, to }` likewise
/// from `from`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawStage {
    /// How long the stage lasts.
    #[schemars(with = "lenient::DurationText")]
    pub duration: String,
    /// Open: hold this rate (arrivals per second).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub rate: Option<f64>,
    /// Ramp from this rate (open) or user count (closed).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub from: Option<f64>,
    /// Ramp to this rate (open) or user count (closed).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<f64>>")]
    pub to: Option<f64>,
    /// Closed model: the user count this stage ends at.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub target: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Reuse connections (default true).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub keep_alive: Option<bool>,
    /// TCP (and TLS) handshake limit (default 10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub connect_timeout: Option<String>,
    /// Default request timeout (60s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub timeout: Option<String>,
    /// A cookie jar per user (default true).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub cookies: Option<bool>,
    /// Headers sent with every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Generator threads (default: the CPUs available).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<std::num::NonZeroUsize>>")]
    pub threads: Option<usize>,
    /// When a reused keep-alive connection turns out closed by the server
    /// before the request reached it, send the request once more on a new
    /// connection: for `idempotent` methods (default: GET, HEAD, PUT,
    /// DELETE, OPTIONS, TRACE), `all`, or `never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_connection_retry: Option<RawStaleRetry>,
    /// Most connections open to any one origin (scheme, host, port), all
    /// users together; users then share a pool of connections per origin.
    /// Unset: each user keeps its own connection to each origin it uses.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<std::num::NonZeroU32>>")]
    pub max_connections_per_host: Option<u32>,
    /// HTTP version: `"1.1"` (default); `"2"` — over https:// ALPN `h2`
    /// only (a server that does not agree fails the run's connections),
    /// over http:// HTTP/2 with prior knowledge (h2c); `"auto"` — over
    /// https:// ALPN `h2,http/1.1` and what the server chooses, over
    /// http:// HTTP/1.1; `"3"` — HTTP/3 over QUIC (https:// only, ALPN
    /// `h3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<RawHttpVersion>,
    /// HTTP/2 and HTTP/3: most streams in flight on one connection
    /// (default 10; never above what the server allows).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<std::num::NonZeroU32>>")]
    pub max_streams: Option<u32>,
    /// HTTP/3: resume connections with 0-RTT, for servers that allow it
    /// (default false). Only idempotent requests go as early data (it can be
    /// replayed); others wait for the handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_rtt: Option<bool>,
}

/// `[http] version`: written `"2"` or `2`, `"1.1"` or `1.1`, `"3"` or `3`,
/// `"auto"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawHttpVersion(pub headroom_engine::plan::HttpVersion);

impl std::str::FromStr for RawHttpVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let canonical = match text {
            "1" | "1.1" | "http/1.1" => "1.1",
            "2" | "2.0" | "h2" => "2",
            "3" | "3.0" | "h3" => "3",
            other => other,
        };
        headroom_engine::plan::HttpVersion::parse(canonical)
            .map(RawHttpVersion)
            .ok_or_else(|| {
                format!(
                    "unknown HTTP version `{text}`: expected {}",
                    headroom_engine::plan::HttpVersion::expected()
                )
            })
    }
}

impl<'de> Deserialize<'de> for RawHttpVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(text) => text,
            serde_json::Value::Number(n) => n.to_string(),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "invalid HTTP version {other}: expected {}",
                    headroom_engine::plan::HttpVersion::expected()
                )))
            }
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for RawHttpVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

impl JsonSchema for RawHttpVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HttpVersion".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        use headroom_engine::plan::HttpVersion;
        schemars::json_schema!({
            "description": HttpVersion::expected(),
            "enum": HttpVersion::NAMES
        })
    }
}

/// `[http] stale_connection_retry`: the engine's own list of choices.
pub use headroom_engine::plan::StaleRetry as RawStaleRetry;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// PEM file of extra trusted CA certificates (relative to the scenario).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Name for SNI and certificate checks (default: the URL's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// Skip certificate verification (default false).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub insecure: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFeeder {
    /// Name used by `feed` steps; its columns become `{{variables}}`.
    pub name: String,
    /// .csv (header row = column names) or .json (array of objects),
    /// relative to the scenario file.
    pub file: String,
    /// sequential, circular (default), random or unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<FeederOrder>,
    /// shared (default), per_user (each user walks the rows) or
    /// per_user_fixed (each user draws one row and keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<FeederScope>,
}

/// Statuses: a code, a list of codes, or a range ("200-299", "2xx").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawStatus {
    One(u16),
    List(Vec<u16>),
    Range(String),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    /// Statuses that count as OK: `200`, `[200, 404]` or `"200-299,404"` (default: below 400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RawStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    /// The request's name in results and reports.
    pub name: String,
    /// GET unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A full URL (same origin as base_url), or use `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Path and query joined to base_url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Headers of this request (over `[http] headers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Inline body text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Body read from a file (relative to the scenario).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_file: Option<String>,
    /// Body as JSON (sets Content-Type: application/json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// This request's response timeout (default `[http] timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub timeout: Option<String>,
    /// Share of the mix (default 1).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub weight: Option<u32>,
    /// Statuses that count as OK (default: below 400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<RawExpect>,
    /// Checks on the response; a failed one fails the request (`check: NAME` in errors).
    #[serde(default, rename = "check", skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<RawCheck>,
    /// Values taken from the response into the user's variables.
    #[serde(default, rename = "extract", skip_serializing_if = "Vec::is_empty")]
    pub extracts: Vec<RawExtract>,
    /// Script run before each send: an exported function's name, or
    /// statements. `ctx.request` (method, url, headers, body) may be
    /// changed: a signature, a timestamp, a nonce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// Script run after each response (`ctx.response`): `ctx.fail(message)`
    /// or `return false` fails the request as check `after: NAME`; it may
    /// set variables (custom extraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// A gRPC call instead of an HTTP request: `package.Service/Method`,
    /// its message the `json` table or the `body` text (JSON, templates
    /// as for bodies), its metadata the `headers`; sent over HTTP/2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<String>,
    /// A streaming gRPC call's messages: the message (or each of a JSON
    /// array's) sent in turn, `count` in all, `interval` apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<RawGrpcStream>,
}

/// `stream = { count = 10, interval = "100ms" }` on a gRPC call that
/// streams its requests (ghz's `--stream-call-count`, `--stream-interval`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGrpcStream {
    /// Messages sent in all, the message (or the array's messages) in
    /// turn (default: each once).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub count: Option<u32>,
    /// Time between one message sent and the next, paced from the
    /// stream's start (default: all at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub interval: Option<String>,
}

/// Exactly one of: `status`, `body_contains`, `body_regex`, `json_path`
/// (with `equals` or `exists`), `header` (with `equals` or `present`),
/// `response_time_under`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCheck {
    /// A name for the results (default: a description of the check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The status is one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RawStatus>,
    /// The body contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_contains: Option<String>,
    /// The body matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_regex: Option<String>,
    /// A JSON path into the body, with `equals` or `exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// A response header, with `equals` or `present`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// With `json_path` or `header`: the value it must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<serde_json::Value>,
    /// With `json_path`: whether the path must find something.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub exists: Option<bool>,
    /// With `header`: whether the header must be there.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub present: Option<bool>,
    /// The response came within this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_time_under: Option<String>,
}

/// Sets variable `name` from exactly one of `json_path`, `regex` (capture
/// `group`, default 1), `header`, `cookie`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExtract {
    /// The variable set (`{{name}}` in later requests).
    pub name: String,
    /// A JSON path into the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// A regular expression over the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// With `regex`: the capture group (default 1).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<usize>>")]
    pub group: Option<usize>,
    /// A response header's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A cookie's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSession {
    /// The session's name in results.
    pub name: String,
    /// Share of iterations (default 1).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub weight: Option<u32>,
    /// What the session does, in order.
    pub steps: Vec<RawStep>,
}

/// Exactly one of: `request` (a request's name), `think` ("1s" or a range
/// "1s..3s"), `repeat` (with `steps`), `choice` (weighted branches),
/// `feed` (a feeder's name: take its next row), `js` (script), `if` (with
/// `steps`, and `else`), `while` (with `steps`, and `max`); on a socket: `ws` or `sse`
/// (open one), `send` / `send_binary` (a message), `expect` alone (wait
/// for a message), `hold` (stay connected), `close` (with a code).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    /// Send the request of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Pause this long (or a range, "1s..3s").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub think: Option<String>,
    /// Run `steps` this many times.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub repeat: Option<u32>,
    /// The steps `repeat`, `if` or `while` runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<RawStep>>,
    /// Run script code: a function `[script] file` exports (called with
    /// `ctx`), or statements (`vars.n = Number(vars.n) + 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub js: Option<String>,
    /// A JavaScript condition (`vars`, `response`, `data` in scope): run
    /// `steps` when it holds, else `else`.
    #[serde(default, rename = "if", skip_serializing_if = "Option::is_none")]
    pub if_: Option<String>,
    /// With `if`: the steps run when it does not hold.
    #[serde(default, rename = "else", skip_serializing_if = "Option::is_none")]
    pub else_: Option<Vec<RawStep>>,
    /// A JavaScript condition: run `steps` again while it holds (asked
    /// before each round), at most `max` rounds.
    #[serde(default, rename = "while", skip_serializing_if = "Option::is_none")]
    pub while_: Option<String>,
    /// With `while`: most rounds (default 100); the loop ends there.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub max: Option<u32>,
    /// Run one of these branches, picked by weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<Vec<RawBranch>>,
    /// Take the next row of the feeder of this name into the user's variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed: Option<String>,
    /// With `repeat`: start a round this often ("100ms": a message rate
    /// per socket) rather than one after the other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub every: Option<String>,
    /// Open the user's WebSocket: a path on the base URL, or a full
    /// `ws://` / `wss://` URL. The handshake is measured as a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws: Option<String>,
    /// Open the user's server-sent-event stream (a path or a full URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse: Option<String>,
    /// Open a gRPC stream of a streaming method (`package.Service/Method`,
    /// types as `[grpc]` says): `send` steps send its messages (JSON),
    /// `expect` waits for a decoded message that matches, `close`
    /// half-closes it and waits for the server's status. Its entry is the
    /// stream's lifetime and status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_stream: Option<String>,
    /// With `ws` or `sse`: headers of the handshake (the session's cookies
    /// and `[http] headers` are sent too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Send a text message on the WebSocket (`{{…}}` templates allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// Send a binary message: its bytes in base64 (`{{…}}` allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_binary: Option<String>,
    /// Wait for the first incoming message that matches (after `ws`, `sse`,
    /// `send`, or alone); the wait is measured (from the send: the round trip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<RawMessageExpect>,
    /// With `expect`: values taken from the matching message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<Vec<RawExtract>>,
    /// Stay connected this long, receiving (answering pings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub hold: Option<String>,
    /// With `hold` on a WebSocket: send a ping this often; each pong's
    /// round trip is measured (the step's `… ping` entry), and a ping
    /// unanswered when the next is due is `ping_timeout` (the socket is
    /// given up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub ping_every: Option<String>,
    /// Close the socket with this code (1000: normal).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u16>>")]
    pub close: Option<u16>,
    /// With `ws`, `sse`, `send`, `send_binary` or `expect`: the step's name
    /// in the results (default: the session, the step's number and kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What an awaited message must be: every condition given holds (none:
/// any message). On an event stream the message is an event's data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMessageExpect {
    /// The message contains this text (`{{…}}` allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The message matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// A JSON path into the message, with `equals` or `exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// With `json_path`: the value it must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<serde_json::Value>,
    /// With `json_path`: whether the path must find something.
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<bool>>")]
    pub exists: Option<bool>,
    /// Server-sent events: the event's name (`event:`; `message` when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// How long to wait (default: the request timeout, `[http] timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::DurationText>")]
    pub within: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBranch {
    /// Share of picks (default 1).
    #[serde(default, with = "lenient", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<lenient::Lenient<u32>>")]
    pub weight: Option<u32>,
    /// What the branch does.
    pub steps: Vec<RawStep>,
}

/// The JSON Schema of the scenario format.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RawScenario)).expect("schema is JSON")
}
