//! What one sample holds: the watched process tree, the machine, and the
//! generator itself. CPU figures are percentages over the interval since
//! the previous sample: 100 % = one core for processes; for the machine,
//! 100 % = all cores (as `sar` shows it).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Sample {
    /// Seconds since the run's start (aligned with the client timeline).
    pub t_s: f64,
    /// Wall clock, Unix milliseconds (aligns a remote monitor's samples).
    pub unix_ms: u64,
    /// The watched server's process tree; `None` when nothing is watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<TreeSample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineSample>,
    /// The load generator: this headroom process, and with
    /// `run --processes` its shard processes too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<ProcessSample>,
    /// A study's `[[service]]`s (a database, a cache), each its own
    /// process tree, by name: beside the server's figures, never in them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub services: BTreeMap<String, TreeSample>,
    /// The server's own gauges, by probe (`puma`: `backlog`,
    /// `busy_threads`…; `nginx`: `active`…; see `headroom run --probe`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub probes: BTreeMap<String, BTreeMap<String, f64>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct TreeSample {
    /// The root process still exists.
    pub alive: bool,
    pub root_pid: i32,
    pub processes: u32,
    pub threads: u64,
    pub cpu_pct: f64,
    pub cpu_user_pct: f64,
    pub cpu_system_pct: f64,
    pub rss_bytes: u64,
    pub fds: u64,
    /// Lowest open-files (soft) limit among the processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd_limit_min: Option<u64>,
    /// The process closest to its open-files limit (fds / limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd_fullest: Option<FdUse>,
    /// Context switches during the interval.
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub per_process: Vec<ProcessSample>,
    /// The accept queue of each socket the tree listens on (TCP and
    /// unix): connections the kernel accepted that no worker has taken
    /// yet — what fills first when every worker is busy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_queues: Vec<AcceptQueue>,
}

/// One listening socket's accept queue at a sample.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct AcceptQueue {
    /// `127.0.0.1:8080`, `[::]:80`, a unix socket's path, `@name`.
    pub address: String,
    /// Connections waiting for `accept()`.
    pub depth: u32,
    /// The queue's limit (the backlog, as the kernel capped it).
    pub limit: u32,
}

impl Sample {
    /// Requests queued inside the server for its workers, as its probes
    /// tell: Puma's backlog, Passenger's request queue, haproxy's backend
    /// queues. `None` without such a probe.
    pub fn probe_queued(&self) -> Option<f64> {
        let mut queued = None;
        let mut add = |v: f64| *queued.get_or_insert(0.0) += v;
        if let Some(v) = self.probes.get("puma").and_then(|g| g.get("backlog")) {
            add(*v);
        }
        if let Some(v) = self
            .probes
            .get("passenger")
            .and_then(|g| g.get("request_queue"))
        {
            add(*v);
        }
        for (name, v) in self.probes.get("haproxy").into_iter().flatten() {
            if name.ends_with(".queue") {
                add(*v);
            }
        }
        queued
    }
}

impl TreeSample {
    /// Connections waiting in all of the tree's accept queues.
    pub fn accept_queue_depth(&self) -> u64 {
        self.accept_queues.iter().map(|q| q.depth as u64).sum()
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct FdUse {
    pub pid: i32,
    pub fds: u64,
    pub limit: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ProcessSample {
    pub pid: i32,
    pub ppid: i32,
    /// The process's name as the kernel knows it (`comm`: `pound`,
    /// `thin`, `nginx`), so a balancer and its backends are told apart.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    pub cpu_pct: f64,
    pub rss_bytes: u64,
    pub threads: u64,
    pub fds: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct MachineSample {
    pub cores: u32,
    pub cpu_user_pct: f64,
    pub cpu_system_pct: f64,
    pub cpu_iowait_pct: f64,
    pub cpu_steal_pct: f64,
    pub cpu_idle_pct: f64,
    pub load1: f64,
    pub load5: f64,
    pub load15: f64,
    pub mem_total_bytes: u64,
    pub mem_available_bytes: u64,
    pub swap_used_bytes: u64,
    pub tcp_established: u64,
    pub tcp_time_wait: u64,
    /// Kernel counters (TcpExt), increase during the interval.
    pub listen_overflows: u64,
    pub listen_drops: u64,
}
