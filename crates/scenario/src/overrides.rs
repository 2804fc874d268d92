//! Overrides: what a front end (the command line's flags) sets over a
//! scenario — a file or a one-liner — laid over its raw form before it is
//! resolved, so the result is checked like any file. Overrides win over
//! the file. Their names are the flags' (`--vus`, `--rate`, …), and so are
//! their messages: that is how users give them.

use crate::raw::{
    Model, RawHttp, RawHttpVersion, RawLoad, RawRoutes, RawScenario, RawStage, RawStaleRetry,
    RawTls, RawTrace,
};
use headroom_engine::plan::schedule::Stage;
use headroom_engine::plan::trace_context::TracePer;
use headroom_engine::plan::UserStage;
use headroom_engine::plan::{HttpVersion, DEFAULT_MAX_STREAMS};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that may be set over a scenario, unset by default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `--base-url`: the scenario's base URL.
    pub base_url: Option<String>,
    /// `--rate`: the open model at this many arrivals per second.
    pub rate: Option<f64>,
    /// `--stages`: the open model with these stages.
    pub stages: Option<Vec<Stage>>,
    /// `--vus`: the closed model with this many users.
    pub vus: Option<u32>,
    /// `--vu-stages`: the closed model with stages over user counts.
    pub vu_stages: Option<Vec<UserStage>>,
    pub iterations: Option<u64>,
    pub ramp_up: Option<Duration>,
    pub think_time: Option<Duration>,
    /// `--connections`: the open model's cap on connections, or the
    /// closed model's users (wrk's and oha's `-c`). Over HTTP/2 (closed
    /// model): the connections the users share, and without `--vus`,
    /// `connections × streams` users (h2load's `-c`).
    pub connections: Option<u32>,
    /// `--http2` (`2`) or `--http-version`.
    pub http_version: Option<HttpVersion>,
    /// `--streams`: HTTP/2 streams in flight per connection.
    pub streams: Option<u32>,
    /// `--0rtt`.
    pub zero_rtt: bool,
    pub duration: Option<Duration>,
    pub graceful_stop: Option<Duration>,
    /// `--requests`: stop after this many requests in all.
    pub requests: Option<u64>,
    pub timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
    /// `--no-keepalive`: a new connection for every request.
    pub no_keepalive: bool,
    pub threads: Option<usize>,
    pub stale_connection_retry: Option<RawStaleRetry>,
    /// `--insecure`: certificates not checked.
    pub insecure: bool,
    /// `--ca-file`, relative to where the command runs.
    pub ca_file: Option<PathBuf>,
    /// `--connect-to` and `--resolve`, added to the file's.
    pub connect_to: Vec<String>,
    pub resolve: Vec<String>,
    /// `-H NAME:VALUE`: replaces a header of the same name (any case).
    pub headers: Vec<(String, String)>,
    /// `--trace` and its settings (any of them turns trace context on).
    pub trace: TraceOverrides,
}

/// `--trace`, `--trace-per`, `--trace-unsampled`, `--trace-state`,
/// `--trace-url`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceOverrides {
    pub on: bool,
    pub per: Option<TracePer>,
    pub unsampled: bool,
    pub state: Option<String>,
    pub url: Option<String>,
}

impl TraceOverrides {
    fn any(&self) -> bool {
        self.on
            || self.per.is_some()
            || self.unsampled
            || self.state.is_some()
            || self.url.is_some()
    }

    fn apply(&self, trace: &mut RawTrace) {
        trace.enabled = Some(true);
        if self.per.is_some() {
            trace.per = self.per;
        }
        if self.unsampled {
            trace.sampled = Some(false);
        }
        if self.state.is_some() {
            trace.tracestate.clone_from(&self.state);
        }
        if self.url.is_some() {
            trace.url.clone_from(&self.url);
        }
    }
}

/// Overrides that make no sense together, said in the flags' terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict(pub String);

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Conflict {}

impl Overrides {
    /// Whether any override picks the open model.
    fn open(&self) -> bool {
        self.rate.is_some() || self.stages.is_some()
    }

    /// Whether any override picks the closed model.
    fn closed(&self) -> bool {
        self.vus.is_some()
            || self.vu_stages.is_some()
            || self.iterations.is_some()
            || self.ramp_up.is_some()
            || self.think_time.is_some()
    }

