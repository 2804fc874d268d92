//! Raw study → checked [`Study`]: every problem at once, each located in
//! the file, by the rules scenario files are checked by.

use super::raw::*;
use super::*;
use headroom_monitor::launch::signal_by_name;
use headroom_objectives::capacity::Settings;
use headroom_records::study::Objective;
use headroom_scenario::errors::{Problem, Problems, ScenarioError};
use headroom_scenario::raw::{RawCapacity, RawScenario};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    let open = scenario
        .load
        .as_ref()
        .is_some_and(|l| l.model() == headroom_scenario::raw::Model::Open);
    let measure = check.measure(raw.measure.clone().unwrap_or_default(), open);
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
    /// `open`: the scenario's load is an open model, whose throughput only
    /// follows the offered rate — so latency (p90) is what tells its
    /// configurations apart, and the default objective.
    fn measure(&mut self, m: RawMeasure, open: bool) -> Measure {
        let warmup = self.duration_or(None, "warmup", &m.warmup, Duration::ZERO);
        let duration = m
            .duration
            .as_deref()
            .and_then(|t| self.duration(None, "duration", t));
        let pause = self.duration_or(None, "pause", &m.pause, Duration::from_secs(1));
        let objective = match m.objective.as_deref() {
            None if open => Objective::P90,
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
        for probe in &s.probes {
            if let Err(e) = probe.parse::<headroom_monitor::probes::Probe>() {
                self.problem(anchor, "probes", probe, format!("server `{}`: {e}", s.name));
            }
        }
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
            probes: s.probes.clone(),
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
        for p in &s.probes {
            templates.push(("probes", p));
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
