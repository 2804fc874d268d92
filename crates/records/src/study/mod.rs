//! `study.json`: every configuration of a study, each run of it, the
//! statistics over repeats and the ranking by the objective ([`rank`]).

pub mod rank;

use crate::capacity::CapacityReport;
use crate::results::Results;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One measured (or failed) run of a configuration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub round: u32,
    /// "ok", or why not: "not ready: …", "died during the run",
    /// "error budget exceeded: …", "error: …".
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Results>,
    /// The server's last stderr lines, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    /// Process-group id the configuration ran in (empty after the run).
    pub pgid: i32,
    /// Objective "capacity": the search on this configuration (`results`
    /// is then its step at the capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityReport>,
    /// Processes of the group still alive after the stop (should be 0).
    pub survivors: u32,
    /// Processes of the server's tree outside its group that ignored the
    /// stop and were killed.
    #[serde(default)]
    pub stray_killed: u32,
}

/// A configuration and everything measured for it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConfigReport {
    pub server: String,
    pub params: BTreeMap<String, Value>,
    pub label: String,
    /// "ok" when every run was, else the last run's reason.
    pub status: String,
    /// The representative run (the median by the objective), in the shape
    /// of `results.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Results>,
    pub runs: Vec<RunRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<rank::ConfigStats>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Winner {
    pub server: String,
    pub params: BTreeMap<String, Value>,
    pub label: String,
    pub reason: String,
}

/// `study.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StudyReport {
    pub headroom_version: String,
    pub study: String,
    pub objective: Objective,
    pub error_budget: f64,
    pub repeat: u32,
    pub configs: Vec<ConfigReport>,
    /// Labels, best first (eligible configurations only).
    pub ranking: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<Winner>,
    /// Configurations within noise of the winner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub within_noise: Vec<String>,
    pub interrupted: bool,
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
    /// Least noticed events: the shortest longest-time-without-an-OK-
    /// response after the configuration's events (`[[server.event]]`),
    /// e.g. restart strategies compared.
    MaxGap,
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
            "max_gap" => Objective::MaxGap,
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
            Objective::MaxGap => "least downtime users felt around events (max gap)",
        }
    }
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
