//! The resolved run plan: everything the engine needs, complete and checked.
//! `scenario` builds a `Plan` from a file or from command-line flags; the
//! engine never sees flags or files.
//!
//! - [`template`]: `{{var}}` parts of URLs, headers and bodies.
//! - [`feeder`]: rows of test data handed to users.
//! - [`check`]: checks and extractions on responses.
//! - [`schedule`]: the open model's arrival times (pure maths).
//! - [`limits`]: the largest durations, rates and jars a plan may ask for.
//! - [`shard`]: one plan split exactly over several processes.
//! - [`events`]: commands and signals at planned moments of the run.
//! - [`socket`]: WebSocket and event-stream steps of sessions.

pub mod check;
pub mod events;
pub mod feeder;
pub mod json_query;
pub mod limits;
pub mod schedule;
pub mod shard;
pub mod socket;
pub mod template;
pub mod trace_context;

use crate::metrics::ErrorClass;
use check::{Check, Extract, StatusSet};
use feeder::Feeder;
use headroom_http::routes::Routes;
use headroom_http::tls::{TlsClient, TlsError, TlsOptions};
pub use headroom_http::HttpVersion;
use headroom_http::{Capture, Endpoint, EndpointError};
use schedule::{Schedule, Stage};
use shard::Shard;
use std::sync::Arc;
use std::time::Duration;
use template::{Scope, Template};

/// Default request timeout, as in Gatling.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests may finish after the load ends, before they
/// are cut off and counted as `aborted`.
pub const DEFAULT_GRACEFUL_STOP: Duration = Duration::from_secs(10);
/// After Ctrl-C, in-flight requests get this long before being cut off.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(1);
/// Open model: connections grow on demand up to this many (all workers
/// together) unless `--connections` says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

#[derive(Clone, Debug)]
pub struct Plan {
    pub endpoint: Endpoint,
    /// For display: the URL or base URL the user gave.
    pub label: String,
    pub requests: Vec<RequestSpec>,
    /// A weighted mix of requests, or sessions of steps.
    pub flow: Flow,
    pub feeders: Vec<Arc<Feeder>>,
    /// Names of every check and extraction, indexed by their id.
    pub check_names: Vec<String>,
    pub load: Load,
    pub keep_alive: bool,
    /// A cookie jar per user.
    pub cookies: bool,
    pub tls: Option<TlsClient>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub graceful_stop: Duration,
    /// Generator worker threads (one tokio runtime each).
    pub threads: usize,
    /// Stop after this many requests in all.
    pub max_requests: Option<u64>,
    /// Which requests are sent again when a reused connection turns out to
    /// have been closed by the server before the request reached it.
    pub stale_retry: StaleRetry,
    /// The part of the plan this process runs (all of it unless sharded;
    /// set with [`Plan::set_shard`]).
    pub shard: Shard,
    /// Source addresses connections are opened from, in turn (empty: the
    /// kernel's choice). One source address reaches a destination through
    /// at most ~28k ephemeral ports; more connections need more addresses.
    pub local_addresses: Vec<std::net::IpAddr>,
    /// Commands or signals at planned moments (the caller acts on them;
    /// the engine traces the requests around them).
    pub events: Vec<events::Event>,
    /// Where host names connect (`--connect-to`, `--resolve`), for the
    /// origins of full URLs; the endpoint was resolved with them already.
    pub routes: Routes,
    /// Caps the connections open to any one origin, all users together:
    /// users then share a pool of connections per origin (as a browser's
    /// tabs do) instead of each keeping its own.
    pub max_connections_per_host: Option<u32>,
    /// How a worker runs a closed model's users.
    pub engine: Engine,
    /// HTTP/1.1, HTTP/2, or what TLS negotiates (`auto`: settled once, at
    /// the start of a run, by [`crate::negotiate`]).
    pub http_version: HttpVersion,
    /// HTTP/2: most streams in flight on one connection (never above the
    /// server's SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_streams: u32,
    /// HTTP/2: a PING on each connection this often (`[grpc] keepalive`).
    pub keepalive: Option<Duration>,
    /// HTTP/3: resume QUIC connections with 0-RTT (`--0rtt`): a request on
    /// a resumed connection may go before its handshake completes — only
    /// an idempotent one, since early data can be replayed.
    pub zero_rtt: bool,
    /// Keep every second's latency histogram for the run's end (the
    /// HdrHistogram interval log, `--hdr-log`). A shard keeps them always
    /// (its merge needs them); otherwise they are not kept, so a long run's
    /// memory stays flat.
    pub keep_second_histograms: bool,
    /// The scenario's scripts (`[script]`, `js`, `if`, `while`, `before`,
    /// `after`): the code steps and hooks refer to by index.
    pub scripts: Option<Arc<headroom_js::Program>>,
    /// What the script's `setup()` returned, as JSON (set by the run, for
    /// every user's `ctx.data`).
    pub script_data: Option<String>,
    /// W3C trace context on every request (`--trace`, `[trace]`).
    pub trace_context: Option<trace_context::TraceContext>,
}

