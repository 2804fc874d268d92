//! Raw scenario → validated [`Plan`]. Every problem is collected (not just
//! the first) and pointed at the line and column where its value appears.

use super::errors::{Locator, Problem};
use super::raw::*;
use crate::engine::schedule::{Schedule, Stage};
use crate::http::tls::{TlsClient, TlsOptions};
use crate::http::{encode_request, Capture, Endpoint};
use crate::plan::check::{
    Check, CheckKind, Extract, ExtractFrom, HeaderExpect, JsonExpect, StatusSet,
};
use crate::plan::feeder::Feeder;
use crate::plan::template::Template;
use crate::plan::{
    ClosedLoad, Expect, Flow, Load, OpenLoad, Plan, RequestSpec, RequestTemplate, Session, Step,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_GRACEFUL_STOP, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_REQUEST_TIMEOUT,
};
use crate::slo::Slo;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Built-in template names, always available.
const BUILTINS: &[&str] = &["user_id", "iteration"];
const DEFAULT_VUS: u32 = 10;
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

pub struct Builder<'a> {
    /// Folder that relative file paths resolve against.
    pub dir: &'a Path,
    pub locator: Locator<'a>,
    problems: Vec<Problem>,
}

impl<'a> Builder<'a> {
    pub fn new(dir: &'a Path, text: &'a str) -> Self {
        Builder {
            dir,
            locator: Locator { text },
            problems: Vec::new(),
        }
    }

    /// Records a problem at the place `needle` appears (after `anchor`,
    /// on a line with `key` if possible).
    fn problem(&mut self, anchor: Option<&str>, key: &str, needle: &str, message: String) {
        let (line, column) = self.locator.find(anchor, key, needle);
        self.problems.push(Problem {
            line,
            column,
            message,
        });
    }

    fn duration(&mut self, anchor: Option<&str>, field: &str, text: &str) -> Option<Duration> {
        match humantime::parse_duration(text.trim()) {
            Ok(d) => Some(d),
            Err(e) => {
                self.problem(
                    anchor,
                    field,
                    text,
                    format!("{field}: `{text}` is not a duration ({e}); write e.g. 500ms, 30s, 2m"),
                );
                None
            }
        }
    }

