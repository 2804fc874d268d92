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

use crate::monitor::launch::signal_by_name;
use crate::scenario::errors::{Locator, Problem, ScenarioError};
use crate::scenario::raw::RawScenario;
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<RawMeasure>,
    /// With `objective = "capacity"`: the objective and the search, as a
    /// scenario's `[capacity]` (and over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::scenario::raw::RawCapacity>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum RawScenarioRef {
    File(String),
    Inline(Box<RawScenario>),
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
    pub stop_grace: Option<String>,
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
    pub warmup: Option<String>,
    /// Replaces the scenario's duration for each measured run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Runs per configuration, interleaved across configurations (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// "throughput" (default), "p50", "p90", "p95", "p99" or "mean" (lowest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// Highest error rate for a configuration to win, e.g. "1%" (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_budget: Option<String>,
    /// Pause between configurations (default 1s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<String>,
}

/// What a study ranks configurations by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Highest throughput with the error rate within budget.
    Throughput,
    /// Lowest latency at that percentile (or mean), within budget.
    P50,
    P90,
    P95,
    P99,
    Mean,
    /// Highest load meeting the `[capacity]` objective (a capacity search
    /// per configuration).
    Capacity,
}

impl Objective {
    pub fn parse(s: &str) -> Option<Objective> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "throughput" => Objective::Throughput,
            "p50" | "median" => Objective::P50,
            "p90" => Objective::P90,
            "p95" => Objective::P95,
            "p99" => Objective::P99,
            "mean" => Objective::Mean,
            "capacity" => Objective::Capacity,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Objective::Throughput => "highest throughput",
            Objective::P50 => "lowest median latency",
            Objective::P90 => "lowest p90 latency",
            Objective::P95 => "lowest p95 latency",
            Objective::P99 => "lowest p99 latency",
            Objective::Mean => "lowest mean latency",
            Objective::Capacity => "highest capacity within the objective",
        }
    }
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
    pub configs: Vec<Config>,
    pub warmup: Duration,
    pub duration: Option<Duration>,
    pub repeat: u32,
    pub objective: Objective,
    pub error_budget: f64,
    pub pause: Duration,
}

