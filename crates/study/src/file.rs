//! The study file: a scenario, the servers to start (command templates
//! with `{param}` and `{port}` placeholders), their parameter grids and
//! explicit configurations, and how to measure each.
//!
//! ```toml
//! scenario = "mix.toml"
//! [[server]]
//! name = "target"
//! command = "headroom target --listen 127.0.0.1:{port} --workers {workers} --threads {threads}"
//! base_url = "http://127.0.0.1:{port}"
//! ready = "/health"
//! [server.grid]
//! workers = [1, 2]
//! threads = [1, 4]
//! [measure]
//! warmup = "2s"
//! duration = "5s"
//! ```

use headroom_monitor::launch::signal_by_name;
use headroom_objectives::capacity::Settings;
use headroom_records::study::rank::Ranking;
use headroom_records::study::{label, param_text, Objective};
use headroom_scenario::errors::{Problem, Problems, ScenarioError};
use headroom_scenario::raw::{RawCapacity, RawEvent, RawScenario};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        deserialize_with = "headroom_scenario::lenient::opt",
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

#[derive(Clone, Debug)]
pub enum Ready {
    Tcp,
    Http(String),
}

/// A server with its configurations expanded.
#[derive(Clone, Debug)]
pub struct Server {
    pub name: String,
    pub command: String,
    pub base_url: String,
    pub ready: Ready,
    pub ready_timeout: Duration,
    pub dir: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub stop_signal: i32,
    pub stop_grace: Duration,
    /// With placeholders; relative to `dir`.
    pub pidfile: Option<String>,
    /// With placeholders, added to the scenario's events.
    pub events: Vec<RawEvent>,
    /// With placeholders, added to the scenario's `connect_to`.
    pub connect_to: Vec<String>,
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

/// A `[[service]]`, checked.
#[derive(Clone, Debug)]
pub struct Service {
    pub name: String,
    /// With `{port}` and `{service.NAME.port}` placeholders.
    pub command: String,
    pub ready: Ready,
    /// A regular expression a line of its output (stdout or stderr) must
    /// match before it counts as ready.
    pub ready_log: Option<regex::Regex>,
    pub ready_timeout: Duration,
    pub dir: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub stop_signal: i32,
    pub stop_grace: Duration,
    pub scope: Scope,
}

/// One configuration: a server and its parameter values.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub server: usize,
    pub params: BTreeMap<String, Value>,
}

#[derive(Clone, Debug)]
pub struct Study {
    pub path: PathBuf,
    pub scenario: RawScenario,
    /// Folder the scenario's relative paths resolve against.
    pub scenario_dir: PathBuf,
    pub servers: Vec<Server>,
    pub services: Vec<Service>,
    pub configs: Vec<Config>,
    pub warmup: Duration,
    pub duration: Option<Duration>,
    pub repeat: u32,
    pub objective: Objective,
    pub error_budget: f64,
    pub pause: Duration,
    /// The study's `[capacity]`, laid over the scenario's for a search.
    pub capacity: Settings,
}

impl Study {
    /// What the ranking of its configurations reads of it.
    pub fn ranking(&self) -> Ranking {
        Ranking {
            study: self.path.display().to_string(),
            objective: self.objective,
            error_budget: self.error_budget,
            repeat: self.repeat,
        }
    }
}

/// Every combination of the grid's values (in key order), then the
/// explicit configurations.
pub fn expand(
    grid: &BTreeMap<String, Vec<Value>>,
    explicit: &[BTreeMap<String, Value>],
) -> Vec<BTreeMap<String, Value>> {
    let mut out: Vec<BTreeMap<String, Value>> = vec![BTreeMap::new()];
    if grid.is_empty() || grid.values().any(Vec::is_empty) {
        out.clear();
    } else {
        for (key, values) in grid {
            out = out
                .into_iter()
                .flat_map(|partial| {
                    values.iter().map(move |v| {
                        let mut p = partial.clone();
                        p.insert(key.clone(), v.clone());
                        p
                    })
                })
                .collect();
        }
    }
    for c in explicit {
        if !out.contains(c) {
            out.push(c.clone());
        }
    }
    out
}