/// HTTP/2 streams in flight per connection unless a plan says otherwise
/// (h2load's `-m` default is 1; 10 is closer to what browsers and proxies
/// keep in flight on a busy connection).
pub const DEFAULT_MAX_STREAMS: u32 = 10;

/// How a worker runs its load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// HTTP/1.1 without TLS to the plan's endpoint (plain requests or
    /// sessions, closed or open) from one event loop per worker, the rest
    /// as tasks: the fast path where it applies (`engine/src/event_loop/`).
    #[default]
    Auto,
    /// A tokio task per user, always (to compare the two, or to rule the
    /// fast path out).
    Tasks,
}

impl Engine {
    /// Every choice: the one list `--engine` takes its values from.
    pub const ALL: [Engine; 2] = [Self::Auto, Self::Tasks];

    /// Their names as written (`--engine`'s values).
    pub const NAMES: [&'static str; 2] = [Self::ALL[0].as_str(), Self::ALL[1].as_str()];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Tasks => "tasks",
        }
    }

    pub fn parse(text: &str) -> Option<Engine> {
        Self::ALL.into_iter().find(|e| e.as_str() == text)
    }
}

/// `--stale-connection-retry`: one of the rules of an exchange.
pub use headroom_http::exchange::StaleRetry;

/// Generator threads by default: the CPUs this process may use (respects
/// `taskset` and cgroup limits).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Why [`Plan::get`] could not make a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl Plan {
    /// The plan with its load cut to `d`: closed runs for `d`; open schedules
    /// scaled to last `d` (stages keep their shares).
    pub fn lasting(&self, d: Duration) -> Plan {
        let mut p = self.clone();
        p.max_requests = None;
        match &mut p.load {
            Load::Closed(c) => {
                c.duration = Some(d);
                c.iterations = None;
            }
            Load::Open(o) => {
                let scale = d.as_secs_f64() / o.schedule.duration().as_secs_f64();
                let stages: Vec<Stage> = o
                    .schedule
                    .stages()
                    .iter()
                    .map(|s| match *s {
                        Stage::Hold { rate, duration } => Stage::Hold {
                            rate,
                            duration: duration.mul_f64(scale),
                        },
                        Stage::Ramp { from, to, duration } => Stage::Ramp {
                            from,
                            to,
                            duration: duration.mul_f64(scale),
                        },
                    })
                    .collect();
                if let Ok(s) = Schedule::new(stages) {
                    o.schedule = s;
                }
            }
        }
        p
    }

    /// How long request `spec` may take: its own timeout, else the plan's.
    pub fn timeout_of(&self, spec: &RequestSpec) -> Duration {
        spec.timeout.unwrap_or(self.request_timeout)
    }
    /// A plan made in code: one `GET` of `url` with `headroom run --url`'s
    /// defaults — 10 closed-model users for 10 s, keep-alive, any status
    /// below 400 is OK, certificates checked against the system's roots.
    /// Change `load` (or any other field but the request) before running.
    pub fn get(url: &str) -> Result<Plan, PlanError> {
        let (endpoint, target) = Endpoint::from_url(url)?;
        let tls = if endpoint.https {
            Some(TlsClient::new(&endpoint.host, &TlsOptions::default())?)
        } else {
            None
        };
        let encoded =
            headroom_http::encode_request("GET", &target, &endpoint.host_header, &[], b"", true)
                .expect("a request without headers has no header to refuse");
        let request = RequestSpec {
            name: target.clone(),
            method: "GET".into(),
            target,
            weight: 1,
            expect: Expect::default(),
            encoded,
            template: None,
            origin: None,
            timeout: None,
            checks: Vec::new(),
            extracts: Vec::new(),
            capture: Capture::default(),
            before: None,
            after: None,
            grpc: None,
            grpc_stream: None,
        };
        Ok(Plan {
            endpoint,
            label: url.into(),
            requests: vec![request],
            flow: Flow::Mix,
            feeders: Vec::new(),
            check_names: Vec::new(),
            load: Load::Closed(ClosedLoad::users(
                ClosedLoad::DEFAULT_USERS,
                Duration::from_secs(10),
            )),
            keep_alive: true,
            cookies: false,
            tls,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            graceful_stop: DEFAULT_GRACEFUL_STOP,
            threads: default_threads(),
            max_requests: None,
            stale_retry: StaleRetry::default(),
            shard: Shard::WHOLE,
            local_addresses: Vec::new(),
            events: Vec::new(),
            routes: Routes::default(),
            max_connections_per_host: None,
            engine: Engine::Auto,
            http_version: HttpVersion::Http1,
            max_streams: DEFAULT_MAX_STREAMS,
            keepalive: None,
            zero_rtt: false,
            keep_second_histograms: false,
            trace_context: None,
            scripts: None,
            script_data: None,
        })
    }

    /// Runs only shard `shard` of this plan: its users, its arrivals, its
    /// share of the budget and of the feeders' rows (see [`shard`]).
    pub fn set_shard(&mut self, shard: Shard) {
        let seed = u64::from_str_radix(&self.fingerprint()[..16], 16).unwrap_or(0);
        self.feeders = self
            .feeders
            .iter()
            .map(|f| Arc::new(f.for_shard(shard, seed)))
            .collect();
        self.shard = shard;
    }

    /// A hash (SHA-256, hex) of everything that makes the plan's load what
    /// it is — requests, flow, feeders' data, load, HTTP settings — and of
    /// nothing that may differ between the machines running its shards
    /// (threads, TLS roots, which shard). Shards of one plan share it; a
    /// merge refuses files whose fingerprints differ.
    pub fn fingerprint(&self) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        // The URL, not the address it resolved to (which may differ between
        // the machines of one run).
        let _ = write!(
            text,
            "{}|{}|",
            self.endpoint.https, self.endpoint.host_header
        );
        for r in &self.requests {
            let _ = write!(
                text,
                "{}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|",
                r.name,
                r.method,
                r.target,
                r.weight,
                r.expect,
                r.encoded,
                r.template,
                r.timeout,
                r.checks,
                r.extracts
            );
        }
        for f in &self.feeders {
            let _ = write!(text, "{}|{:?}|{:?}|", f.name, f.order, f.scope);
            f.write_rows(&mut text);
        }
        // Shards running other scripts are not one run.
        if let Some(p) = &self.scripts {
            let _ = write!(
                text,
                "{:?}|{:?}|{:?}|{:?}|",
                p.file, p.code, p.limits, p.seed
            );
            for r in &self.requests {
                let _ = write!(text, "{:?}|{:?}|", r.before, r.after);
            }
        }
        let _ = write!(
            text,
            "{:?}|{:?}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}",
            self.flow,
            self.load,
            self.keep_alive,
            self.cookies,
            self.connect_timeout,
            self.request_timeout,
            self.graceful_stop,
            self.max_requests,
            self.stale_retry
        );
        if !self.events.is_empty() {
            let _ = write!(text, "|{:?}", self.events);
        }
        if let Some(cap) = self.max_connections_per_host {
            let _ = write!(text, "|per-host {cap}");
        }
        if self.http_version != HttpVersion::Http1 {
            let _ = write!(
                text,
                "|http {} streams {}",
                self.http_version.as_str(),
                self.max_streams
            );
        }
        if self.zero_rtt {
            text.push_str("|0rtt");
        }
        for r in self.requests.iter().filter_map(|r| r.origin.as_ref()) {
            let _ = write!(text, "|{r}");
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// When the load itself ends (not counting the graceful stop); `None`
    /// when the run is bounded by requests or iterations only.
    pub fn load_duration(&self) -> Option<Duration> {
        match &self.load {
            Load::Closed(c) => c.duration,
            Load::Open(o) => Some(o.schedule.duration()),
        }
    }

    /// The request an arrival would send first, for `pick` (a request of
    /// the mix, or a session): to file an arrival never sent under it.
    pub fn first_request(&self, pick: usize) -> usize {
        fn first(steps: &[Step]) -> Option<usize> {
            steps.iter().find_map(|s| match s {
                Step::Request(i) => Some(*i),
                Step::Repeat { steps, .. } => first(steps),
                Step::Choice(branches) => branches.iter().find_map(|(_, s)| first(s)),
                Step::Socket(socket::SocketStep::Open { handshake, .. }) => Some(*handshake),
                Step::If {
                    then, otherwise, ..
                } => first(then).or_else(|| first(otherwise)),
                Step::While { steps, .. } => first(steps),
                Step::Think { .. } | Step::Feed(_) | Step::Socket(_) | Step::Js(_) => None,
            })
        }
        match &self.flow {
            Flow::Mix => pick,
            Flow::Sessions(sessions) => first(&sessions[pick].steps).unwrap_or(0),
        }
    }

    /// Whether an open-model arrival would be a user running a session
    /// (users/s) rather than a request (req/s).
    pub fn arrivals_are_users(&self) -> bool {
        match &self.load {
            Load::Open(o) => o.users,
            Load::Closed(_) => matches!(self.flow, Flow::Sessions(_)),
        }
    }

    /// The requests go as streams over shared connections: HTTP/2 or
    /// HTTP/3 (once `auto` is settled).
    pub fn speaks_h2(&self) -> bool {
        self.http_version.multiplexed()
    }

    /// Most connections open to one origin, all workers together: the
    /// plan's `max_connections_per_host`; over HTTP/2, else one connection
    /// per `max_streams` users (closed model, as h2load's `-c`/`-m`) or the
    /// open model's `max_connections`.
    pub fn connection_cap(&self) -> Option<u32> {
        if !self.speaks_h2() {
            return self.max_connections_per_host;
        }
        let derived = match &self.load {
            Load::Closed(c) => c.vus.div_ceil(self.max_streams.max(1)),
            Load::Open(o) => o.max_connections.min(u32::MAX as usize) as u32,
        };
        Some(self.max_connections_per_host.unwrap_or(derived).max(1))
    }

    /// Threads actually worth starting: no more than there are users.
    pub fn effective_threads(&self) -> usize {
        let most = match &self.load {
            Load::Closed(c) => self.shard.share(c.vus as u64) as usize,
            Load::Open(_) => usize::MAX,
        };
        // Each worker needs a place under a per-host cap.
        let most = match self.connection_cap() {
            Some(cap) => most.min(self.shard.share(cap as u64).max(1) as usize),
            None => most,
        };
        self.threads.clamp(1, most.max(1))
    }
}