    fn path(&self, file: &str) -> PathBuf {
        let p = Path::new(file);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    fn status_set(&mut self, anchor: Option<&str>, raw: &RawStatus) -> Option<StatusSet> {
        let ranges: Result<Vec<(u16, u16)>, String> = match raw {
            RawStatus::One(c) => StatusSet::parse_range(&c.to_string()).map(|r| vec![r]),
            RawStatus::List(list) => list
                .iter()
                .map(|c| StatusSet::parse_range(&c.to_string()))
                .collect(),
            RawStatus::Range(text) => text.split(',').map(StatusSet::parse_range).collect(),
        };
        match ranges {
            Ok(r) if !r.is_empty() => Some(StatusSet(r)),
            Ok(_) => {
                self.problem(
                    anchor,
                    "status",
                    "status",
                    "status: the list is empty".into(),
                );
                None
            }
            Err(e) => {
                let needle = match raw {
                    RawStatus::Range(t) => t.clone(),
                    _ => "status".into(),
                };
                self.problem(anchor, "status", &needle, format!("status: {e}"));
                None
            }
        }
    }

    fn template(&mut self, anchor: Option<&str>, field: &str, text: &str) -> Option<Template> {
        match Template::parse(text) {
            Ok(t) => Some(t),
            Err(e) => {
                self.problem(anchor, field, text, format!("{field}: {e}"));
                None
            }
        }
    }

    pub fn build(mut self, raw: &RawScenario, label: &str) -> Result<Plan, Vec<Problem>> {
        let http = raw.http.clone().unwrap_or_default();
        let keep_alive = http.keep_alive.unwrap_or(true);
        let connect_timeout = http
            .connect_timeout
            .as_deref()
            .and_then(|t| self.duration(None, "connect_timeout", t))
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let request_timeout = http
            .timeout
            .as_deref()
            .and_then(|t| self.duration(None, "timeout", t))
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        if http.threads == Some(0) {
            self.problem(
                None,
                "threads",
                "threads",
                "http.threads: must be at least 1".into(),
            );
        }

        let (load, max_requests, graceful_stop) = self.load(raw.load.as_ref());
        let feeders = self.feeders(&raw.feeders);
        let endpoint = self.endpoint(raw);
        let mut check_names = Vec::new();
        let requests = match &endpoint {
            Some(endpoint) => self.requests(raw, &http, endpoint, keep_alive, &mut check_names),
            None => Vec::new(),
        };
        self.variables(raw, &feeders);
        let flow = self.flow(raw, &feeders);
        let tls = endpoint
            .as_ref()
            .filter(|e| e.https)
            .and_then(|e| self.tls(raw.tls.as_ref(), &e.host));
        if raw.tls.is_some() && endpoint.as_ref().is_some_and(|e| !e.https) {
            self.problem(
                None,
                "[tls]",
                "tls",
                "[tls] is set but the base URL is not https://".into(),
            );
        }

        let capacity = self.capacity(raw.capacity.as_ref());
        let thresholds = self.thresholds(raw.thresholds.as_ref(), &requests);

        if !self.problems.is_empty() {
            return Err(self.problems);
        }
        let (Some(endpoint), Some(load)) = (endpoint, load) else {
            unreachable!("no problems means the endpoint and load were built");
        };
        Ok(Plan {
            endpoint,
            label: label.to_string(),
            requests,
            flow,
            feeders,
            check_names,
            load,
            keep_alive,
            cookies: http.cookies.unwrap_or(true),
            tls,
            connect_timeout,
            request_timeout,
            graceful_stop: graceful_stop.unwrap_or(DEFAULT_GRACEFUL_STOP),
            threads: http
                .threads
                .unwrap_or_else(crate::sysinfo::available_cores)
                .max(1),
            max_requests,
            capacity,
            thresholds,
        })
    }

    /// `[capacity]` → settings for `headroom capacity` (flags override).
    fn capacity(&mut self, raw: Option<&RawCapacity>) -> crate::capacity::Settings {
        let Some(c) = raw else {
            return crate::capacity::Settings::default();
        };
        let a = Some("[capacity]");
        let slo = c.slo.as_deref().and_then(|t| match Slo::parse(t) {
            Ok(slo) => Some(slo),
            Err(e) => {
                self.problem(a, "slo", t, format!("capacity.slo: {e}"));
                None
            }
        });
        let axis = c.axis.as_deref().and_then(|t| {
            let axis = crate::capacity::Axis::parse(t);
            if axis.is_none() {
                self.problem(
                    a,
                    "axis",
                    t,
                    format!("capacity.axis: `{t}`: use rate or users"),
                );
            }
            axis
        });
        let precision = c.precision.as_deref().and_then(|t| {
            let value = t
                .trim()
                .strip_suffix('%')
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| *v > 0.0 && *v < 100.0);
            if value.is_none() {
                self.problem(
                    a,
                    "precision",
                    t,
                    format!(
                        "capacity.precision: `{t}` is not a percentage between 0 and 100, e.g. 5%"
                    ),
                );
            }
            value.map(|v| v / 100.0)
        });
        let mut duration =
            |field: &str, v: &Option<String>| v.as_deref().and_then(|t| self.duration(a, field, t));
        crate::capacity::Settings {
            slo,
            axis,
            min: c.min,
            max: c.max,
            growth: c.growth,
            precision,
            step_duration: duration("step_duration", &c.step_duration),
            warmup: duration("warmup", &c.warmup),
            pause: duration("pause", &c.pause),
            max_time: duration("max_time", &c.max_time),
        }
    }

    /// `[thresholds]` → bounds; the comparison may be left out (`<` for
    /// latency and errors, `>=` for achieved and throughput).
    /// A key may name a request: `"p95{login}" = "500ms"`.
    fn thresholds(
        &mut self,
        raw: Option<&BTreeMap<String, String>>,
        requests: &[RequestSpec],
    ) -> Slo {
        let mut slo = Slo::default();
        for (metric, bound) in raw.into_iter().flatten() {
            let bound = bound.trim();
            let name = metric.split('{').next().unwrap_or(metric).trim();
            let text = if bound.starts_with(['<', '>']) {
                format!("{metric}{bound}")
            } else if matches!(name, "achieved" | "throughput" | "rps") {
                format!("{metric}>={bound}")
            } else {
                format!("{metric}<{bound}")
            };
            let parsed = Slo::parse(&text).and_then(|s| {
                s.check_requests(requests.iter().map(|r| r.name.as_str()))?;
                Ok(s)
            });
            match parsed {
                Ok(s) => slo.bounds.extend(s.bounds),
                Err(e) => self.problem(
                    Some("[thresholds]"),
                    metric,
                    bound,
                    format!("thresholds.{metric}: {}", e.message),
                ),
            }
        }
        slo
    }