    /// Combinations that make no sense, before anything is laid over.
    pub fn check(&self) -> Result<(), Conflict> {
        let fail = |m: &str| Err(Conflict(m.into()));
        if self.open() && self.vus.is_some() {
            return fail("--vus is for the closed model; with --rate or --stages use --connections to cap connections");
        }
        if self.open()
            && (self.iterations.is_some() || self.ramp_up.is_some() || self.think_time.is_some())
        {
            return fail("--iterations, --ramp-up and --think-time are for the closed model (--vus), not --rate/--stages");
        }
        if self.vu_stages.is_some() && (self.vus.is_some() || self.connections.is_some()) {
            return fail(
                "--vu-stages say how many users run when: give them without --vus or --connections",
            );
        }
        if self.stages.is_some() && self.duration.is_some() {
            return fail("--duration and --stages both set the length of the run: give one");
        }
        for (value, flag) in [
            (self.vus.map(u64::from), "--vus"),
            (self.connections.map(u64::from), "--connections"),
            (self.streams.map(u64::from), "--streams"),
            (self.requests, "--requests"),
            (self.threads.map(|t| t as u64), "--threads"),
        ] {
            if value == Some(0) {
                return Err(Conflict(format!("{flag} must be at least 1")));
            }
        }
        for (value, flag) in [
            (self.duration, "--duration"),
            (self.timeout, "--timeout"),
            (self.connect_timeout, "--connect-timeout"),
        ] {
            if value.is_some_and(|d| d.is_zero()) {
                return Err(Conflict(format!("{flag} must be greater than zero")));
            }
        }
        Ok(())
    }

    /// Lays the overrides over `raw`: they win.
    pub fn apply(&self, raw: &mut RawScenario) {
        if let Some(base) = &self.base_url {
            raw.base_url = Some(base.clone());
        }
        let http = raw.http.get_or_insert_with(RawHttp::default);
        self.apply_http(http);
        let h2 = http.version.is_some_and(|v| v.0 != HttpVersion::Http1);
        if h2 {
            self.apply_h2_connections(raw);
        } else {
            self.apply_load(raw.load.get_or_insert_with(RawLoad::default));
        }
        if self.insecure || self.ca_file.is_some() {
            self.apply_tls(raw.tls.get_or_insert_with(RawTls::default));
        }
        RawRoutes::extend(&mut raw.connect_to, &self.connect_to);
        RawRoutes::extend(&mut raw.resolve, &self.resolve);
        if self.trace.any() {
            self.trace
                .apply(raw.trace.get_or_insert_with(RawTrace::default));
        }
    }

    fn apply_load(&self, load: &mut RawLoad) {
        if self.open() {
            // The open model from the flags: the file's closed fields go.
            *load = RawLoad {
                model: Some(Model::Open),
                max_connections: load.max_connections,
                max_requests: load.max_requests,
                graceful_stop: load.graceful_stop.clone(),
                duration: load.duration.clone().filter(|_| self.stages.is_none()),
                ..RawLoad::default()
            };
            load.rate = self.rate;
            load.stages = self
                .stages
                .as_ref()
                .map(|s| s.iter().map(rate_stage).collect());
        } else if self.closed() {
            if load.model() == Model::Open {
                // Switching a file's open load to closed drops its open fields.
                *load = RawLoad {
                    duration: load.duration.clone(),
                    max_requests: load.max_requests,
                    graceful_stop: load.graceful_stop.clone(),
                    ..RawLoad::default()
                };
            }
            load.model = Some(Model::Closed);
            if let Some(stages) = &self.vu_stages {
                load.vus = None;
                load.ramp_up = None;
                load.duration = None;
                load.stages = Some(stages.iter().map(user_stage).collect());
            }
        }
        match load.model() {
            Model::Open => load.max_connections = self.connections.or(load.max_connections),
            Model::Closed => {
                if let Some(users) = self.vus.or(self.connections) {
                    // A number of users replaces the file's user stages.
                    load.stages = None;
                    load.vus = Some(users);
                }
            }
        }
        let set = |slot: &mut Option<String>, d: Option<Duration>| {
            if let Some(d) = d {
                *slot = Some(duration_text(d));
            }
        };
        set(&mut load.duration, self.duration);
        set(&mut load.ramp_up, self.ramp_up);
        set(&mut load.think_time, self.think_time);
        set(&mut load.graceful_stop, self.graceful_stop);
        load.max_requests = self.requests.or(load.max_requests);
        load.iterations = self.iterations.or(load.iterations);
    }

