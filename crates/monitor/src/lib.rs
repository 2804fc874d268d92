//! Watching the server while loading it: its process tree, the machine,
//! and the generator itself, sampled on the run's clock (the same interval
//! boundaries as the client timeline), then read for what ran out first.
//!
//! - [`sample`]: what a sample holds (serialised into `results.json`).
//! - `proc`: reading /proc via `procfs`; `netstat`: listen-queue counters.
//! - [`findings`]: thresholds → findings and the generator-bound verdict.
//! - [`remote`]: `headroom monitor` on the server's host, and the client
//!   that pulls its samples during a run.
//! - [`launch`]: start a server command in its own process group, wait for
//!   its port, stop the whole group.
//! - [`machine`]: the machine's facts (for results' `meta`) and the
//!   process's open-files limit.

pub mod findings;
pub mod launch;
pub mod machine;
mod netstat;
mod proc;
pub mod remote;
pub mod sample;

pub use proc::{unix_ms, Follow, Restart, Sampler};
use sample::Sample;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct MonitorConfig {
    /// Root of the server's process tree, when watched locally.
    pub root: Option<i32>,
    pub interval: Duration,
    /// Pull server samples from a `headroom monitor` instead.
    pub remote: Option<remote::RemoteSource>,
    /// How the server was named, for the report.
    pub source: String,
    /// How to find the server again when its main process exits.
    pub follow: Follow,
}

/// A monitor running beside a load test.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<Option<Sample>>>,
    /// The server's main process now (0: none watched locally).
    main_pid: Arc<AtomicI32>,
    handle: JoinHandle<(Vec<Sample>, Vec<String>, Vec<Restart>)>,
    config: MonitorConfig,
}

impl Monitor {
    /// Starts sampling at `start` + k × interval (the run's clock);
    /// `start_wall` is the wall-clock time of `start`, for sample times.
    pub fn start(config: MonitorConfig, start: Instant, start_wall: SystemTime) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let latest = Arc::new(Mutex::new(None));
        let main_pid = Arc::new(AtomicI32::new(
            config.root.filter(|_| config.remote.is_none()).unwrap_or(0),
        ));
        let (s, l, c, m) = (
            stop.clone(),
            latest.clone(),
            config.clone(),
            main_pid.clone(),
        );
        let start_unix_ms = start_wall
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let handle = std::thread::Builder::new()
            .name("headroom-monitor".into())
            .spawn(move || sample_loop(c, start, start_unix_ms, s, l, m))
            .expect("a monitor thread can be spawned");
        Monitor {
            stop,
            latest,
            main_pid,
            handle,
            config,
        }
    }

    /// The most recent sample, for live displays.
    pub fn latest(&self) -> Option<Sample> {
        self.latest.lock().expect("monitor lock").clone()
    }

    /// The watched server's main process now (it changes when the server
    /// restarts), when a local server is watched: where signals go.
    pub fn main_pid(&self) -> Option<i32> {
        Some(self.main_pid.load(Ordering::SeqCst)).filter(|&p| p > 0)
    }

    /// A handle on [`Monitor::main_pid`] for another thread.
    pub fn main_pid_handle(&self) -> Arc<AtomicI32> {
        self.main_pid.clone()
    }

    /// Stops (after one last sample) and returns the report.
    pub fn finish(self, generator_cores: usize, client: &findings::ClientFacts) -> ServerReport {
        self.stop.store(true, Ordering::SeqCst);
        let (samples, errors, restarts) = self.handle.join().unwrap_or_default();
        let mut found = findings::findings(&samples, generator_cores);
        let summary = Summary::of(&samples);
        let generator_cpu_peak = summary.generator_cpu_pct.map(|c| c.peak);
        let generator_bound_reasons =
            findings::generator_bound(&mut found, client, generator_cpu_peak);
        ServerReport {
            source: self.config.source.clone(),
            interval_s: self.config.interval.as_secs_f64(),
            summary,
            samples,
            findings: found,
            generator_bound: !generator_bound_reasons.is_empty(),
            generator_bound_reasons,
            errors,
            restarts,
        }
    }
}

fn sample_loop(
    config: MonitorConfig,
    start: Instant,
    start_unix_ms: u64,
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<Option<Sample>>>,
    main_pid: Arc<AtomicI32>,
) -> (Vec<Sample>, Vec<String>, Vec<Restart>) {
    let local_server = config.remote.is_none();
    let mut sampler = Sampler::new(config.root.filter(|_| local_server), local_server, true)
        .following(config.follow.clone());
    let mut remote = config
        .remote
        .clone()
        .map(|r| remote::Puller::new(r, start_unix_ms));
    let mut samples = vec![];
    // A run joined late (a shard after the shared start) samples from now
    // on, not a burst of the intervals already past.
    let past = Instant::now().saturating_duration_since(start);
    let mut k = (past.as_secs_f64() / config.interval.as_secs_f64()).floor() as u32 + 1;
    loop {
        let due = start + config.interval * k;
        // Sleep in short steps so a stop is noticed promptly.
        while Instant::now() < due && !stop.load(Ordering::SeqCst) {
            std::thread::sleep((due - Instant::now()).min(Duration::from_millis(20)));
        }
        let stopping = stop.load(Ordering::SeqCst);
        let t_s = if stopping {
            start.elapsed().as_secs_f64()
        } else {
            (config.interval * k).as_secs_f64()
        };
        let mut s = sampler.sample(t_s);
        if let Some(r) = &mut remote {
            r.fill(&mut s);
        }
        *latest.lock().expect("monitor lock") = Some(s.clone());
        main_pid.store(sampler.root().unwrap_or(0), Ordering::SeqCst);
        samples.push(s);
        if stopping {
            break;
        }
        k += 1;
    }
    let errors = remote.map(|r| r.errors()).unwrap_or_default();
    (samples, errors, sampler.restarts().to_vec())
}

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
        }
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