    fn load(&mut self, raw: Option<&RawLoad>) -> (Option<Load>, Option<u64>, Option<Duration>) {
        let l = raw.cloned().unwrap_or_default();
        let a = Some("[load]").filter(|_| raw.is_some());
        let d = |b: &mut Self, field: &str, v: &Option<String>| {
            v.as_deref().and_then(|t| b.duration(a, field, t))
        };
        let duration = d(self, "duration", &l.duration);
        let graceful_stop = d(self, "graceful_stop", &l.graceful_stop);
        if l.max_requests == Some(0) {
            self.problem(
                a,
                "max_requests",
                "max_requests",
                "load.max_requests: must be at least 1".into(),
            );
        }
        let open_fields = l.rate.is_some()
            || l.stages.is_some()
            || l.users.is_some()
            || l.users_per_second.is_some();
        let model = l.model.unwrap_or(if open_fields {
            Model::Open
        } else {
            Model::Closed
        });
        let load = match model {
            Model::Closed => {
                for (set, field) in [
                    (l.rate.is_some(), "rate"),
                    (l.stages.is_some(), "stages"),
                    (l.users.is_some(), "users"),
                    (l.users_per_second.is_some(), "users_per_second"),
                    (l.over.is_some(), "over"),
                    (l.max_connections.is_some(), "max_connections"),
                ] {
                    if set {
                        self.problem(a, field, field, format!(
                            "load.{field} is for the open model, but model is \"closed\" (use vus, ramp_up, duration, iterations, think_time)"
                        ));
                    }
                }
                let vus = l.vus.unwrap_or(DEFAULT_VUS);
                if vus == 0 {
                    self.problem(a, "vus", "vus", "load.vus: must be at least 1".into());
                }
                let bounded =
                    duration.is_some() || l.iterations.is_some() || l.max_requests.is_some();
                Some(Load::Closed(ClosedLoad {
                    vus,
                    ramp_up: d(self, "ramp_up", &l.ramp_up).unwrap_or_default(),
                    duration: if bounded {
                        duration
                    } else {
                        Some(DEFAULT_DURATION)
                    },
                    iterations: l.iterations,
                    think_time: d(self, "think_time", &l.think_time).unwrap_or_default(),
                }))
            }
            Model::Open => {
                for (set, field) in [
                    (l.vus.is_some(), "vus"),
                    (l.ramp_up.is_some(), "ramp_up"),
                    (l.iterations.is_some(), "iterations"),
                    (l.think_time.is_some(), "think_time"),
                ] {
                    if set {
                        self.problem(a, field, field, format!(
                            "load.{field} is for the closed model, but model is \"open\" (use rate, stages, users + over, or users_per_second; cap concurrency with max_connections)"
                        ));
                    }
                }
                let forms = [
                    l.rate.is_some(),
                    l.stages.is_some(),
                    l.users.is_some() || l.over.is_some(),
                    l.users_per_second.is_some(),
                ];
                let stages = match forms.iter().filter(|&&f| f).count() {
                    0 => {
                        self.problem(a, "model", "open", "the open model needs one of: rate (+ duration), stages, users + over, users_per_second (+ duration)".into());
                        None
                    }
                    1 => self.open_stages(&l, duration, a),
                    _ => {
                        self.problem(
                            a,
                            "rate",
                            "rate",
                            "give only one of: rate, stages, users + over, users_per_second".into(),
                        );
                        None
                    }
                };
                if l.max_connections == Some(0) {
                    self.problem(
                        a,
                        "max_connections",
                        "max_connections",
                        "load.max_connections: must be at least 1".into(),
                    );
                }
                stages.and_then(|stages| match Schedule::new(stages) {
                    Ok(schedule) => Some(Load::Open(OpenLoad {
                        schedule,
                        max_connections: l
                            .max_connections
                            .map_or(DEFAULT_MAX_CONNECTIONS, |c| c as usize),
                    })),
                    Err(e) => {
                        self.problem(a, "stages", "stages", format!("load: {e}"));
                        None
                    }
                })
            }
        };
        (load, l.max_requests, graceful_stop)
    }

    fn open_stages(
        &mut self,
        l: &RawLoad,
        duration: Option<Duration>,
        a: Option<&str>,
    ) -> Option<Vec<Stage>> {
        let rate_ok = |b: &mut Self, field: &str, r: f64, zero_ok: bool| {
            let ok = r.is_finite() && (r > 0.0 || (zero_ok && r == 0.0));
            if !ok {
                b.problem(
                    a,
                    field,
                    field,
                    format!("load.{field}: `{r}` must be a positive number"),
                );
            }
            ok
        };
        if let Some(rate) = l.rate.or(l.users_per_second) {
            let field = if l.rate.is_some() {
                "rate"
            } else {
                "users_per_second"
            };
            if !rate_ok(self, field, rate, false) {
                return None;
            }
            return Some(vec![Stage::Hold {
                rate,
                duration: duration.unwrap_or(DEFAULT_DURATION),
            }]);
        }
        if l.users.is_some() || l.over.is_some() {
            let (Some(users), Some(over)) = (l.users, l.over.as_deref()) else {
                self.problem(a, "users", "users", "load: `users` and `over` go together (N users arriving evenly over a duration)".into());
                return None;
            };
            let over = self.duration(a, "over", over)?;
            if users == 0 || over.is_zero() {
                self.problem(
                    a,
                    "users",
                    "users",
                    "load: users and over must be greater than zero".into(),
                );
                return None;
            }
            return Some(vec![Stage::Hold {
                rate: users as f64 / over.as_secs_f64(),
                duration: over,
            }]);
        }
        let raw_stages = l.stages.as_ref()?;
        if raw_stages.is_empty() {
            self.problem(
                a,
                "stages",
                "stages",
                "load.stages: give at least one stage".into(),
            );
            return None;
        }
        if duration.is_some() {
            self.problem(
                a,
                "duration",
                "duration",
                "load: `duration` and `stages` both set the length of the run: give one".into(),
            );
        }
        let mut stages = Vec::new();
        for (i, s) in raw_stages.iter().enumerate() {
            let n = i + 1;
            let d = self.duration(a, "duration", &s.duration)?;
            let stage = match (s.rate, s.from, s.to) {
                (Some(rate), None, None) => {
                    rate_ok(self, "stages", rate, true).then_some(Stage::Hold { rate, duration: d })
                }
                (None, Some(from), Some(to)) => (rate_ok(self, "stages", from, true)
                    && rate_ok(self, "stages", to, true))
                .then_some(Stage::Ramp {
                    from,
                    to,
                    duration: d,
                }),
                _ => {
                    self.problem(
                        a,
                        "stages",
                        &s.duration,
                        format!(
                            "load.stages[{n}]: give `rate` (hold) or `from` and `to` (linear ramp)"
                        ),
                    );
                    None
                }
            };
            stages.push(stage?);
        }
        Some(stages)
    }