/// The text a parameter value stands for in a command.
pub fn param_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A configuration's label: "server workers=2 threads=4".
pub fn label(server: &str, params: &BTreeMap<String, Value>) -> String {
    let mut s = server.to_string();
    for (k, v) in params {
        s.push_str(&format!(" {k}={}", param_text(v)));
    }
    s
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

/// Fills `{param}` and `{port}` in.
pub fn fill(template: &str, params: &BTreeMap<String, Value>, port: u16) -> String {
    let mut out = template.replace("{port}", &port.to_string());
    for (k, v) in params {
        out = out.replace(&format!("{{{k}}}"), &param_text(v));
    }
    out
}

fn duration(
    problems: &mut Vec<Problem>,
    loc: &Locator,
    field: &str,
    text: &str,
) -> Option<Duration> {
    match humantime::parse_duration(text.trim()) {
        Ok(d) => Some(d),
        Err(e) => {
            let (line, column) = loc.find(None, field, text);
            problems.push(Problem {
                line,
                column,
                message: format!("{field}: `{text}` is not a duration ({e})"),
            });
            None
        }
    }
}

/// The study's `[capacity]` over the scenario's, field by field.
fn overlay_capacity(
    base: Option<&crate::scenario::raw::RawCapacity>,
    over: &crate::scenario::raw::RawCapacity,
) -> crate::scenario::raw::RawCapacity {
    let base = base.cloned().unwrap_or_default();
    crate::scenario::raw::RawCapacity {
        slo: over.slo.clone().or(base.slo),
        axis: over.axis.clone().or(base.axis),
        min: over.min.or(base.min),
        max: over.max.or(base.max),
        growth: over.growth.or(base.growth),
        precision: over.precision.clone().or(base.precision),
        step_duration: over.step_duration.clone().or(base.step_duration),
        warmup: over.warmup.clone().or(base.warmup),
        pause: over.pause.clone().or(base.pause),
        max_time: over.max_time.clone().or(base.max_time),
    }
}

/// Reads and checks a study file; every problem at once, located.
pub fn load(path: &Path) -> Result<Study, ScenarioError> {
    let fail = |problems: Vec<Problem>| ScenarioError {
        source: path.to_path_buf(),
        problems,
    };
    let one = |message: String| {
        fail(vec![Problem {
            line: 0,
            column: 0,
            message,
        }])
    };
    let source =
        std::fs::read_to_string(path).map_err(|e| one(format!("cannot read the study: {e}")))?;
    let text = crate::scenario::env::expand(&source, |n| std::env::var(n).ok()).map_err(fail)?;
    let raw: RawStudy = toml::from_str(&text).map_err(|e| {
        let (line, column) = e.span().map_or((0, 0), |s| {
            crate::scenario::errors::line_col(&text, s.start)
        });
        let message = e.message().trim().to_string();
        let message = match crate::scenario::errors::suggest_key(&message) {
            Some(k) if message.contains("unknown field") => {
                format!("{message} — did you mean `{k}`?")
            }
            _ => message,
        };
        fail(vec![Problem {
            line,
            column,
            message,
        }])
    })?;
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let loc = Locator { text: &text };
    let mut problems = Vec::new();

    let (mut scenario, scenario_dir) = match &raw.scenario {
        RawScenarioRef::Inline(s) => ((**s).clone(), dir.clone()),
        RawScenarioRef::File(f) => {
            let p = dir.join(f);
            match crate::scenario::read(&p) {
                Ok(file) => (file.raw, p.parent().unwrap_or(Path::new(".")).to_path_buf()),
                Err(e) => return Err(e),
            }
        }
    };
    let m = raw.measure.clone().unwrap_or_default();
    let warmup = m
        .warmup
        .as_deref()
        .and_then(|t| duration(&mut problems, &loc, "warmup", t))
        .unwrap_or_default();
    let measure_duration = m
        .duration
        .as_deref()
        .and_then(|t| duration(&mut problems, &loc, "duration", t));
    let pause = m
        .pause
        .as_deref()
        .and_then(|t| duration(&mut problems, &loc, "pause", t))
        .unwrap_or(Duration::from_secs(1));
    let objective = match m.objective.as_deref() {
        None => Objective::Throughput,
        Some(o) => Objective::parse(o).unwrap_or_else(|| {
            let (line, column) = loc.find(None, "objective", o);
            problems.push(Problem {
                line,
                column,
                message: format!(
                    "objective `{o}`: use throughput, p50, p90, p95, p99, mean or capacity"
                ),
            });
            Objective::Throughput
        }),
    };
    let error_budget = match m.error_budget.as_deref() {
        None => 0.01,
        Some(b) => match b.trim().trim_end_matches('%').trim().parse::<f64>() {
            Ok(v) if (0.0..=100.0).contains(&v) => v / 100.0,
            _ => {
                let (line, column) = loc.find(None, "error_budget", b);
                problems.push(Problem {
                    line,
                    column,
                    message: format!("error_budget `{b}`: write a percentage, e.g. \"1%\""),
                });
                0.01
            }
        },
    };
    if let Some(c) = &raw.capacity {
        if let Some(slo) = c.slo.as_deref() {
            if let Err(e) = crate::slo::Slo::parse(slo) {
                let (line, column) = loc.find(Some("[capacity]"), "slo", slo);
                problems.push(Problem {
                    line,
                    column,
                    message: format!("capacity.slo: {e}"),
                });
            }
        }
        scenario.capacity = Some(overlay_capacity(scenario.capacity.as_ref(), c));
    }
    if objective == Objective::Capacity
        && scenario.capacity.as_ref().is_none_or(|c| c.slo.is_none())
    {
        let (line, column) = loc.find(None, "objective", "capacity");
        problems.push(Problem {
            line,
            column,
            message: "objective = \"capacity\" needs an objective to meet: add [capacity] with \
                      slo = \"p90<500ms, errors<5%\" (and step_duration, min, max as needed)"
                .into(),
        });
    }
    if m.repeat == Some(0) {
        let (line, column) = loc.find(None, "repeat", "repeat");
        problems.push(Problem {
            line,
            column,
            message: "repeat: must be at least 1".into(),
        });
    }
    if raw.servers.is_empty() {
        problems.push(Problem {
            line: 0,
            column: 0,
            message: "the study has no [[server]]".into(),
        });
    }

    let mut servers = Vec::new();
    let mut configs = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, s) in raw.servers.iter().enumerate() {
        let anchor = Some(s.name.as_str());
        if !names.insert(s.name.clone()) {
            let (line, column) = loc.find(anchor, "name", &s.name);
            problems.push(Problem {
                line,
                column,
                message: format!("server `{}` is defined twice", s.name),
            });
        }
        let grid = s.grid.clone().unwrap_or_default();
        let params = expand(&grid, &s.configs);
        let params = if params.is_empty() {
            vec![BTreeMap::new()]
        } else {
            params
        };
        let base_url = s
            .base_url
            .clone()
            .unwrap_or_else(|| "http://127.0.0.1:{port}".into());
        // Every placeholder must be a parameter of every configuration, or {port}.
        let mut templates = vec![
            ("command", s.command.as_str()),
            ("base_url", base_url.as_str()),
        ];
        if let Some(d) = &s.dir {
            templates.push(("dir", d));
        }
        for v in s.env.iter().flat_map(|e| e.values()) {
            templates.push(("env", v));
        }
        for (field, t) in templates {
            for name in placeholders(t) {
                if name == "port" {
                    continue;
                }
                if let Some(missing) = params.iter().find(|p| !p.contains_key(&name)) {
                    let (line, column) = loc.find(anchor, field, &format!("{{{name}}}"));
                    let known: Vec<&String> = missing.keys().collect();
                    problems.push(Problem {
                        line,
                        column,
                        message: format!(
                            "server `{}`: placeholder {{{name}}} in {field} is not a parameter of configuration {} (parameters: {known:?}, and {{port}})",
                            s.name,
                            label(&s.name, missing)
                        ),
                    });
                }
            }
        }
        let d = |problems: &mut Vec<Problem>, f: &str, v: &Option<String>, default: Duration| {
            v.as_deref()
                .and_then(|t| duration(problems, &loc, f, t))
                .unwrap_or(default)
        };
        let ready = match s.ready.as_deref() {
            None | Some("tcp") => Ready::Tcp,
            Some(p) if p.starts_with('/') => Ready::Http(p.to_string()),
            Some(p) => {
                let (line, column) = loc.find(anchor, "ready", p);
                problems.push(Problem {
                    line,
                    column,
                    message: format!(
                        "server `{}`: ready `{p}`: give an HTTP path starting with / or \"tcp\"",
                        s.name
                    ),
                });
                Ready::Tcp
            }
        };
        let stop_signal = match s.stop_signal.as_deref() {
            None => libc::SIGTERM,
            Some(name) => signal_by_name(name).unwrap_or_else(|| {
                let (line, column) = loc.find(anchor, "stop_signal", name);
                problems.push(Problem { line, column, message: format!("server `{}`: `{name}` is not a signal (TERM, INT, QUIT, HUP, USR1, USR2, WINCH, KILL)", s.name) });
                libc::SIGTERM
            }),
        };
        servers.push(Server {
            name: s.name.clone(),
            command: s.command.clone(),
            base_url,
            ready,
            ready_timeout: d(
                &mut problems,
                "ready_timeout",
                &s.ready_timeout,
                Duration::from_secs(30),
            ),
            dir: Some(s.dir.as_ref().map_or_else(|| dir.clone(), |d| dir.join(d))),
            env: s.env.clone().unwrap_or_default().into_iter().collect(),
            stop_signal,
            stop_grace: d(
                &mut problems,
                "stop_grace",
                &s.stop_grace,
                Duration::from_secs(10),
            ),
        });
        configs.extend(
            params
                .into_iter()
                .map(|params| Config { server: i, params }),
        );
    }
    if !problems.is_empty() {
        return Err(fail(problems));
    }
    Ok(Study {
        path: path.to_path_buf(),
        scenario,
        scenario_dir,
        servers,
        configs,
        warmup,
        duration: measure_duration,
        repeat: m.repeat.unwrap_or(1).max(1),
        objective,
        error_budget,
        pause,
    })
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
