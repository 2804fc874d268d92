//! What the monitor saw of the server, the machine and the generator
//! (`server` in results.json): the samples, their means and peaks, the
//! server's restarts, and the findings read from them — what ran out
//! first, and whether the generator rather than the server was the limit.

pub mod findings;
pub mod machine;
pub mod sample;

use sample::Sample;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Mean and peak of one figure over the run.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct MeanPeak {
    pub mean: f64,
    pub peak: f64,
}

impl MeanPeak {
    fn of(values: impl Iterator<Item = f64>) -> Option<MeanPeak> {
        let v: Vec<f64> = values.collect();
        if v.is_empty() {
            return None;
        }
        Some(MeanPeak {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            peak: v.iter().copied().fold(f64::MIN, f64::max),
        })
    }
}

/// Mean and peak of each figure (CPU from the samples after the first,
/// which only sets the baseline).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Summary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_pct: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rss_bytes: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_processes: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_threads: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_fds: Option<MeanPeak>,
    /// Connections waiting in the server's accept queues (all its
    /// listening sockets together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_accept_queue: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_cpu_busy_pct: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_iowait_pct: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load1: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_available_bytes: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_used_bytes: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_established: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_time_wait: Option<MeanPeak>,
    pub listen_overflows: u64,
    pub listen_drops: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_cpu_pct: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_rss_bytes: Option<MeanPeak>,
    /// A study's services, by name (not in the `server_` figures).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub services: BTreeMap<String, ServiceSummary>,
}

/// One service's process tree over the run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ServiceSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<MeanPeak>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<MeanPeak>,
}

impl Summary {
    pub fn of(samples: &[Sample]) -> Summary {
        let rated = || samples.iter().skip(1);
        let alive = || {
            samples
                .iter()
                .filter_map(|s| s.server.as_ref().filter(|t| t.alive))
        };
        let alive_rated = || rated().filter_map(|s| s.server.as_ref().filter(|t| t.alive));
        let machine = || samples.iter().filter_map(|s| s.machine.as_ref());
        let machine_rated = || rated().filter_map(|s| s.machine.as_ref());
        let generator_rated = || rated().filter_map(|s| s.generator.as_ref());
        Summary {
            server_cpu_pct: MeanPeak::of(alive_rated().map(|t| t.cpu_pct)),
            server_rss_bytes: MeanPeak::of(alive().map(|t| t.rss_bytes as f64)),
            server_processes: MeanPeak::of(alive().map(|t| t.processes as f64)),
            server_threads: MeanPeak::of(alive().map(|t| t.threads as f64)),
            server_fds: MeanPeak::of(alive().map(|t| t.fds as f64)),
            server_accept_queue: MeanPeak::of(
                alive()
                    .filter(|t| !t.accept_queues.is_empty())
                    .map(|t| t.accept_queue_depth() as f64),
            ),
            machine_cpu_busy_pct: MeanPeak::of(machine_rated().map(|m| 100.0 - m.cpu_idle_pct)),
            machine_iowait_pct: MeanPeak::of(machine_rated().map(|m| m.cpu_iowait_pct)),
            load1: MeanPeak::of(machine().map(|m| m.load1)),
            mem_available_bytes: MeanPeak::of(machine().map(|m| m.mem_available_bytes as f64)),
            swap_used_bytes: MeanPeak::of(machine().map(|m| m.swap_used_bytes as f64)),
            tcp_established: MeanPeak::of(machine().map(|m| m.tcp_established as f64)),
            tcp_time_wait: MeanPeak::of(machine().map(|m| m.tcp_time_wait as f64)),
            listen_overflows: machine().map(|m| m.listen_overflows).sum(),
            listen_drops: machine().map(|m| m.listen_drops).sum(),
            generator_cpu_pct: MeanPeak::of(generator_rated().map(|g| g.cpu_pct)),
            generator_rss_bytes: MeanPeak::of(
                samples
                    .iter()
                    .filter_map(|s| s.generator.as_ref())
                    .map(|g| g.rss_bytes as f64),
            ),
            services: Self::services(samples),
        }
    }

    fn services(samples: &[Sample]) -> BTreeMap<String, ServiceSummary> {
        let names: std::collections::BTreeSet<&String> =
            samples.iter().flat_map(|s| s.services.keys()).collect();
        names
            .into_iter()
            .map(|name| {
                let alive = |rated: bool| {
                    samples
                        .iter()
                        .skip(usize::from(rated))
                        .filter_map(move |s| s.services.get(name).filter(|t| t.alive))
                };
                let summary = ServiceSummary {
                    cpu_pct: MeanPeak::of(alive(true).map(|t| t.cpu_pct)),
                    rss_bytes: MeanPeak::of(alive(false).map(|t| t.rss_bytes as f64)),
                };
                (name.clone(), summary)
            })
            .collect()
    }
}

/// `server` in `results.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ServerReport {
    /// What was watched: "pid N", "command `...`", "remote URL", or
    /// "generator only".
    pub source: String,
    pub interval_s: f64,
    pub samples: Vec<Sample>,
    pub summary: Summary,
    pub findings: Vec<findings::Finding>,
    /// The figures describe the generator's limit, not the server's.
    pub generator_bound: bool,
    pub generator_bound_reasons: Vec<String>,
    /// Problems while monitoring (e.g. a remote monitor that stopped answering).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Each time the server's main process changed during the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<Restart>,
}

/// The server's main process changed (`server.restarts[]`).
#[derive(
    Clone, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema,
)]
pub struct Restart {
    /// Sample time (s from the start) at which the new process was found.
    pub t_s: f64,
    pub unix_ms: u64,
    pub old_pid: i32,
    pub new_pid: i32,
    /// "pidfile", "child" (re-exec'd by the old one), or "listener".
    pub how: String,
    /// How long nothing of the server was running, when the restart went
    /// through a stop (ms, sample precision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_ms: Option<f64>,
}