    fn feeders(&mut self, raw: &[RawFeeder]) -> Vec<Arc<Feeder>> {
        let mut out = Vec::new();
        let mut names = BTreeSet::new();
        for f in raw {
            if !names.insert(f.name.clone()) {
                self.problem(
                    Some(&f.name),
                    "name",
                    &f.name,
                    format!("feeder `{}` is defined twice", f.name),
                );
            }
            let path = self.path(&f.file);
            match Feeder::load(
                &f.name,
                &path,
                f.order.unwrap_or_default(),
                f.scope.unwrap_or_default(),
            ) {
                Ok(feeder) => out.push(Arc::new(feeder)),
                Err(e) => self.problem(
                    Some(&f.name),
                    "file",
                    &f.file,
                    format!("feeder `{}`: {e}", f.name),
                ),
            }
        }
        out
    }

    /// The one origin all requests go to.
    fn endpoint(&mut self, raw: &RawScenario) -> Option<Endpoint> {
        if raw.requests.is_empty() {
            self.problems.push(Problem {
                line: 0,
                column: 0,
                message: "the scenario has no requests: add at least one [[request]] with a name and a path".into(),
            });
            return None;
        }
        let base = raw.base_url.clone().or_else(|| {
            raw.requests
                .iter()
                .find_map(|r| r.url.as_deref().and_then(origin))
        });
        let Some(base) = base else {
            self.problem(
                None,
                "path",
                "path",
                "no base_url: set base_url (or --base-url), or give requests a full url".into(),
            );
            return None;
        };
        match Endpoint::from_url(&base) {
            Ok((e, _)) => Some(e),
            Err(e) => {
                self.problem(None, "base_url", &base, format!("base_url: {e}"));
                None
            }
        }
    }