#[derive(Clone, Debug)]
pub enum Load {
    Closed(ClosedLoad),
    Open(OpenLoad),
}

/// N virtual users, each with its own connection, looping request → response.
#[derive(Clone, Debug)]
pub struct ClosedLoad {
    pub vus: u32,
    /// Users start evenly over this time.
    pub ramp_up: Duration,
    pub duration: Option<Duration>,
    /// Requests per user.
    pub iterations: Option<u64>,
    pub think_time: Duration,
    /// k6's ramping-vus: the number of users follows these stages (then
    /// `vus` is their highest count and `ramp_up` is unused). Empty: `vus`
    /// users, started over `ramp_up`.
    pub stages: Vec<UserStage>,
}

/// The user count goes from `from` to `to` linearly over `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserStage {
    pub duration: Duration,
    pub from: u32,
    pub to: u32,
}

impl UserStage {
    /// The most users any stage asks for.
    pub fn peak(stages: &[UserStage]) -> u32 {
        stages.iter().map(|s| s.from.max(s.to)).max().unwrap_or(0)
    }

    /// All the stages together.
    pub fn total(stages: &[UserStage]) -> Duration {
        stages.iter().map(|s| s.duration).sum()
    }

    /// When user `k` (0-based) is active under these stages: user k runs
    /// while the user count is above k. Spans are `(start, stop)` from the
    /// start of the load; `None` is "until the load ends".
    pub fn spans(stages: &[UserStage], k: u32) -> Vec<(Duration, Option<Duration>)> {
        let k = k as f64;
        let mut spans = Vec::new();
        let mut since: Option<Duration> = None;
        let mut t = Duration::ZERO;
        let mut toggle = |at: Duration, on: bool, since: &mut Option<Duration>| match (on, *since) {
            (true, None) => *since = Some(at),
            (false, Some(start)) => {
                if at > start {
                    spans.push((start, Some(at)));
                }
                *since = None;
            }
            _ => {}
        };
        for s in stages {
            let (a, b) = (s.from as f64, s.to as f64);
            toggle(t, a > k, &mut since);
            if (a > k) != (b > k) {
                // The count crosses k within the stage.
                let frac = (k - a) / (b - a);
                let at = t + s.duration.mul_f64(frac.clamp(0.0, 1.0));
                toggle(at, b > k, &mut since);
            }
            t += s.duration;
        }
        if let Some(start) = since {
            spans.push((start, None));
        }
        spans
    }
}