/// `{name}` placeholders in a template (not `${name}`, a shell variable).
pub fn placeholders(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = template.as_bytes();
    let mut i = 0;
    while let Some(open) = template[i..].find('{') {
        let at = i + open;
        let close = template[at..].find('}').map(|c| at + c);
        let Some(close) = close else { break };
        let name = &template[at + 1..close];
        let shell = at > 0 && bytes[at - 1] == b'$';
        if !shell && !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            names.push(name.to_string());
        }
        i = at + 1;
    }
    names
}

/// The NAMEs of `{service.NAME.port}` in a template.
pub fn service_placeholders(template: &str) -> Vec<String> {
    template
        .split("{service.")
        .skip(1)
        .filter_map(|rest| rest.split_once(".port}").map(|(name, _)| name.to_string()))
        .collect()
}

/// Fills `{param}` and `{port}` in.
pub fn fill(template: &str, params: &BTreeMap<String, Value>, port: u16) -> String {
    let mut out = template.replace("{port}", &port.to_string());
    for (k, v) in params {
        out = out.replace(&format!("{{{k}}}"), &param_text(v));
    }
    out
}

/// Collects a study file's problems, each located in its text, by the
/// rules scenario files are checked by (`Problems`).
struct Checker<'a> {
    problems: Problems<'a>,
}

impl Checker<'_> {
    fn problem(&mut self, anchor: Option<&str>, key: &str, needle: &str, message: String) {
        self.problems.add(anchor, key, needle, message);
    }

    fn duration(&mut self, anchor: Option<&str>, field: &str, text: &str) -> Option<Duration> {
        self.problems.duration(anchor, field, text)
    }

    fn duration_or(
        &mut self,
        anchor: Option<&str>,
        field: &str,
        text: &Option<String>,
        default: Duration,
    ) -> Duration {
        text.as_deref()
            .and_then(|t| self.duration(anchor, field, t))
            .unwrap_or(default)
    }
}

/// Reads and checks a study file; every problem at once, located.
pub fn load(path: &Path) -> Result<Study, ScenarioError> {
    let text = headroom_scenario::read_expanded(path, "study")?;
    from_text(&text, path)
}

/// Checks a study's text (after `${…}` expansion) as if read from `path`,
/// which places its relative paths.
pub fn from_text(text: &str, path: &Path) -> Result<Study, ScenarioError> {
    let fail = |problems: Vec<Problem>| ScenarioError {
        source: path.to_path_buf(),
        problems,
    };
    let raw: RawStudy = headroom_scenario::parse_toml(text).map_err(fail)?;
    // Absolute: servers and event commands run in it, and `a.toml`'s
    // parent is the empty path, which no process can start in.
    let dir = std::path::absolute(path.parent().unwrap_or(Path::new(".")))
        .unwrap_or_else(|_| PathBuf::from("."));
    let (scenario, scenario_dir) = scenario_of(&raw, &dir)?;
    let mut check = Checker {
        problems: Problems::new(text),
    };
    let measure = check.measure(raw.measure.clone().unwrap_or_default());
    let capacity = check.capacity(&raw, &scenario, measure.objective, text);
    let services = check.services(&raw.services, &dir);
    let (servers, configs) = check.servers(&raw.servers, &dir);
    check.service_references(&raw, &services);
    check.problems.into_result(()).map_err(fail)?;
    Ok(Study {
        path: path.to_path_buf(),
        scenario,
        scenario_dir,
        servers,
        services,
        configs,
        warmup: measure.warmup,
        duration: measure.duration,
        repeat: measure.repeat,
        objective: measure.objective,
        error_budget: measure.error_budget,
        pause: measure.pause,
        capacity,
    })
}