    fn requests(
        &mut self,
        raw: &RawScenario,
        http: &RawHttp,
        endpoint: &Endpoint,
        keep_alive: bool,
        check_names: &mut Vec<String>,
    ) -> Vec<RequestSpec> {
        let mut names = BTreeSet::new();
        let base_path = raw
            .base_url
            .as_deref()
            .and_then(|b| url::Url::parse(b).ok())
            .map(|u| u.path().trim_end_matches('/').to_string())
            .unwrap_or_default();
        let base_origin = raw.base_url.as_deref().and_then(origin);
        let mut out = Vec::new();
        for r in &raw.requests {
            let a = Some(r.name.as_str());
            if !names.insert(r.name.clone()) {
                self.problem(a, "name", &r.name, format!("request `{}` is defined twice (names must be unique: they label the results)", r.name));
            }
            let target = match (&r.url, &r.path) {
                (Some(_), Some(_)) => {
                    self.problem(
                        a,
                        "url",
                        "url",
                        format!("request `{}`: give `url` or `path`, not both", r.name),
                    );
                    continue;
                }
                (None, None) => {
                    self.problem(
                        a,
                        "name",
                        &r.name,
                        format!(
                            "request `{}`: needs a `path` (joined to base_url) or a full `url`",
                            r.name
                        ),
                    );
                    continue;
                }
                (None, Some(path)) => {
                    if !path.starts_with('/') && !path.starts_with("{{") {
                        self.problem(a, "path", path, format!("request `{}`: path `{path}` must start with / (or be a template such as {{{{path}}}})", r.name));
                        continue;
                    }
                    format!("{base_path}{path}")
                }
                (Some(url), None) => {
                    let o = origin(url);
                    let same = o.is_some()
                        && (o == base_origin
                            || base_origin.is_none()
                                && o.as_deref() == origin_of(endpoint).as_deref());
                    if !same {
                        self.problem(a, "url", url, format!(
                            "request `{}`: url `{url}` is not on the scenario's origin; one scenario loads one server (give a path, or a url on base_url's host and port)",
                            r.name
                        ));
                        continue;
                    }
                    let o = o.expect("checked above");
                    let rest = &url[o.len()..];
                    if rest.is_empty() {
                        "/".to_string()
                    } else {
                        rest.to_string()
                    }
                }
            };
            let method = r
                .method
                .clone()
                .unwrap_or_else(|| "GET".into())
                .to_ascii_uppercase();
            if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
                self.problem(
                    a,
                    "method",
                    r.method.as_deref().unwrap_or(""),
                    format!("request `{}`: `{method}` is not an HTTP method", r.name),
                );
            }
            // Headers: defaults from [http], then the request's own.
            let mut headers: BTreeMap<String, String> = http.headers.clone().unwrap_or_default();
            for (k, v) in r.headers.clone().unwrap_or_default() {
                headers.retain(|old, _| !old.eq_ignore_ascii_case(&k));
                headers.insert(k, v);
            }
            for (k, v) in &headers {
                if k.is_empty() || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                    self.problem(
                        a,
                        k,
                        k,
                        format!("request `{}`: `{k}` is not a valid header name", r.name),
                    );
                }
                if v.contains(['\r', '\n']) {
                    self.problem(
                        a,
                        k,
                        k,
                        format!("request `{}`: header {k} contains a line break", r.name),
                    );
                }
            }
            let bodies = [r.body.is_some(), r.body_file.is_some(), r.json.is_some()];
            if bodies.iter().filter(|&&b| b).count() > 1 {
                self.problem(
                    a,
                    "body",
                    "body",
                    format!(
                        "request `{}`: give only one of body, body_file, json",
                        r.name
                    ),
                );
            }
            let body = if let Some(b) = &r.body {
                b.clone()
            } else if let Some(file) = &r.body_file {
                match std::fs::read_to_string(self.path(file)) {
                    Ok(b) => b,
                    Err(e) => {
                        self.problem(
                            a,
                            "body_file",
                            file,
                            format!(
                                "request `{}`: cannot read body_file {}: {e}",
                                r.name,
                                self.path(file).display()
                            ),
                        );
                        String::new()
                    }
                }
            } else if let Some(json) = &r.json {
                if !headers
                    .keys()
                    .any(|k| k.eq_ignore_ascii_case("content-type"))
                {
                    headers.insert("Content-Type".into(), "application/json".into());
                }
                json.to_string()
            } else {
                String::new()
            };
            let timeout = r
                .timeout
                .as_deref()
                .and_then(|t| self.duration(a, "timeout", t));
            let expect = Expect {
                statuses: r
                    .expect
                    .as_ref()
                    .and_then(|e| e.status.as_ref())
                    .and_then(|s| self.status_set(a, s)),
            };
            let checks = self.checks(r, check_names);
            let extracts = self.extracts(r, check_names);

