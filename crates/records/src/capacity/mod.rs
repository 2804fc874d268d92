//! `cap.json`: a capacity search's steps, how it ended, its answer, and
//! the knee and limiting resource read from the steps ([`analysis`]).

pub mod analysis;
pub mod backlog;

use crate::results::Results;
use headroom_objectives::capacity::{Axis, SettingsRecord};
use headroom_objectives::slo::BoundCheck;
use serde::{Deserialize, Serialize};

/// One step of the search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub index: u32,
    /// The load tried, in the axis's unit.
    pub offered: f64,
    /// OK responses per second (rate axis: of the planned step length).
    pub achieved: f64,
    pub passed: bool,
    /// A repeat of an earlier passing load, to guard against a lucky step.
    pub retest: bool,
    /// The step failed because the generator could not keep up (often a
    /// hiccup of a shared machine): the same load was tried again and this
    /// step counts for nothing. A second such step in a row ends the search
    /// as `generator_bound`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discarded: bool,
    /// A longer run of the search's answer before it is given (3 × the
    /// step by default): only a load that holds there is reported.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmation: bool,
    pub checks: Vec<BoundCheck>,
    /// Rate axis: whether the server kept up with the arrivals (see
    /// [`backlog`]); a step that did not fails whatever its checks say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<backlog::Backlog>,
    /// Where the monitor saw it: the server's own queue (accept queues and
    /// probes' queued requests), judged by the same rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_queue: Option<backlog::Backlog>,
    /// The step's run, in the shape of `results.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Results>,
}

impl Step {
    /// Each bound the step failed, described with its figure.
    pub fn failed_checks(&self) -> Vec<String> {
        let checks = self.checks.iter().filter(|c| !c.passed);
        let backlog = self.backlog.iter().filter(|b| !b.sustained);
        let queue = self.server_queue.iter().filter(|b| !b.sustained);
        checks
            .map(BoundCheck::describe)
            .chain(backlog.map(backlog::Backlog::describe))
            .chain(queue.map(|q| q.describe_as("the server's queue")))
            .collect()
    }

    /// Not sustained: the server fell behind its arrivals in this step
    /// (its backlog or its own queue grew throughout).
    pub fn not_sustained(&self) -> bool {
        let grew = |b: &Option<backlog::Backlog>| b.as_ref().is_some_and(|b| !b.sustained);
        grew(&self.backlog) || grew(&self.server_queue)
    }
}

/// How the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Bracketed within the precision.
    Found,
    /// Even the maximum tried met the objective.
    MetUpToMax,
    /// Even the minimum failed.
    FailedAtMin,
    /// `--max-time` ran out before the search ended.
    TimeLimit,
    /// The generator, not the server, failed the objective.
    GeneratorBound,
    /// The server died during a step.
    ServerExited,
    Interrupted,
    /// The search goes on: a snapshot written after each step, so a crash
    /// of headroom itself mid-search still leaves every finished step.
    InProgress,
}

/// `cap.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    pub headroom_version: String,
    pub target: String,
    pub axis: Axis,
    /// The unit of `capacity`, `interval`, `knee` and steps' `offered`.
    pub unit: String,
    pub slo: String,
    /// The highest load that met the objective (and held in its
    /// confirmation, when one ran); null when none did.
    pub capacity: Option<f64>,
    /// [highest pass, lowest fail]; either end null when not found.
    pub interval: [Option<f64>; 2],
    /// The load whose confirmation passed (= `capacity`); null when no
    /// confirmation passed (interrupted, time limit, `--confirm-duration 0s`).
    #[serde(default)]
    pub confirmed: Option<f64>,
    /// Loads whose confirmation failed, each moving the answer down.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refuted: Vec<f64>,
    /// The noise of the passed steps: the relative spread (standard
    /// deviation over mean) of the knee's latency figure among the tries
    /// of the highest passing load, when it was tried more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    pub outcome: Outcome,
    /// The answer in one sentence.
    pub verdict: String,
    /// What saturated at the lowest failing load: generator, server_exited,
    /// queue_full, upstream_closed, memory, fds, accept_queue_full,
    /// worker_pool, listen_queue, server_cpu, machine_cpu, none_observed
    /// (the first that fired, in this order).
    pub limited_by: Option<String>,
    pub limited_by_detail: Option<String>,
    /// The objective failed because of the generator: not a server capacity.
    pub generator_bound: bool,
    /// Where latency bends upward (Kneedle), in the axis's unit.
    pub knee: Option<f64>,
    /// The latency figure the knee follows (e.g. "p90").
    pub knee_metric: String,
    pub settings: SettingsRecord,
    pub elapsed_s: f64,
    pub steps: Vec<Step>,
}