/// The study's scenario (inline, or read from its file) and the folder its
/// relative paths resolve against.
fn scenario_of(raw: &RawStudy, dir: &Path) -> Result<(RawScenario, PathBuf), ScenarioError> {
    Ok(match &raw.scenario {
        RawScenarioRef::Inline(s) => ((**s).clone(), dir.to_path_buf()),
        RawScenarioRef::File(f) => {
            let p = dir.join(f);
            let file = headroom_scenario::read(&p)?;
            (file.raw, p.parent().unwrap_or(Path::new(".")).to_path_buf())
        }
    })
}

/// `[measure]`, resolved.
struct Measure {
    warmup: Duration,
    duration: Option<Duration>,
    pause: Duration,
    repeat: u32,
    objective: Objective,
    error_budget: f64,
}

impl Checker<'_> {
    fn measure(&mut self, m: RawMeasure) -> Measure {
        let warmup = self.duration_or(None, "warmup", &m.warmup, Duration::ZERO);
        let duration = m
            .duration
            .as_deref()
            .and_then(|t| self.duration(None, "duration", t));
        let pause = self.duration_or(None, "pause", &m.pause, Duration::from_secs(1));
        let objective = match m.objective.as_deref() {
            None => Objective::Throughput,
            Some(o) => Objective::parse(o).unwrap_or_else(|| {
                self.problem(
                    None,
                    "objective",
                    o,
                    format!(
                        "objective `{o}`: use throughput, p50, p90, p95, p99, mean, capacity or max_gap"
                    ),
                );
                Objective::Throughput
            }),
        };
        let error_budget = match m.error_budget.as_deref() {
            None => 0.01,
            Some(b) => match b.trim().trim_end_matches('%').trim().parse::<f64>() {
                Ok(v) if (0.0..=100.0).contains(&v) => v / 100.0,
                _ => {
                    self.problem(
                        None,
                        "error_budget",
                        b,
                        format!("error_budget `{b}`: write a percentage, e.g. \"1%\""),
                    );
                    0.01
                }
            },
        };
        if m.repeat == Some(0) {
            self.problem(
                None,
                "repeat",
                "repeat",
                "repeat: must be at least 1".into(),
            );
        }
        Measure {
            warmup,
            duration,
            pause,
            repeat: m.repeat.unwrap_or(1).max(1),
            objective,
            error_budget,
        }
    }

    /// The study's `[capacity]`, checked as a scenario's is; it lies over
    /// the scenario's own `[capacity]` when a search runs.
    fn capacity(
        &mut self,
        raw: &RawStudy,
        scenario: &RawScenario,
        objective: Objective,
        text: &str,
    ) -> Settings {
        let settings = match &raw.capacity {
            None => Settings::default(),
            Some(c) => headroom_scenario::capacity_settings(c, text).unwrap_or_else(|problems| {
                self.problems.extend(problems);
                Settings::default()
            }),
        };
        let slo_given = |c: Option<&RawCapacity>| c.is_some_and(|c| c.slo.is_some());
        if objective == Objective::Capacity
            && !slo_given(raw.capacity.as_ref())
            && !slo_given(scenario.capacity.as_ref())
        {
            self.problem(
                None,
                "objective",
                "capacity",
                "objective = \"capacity\" needs an objective to meet: add [capacity] with \
                 slo = \"p90<500ms, errors<5%\" (and step_duration, min, max as needed)"
                    .into(),
            );
        }
        settings
    }

    /// Every `[[server]]` and its configurations (grid, then explicit).
    fn servers(&mut self, raw: &[RawServer], dir: &Path) -> (Vec<Server>, Vec<Config>) {
        if raw.is_empty() {
            self.problem(
                None,
                "server",
                "server",
                "the study has no [[server]]".into(),
            );
        }
        let mut servers = Vec::new();
        let mut configs = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (i, s) in raw.iter().enumerate() {
            if !names.insert(s.name.clone()) {
                self.problem(
                    Some(&s.name),
                    "name",
                    &s.name,
                    format!("server `{}` is defined twice", s.name),
                );
            }
            let grid = s.grid.clone().unwrap_or_default();
            let params = expand(&grid, &s.configs);
            let params = if params.is_empty() {
                vec![BTreeMap::new()]
            } else {
                params
            };
            let server = self.server(s, dir, &params);
            servers.push(server);
            configs.extend(
                params
                    .into_iter()
                    .map(|params| Config { server: i, params }),
            );
        }
        (servers, configs)
    }

    /// One server, its placeholders checked against every configuration's
    /// parameters.
    fn server(&mut self, s: &RawServer, dir: &Path, params: &[BTreeMap<String, Value>]) -> Server {
        let anchor = Some(s.name.as_str());
        let base_url = s
            .base_url
            .clone()
            .unwrap_or_else(|| "http://127.0.0.1:{port}".into());
        self.placeholders(s, &base_url, params);
        let what = format!("server `{}`", s.name);
        let ready = self.ready(&what, anchor, s.ready.as_deref(), "");
        let stop_signal = self.stop_signal(&what, anchor, s.stop_signal.as_deref());
        Server {
            name: s.name.clone(),
            command: s.command.clone(),
            base_url,
            ready,
            ready_timeout: self.duration_or(
                anchor,
                "ready_timeout",
                &s.ready_timeout,
                Duration::from_secs(30),
            ),
            dir: Some(
                s.dir
                    .as_ref()
                    .map_or_else(|| dir.to_path_buf(), |d| dir.join(d)),
            ),
            env: s.env.clone().unwrap_or_default().into_iter().collect(),
            stop_signal,
            stop_grace: self.duration_or(
                anchor,
                "stop_grace",
                &s.stop_grace,
                Duration::from_secs(10),
            ),
            pidfile: s.pidfile.clone(),
            events: s.events.clone(),
            connect_to: s.connect_to.clone(),
        }
    }

    /// `ready`: "tcp" (the default) or an HTTP path, for `what` (a server
    /// or a service).
    fn ready(
        &mut self,
        what: &str,
        anchor: Option<&str>,
        ready: Option<&str>,
        hint: &str,
    ) -> Ready {
        match ready {
            None | Some("tcp") => Ready::Tcp,
            Some(p) if p.starts_with('/') => Ready::Http(p.to_string()),
            Some(p) => {
                self.problem(
                    anchor,
                    "ready",
                    p,
                    format!(
                        "{what}: ready `{p}`: give an HTTP path starting with / or \"tcp\"{hint}"
                    ),
                );
                Ready::Tcp
            }
        }
    }

    /// `stop_signal` by name (TERM by default), for `what`.
    fn stop_signal(&mut self, what: &str, anchor: Option<&str>, name: Option<&str>) -> i32 {
        let Some(name) = name else {
            return libc::SIGTERM;
        };
        signal_by_name(name).unwrap_or_else(|| {
            self.problem(
                anchor,
                "stop_signal",
                name,
                format!(
                "{what}: `{name}` is not a signal (TERM, INT, QUIT, HUP, USR1, USR2, WINCH, KILL)"
            ),
            );
            libc::SIGTERM
        })
    }

    /// Every `[[service]]`, checked.
    fn services(&mut self, raw: &[RawService], dir: &Path) -> Vec<Service> {
        let mut names = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for s in raw {
            let anchor = Some(s.name.as_str());
            if !names.insert(s.name.clone()) {
                self.problem(
                    anchor,
                    "name",
                    &s.name,
                    format!("service `{}` is defined twice", s.name),
                );
            }
            if s.name.is_empty()
                || !s
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                self.problem(anchor, "name", &s.name, format!(
                    "service `{}`: a name of letters, digits, - and _ (it is used in {{service.NAME.port}})",
                    s.name
                ));
            }
            let what = format!("service `{}`", s.name);
            let ready = self.ready(
                &what,
                anchor,
                s.ready.as_deref(),
                " (a log line: ready_log)",
            );
            let ready_log = s.ready_log.as_deref().and_then(|re| {
                match regex::RegexBuilder::new(re).multi_line(true).build() {
                    Ok(re) => Some(re),
                    Err(e) => {
                        self.problem(
                            anchor,
                            "ready_log",
                            re,
                            format!("service `{}`: ready_log: {e}", s.name),
                        );
                        None
                    }
                }
            });
            let stop_signal = self.stop_signal(&what, anchor, s.stop_signal.as_deref());
            out.push(Service {
                name: s.name.clone(),
                command: s.command.clone(),
                ready,
                ready_log,
                ready_timeout: self.duration_or(
                    anchor,
                    "ready_timeout",
                    &s.ready_timeout,
                    Duration::from_secs(30),
                ),
                dir: Some(
                    s.dir
                        .as_ref()
                        .map_or_else(|| dir.to_path_buf(), |d| dir.join(d)),
                ),
                env: s.env.clone().unwrap_or_default().into_iter().collect(),
                stop_signal,
                stop_grace: self.duration_or(
                    anchor,
                    "stop_grace",
                    &s.stop_grace,
                    Duration::from_secs(10),
                ),
                scope: s.scope.unwrap_or(Scope::Config),
            });
        }
        out
    }

    /// Every `{service.NAME.port}` names a service that is started before
    /// the text is used: in a server, any service; in a service, one
    /// listed before it (a study-wide service only study-wide ones).
    fn service_references(&mut self, raw: &RawStudy, services: &[Service]) {
        let mut texts: Vec<(Option<&str>, Vec<&str>, Vec<&Service>)> = Vec::new();
        for s in &raw.servers {
            let mut t = vec![s.command.as_str()];
            t.extend(s.base_url.as_deref());
            t.extend(s.connect_to.iter().map(String::as_str));
            t.extend(s.env.iter().flat_map(|e| e.values().map(String::as_str)));
            texts.push((Some(&s.name), t, services.iter().collect()));
        }
        for (i, s) in raw.services.iter().enumerate() {
            let mut t = vec![s.command.as_str()];
            t.extend(s.env.iter().flat_map(|e| e.values().map(String::as_str)));
            let study_wide = services.get(i).is_some_and(|s| s.scope == Scope::Study);
            let before = services[..i.min(services.len())]
                .iter()
                .filter(|b| !study_wide || b.scope == Scope::Study)
                .collect();
            texts.push((Some(&s.name), t, before));
        }
        for (anchor, t, known) in texts {
            for text in t {
                for name in service_placeholders(text) {
                    if !known.iter().any(|s| s.name == name) {
                        let names: Vec<&str> = known.iter().map(|s| s.name.as_str()).collect();
                        self.problem(anchor, "", &format!("{{service.{name}.port}}"), format!(
                            "{{service.{name}.port}}: no service `{name}` is started before this (services: {names:?})"
                        ));
                    }
                }
            }
        }
    }

    /// Every placeholder in the command, base URL, dir and env must be a
    /// parameter of every configuration, or `{port}`.
    fn placeholders(&mut self, s: &RawServer, base_url: &str, params: &[BTreeMap<String, Value>]) {
        let mut templates = vec![("command", s.command.as_str()), ("base_url", base_url)];
        if let Some(d) = &s.dir {
            templates.push(("dir", d));
        }
        for v in s.env.iter().flat_map(|e| e.values()) {
            templates.push(("env", v));
        }
        if let Some(p) = &s.pidfile {
            templates.push(("pidfile", p));
        }
        for c in &s.connect_to {
            templates.push(("connect_to", c));
        }
        for e in &s.events {
            templates.extend(e.command.as_deref().map(|c| ("event.command", c)));
            templates.extend(e.pidfile.as_deref().map(|p| ("event.pidfile", p)));
        }
        for (field, t) in templates {
            for name in placeholders(t) {
                if name == "port" {
                    continue;
                }
                if let Some(missing) = params.iter().find(|p| !p.contains_key(&name)) {
                    let known: Vec<&String> = missing.keys().collect();
                    self.problem(
                        Some(&s.name),
                        field,
                        &format!("{{{name}}}"),
                        format!(
                            "server `{}`: placeholder {{{name}}} in {field} is not a parameter of configuration {} (parameters: {known:?}, and {{port}})",
                            s.name,
                            label(&s.name, missing)
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn grid_expands_to_every_combination_then_explicit_configs() {
        let grid: BTreeMap<String, Vec<Value>> = [
            ("workers".to_string(), vec![json!(1), json!(2)]),
            ("threads".to_string(), vec![json!(1), json!(8), json!(32)]),
        ]
        .into();
        let explicit = vec![
            map(&[("workers", json!(16)), ("threads", json!(64))]),
            map(&[("workers", json!(1)), ("threads", json!(1))]),
        ];
        let all = expand(&grid, &explicit);
        assert_eq!(
            all.len(),
            7,
            "6 combinations + 1 new explicit (the duplicate is dropped)"
        );
        assert_eq!(all[0], map(&[("threads", json!(1)), ("workers", json!(1))]));
        assert_eq!(
            all[5],
            map(&[("threads", json!(32)), ("workers", json!(2))])
        );
        assert_eq!(
            all[6],
            map(&[("threads", json!(64)), ("workers", json!(16))])
        );
        assert!(expand(&BTreeMap::new(), &[]).is_empty());
    }

    #[test]
    fn every_problem_is_located_on_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"
[scenario]
base_url = "http://127.0.0.1:1"
[[scenario.request]]
name = "home"
path = "/"

[[server]]
name = "app"
command = "app --workers {workers} --port {port}"
stop_signal = "BOGUS"
ready = "health"

[measure]
warmup = "2 parsecs"
objective = "fastest"

[capacity]
slo = "p90<<5"
"#;
        let path = dir.path().join("study.toml");
        std::fs::write(&path, text).unwrap();
        let err = load(&path).unwrap_err();
        let line_of = |needle: &str| 1 + text[..text.find(needle).unwrap()].matches('\n').count();
        let expected = [
            ("{workers}", "placeholder {workers}"),
            ("BOGUS", "is not a signal"),
            ("\"health\"", "ready `health`"),
            ("2 parsecs", "is not a duration"),
            ("fastest", "objective `fastest`"),
            ("p90<<5", "capacity.slo"),
        ];
        for (needle, message) in expected {
            let p = err
                .problems
                .iter()
                .find(|p| p.message.contains(message))
                .unwrap_or_else(|| panic!("no problem saying `{message}` in {err}"));
            assert_eq!(p.line, line_of(needle), "{message}: {err}");
            assert!(p.column > 0, "{message}: {err}");
        }
        assert_eq!(err.problems.len(), expected.len(), "{err}");
    }

    /// Studies are held to the same duration limits and messages as
    /// scenario files (one problem collector for both).
    #[test]
    fn durations_have_the_scenarios_limits() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"
[scenario]
base_url = "http://127.0.0.1:1"
[[scenario.request]]
name = "home"
path = "/"

[[server]]
name = "app"
command = "app --port {port}"
ready_timeout = "0s"

[measure]
duration = "0s"
warmup = "400 days"
pause = "0s"
"#;
        let path = dir.path().join("study.toml");
        std::fs::write(&path, text).unwrap();
        let err = load(&path).unwrap_err();
        let messages: Vec<&str> = err.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "warmup: 400 days is longer than headroom accepts (at most 366 days)",
                "duration: must be greater than zero",
                "ready_timeout: must be greater than zero",
            ],
            "{err}"
        );
    }

    #[test]
    fn placeholders_and_filling() {
        let t = "puma -w {workers} -t {threads}:{threads} -b tcp://127.0.0.1:{port} ${HOME} awk '{print $1}'";
        // `${HOME}` is a shell variable and `{print $1}` not a name: both left alone.
        assert_eq!(placeholders(t), ["workers", "threads", "threads", "port"]);
        let p = map(&[
            ("workers", json!(4)),
            ("threads", json!(8)),
            ("mode", json!("fast")),
        ]);
        assert_eq!(
            fill("-w {workers} -t {threads} {mode} :{port}", &p, 8123),
            "-w 4 -t 8 fast :8123"
        );
        assert_eq!(label("puma", &p), "puma mode=fast threads=8 workers=4");
    }
}