    /// Over HTTP/2 the closed model's `--connections` are connections, not
    /// users: the users share them, `--streams` on each, and without
    /// `--vus` there are as many users as streams (h2load's `-c` × `-m`).
    fn apply_h2_connections(&self, raw: &mut RawScenario) {
        let load = raw.load.get_or_insert_with(RawLoad::default);
        let closed = if self.open() {
            false
        } else {
            self.closed() || load.model() == Model::Closed
        };
        let Some(connections) = self.connections.filter(|_| closed) else {
            return self.apply_load(load);
        };
        let just_users = Overrides {
            connections: None,
            ..self.clone()
        };
        just_users.apply_load(load);
        let http = raw.http.get_or_insert_with(RawHttp::default);
        http.max_connections_per_host = Some(connections);
        if self.vus.is_none() && self.vu_stages.is_none() {
            let streams = http.max_streams.unwrap_or(DEFAULT_MAX_STREAMS);
            let load = raw.load.get_or_insert_with(RawLoad::default);
            load.stages = None;
            load.vus = Some(connections.saturating_mul(streams));
        }
    }

    fn apply_http(&self, http: &mut RawHttp) {
        if let Some(version) = self.http_version {
            http.version = Some(RawHttpVersion(version));
        }
        http.max_streams = self.streams.or(http.max_streams);
        if self.zero_rtt {
            http.zero_rtt = Some(true);
        }
        if let Some(d) = self.timeout {
            http.timeout = Some(duration_text(d));
        }
        if let Some(d) = self.connect_timeout {
            http.connect_timeout = Some(duration_text(d));
        }
        if self.no_keepalive {
            http.keep_alive = Some(false);
        }
        http.threads = self.threads.or(http.threads);
        if let Some(retry) = self.stale_connection_retry {
            http.stale_connection_retry = Some(retry);
        }
        if !self.headers.is_empty() {
            let headers = http.headers.get_or_insert_with(Default::default);
            for (k, v) in &self.headers {
                headers.retain(|old, _| !old.eq_ignore_ascii_case(k));
                headers.insert(k.clone(), v.clone());
            }
        }
    }

    fn apply_tls(&self, tls: &mut RawTls) {
        if self.insecure {
            tls.insecure = Some(true);
        }
        if let Some(file) = &self.ca_file {
            // Relative to where the command runs, not to the scenario.
            let file = std::path::absolute(file).unwrap_or_else(|_| file.clone());
            tls.ca_file = Some(file.display().to_string());
        }
    }
}

impl RawLoad {
    /// The load model: as written, else open when a field only the open
    /// model has is set (a rate, stages of rates, users arriving), else
    /// closed. The one decision the resolver and the overrides share.
    pub fn model(&self) -> Model {
        let open_fields = self.rate.is_some()
            || self.stages.as_ref().is_some_and(|s| !is_user_stages(s))
            || self.users.is_some()
            || self.users_per_second.is_some();
        self.model.unwrap_or(if open_fields {
            Model::Open
        } else {
            Model::Closed
        })
    }
}

/// Stages with a `target` are user counts (the closed model).
fn is_user_stages(stages: &[RawStage]) -> bool {
    stages.iter().any(|s| s.target.is_some())
}

fn duration_text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn rate_stage(stage: &Stage) -> RawStage {
    match *stage {
        Stage::Hold { rate, duration } => RawStage {
            duration: duration_text(duration),
            rate: Some(rate),
            ..RawStage::default()
        },
        Stage::Ramp { from, to, duration } => RawStage {
            duration: duration_text(duration),
            from: Some(from),
            to: Some(to),
            ..RawStage::default()
        },
    }
}