impl ClosedLoad {
    /// Users when a scenario, a study or the command line names none.
    pub const DEFAULT_USERS: u32 = 10;

    /// When user `user` starts in a ramp-up without stages: the users are
    /// spread evenly over it, in their numbering over the whole plan.
    pub fn ramp_offset(&self, user: u64) -> Duration {
        self.ramp_up.mul_f64(user as f64 / self.vus as f64)
    }

    /// `vus` users, all started at once, looping for `duration`.
    pub fn users(vus: u32, duration: Duration) -> ClosedLoad {
        ClosedLoad {
            vus,
            ramp_up: Duration::ZERO,
            duration: Some(duration),
            iterations: None,
            think_time: Duration::ZERO,
            stages: Vec::new(),
        }
    }
}

/// Requests sent at scheduled times whatever the server does.
#[derive(Clone, Debug)]
pub struct OpenLoad {
    pub schedule: Schedule,
    /// Most connections (= requests in flight) at once, all workers together.
    /// When arrivals are users, the most users in progress at once.
    pub max_connections: usize,
    /// Each arrival is a user with its own connections, closed when its
    /// iteration (session) ends; else arrivals share kept-alive
    /// connections.
    pub users: bool,
}

/// What users do each iteration.
#[derive(Clone, Debug, Default)]
pub enum Flow {
    /// One request, drawn by weight.
    #[default]
    Mix,
    /// One session, drawn by weight, run step by step.
    Sessions(Vec<Session>),
}