            let target_t = self.template(a, "path", &target);
            let header_ts: Vec<(String, Option<Template>)> = headers
                .iter()
                .map(|(k, v)| (k.clone(), self.template(a, k, v)))
                .collect();
            let body_t = self.template(a, "body", &body);
            let (Some(target_t), Some(body_t)) = (target_t, body_t) else {
                continue;
            };
            let header_ts: Vec<(String, Template)> = header_ts
                .into_iter()
                .filter_map(|(k, t)| t.map(|t| (k, t)))
                .collect();
            let is_static = target_t.is_static()
                && body_t.is_static()
                && header_ts.iter().all(|(_, t)| t.is_static());
            let header_pairs: Vec<(String, String)> = headers.into_iter().collect();
            let encoded = if is_static {
                encode_request(
                    &method,
                    &target,
                    &endpoint.host_header,
                    &header_pairs,
                    body.as_bytes(),
                    keep_alive,
                )
            } else {
                Vec::new()
            };
            let mut capture = Capture::default();
            for need in checks
                .iter()
                .map(Check::needs)
                .chain(extracts.iter().map(Extract::needs))
            {
                capture.body |= need.body;
                capture.headers |= need.headers;
                capture.set_cookies |= need.set_cookies;
            }
            out.push(RequestSpec {
                name: r.name.clone(),
                method,
                target,
                weight: r.weight.unwrap_or(1),
                expect,
                encoded,
                template: (!is_static).then_some(RequestTemplate {
                    target: target_t,
                    headers: header_ts,
                    body: body_t,
                }),
                timeout,
                checks,
                extracts,
                capture,
            });
        }
        out
    }

    fn checks(&mut self, r: &RawRequest, names: &mut Vec<String>) -> Vec<Check> {
        let a = Some(r.name.as_str());
        let mut out = Vec::new();
        for c in &r.checks {
            let kinds = [
                c.status.is_some(),
                c.body_contains.is_some(),
                c.body_regex.is_some(),
                c.json_path.is_some(),
                c.header.is_some(),
                c.response_time_under.is_some(),
            ];
            if kinds.iter().filter(|&&k| k).count() != 1 {
                self.problem(a, "check", "check", format!(
                    "request `{}`: each check has exactly one of status, body_contains, body_regex, json_path, header, response_time_under",
                    r.name
                ));
                continue;
            }
            let (kind, describe) = if let Some(s) = &c.status {
                let Some(set) = self.status_set(a, s) else {
                    continue;
                };
                let d = format!("status {}", set.describe());
                (CheckKind::Status(set), d)
            } else if let Some(s) = &c.body_contains {
                (
                    CheckKind::BodyContains(s.clone()),
                    format!("body contains {s:?}"),
                )
            } else if let Some(re) = &c.body_regex {
                match regex::Regex::new(re) {
                    Ok(compiled) => (
                        CheckKind::BodyRegex(compiled),
                        format!("body matches /{re}/"),
                    ),
                    Err(e) => {
                        self.problem(
                            a,
                            "body_regex",
                            re,
                            format!("request `{}`: body_regex: {e}", r.name),
                        );
                        continue;
                    }
                }
            } else if let Some(p) = &c.json_path {
                let Some(path) = self.json_path(a, p, &r.name) else {
                    continue;
                };
                let (expect, d) = match (&c.equals, c.exists) {
                    (Some(v), None) => (JsonExpect::Equals(v.clone()), format!("json {p} == {v}")),
                    (None, Some(e)) => (
                        JsonExpect::Exists(e),
                        format!("json {p} {}", if e { "exists" } else { "absent" }),
                    ),
                    (None, None) => (JsonExpect::Exists(true), format!("json {p} exists")),
                    (Some(_), Some(_)) => {
                        self.problem(a, "json_path", p, format!("request `{}`: a json_path check takes `equals` or `exists`, not both", r.name));
                        continue;
                    }
                };
                (CheckKind::Json { path, expect }, d)
            } else if let Some(h) = &c.header {
                let (expect, d) = match (&c.equals, c.present) {
                    (Some(serde_json::Value::String(v)), None) => (
                        HeaderExpect::Equals(v.clone()),
                        format!("header {h} == {v:?}"),
                    ),
                    (Some(other), None) => (
                        HeaderExpect::Equals(other.to_string()),
                        format!("header {h} == {other}"),
                    ),
                    (None, Some(p)) => (
                        HeaderExpect::Present(p),
                        format!("header {h} {}", if p { "present" } else { "absent" }),
                    ),
                    (None, None) => (HeaderExpect::Present(true), format!("header {h} present")),
                    (Some(_), Some(_)) => {
                        self.problem(a, "header", h, format!("request `{}`: a header check takes `equals` or `present`, not both", r.name));
                        continue;
                    }
                };
                (
                    CheckKind::Header {
                        name: h.clone(),
                        expect,
                    },
                    d,
                )
            } else {
                let t = c.response_time_under.as_deref().unwrap_or_default();
                let Some(bound) = self.duration(a, "response_time_under", t) else {
                    continue;
                };
                (
                    CheckKind::ResponseTimeUnder(bound),
                    format!("response time < {t}"),
                )
            };
            if c.equals.is_some() && c.json_path.is_none() && c.header.is_none() {
                self.problem(
                    a,
                    "equals",
                    "equals",
                    format!(
                        "request `{}`: `equals` goes with json_path or header",
                        r.name
                    ),
                );
            }
            let id = names.len() as u32;
            names.push(format!(
                "{}: {}",
                r.name,
                c.name.clone().unwrap_or(describe)
            ));
            out.push(Check { id, kind });
        }
        out
    }

    fn json_path(
        &mut self,
        a: Option<&str>,
        p: &str,
        request: &str,
    ) -> Option<serde_json_path::JsonPath> {
        match serde_json_path::JsonPath::parse(p) {
            Ok(path) => Some(path),
            Err(e) => {
                self.problem(
                    a,
                    "json_path",
                    p,
                    format!("request `{request}`: json_path `{p}`: {e}"),
                );
                None
            }
        }
    }

    fn extracts(&mut self, r: &RawRequest, names: &mut Vec<String>) -> Vec<Extract> {
        let a = Some(r.name.as_str());
        let mut out = Vec::new();
        for x in &r.extracts {
            let sources = [
                x.json_path.is_some(),
                x.regex.is_some(),
                x.header.is_some(),
                x.cookie.is_some(),
            ];
            if sources.iter().filter(|&&s| s).count() != 1 {
                self.problem(a, "extract", &x.name, format!(
                    "request `{}`: extract `{}` needs exactly one of json_path, regex, header, cookie",
                    r.name, x.name
                ));
                continue;
            }
            if Template::parse(&format!("{{{{{}}}}}", x.name)).is_err()
                || BUILTINS.contains(&x.name.as_str())
            {
                self.problem(
                    a,
                    "name",
                    &x.name,
                    format!(
                        "request `{}`: `{}` cannot be a variable name",
                        r.name, x.name
                    ),
                );
                continue;
            }
            let from = if let Some(p) = &x.json_path {
                let Some(path) = self.json_path(a, p, &r.name) else {
                    continue;
                };
                ExtractFrom::Json(path)
            } else if let Some(re) = &x.regex {
                match regex::Regex::new(re) {
                    Ok(compiled) => {
                        let group = x.group.unwrap_or(1);
                        if group > compiled.captures_len() - 1 && x.group.is_some() {
                            self.problem(
                                a,
                                "group",
                                re,
                                format!("request `{}`: regex has no group {group}", r.name),
                            );
                            continue;
                        }
                        ExtractFrom::Regex(compiled, group)
                    }
                    Err(e) => {
                        self.problem(a, "regex", re, format!("request `{}`: regex: {e}", r.name));
                        continue;
                    }
                }
            } else if let Some(h) = &x.header {
                ExtractFrom::Header(h.clone())
            } else {
                ExtractFrom::Cookie(x.cookie.clone().unwrap_or_default())
            };
            let id = names.len() as u32;
            names.push(format!("{}: extract {}", r.name, x.name));
            out.push(Extract {
                id,
                var: x.name.clone(),
                from,
            });
        }
        out
    }

    /// Every `{{var}}` must be something a feeder or an extraction sets.
    fn variables(&mut self, raw: &RawScenario, feeders: &[Arc<Feeder>]) {
        let mut known: BTreeSet<String> = BUILTINS.iter().map(|s| s.to_string()).collect();
        for f in feeders {
            known.extend(f.columns.iter().cloned());
        }
        for r in &raw.requests {
            known.extend(r.extracts.iter().map(|x| x.name.clone()));
        }
        let mut seen = BTreeSet::new();
        for r in &raw.requests {
            let mut texts: Vec<&str> = Vec::new();
            texts.extend(r.path.as_deref());
            texts.extend(r.url.as_deref());
            texts.extend(r.body.as_deref());
            texts.extend(
                r.headers
                    .iter()
                    .flat_map(|h| h.values().map(String::as_str)),
            );
            let json = r.json.as_ref().map(|j| j.to_string());
            texts.extend(json.as_deref());
            for text in texts {
                let Ok(t) = Template::parse(text) else {
                    continue;
                };
                for var in t.vars() {
                    if known.contains(var) || !seen.insert((r.name.clone(), var.to_string())) {
                        continue;
                    }
                    let near = known
                        .iter()
                        .map(|k| (strsim::jaro_winkler(var, k), k))
                        .filter(|(s, _)| *s > 0.8)
                        .max_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|(_, k)| format!(" — did you mean `{k}`?"))
                        .unwrap_or_default();
                    let provided = if known.len() > BUILTINS.len() {
                        format!(
                            "known: {}",
                            known.iter().cloned().collect::<Vec<_>>().join(", ")
                        )
                    } else {
                        "no feeder or extraction provides any".into()
                    };
                    self.problem(Some(&r.name), "", &format!("{{{{{var}"), format!(
                        "request `{}`: template variable `{var}` is not set by any feeder column or extraction ({provided}){near}",
                        r.name
                    ));
                }
            }
        }
    }

    fn flow(&mut self, raw: &RawScenario, feeders: &[Arc<Feeder>]) -> Flow {
        if raw.sessions.is_empty() {
            if !raw.requests.is_empty() && raw.requests.iter().all(|r| r.weight == Some(0)) {
                self.problem(
                    None,
                    "weight",
                    "weight",
                    "every request has weight 0: nothing to send".into(),
                );
            }
            return Flow::Mix;
        }
        let mut names = BTreeSet::new();
        let mut sessions = Vec::new();
        for s in &raw.sessions {
            if !names.insert(s.name.clone()) {
                self.problem(
                    Some(&s.name),
                    "name",
                    &s.name,
                    format!("session `{}` is defined twice", s.name),
                );
            }
            if s.steps.is_empty() {
                self.problem(
                    Some(&s.name),
                    "steps",
                    &s.name,
                    format!("session `{}` has no steps", s.name),
                );
            }
            let steps = self.steps(&s.name, &s.steps, raw, feeders);
            sessions.push(Session {
                name: s.name.clone(),
                weight: s.weight.unwrap_or(1),
                steps,
            });
        }
        if sessions.iter().all(|s| s.weight == 0) {
            self.problem(
                None,
                "weight",
                "weight",
                "every session has weight 0: nothing to run".into(),
            );
        }
        Flow::Sessions(sessions)
    }

    fn steps(
        &mut self,
        session: &str,
        raw: &[RawStep],
        scenario: &RawScenario,
        feeders: &[Arc<Feeder>],
    ) -> Vec<Step> {
        let a = Some(session);
        let mut out = Vec::new();
        for (i, st) in raw.iter().enumerate() {
            let n = i + 1;
            let kinds = [
                st.request.is_some(),
                st.think.is_some(),
                st.repeat.is_some(),
                st.choice.is_some(),
                st.feed.is_some(),
            ];
            if kinds.iter().filter(|&&k| k).count() != 1 {
                self.problem(a, "steps", "steps", format!(
                    "session `{session}` step {n}: each step has exactly one of request, think, repeat (with steps), choice, feed"
                ));
                continue;
            }
            if st.steps.is_some() && st.repeat.is_none() {
                self.problem(
                    a,
                    "steps",
                    "steps",
                    format!("session `{session}` step {n}: `steps` goes with `repeat`"),
                );
            }
            if let Some(name) = &st.request {
                match scenario.requests.iter().position(|r| &r.name == name) {
                    Some(idx) => out.push(Step::Request(idx)),
                    None => {
                        let near = scenario
                            .requests
                            .iter()
                            .map(|r| (strsim::jaro_winkler(name, &r.name), &r.name))
                            .filter(|(s, _)| *s > 0.7)
                            .max_by(|a, b| a.0.total_cmp(&b.0))
                            .map(|(_, k)| format!(" — did you mean `{k}`?"))
                            .unwrap_or_default();
                        self.problem(
                            a,
                            "request",
                            name,
                            format!(
                                "session `{session}` step {n}: no request named `{name}`{near}"
                            ),
                        );
                    }
                }
            } else if let Some(think) = &st.think {
                let (lo, hi) = match think.split_once("..") {
                    Some((lo, hi)) => (lo, hi),
                    None => (think.as_str(), think.as_str()),
                };
                let (Some(min), Some(max)) =
                    (self.duration(a, "think", lo), self.duration(a, "think", hi))
                else {
                    continue;
                };
                if min > max {
                    self.problem(
                        a,
                        "think",
                        think,
                        format!(
                            "session `{session}` step {n}: think range `{think}` runs backwards"
                        ),
                    );
                    continue;
                }
                out.push(Step::Think { min, max });
            } else if let Some(times) = st.repeat {
                let Some(inner) = &st.steps else {
                    self.problem(
                        a,
                        "repeat",
                        "repeat",
                        format!("session `{session}` step {n}: `repeat` needs `steps`"),
                    );
                    continue;
                };
                let steps = self.steps(session, inner, scenario, feeders);
                out.push(Step::Repeat { times, steps });
            } else if let Some(branches) = &st.choice {
                if branches.is_empty() || branches.iter().all(|b| b.weight == Some(0)) {
                    self.problem(
                        a,
                        "choice",
                        "choice",
                        format!(
                            "session `{session}` step {n}: a choice needs a branch with weight > 0"
                        ),
                    );
                    continue;
                }
                let branches = branches
                    .iter()
                    .map(|b| {
                        (
                            b.weight.unwrap_or(1),
                            self.steps(session, &b.steps, scenario, feeders),
                        )
                    })
                    .collect();
                out.push(Step::Choice(branches));
            } else if let Some(feed) = &st.feed {
                match feeders.iter().position(|f| &f.name == feed) {
                    Some(idx) => out.push(Step::Feed(idx)),
                    None => self.problem(
                        a,
                        "feed",
                        feed,
                        format!("session `{session}` step {n}: no feeder named `{feed}`"),
                    ),
                }
            }
        }
        out
    }

    fn tls(&mut self, raw: Option<&RawTls>, host: &str) -> Option<TlsClient> {
        let raw = raw.cloned().unwrap_or_default();
        let options = TlsOptions {
            ca_file: raw.ca_file.as_deref().map(|f| self.path(f)),
            server_name: raw.server_name.clone(),
            insecure: raw.insecure.unwrap_or(false),
        };
        match TlsClient::new(host, &options) {
            Ok(t) => Some(t),
            Err(e) => {
                let needle = raw.ca_file.clone().unwrap_or_else(|| "tls".into());
                self.problem(None, "", &needle, format!("tls: {e}"));
                None
            }
        }
    }
}

/// "scheme://host:port" of a URL (without templates in it).
fn origin(url: &str) -> Option<String> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let host_end = rest.find('/').unwrap_or(rest.len());
    Some(url[..scheme_end + host_end].to_string())
}

fn origin_of(e: &Endpoint) -> Option<String> {
    Some(format!(
        "{}://{}",
        if e.https { "https" } else { "http" },
        e.host_header
    ))
}