fn user_stage(stage: &UserStage) -> RawStage {
    RawStage {
        duration: duration_text(stage.duration),
        from: Some(stage.from as f64),
        to: Some(stage.to as f64),
        ..RawStage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build_raw;

    fn file(text: &str) -> RawScenario {
        crate::parse_toml(text).expect("the test's file parses")
    }

    fn closed_users(raw: &RawScenario) -> u32 {
        let scenario = build_raw(raw, "test.toml", "").expect("builds");
        match scenario.plan.load {
            headroom_engine::plan::Load::Closed(l) => l.vus,
            other => panic!("not closed: {other:?}"),
        }
    }

    const USER_STAGES: &str = r#"
        base_url = "http://127.0.0.1:8080"
        [load]
        stages = [{ duration = "10s", target = 5 }, { duration = "10s", target = 0 }]
        [[request]]
        name = "home"
        path = "/"
    "#;

    #[test]
    fn the_model_is_decided_once_for_files_and_overrides() {
        let model = |text: &str| file(text).load.unwrap_or_default().model();
        assert_eq!(model(USER_STAGES), Model::Closed);
        assert_eq!(model("[load]\nrate = 5"), Model::Open);
        assert_eq!(
            model("[load]\nstages = [{ duration = \"5s\", rate = 5 }]"),
            Model::Open
        );
        assert_eq!(model("[load]\nvus = 3"), Model::Closed);
        assert_eq!(model("[load]\nmodel = \"open\"\nvus = 3"), Model::Open);
        assert_eq!(model(""), Model::Closed);
    }

    /// `--connections` on a closed file with user stages once became the
    /// open model's `max_connections`, which the resolver then refused.
    #[test]
    fn connections_over_user_stages_are_the_number_of_users() {
        let mut raw = file(USER_STAGES);
        Overrides {
            connections: Some(7),
            ..Overrides::default()
        }
        .apply(&mut raw);
        let load = raw.load.as_ref().unwrap();
        assert_eq!(load.max_connections, None);
        assert_eq!(load.vus, Some(7));
        assert_eq!(closed_users(&raw), 7);
    }

    /// Over HTTP/2, the closed model's `--connections` are connections:
    /// with `--vus` the users share them; without, there are
    /// connections × streams users (h2load's `-c` and `-m`). The open
    /// model's stay its cap.
    #[test]
    fn http2_connections_are_connections_and_users_are_their_streams() {
        let closed =
            "base_url = \"http://127.0.0.1:8080\"\n[[request]]\nname = \"home\"\npath = \"/\"";
        let h2 = |connections, vus, streams| Overrides {
            http_version: Some(HttpVersion::Http2),
            connections: Some(connections),
            vus,
            streams,
            ..Overrides::default()
        };
        let built = |o: Overrides, text: &str| {
            let mut raw = file(text);
            o.apply(&mut raw);
            build_raw(&raw, "test.toml", "").expect("builds").plan
        };
        let plan = built(h2(3, None, Some(4)), closed);
        assert_eq!(plan.http_version, HttpVersion::Http2);
        assert_eq!((plan.max_streams, plan.connection_cap()), (4, Some(3)));
        assert_eq!(
            closed_users(&{
                let mut raw = file(closed);
                h2(3, None, Some(4)).apply(&mut raw);
                raw
            }),
            12
        );
        // Default streams: 10 per connection.
        let plan = built(h2(2, None, None), closed);
        assert!(matches!(plan.load, headroom_engine::plan::Load::Closed(ref c) if c.vus == 20));
        // Users given: they share the connections.
        let plan = built(h2(5, Some(100), None), closed);
        assert!(matches!(plan.load, headroom_engine::plan::Load::Closed(ref c) if c.vus == 100));
        assert_eq!(plan.connection_cap(), Some(5));
        // No --connections: one connection per `streams` users.
        let mut raw = file(closed);
        Overrides {
            http_version: Some(HttpVersion::Http2),
            vus: Some(25),
            ..Overrides::default()
        }
        .apply(&mut raw);
        let plan = build_raw(&raw, "test.toml", "").unwrap().plan;
        assert_eq!(plan.connection_cap(), Some(3));
        // The open model: a cap on connections.
        let open = "base_url = \"http://127.0.0.1:8080\"\n[load]\nrate = 50\nduration = \"5s\"\n[[request]]\nname = \"home\"\npath = \"/\"";
        let plan = built(h2(4, None, None), open);
        assert_eq!(plan.connection_cap(), Some(4));
    }

    #[test]
    fn the_http_version_is_written_as_text_or_number() {
        for (text, version) in [
            ("\"2\"", HttpVersion::Http2),
            ("2", HttpVersion::Http2),
            ("1.1", HttpVersion::Http1),
            ("\"1.1\"", HttpVersion::Http1),
            ("\"auto\"", HttpVersion::Auto),
            ("3", HttpVersion::Http3),
            ("\"h3\"", HttpVersion::Http3),
        ] {
            let raw = file(&format!("[http]\nversion = {text}"));
            assert_eq!(
                raw.http.unwrap().version.map(|v| v.0),
                Some(version),
                "{text}"
            );
        }
        let error = format!(
            "{:?}",
            crate::parse_toml::<RawScenario>("[http]\nversion = \"4\"").unwrap_err()
        );
        assert!(error.contains("unknown HTTP version `4`"), "{error}");
    }

    #[test]
    fn connections_cap_an_open_file_and_count_users_of_a_closed_one() {
        let mut open = file(
            "[load]\nrate = 50\nduration = \"5s\"\n[[request]]\nname = \"home\"\npath = \"/\"",
        );
        open.base_url = Some("http://127.0.0.1:8080".into());
        let c = Overrides {
            connections: Some(9),
            ..Overrides::default()
        };
        c.apply(&mut open);
        assert_eq!(open.load.as_ref().unwrap().max_connections, Some(9));
        assert_eq!(open.load.as_ref().unwrap().vus, None);
        let mut closed = file(
            "base_url = \"http://127.0.0.1:8080\"\n[[request]]\nname = \"home\"\npath = \"/\"",
        );
        c.apply(&mut closed);
        assert_eq!(closed_users(&closed), 9);
    }

    #[test]
    fn a_rate_switches_a_closed_file_to_open_and_drops_its_closed_fields() {
        let mut raw = file("[load]\nvus = 4\nthink_time = \"1s\"\nmax_requests = 100");
        Overrides {
            rate: Some(20.0),
            ..Overrides::default()
        }
        .apply(&mut raw);
        let load = raw.load.unwrap();
        assert_eq!(load.model, Some(Model::Open));
        assert_eq!(
            (load.rate, load.vus, load.think_time),
            (Some(20.0), None, None)
        );
        assert_eq!(load.max_requests, Some(100), "kept: both models have it");
    }

    #[test]
    fn vus_switch_an_open_file_to_closed() {
        let mut raw = file("[load]\nrate = 5\nduration = \"3s\"\nmax_connections = 8");
        Overrides {
            vus: Some(2),
            ..Overrides::default()
        }
        .apply(&mut raw);
        let load = raw.load.unwrap();
        assert_eq!(load.model(), Model::Closed);
        assert_eq!(
            (load.vus, load.rate, load.max_connections),
            (Some(2), None, None)
        );
        assert_eq!(load.duration.as_deref(), Some("3s"));
    }

    #[test]
    fn headers_replace_the_files_of_any_case() {
        let mut raw = file("[http]\nheaders = { accept = \"text/html\", X-Keep = \"1\" }");
        Overrides {
            headers: vec![("Accept".into(), "application/json".into())],
            ..Overrides::default()
        }
        .apply(&mut raw);
        let headers = raw.http.unwrap().headers.unwrap();
        assert_eq!(
            headers.get("Accept").map(String::as_str),
            Some("application/json")
        );
        assert!(!headers.contains_key("accept"));
        assert_eq!(headers.get("X-Keep").map(String::as_str), Some("1"));
    }

    #[test]
    fn conflicts_are_said_in_the_flags_terms() {
        let conflict = |o: Overrides| o.check().unwrap_err().0;
        assert!(conflict(Overrides {
            rate: Some(1.0),
            vus: Some(2),
            ..Overrides::default()
        })
        .starts_with("--vus is for the closed model"));
        assert_eq!(
            conflict(Overrides {
                connections: Some(0),
                ..Overrides::default()
            }),
            "--connections must be at least 1"
        );
        assert_eq!(
            conflict(Overrides {
                timeout: Some(Duration::ZERO),
                ..Overrides::default()
            }),
            "--timeout must be greater than zero"
        );
        assert_eq!(Overrides::default().check(), Ok(()));
    }
}