#[derive(Clone, Debug)]
pub struct Session {
    pub name: String,
    pub weight: u32,
    pub steps: Vec<Step>,
}

impl Session {
    /// Whether the session's own `feed` steps take rows of feeder `i`
    /// (then an iteration does not take one of it first).
    pub fn feeds(&self, i: usize) -> bool {
        fn any(steps: &[Step], i: usize) -> bool {
            steps.iter().any(|s| match s {
                Step::Feed(f) => *f == i,
                Step::Repeat { steps, .. } => any(steps, i),
                Step::Choice(branches) => branches.iter().any(|(_, b)| any(b, i)),
                Step::If {
                    then, otherwise, ..
                } => any(then, i) || any(otherwise, i),
                Step::While { steps, .. } => any(steps, i),
                _ => false,
            })
        }
        any(&self.steps, i)
    }
}

#[derive(Clone, Debug)]
pub enum Step {
    /// Send request `plan.requests[i]`.
    Request(usize),
    /// Pause for a time drawn uniformly from [min, max].
    Think { min: Duration, max: Duration },
    Repeat {
        times: u32,
        steps: Vec<Step>,
        /// Start each round this long after the previous one started (a
        /// message rate per socket); `None`: one after the other.
        every: Option<Duration>,
    },
    /// Run one branch, drawn by weight.
    Choice(Vec<(u32, Vec<Step>)>),
    /// Take the next row of `plan.feeders[i]`.
    Feed(usize),
    /// A step on the user's WebSocket or event stream.
    Socket(socket::SocketStep),
    /// Run script code `plan.scripts.code[i]` (it may end the iteration
    /// or the user).
    Js(usize),
    /// Run `then` when condition `cond` (script code) holds, else
    /// `otherwise`.
    If {
        cond: usize,
        then: Vec<Step>,
        otherwise: Vec<Step>,
    },
    /// Run `steps` while condition `cond` holds, at most `max` rounds.
    While {
        cond: usize,
        steps: Vec<Step>,
        max: u32,
    },
}

