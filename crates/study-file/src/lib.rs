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
//!
//! - [`raw`]: the file as written (serde types, the JSON Schema).
//! - `check`: raw → checked [`Study`], every problem at once, located.
//! - here: the checked study, grid expansion, `{param}`/`{port}` filling.

mod check;
pub mod raw;

pub use check::{from_text, load};
pub use raw::*;

use headroom_objectives::capacity::Settings;
use headroom_records::study::rank::Ranking;
use headroom_records::study::{label, param_text, Objective};
use headroom_scenario::raw::{RawEvent, RawScenario};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

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
    /// `KIND=TARGET` probes, with placeholders (checked as specs).
    pub probes: Vec<String>,
    /// With placeholders, added to the scenario's events.
    pub events: Vec<RawEvent>,
    /// With placeholders, added to the scenario's `connect_to`.
    pub connect_to: Vec<String>,
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

/// How many ports a template asks for: 1 for `{port}`, K for `{port.K}`
/// (0 when it names none).
pub fn ports_used(template: &str) -> usize {
    let numbered = template
        .split("{port.")
        .skip(1)
        .filter_map(|rest| rest.split_once('}')?.0.parse::<usize>().ok())
        .max()
        .unwrap_or(0);
    numbered.max(usize::from(template.contains("{port}")))
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
/// `ports[0]` fills `{port}` (and `{port.1}`), `ports[K-1]` fills
/// `{port.K}`: a server with a balancer in front of backends, each on a
/// port of its own.
pub fn fill(template: &str, params: &BTreeMap<String, Value>, ports: &[u16]) -> String {
    let mut out = template.to_string();
    for (k, port) in ports.iter().enumerate().rev() {
        out = out.replace(&format!("{{port.{}}}", k + 1), &port.to_string());
    }
    if let Some(first) = ports.first() {
        out = out.replace("{port}", &first.to_string());
    }
    for (k, v) in params {
        out = out.replace(&format!("{{{k}}}"), &param_text(v));
    }
    out
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
    fn an_open_load_is_compared_by_latency_unless_told_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let study = |load_table: &str, measure: &str| {
            let text = format!(
                "[scenario]\nbase_url = \"http://127.0.0.1:1\"\n[scenario.load]\n{load_table}\n\
                 [[scenario.request]]\nname = \"home\"\npath = \"/\"\n\
                 [[server]]\nname = \"app\"\ncommand = \"app --port {{port}}\"\n\
                 [measure]\n{measure}\n"
            );
            let path = dir.path().join("study.toml");
            std::fs::write(&path, text).unwrap();
            load(&path).unwrap().objective
        };
        assert_eq!(study("rate = 50", ""), Objective::P90);
        assert_eq!(study("users_per_second = 5", ""), Objective::P90);
        assert_eq!(study("vus = 5", ""), Objective::Throughput);
        assert_eq!(
            study("rate = 50", "objective = \"throughput\""),
            Objective::Throughput
        );
    }

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
    fn a_command_may_use_several_ports() {
        let t = "pound -f {port} --backends {port.2},{port.3},{port.4},{port.5}";
        assert_eq!(ports_used(t), 5);
        assert_eq!(ports_used("thin -p {port}"), 1);
        assert_eq!(ports_used("sleep 1"), 0);
        assert_eq!(
            fill(t, &BTreeMap::new(), &[8000, 8001, 8002, 8003, 8004]),
            "pound -f 8000 --backends 8001,8002,8003,8004"
        );
        assert_eq!(fill("{port.1}={port}", &BTreeMap::new(), &[7]), "7=7");
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
            fill("-w {workers} -t {threads} {mode} :{port}", &p, &[8123]),
            "-w 4 -t 8 fast :8123"
        );
        assert_eq!(label("puma", &p), "puma mode=fast threads=8 workers=4");
    }
}