#[derive(Clone, Debug)]
pub struct RequestSpec {
    pub name: String,
    pub method: String,
    /// Path and query sent on the request line, as written.
    pub target: String,
    pub weight: u32,
    pub expect: Expect,
    /// The request as sent on the wire, encoded once — when nothing in it
    /// needs rendering (see `template`).
    pub encoded: Vec<u8>,
    /// Parts rendered per request, when the target, a header or the body
    /// uses `{{…}}`. A target that renders to a full URL goes to that
    /// URL's origin.
    pub template: Option<RequestTemplate>,
    /// `scheme://authority` of a full URL on another origin than the
    /// plan's endpoint (`encoded` then carries that origin's `Host`).
    pub origin: Option<String>,
    /// Overrides the plan's request timeout.
    pub timeout: Option<Duration>,
    pub checks: Vec<Check>,
    pub extracts: Vec<Extract>,
    /// What of the response the checks and extractions need.
    pub capture: Capture,
    /// Script code run before each send (it may change the method, URL's
    /// path, headers and body) and after each response (a failure it
    /// reports fails check `after.1`, id `after.0`).
    pub before: Option<usize>,
    pub after: Option<(usize, u32)>,
    /// A gRPC call: its method (the message a template renders is encoded
    /// as its input at each send; its answer's status is judged).
    pub grpc: Option<std::sync::Arc<headroom_grpc::Method>>,
    /// A gRPC call that streams (either way): how its messages go out and
    /// where its answer's messages are timed.
    pub grpc_stream: Option<GrpcStream>,
}

/// A gRPC streaming call's messages: the rendered ones (one, or a JSON
/// array's) sent in turn, `count` in all (`None`: each once), `interval`
/// apart (`None`: all at once); the answer's messages timed into request
/// entries `first_message` (from the stream's start) and `next_message`
/// (from the later of the previous message received and the last sent).
#[derive(Clone, Debug)]
pub struct GrpcStream {
    pub count: Option<u32>,
    pub interval: Option<Duration>,
    pub first_message: usize,
    pub next_message: usize,
}

/// The parts of a request that are rendered for each send.
#[derive(Clone, Debug)]
pub struct RequestTemplate {
    pub target: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Template,
}

impl RequestSpec {
    pub fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }

    /// This send's request in parts, as a `before` hook sees it: the URL
    /// on `origin`, the headers and body rendered (the plan's encoded
    /// request read back when it has no template), the cookie added.
    pub fn parts(
        &self,
        scope: &mut Scope,
        origin: &str,
        target: &str,
        added: Added<'_>,
    ) -> headroom_js::Request {
        let text = |t: &template::Template, scope: &mut Scope| {
            let mut out = Vec::new();
            t.render(scope, &mut out);
            String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        };
        let (mut headers, body) = match &self.template {
            Some(t) => (
                t.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), text(v, scope)))
                    .collect(),
                text(&t.body, scope),
            ),
            None => headroom_http::split_request(&self.encoded),
        };
        headers.retain(|(k, _)| {
            !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("content-length")
        });
        headers.extend(added.headers().map(|(k, v)| (k.into(), v.into())));
        headroom_js::Request {
            method: self.method.clone(),
            url: format!("{origin}{target}"),
            headers,
            body,
        }
    }

    /// The target rendered for this send, when it is a template (a path,
    /// or a full URL).
    pub fn render_target(&self, scope: &mut Scope) -> Option<String> {
        self.template.as_ref().map(|t| {
            let mut out = Vec::new();
            t.target.render_target(scope, &mut out);
            String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        })
    }

    /// The request for this send: the pre-encoded bytes as they are, or
    /// written into `out` — the template rendered for this user (with
    /// `target`, from [`RequestSpec::render_target`], and `host`), or the
    /// pre-encoded bytes with the headers this send adds. A header value
    /// rendered with a line break or a NUL fails it as
    /// `invalid_header_value`: nothing is sent.
    pub fn render(
        &self,
        scope: &mut Scope,
        target: &str,
        host: &str,
        keep_alive: bool,
        added: Added<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Wire, ErrorClass> {
        let Some(t) = &self.template else {
            if added.is_empty() {
                // Sent from the plan: not copied into the user's buffer,
                // whose memory is a cache miss per request at 1,000
                // connections.
                return Ok(Wire::Encoded);
            }
            self.encoded_with(added, out);
            return Ok(Wire::Rendered);
        };
        out.clear();
        let sets_host = t
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("host"));
        let host = (!sets_host).then_some(host);
        let mut head = headroom_http::RequestWriter::start(out, &self.method, target, host);
        for (name, value) in &t.headers {
            head.header(name, |out| value.render(scope, out));
        }
        for (name, value) in added.headers() {
            head.header(name, |out| out.extend_from_slice(value.as_bytes()));
        }
        head.finish(keep_alive, |out| t.body.render(scope, out))
            .map_err(|_| ErrorClass::InvalidHeaderValue)?;
        Ok(Wire::Rendered)
    }

    /// The pre-encoded request with the headers this send adds, written
    /// into `out`.
    pub fn encoded_with(&self, added: Added<'_>, out: &mut Vec<u8>) {
        headroom_http::with_headers(&self.encoded, added.headers(), out);
    }

    /// The bytes request `wire` sends, `rendered` holding those written
    /// for it.
    pub fn wire<'a>(&'a self, wire: Wire, rendered: &'a [u8]) -> &'a [u8] {
        match wire {
            Wire::Encoded => &self.encoded,
            Wire::Rendered => rendered,
        }
    }
}

/// Headers a send adds to its request's own: the user's cookies, and the
/// trace context of a run that sends it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Added<'a> {
    pub cookie: Option<&'a str>,
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
}

impl<'a> Added<'a> {
    pub fn is_empty(&self) -> bool {
        self.headers().next().is_none()
    }

    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &'a str)> {
        [
            ("Cookie", self.cookie),
            ("traceparent", self.traceparent),
            ("tracestate", self.tracestate),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
    }
}

/// Which bytes a request sends: its spec's own, encoded once, or those
/// rendered for this send into the user's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Encoded,
    Rendered,
}

/// Which statuses count as OK. Without a set, anything below 400 is OK
/// (redirects are answers, as in JMeter and Gatling).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    pub statuses: Option<StatusSet>,
}

impl Expect {
    /// `None` when the status is OK, else why it is a failure.
    pub fn check(&self, status: u16) -> Option<ErrorClass> {
        let ok = match &self.statuses {
            Some(set) => set.contains(status),
            None => status < 400,
        };
        if ok {
            None
        } else if (400..500).contains(&status) {
            Some(ErrorClass::Http4xx)
        } else if (500..600).contains(&status) {
            Some(ErrorClass::Http5xx)
        } else {
            Some(ErrorClass::UnexpectedStatus)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::template::Vars;

    /// A request without templates or cookies goes out as the plan
    /// encoded it, not copied; a cookie makes it rendered, the header
    /// before the blank line.
    #[test]
    fn a_static_request_is_sent_from_the_plan() {
        let plan = Plan::get("http://127.0.0.1:8080/a").unwrap();
        let spec = &plan.requests[0];
        let vars = Vars::default();
        let mut rng = fastrand::Rng::with_seed(1);
        let mut scope = Scope {
            vars: &vars,
            user_id: 0,
            iteration: 0,
            rng: &mut rng,
        };
        let mut out = b"left over".to_vec();
        let host = "127.0.0.1:8080";
        let wire = spec
            .render(&mut scope, "/a", host, true, Added::default(), &mut out)
            .unwrap();
        assert_eq!(wire, Wire::Encoded);
        assert_eq!(spec.wire(wire, &out), &spec.encoded[..]);
        let added = Added {
            cookie: Some("id=7"),
            ..Added::default()
        };
        let wire = spec
            .render(&mut scope, "/a", host, true, added, &mut out)
            .unwrap();
        assert_eq!(wire, Wire::Rendered);
        let sent = String::from_utf8(spec.wire(wire, &out).to_vec()).unwrap();
        assert!(sent.starts_with("GET /a HTTP/1.1\r\n"), "{sent}");
        assert!(sent.ends_with("\r\nCookie: id=7\r\n\r\n"), "{sent}");
        assert_eq!(sent.len(), spec.encoded.len() + "Cookie: id=7\r\n".len());
        // Trace context: after the cookie, before the blank line.
        let traced = Added {
            cookie: Some("id=7"),
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            tracestate: Some("a=1"),
        };
        let wire = spec
            .render(&mut scope, "/a", host, true, traced, &mut out)
            .unwrap();
        let sent = String::from_utf8(spec.wire(wire, &out).to_vec()).unwrap();
        assert!(
            sent.ends_with(
                "\r\nCookie: id=7\r\ntraceparent: \
                 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\ntracestate: a=1\r\n\r\n"
            ),
            "{sent}"
        );
    }

    #[test]
    fn users_follow_the_stages() {
        let s = |secs: u64, from: u32, to: u32| UserStage {
            duration: Duration::from_secs(secs),
            from,
            to,
        };
        let d = Duration::from_secs;
        let ms = Duration::from_millis;
        // 0 → 4 over 4 s, hold 4 for 2 s, 4 → 0 over 4 s.
        let stages = [s(4, 0, 4), s(2, 4, 4), s(4, 4, 0)];
        assert_eq!(UserStage::peak(&stages), 4);
        assert_eq!(UserStage::spans(&stages, 0), vec![(d(0), Some(d(10)))]);
        assert_eq!(UserStage::spans(&stages, 3), vec![(d(3), Some(d(7)))]);
        // Up, down, up again: two spans; the last lasts to the end.
        let stages = [s(2, 0, 2), s(2, 2, 0), s(1, 2, 2)];
        assert_eq!(
            UserStage::spans(&stages, 1),
            vec![(d(1), Some(d(3))), (d(4), None)]
        );
        // A hold with no users, then a jump: starts at the jump.
        let stages = [s(1, 0, 0), s(1, 3, 3)];
        assert_eq!(UserStage::spans(&stages, 2), vec![(d(1), None)]);
        assert!(UserStage::spans(&stages, 3).is_empty());
        assert_eq!(UserStage::spans(&[s(1, 0, 10)], 5), vec![(ms(500), None)]);
    }

    #[test]
    fn expectations() {
        let default = Expect::default();
        assert_eq!(default.check(200), None);
        assert_eq!(default.check(302), None);
        assert_eq!(default.check(404), Some(ErrorClass::Http4xx));
        assert_eq!(default.check(503), Some(ErrorClass::Http5xx));
        let only_404 = Expect {
            statuses: Some(StatusSet(vec![(404, 404)])),
        };
        assert_eq!(only_404.check(404), None);
        assert_eq!(only_404.check(200), Some(ErrorClass::UnexpectedStatus));
        assert_eq!(only_404.check(500), Some(ErrorClass::Http5xx));
    }
}
